"""Cache hints for providers that cache only where the request asks: Anthropic's ``cache_control``
(docs/cost_cache.md).

Every judge prompt is laid out stable-first: the instructions, the rubric and the shared data come first,
what one call alone judges comes last, in the template's last section. When the judge's chat model is
``langchain_anthropic.ChatAnthropic``, the prompt is sent as two text blocks split at the start of that last
section, the first marked ``cache_control: {"type": "ephemeral"}``, so Anthropic writes (and later reads) its
cache at the end of the stable part. The boundary is found on the template, never in the rendered text, so
conversation content cannot move it. Any other chat model gets the prompt as one plain string, as before.

``langchain_anthropic`` is never imported here: the class is looked up among the modules already imported
(a ``ChatAnthropic`` object exists only once its module is).
"""

from __future__ import annotations

import hashlib
import re
import sys
import threading

from langchain_core.messages import HumanMessage

from ..prompts import PLACEHOLDER, Prompt

#: The cache hint Anthropic reads on a content block: cache the prefix up to and including it (5 minutes).
EPHEMERAL = {"type": "ephemeral"}

_OPENING = re.compile(r"<\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*>")


def is_anthropic_chat(model: object) -> bool:
    """A ``langchain_anthropic.ChatAnthropic`` (or a subclass), checked without importing the package, or a
    stand-in for one that says so (``marks_cache_control``: the dry run's recorder of an ``anthropic:`` model,
    which must be sent what ChatAnthropic would be sent)."""
    if getattr(model, "marks_cache_control", False) is True:
        return True
    module = sys.modules.get("langchain_anthropic")
    cls = getattr(module, "ChatAnthropic", None)
    return isinstance(cls, type) and isinstance(model, cls)


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
    :func:`stable_boundary`; None when the template has no boundary, when a part would be only whitespace, or
    when the two parts would not give back ``rendered`` exactly (the text sent never differs from the one
    rendered)."""
    cut = stable_boundary(prompt.template)
    if cut is None:
        return None

    def render(part: str) -> str:
        return PLACEHOLDER.sub(lambda m: prompt.neutralise(str(values[m.group(1)])), part)

    try:
        stable, changing = render(prompt.template[:cut]), render(prompt.template[cut:])
    except KeyError:
        return None
    # Anthropic refuses a text block that is empty or only whitespace
    return (stable, changing) if stable + changing == rendered and stable.strip() and changing.strip() else None


class SeenPrefixes:
    """The stable parts a judge has sent (as hashes; a run's repeats share it): Anthropic bills a cache write at
    1.25 × the input price, so a stable part is marked only from its second sending on, when a call has
    shown it is shared (a guideline after the first, a re-ask, a repeat): a prefix no other call sends is never
    written. Thread-safe; forgets everything past ``limit`` entries (a mark then comes one call later)."""

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


def prompt_message(model: object, prompt: Prompt, values: dict[str, str], rendered: str,
                   seen: SeenPrefixes | None = None) -> HumanMessage:
    """The judge's first message: for ChatAnthropic the stable part and the part that changes as two text
    blocks, the stable one marked for Anthropic's cache (when ``seen`` is given, only once it was sent before);
    for every other model (or a template with no boundary) ``rendered`` as one string, unchanged. Its
    ``.text`` is ``rendered`` either way (transcripts and token counts)."""
    if is_anthropic_chat(model) and (parts := split_rendered(prompt, values, rendered)) is not None:
        stable, changing = parts
        block: dict[str, object] = {"type": "text", "text": stable}
        if seen is None or seen.sent_before(stable):
            block["cache_control"] = dict(EPHEMERAL)
        return HumanMessage([block, {"type": "text", "text": changing}])
    return HumanMessage(rendered)
