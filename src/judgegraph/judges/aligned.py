"""An LLM judge aligned to people's labels (docs/alignment.md): :class:`Alignment` (guidelines and labelled
examples, made by ``judgegraph align``, kept as ``aligned-<metric>-<hash12>.json``) and :class:`AlignedJudge`,
which places them before every prompt as placeholder *values* of ``prompts/align/preamble.md`` (data, never
template source), so every metric takes them unchanged.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..data.prompts import Prompt, load_prompt
from .base import Endpoint, FittedFile, Judge, JudgeOutcome, JudgeRequest
from .cache import JudgeCache

__all__ = ["FORMAT", "PREAMBLE_STEP", "AlignedJudge", "Alignment", "Example", "read_alignment"]

FORMAT = "judgegraph-aligned-judge"
PREAMBLE_STEP = "align/preamble"
#: the placeholders of the preamble, as the test of every prompt file checks them
PROMPT_VALUES = {PREAMBLE_STEP: frozenset({"alignment_guidelines", "alignment_examples"})}


@dataclass(frozen=True)
class Example:
    """One labelled case shown to the aligned judge: a conversation excerpt and the label people gave."""

    conversation_id: str
    target: str  # what the label is about, as a person reads it: "turn 4", "verdict 2", "the result"
    turns: tuple[tuple[int, str, str], ...]  # (1-based turn number, role, content) of the excerpt, in order
    label: str
    note: str = ""

    def to_json(self) -> dict[str, Any]:  # Any: JSON values
        return {"conversation_id": self.conversation_id, "target": self.target,
                "turns": [{"turn": n, "role": r, "content": c} for n, r, c in self.turns],
                "label": self.label, "note": self.note}

    @classmethod
    def from_json(cls, data: object) -> Example:
        if not isinstance(data, dict):
            raise ValueError(f"an example is an object, got {type(data).__name__}")
        turns = data.get("turns")
        if not isinstance(turns, list) or not all(isinstance(t, dict) for t in turns):
            raise ValueError("'turns' must be a list of {turn, role, content}")
        try:
            read = tuple((int(t["turn"]), str(t["role"]), str(t["content"])) for t in turns)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"'turns': each needs turn, role and content ({exc})") from None
        for key in ("conversation_id", "target", "label"):
            if not isinstance(data.get(key), str):
                raise ValueError(f"{key!r} must be a string")
        return cls(data["conversation_id"], data["target"], read, data["label"], str(data.get("note") or ""))

    def render(self, number: int) -> str:
        lines = [f"Example {number} ({self.target}):"]
        lines += [f"[turn {n}] {role}: {content}" for n, role, content in self.turns]
        lines.append(f"Label people gave: {self.label}" + (f" (their note: {self.note})" if self.note else ""))
        return "\n".join(lines)


@dataclass(frozen=True)
class Alignment(FittedFile):
    """What an aligned judge adds to a metric's judge: guidelines and labelled examples.
    ``fit`` holds how they were made and their figures (not part of the hash)."""

    metric: str
    model: str  # the base judge's model name (LLMJudge.model_name), e.g. "gpt-4.1-mini"
    guidelines: tuple[str, ...]
    examples: tuple[Example, ...]
    fit: dict[str, Any] = field(default_factory=dict, compare=False)  # Any: JSON figures and provenance

    FORMAT: ClassVar[str] = FORMAT
    WHAT: ClassVar[str] = "aligned judge"

    def decision(self) -> dict[str, Any]:  # Any: JSON values
        """The fields that change verdicts (what the hash covers)."""
        return {"metric": self.metric, "model": self.model, "guidelines": list(self.guidelines),
                "examples": [e.to_json() for e in self.examples]}

    @property
    def filename(self) -> str:
        """``aligned-<metric>-<hash12>.json`` (an import path's characters other than letters, digits, ``._-``
        written as ``_``)."""
        return f"aligned-{re.sub(r'[^A-Za-z0-9_.-]', '_', self.metric)}-{self.short}.json"

    def values(self) -> dict[str, str]:
        """The preamble's placeholder values."""
        guidelines = "\n".join(f"{i}. {g}" for i, g in enumerate(self.guidelines, 1)) or "(none)"
        examples = "\n\n".join(e.render(i) for i, e in enumerate(self.examples, 1)) or "(none)"
        return {"alignment_guidelines": guidelines, "alignment_examples": examples}



def read_alignment(path: str | os.PathLike[str]) -> Alignment:
    """Read an aligned-judge file; ``ValueError`` naming the file and field when it is not one, or when its
    ``sha256`` does not match its content (a hand edit, a truncated copy): a tampered file is refused."""
    data = Alignment.read_json(path)
    for key in ("metric", "model"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise ValueError(f"{path}: field {key!r}: must be a non-empty string")
    guidelines = data.get("guidelines")
    if not isinstance(guidelines, list) or not all(isinstance(g, str) for g in guidelines):
        raise ValueError(f"{path}: field 'guidelines': must be a list of strings")
    examples = data.get("examples")
    if not isinstance(examples, list):
        raise ValueError(f"{path}: field 'examples': must be a list")
    read = []
    for i, item in enumerate(examples):
        try:
            read.append(Example.from_json(item))
        except ValueError as exc:
            raise ValueError(f"{path}: field 'examples[{i}]': {exc}") from None
    fit = data.get("fit")
    alignment = Alignment(data["metric"], data["model"], tuple(guidelines), tuple(read),
                          fit if isinstance(fit, dict) else {})
    if data.get("sha256") != alignment.hash:
        raise ValueError(f"{path}: field 'sha256': does not match the file's guidelines, examples, metric and model "
                         "(edited or damaged); run judgegraph align again rather than editing the file")
    return alignment


class AlignedJudge(Judge):
    """``judge`` with an :class:`Alignment` placed before every prompt it is asked (see the module).

    The wrapped judge does the asking (its cache, limits, retries and transcripts): the request it gets differs
    from the metric's by the preamble, so answers of the plain and the aligned judge are never mixed up."""

    def __init__(self, judge: Judge, alignment: Alignment) -> None:
        if judge.kind != "llm":
            raise ValueError(f"an aligned judge wraps an LLM judge; {judge.name} is a {judge.kind} judge "
                             "(for the offline judge, judgegraph align --model offline fits a rule)")
        model = getattr(judge, "model_name", None)
        if model is not None and model != alignment.model:
            raise ValueError(f"the aligned judge {alignment.short} was made for model {alignment.model!r}, not "
                             f"{model!r}: judge with --model {alignment.model} (or align {model} again)")
        self.inner = judge
        self.alignment = alignment
        self.kind = judge.kind
        self.name = f"{judge.name}+aligned-{alignment.short}"
        self._values = alignment.values()
        self.cache: JudgeCache | None = judge.cache  # the wrapped judge's (shown by eval): it does the caching
        self._prompts: dict[str, Prompt] = {}

    def __getattr__(self, name: str) -> Any:  # Any: whatever the wrapped judge has (model_name, limiter, settings...)
        if name in ("inner", "alignment", "__setstate__") or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def supports(self, task: str) -> bool:
        return self.inner.supports(task)

    @property
    def embeddings(self) -> Any:
        return self.inner.embeddings

    @property
    def endpoint(self) -> Endpoint | None:
        return self.inner.endpoint

    def aligned(self, request: JudgeRequest) -> JudgeRequest:
        """``request`` with the preamble before its prompt (its own prompt override, or its step's file)."""
        base = request.template
        prompt = self._prompts.get(base.template)
        if prompt is None:
            clash = base.placeholders & self._values.keys()
            if clash:
                raise ValueError(f"prompt {base.name!r} uses the aligned judge's placeholders {sorted(clash)}")
            preamble = load_prompt(PREAMBLE_STEP)
            prompt = Prompt(f"{base.name}+aligned", preamble.template + "\n" + base.template,
                            base.documented | preamble.documented, base.path)
            self._prompts[base.template] = prompt
        return dataclasses.replace(request, prompt=prompt, values={**request.values, **self._values})

    def judge(self, request: JudgeRequest) -> JudgeOutcome:
        return self.inner.judge(self.aligned(request))

    async def ajudge(self, request: JudgeRequest) -> JudgeOutcome:
        return await self.inner.ajudge(self.aligned(request))

    def run(self, request: JudgeRequest) -> JudgeOutcome:
        return self.inner.run(self.aligned(request))

    async def arun(self, request: JudgeRequest) -> JudgeOutcome:
        return await self.inner.arun(self.aligned(request))

    def prepare(self, request: JudgeRequest) -> None:
        load_prompt(PREAMBLE_STEP)
        self.inner.prepare(request)
