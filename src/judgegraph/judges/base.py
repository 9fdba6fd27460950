"""The judge interface: one request in, one outcome out, sync or async.

A node builds a :class:`JudgeRequest` (which prompt step, the values for its
placeholders, the structured-output schema, and the raw inputs an offline
judge needs) and hands it to a :class:`Judge`. The judge never raises for a
judgement it could not make: it returns an outcome with ``error`` set, and the
metric reports and counts it.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ..prompts import Prompt, load_prompt
from ..results import Usage


@dataclass(frozen=True)
class JudgeRequest:
    task: str  # what is being judged, e.g. "turn_relevance"
    step: str  # prompt name, e.g. "turn_relevancy/judge_turn"
    schema: type[BaseModel]
    values: dict[str, str]  # placeholder values for the prompt
    inputs: dict[str, Any] = field(default_factory=dict)  # raw inputs for non-LLM judges
    prompt: Prompt | None = None  # an override of the step's prompt file

    def render(self) -> str:
        return (self.prompt or load_prompt(self.step)).render(self.values)


@dataclass
class JudgeOutcome:
    value: BaseModel | None
    error: str | None = None
    attempts: int = 0
    usage: Usage = field(default_factory=Usage)
    score: float | None = None  # a similarity or probability behind the value, if any

    @property
    def ok(self) -> bool:
        return self.value is not None and self.error is None


class Judge(ABC):
    """Makes one judgement. Subclasses implement :meth:`judge`; :meth:`ajudge`
    runs it in a worker thread unless overridden with a native async path."""

    name: str = "judge"
    kind: str = "judge"  # "llm" or "offline"
    rule: str | None = None  # how a non-LLM judge decides, shown in results

    def supports(self, task: str) -> bool:
        return True

    @abstractmethod
    def judge(self, request: JudgeRequest) -> JudgeOutcome: ...

    async def ajudge(self, request: JudgeRequest) -> JudgeOutcome:
        return await asyncio.to_thread(self.judge, request)
