"""Prompt files: one per node step, under ``prompts/<metric>/<step>.md``.

A prompt file starts with an HTML comment that documents its placeholders::

    <!--
    placeholders:
      reply: the assistant reply being judged
    -->

and the body uses ``{{ name }}`` for each. Rendering is one pass of plain
substitution over the *template*: the values (conversation content) are data
and are never scanned for placeholders, so a message containing
``{{ env.SECRET }}`` or ``{reply}`` reaches the judge as literal text.

The sections a template tags (``<reply_to_judge>...</reply_to_judge>``) cannot
be closed or opened early by a value: in values, a tag with one of the
template's own tag names is neutralised (``</reply_to_judge>`` becomes
``&lt;/reply_to_judge&gt;``). Other text, and the template, are untouched.

Where prompts are read from, first match wins: ``$JUDGEGRAPH_PROMPTS_DIR``
(override any prompt without touching the package), the ``prompts`` folder
inside the installed wheel, the repository's top-level ``prompts/`` (editable
installs).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import cache, cached_property, lru_cache
from pathlib import Path

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_HEADER = re.compile(r"\A\s*<!--(.*?)-->\s*", re.DOTALL)
_DOC_LINE = re.compile(r"^\s{2,}([A-Za-z_][A-Za-z0-9_]*)\s*:", re.MULTILINE)
_TAG = re.compile(r"</?\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*>")


@lru_cache(maxsize=256)
def _tag_pattern(names: frozenset[str]) -> re.Pattern[str] | None:
    if not names:
        return None
    alt = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(rf"<(\s*/?\s*(?:{alt})\s*)>", re.IGNORECASE)


def neutralise_tags(value: str, pattern: re.Pattern[str] | None) -> str:
    """``value`` with every tag ``pattern`` matches written as ``&lt;...&gt;``."""
    if pattern is None or "<" not in value:
        return value
    return pattern.sub(r"&lt;\1&gt;", value)


class PromptError(ValueError):
    pass


@dataclass(frozen=True)
class Prompt:
    name: str
    template: str
    documented: frozenset[str]
    path: Path | None = None

    @property
    def placeholders(self) -> frozenset[str]:
        return frozenset(PLACEHOLDER.findall(self.template))

    def render(self, values: dict[str, str]) -> str:
        missing = self.placeholders - values.keys()
        extra = values.keys() - self.placeholders
        if missing or extra:
            raise PromptError(
                f"prompt {self.name!r}: placeholders do not match the values given"
                f" (missing {sorted(missing)}, unexpected {sorted(extra)})"
            )
        tags = self.tag_pattern
        return PLACEHOLDER.sub(lambda m: neutralise_tags(str(values[m.group(1)]), tags), self.template)

    @cached_property
    def tag_pattern(self) -> re.Pattern[str] | None:
        """Matches the tags the template itself uses (opening or closing)."""
        return _tag_pattern(frozenset(n.lower() for n in _TAG.findall(PLACEHOLDER.sub("", self.template))))


def prompt_dirs() -> list[Path]:
    dirs = []
    if env := os.environ.get("JUDGEGRAPH_PROMPTS_DIR"):
        dirs.append(Path(env))
    here = Path(__file__).resolve().parent
    dirs.append(here / "prompts")  # inside a built wheel
    dirs.append(here.parent.parent / "prompts")  # editable install: <repo>/src/judgegraph
    return dirs


def parse_prompt(name: str, text: str, path: Path | None = None) -> Prompt:
    documented: frozenset[str] = frozenset()
    if header := _HEADER.match(text):
        documented = frozenset(_DOC_LINE.findall(header.group(1)))
        text = text[header.end() :]
    return Prompt(name, text.strip() + "\n", documented, path)


@cache
def _load(name: str, dirs: tuple[Path, ...]) -> Prompt:
    for d in dirs:
        path = d / f"{name}.md"
        if path.is_file():
            return parse_prompt(name, path.read_text(encoding="utf-8"), path)
    raise PromptError(f"prompt {name!r} not found in {', '.join(str(d) for d in dirs)}")


def load_prompt(name: str) -> Prompt:
    """Load ``prompts/<name>.md``, e.g. ``load_prompt("turn_relevancy/judge_turn")``."""
    return _load(name, tuple(prompt_dirs()))


def all_prompt_names() -> list[str]:
    names: set[str] = set()
    for d in prompt_dirs():
        if d.is_dir():
            names.update(str(p.relative_to(d).with_suffix("")) for p in d.rglob("*.md"))
    return sorted(names)
