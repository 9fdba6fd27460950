"""Prompt files (``prompts/<metric>/<step>.md``, a leading HTML comment documenting the placeholders; docs/judges.md),
rendered in one pass: values are data, never scanned, and a value's tag named like one of the template's is
neutralised (compared after NFKC, case folding and invisible characters dropped)."""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_HEADER = re.compile(r"\A\s*<!--(.*?)-->\s*", re.DOTALL)
_DOC_LINE = re.compile(r"^\s{2,}([A-Za-z_][A-Za-z0-9_]*)\s*:", re.MULTILINE)
_TAG = re.compile(r"</?\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*>")


#: Anything between angle brackets: each is checked for a section tag by :meth:`Prompt.neutralise`.
_ANGLED = re.compile(r"<([^<>]*)>")
#: A tag once invisible characters are gone: opening or closing, a name, then attributes or a self-closing slash.
_TAG_SHAPE = re.compile(r"\s*/?\s*([^\W\d][\w.-]*)(?:[\s/=\"'].*)?", re.DOTALL)
#: Invisible characters that are not of the Cf (format) category: combining grapheme joiner, Hangul fillers,
#: Mongolian vowel separator and free variation selectors.
_INVISIBLE_EXTRA = frozenset("\u034f\u115f\u1160\u3164\uffa0\u180b\u180c\u180d\u180e\u180f")


def _invisible(ch: str) -> bool:
    if ch in _INVISIBLE_EXTRA or "\ufe00" <= ch <= "\ufe0f" or "\U000e0100" <= ch <= "\U000e01ef":
        return True
    category = unicodedata.category(ch)
    return category == "Cf" or (category == "Cc" and not ch.isspace())


def tag_name(inside: str) -> str | None:
    """The tag name of ``<inside>`` as compared with a template's (NFKC, case folded), or None."""
    if not inside.isascii():
        inside = unicodedata.normalize("NFKC", "".join(ch for ch in inside if not _invisible(ch)))
    elif not inside.isprintable():
        inside = "".join(ch for ch in inside if not _invisible(ch))
    m = _TAG_SHAPE.fullmatch(inside)
    return m.group(1).casefold() if m else None


class PromptError(ValueError):
    pass


@dataclass(frozen=True)
class Prompt:
    name: str
    template: str
    documented: frozenset[str]
    path: Path | None = None

    @cached_property
    def _pieces(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The template cut at its placeholders, once: its texts and, between each two, a placeholder's name."""
        cut = PLACEHOLDER.split(self.template)
        return tuple(cut[0::2]), tuple(cut[1::2])

    @cached_property
    def placeholders(self) -> frozenset[str]:
        return frozenset(self._pieces[1])

    def render(self, values: dict[str, str]) -> str:
        if values.keys() != self.placeholders:
            missing, extra = self.placeholders - values.keys(), values.keys() - self.placeholders
            raise PromptError(
                f"prompt {self.name!r}: placeholders do not match the values given"
                f" (missing {sorted(missing)}, unexpected {sorted(extra)})"
            )
        texts, names = self._pieces
        out = [texts[0]]
        for name, text in zip(names, texts[1:]):
            out += self.neutralise(str(values[name])), text
        return "".join(out)

    @cached_property
    def section_tags(self) -> frozenset[str]:
        """The tag names (case folded) the template itself uses, which values cannot open or close."""
        return frozenset(n.casefold() for n in _TAG.findall(PLACEHOLDER.sub("", self.template)))

    def neutralise(self, value: str) -> str:
        """``value`` with every tag named in :attr:`section_tags` written as ``&lt;...&gt;``."""
        if not self.section_tags or "<" not in value:
            return value
        tags = self.section_tags
        return _ANGLED.sub(lambda m: f"&lt;{m.group(1)}&gt;" if tag_name(m.group(1)) in tags else m.group(0), value)


PROMPTS_DIR_VARIABLE = "JUDGEGRAPH_PROMPTS_DIR"  # overrides, read at every lookup (docs/concepts/prompts.md)


def prompt_dirs() -> list[Path]:
    return list(_dirs(os.environ.get(PROMPTS_DIR_VARIABLE) or None))


@cache
def _dirs(override: str | None) -> tuple[Path, ...]:
    here = Path(__file__).resolve().parents[1]  # resolved once; inside a wheel, or editable: <repo>/src/judgegraph
    return *([Path(override)] if override else []), here / "prompts", here.parent.parent / "prompts"


def parse_prompt(name: str, text: str, path: Path | None = None) -> Prompt:
    documented: frozenset[str] = frozenset()
    if header := _HEADER.match(text):
        documented = frozenset(_DOC_LINE.findall(header.group(1)))
        text = text[header.end() :]
    return Prompt(name, text.strip() + "\n", documented, path)


@cache
def _load(name: str, override: str | None) -> Prompt:
    dirs = _dirs(override)
    for d in dirs:
        path = d / f"{name}.md"
        if path.is_file():
            return parse_prompt(name, path.read_text(encoding="utf-8"), path)
    raise PromptError(f"prompt {name!r} not found in {', '.join(str(d) for d in dirs)}")


def load_prompt(name: str) -> Prompt:
    """Load ``prompts/<name>.md``, e.g. ``load_prompt("turn_relevancy/judge_turn")`` (each file read once)."""
    return _load(name, os.environ.get(PROMPTS_DIR_VARIABLE) or None)
