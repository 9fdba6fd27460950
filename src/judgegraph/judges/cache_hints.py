"""Cache hints for providers that cache only where the request asks (docs/cost_cache.md): every judge prompt is
stable-first, so the prompt is split at the start of its template's last section (found on the template, never in
the rendered text: conversation content cannot move it) and the provider marks the stable part.
"""

from __future__ import annotations

import hashlib
import re
import threading
from typing import TYPE_CHECKING

from langchain_core.messages import HumanMessage

from ..data.prompts import PLACEHOLDER, Prompt

if TYPE_CHECKING:
    from ..providers import Provider

_OPENING = re.compile(r"<\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*>")


def stable_boundary(template: str) -> int | None:
    """Where the part of ``template`` that changes from call to call begins: the start of the line opening the
    section that holds the last placeholder (``<tag>`` … ``{{ value }}`` … ``</tag>``), else the start of the
    line holding the last placeholder; None when nothing would precede it (no stable part to mark)."""
    found = list(PLACEHOLDER.finditer(template))
    if not found:
        return None
    last = found[-1]
    cut = template.rfind("\n", 0, last.start()) + 1
    for opening in reversed(list(_OPENING.finditer(template, 0, last.start()))):
        name = opening.group(1)
        closing = re.compile(rf"</\s*{re.escape(name)}\s*>")
        if closing.search(template, last.end()) and not closing.search(template, opening.end(), last.start()):
            cut = template.rfind("\n", 0, opening.start()) + 1
            break
    return cut if template[:cut].strip() else None


def split_rendered(prompt: Prompt, values: dict[str, str], rendered: str) -> tuple[str, str] | None:
    """``rendered`` (``prompt`` rendered with ``values``) as its stable part and the part that changes, cut at
    :func:`stable_boundary`; None when there is no boundary, a part would be only whitespace, or the parts would not
    give back ``rendered`` exactly."""
    cut = stable_boundary(prompt.template)
    if cut is None:
        return None

    def render(part: str) -> str:
        return PLACEHOLDER.sub(lambda m: prompt.neutralise(str(values[m.group(1)])), part)

    try:
        stable, changing = render(prompt.template[:cut]), render(prompt.template[cut:])
    except KeyError:
        return None
    # a provider may refuse a text block that is empty or only whitespace
    return (stable, changing) if stable + changing == rendered and stable.strip() and changing.strip() else None


class SeenPrefixes:
    """The stable parts a judge has sent (hashes; shared by a run's repeats): a cache write may cost more than the
    input, so a part is marked only from its second sending on. Thread-safe; forgets all past ``limit`` entries."""

    def __init__(self, limit: int = 100_000) -> None:
        self.limit = limit
        self._seen: set[bytes] = set()
        self._lock = threading.Lock()

    def sent_before(self, stable: str) -> bool:
        """Whether ``stable`` was sent before; records that it now is."""
        key = hashlib.blake2b(stable.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        with self._lock:
            if key in self._seen:
                return True
            if len(self._seen) >= self.limit:
                self._seen.clear()
            self._seen.add(key)
            return False


def first_message(provider: Provider | None, prompt: Prompt, values: dict[str, str], rendered: str,
                  seen: SeenPrefixes | None = None) -> HumanMessage:
    """The judge's first message: with ``provider``'s cache hints when it has any for this template, else
    ``rendered`` as one string; its ``.text`` is ``rendered`` either way."""
    marked = provider.prompt_message(prompt, values, rendered, seen) if provider is not None else None
    return marked if marked is not None else HumanMessage(rendered)


def prompt_message(model: object, prompt: Prompt, values: dict[str, str], rendered: str,
                   seen: SeenPrefixes | None = None) -> HumanMessage:
    """:func:`first_message` for the chat model ``model``'s provider."""
    from ..providers import of_model

    return first_message(of_model(model), prompt, values, rendered, seen)
