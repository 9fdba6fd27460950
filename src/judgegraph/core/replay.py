"""Steering a metric's judge steps at run time, with no metric-specific code.

A :class:`Steer` in ``configurable[STEER_KEY]`` is read by every judge step: one whose verdicts (found by calling its
``finish`` with a failed outcome) are all kept returns them, an extraction repeating a request gets the earlier
answer, any other asks the judge. Nothing here names a node or a metric.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from ..data.prompts import Prompt
from ..data.results import JudgeAttempt, MetricResult, Verdict
from ..judges.base import Judge, JudgeOutcome, JudgeRequest

STEER_KEY = "judgegraph_steer"
PROBE = "(steering probe: no call made)"


@dataclass(frozen=True)
class Steer:
    """Run-time steering of judge steps: ``keep`` verdicts by id unless ``chosen`` (None: all);
    ``replay`` earlier answers by request key; ``prompt``, ``values`` (``{"rubric": ...}``) and
    ``judge`` replace the steps' own; ``review``: whether a review node pauses again."""

    keep: Mapping[str, Verdict] = field(default_factory=dict)
    chosen: frozenset[str] | None = None
    replay: Mapping[str, JudgeAttempt] = field(default_factory=dict)
    prompt: Prompt | None = None
    values: Mapping[str, str] = field(default_factory=dict)
    judge: Judge | None = None
    review: bool = False
    #: filled as the run goes: ids of the verdicts judged again, names of the values replaced
    rejudged: set[str] = field(default_factory=set)
    replaced: set[str] = field(default_factory=set)

    def plan(self, probe: Any, request: JudgeRequest) -> tuple[JudgeRequest, Any | JudgeOutcome | None]:
        """The request to send (prompt and values replaced) and what the step does instead of
        asking the judge, from ``probe`` (its update for a failed outcome): the kept verdicts, the
        earlier answer to the same request (a step writing no verdict), or None (ask the judge)."""
        verdicts = verdicts_of(probe)
        if not verdicts:
            return self._values(request), self.answer(request)
        if (kept := self.kept(verdicts)) is not None:
            return request, {"verdicts": kept}
        request = self._values(request)
        if self.prompt is not None:
            unknown = self.prompt.placeholders - request.values.keys()
            if unknown:
                raise ValueError(f"the new prompt uses {sorted(unknown)}, which step {request.step!r} does not fill"
                                 f" (it fills {sorted(request.values)})")
            request = dataclasses.replace(request, prompt=self.prompt, values={
                k: v for k, v in request.values.items() if k in self.prompt.placeholders})
        return request, None

    def kept(self, verdicts: list[Verdict]) -> list[Verdict] | None:
        """The kept verdicts standing for ``verdicts`` (all kept, none chosen), else None: they are judged again."""
        ids = [v.id for v in verdicts]
        if ids and self.chosen is not None and all(i in self.keep and i not in self.chosen for i in ids):
            return [self.keep[i] for i in ids]
        return None

    def _values(self, request: JudgeRequest) -> JudgeRequest:
        mine = {k: v for k, v in self.values.items() if k in request.values}
        if not mine:
            return request
        self.replaced.update(mine)
        return dataclasses.replace(request, values={**request.values, **mine})

    def answer(self, request: JudgeRequest) -> JudgeOutcome | None:
        """The earlier answer to the same request, as an outcome with no call (None: none that fits)."""
        attempt = self.replay.get(request.cache_key())
        if attempt is None or attempt.reply is None:
            return None
        try:
            value = request.schema.model_validate_json(attempt.reply)
        except ValueError:
            return None
        return JudgeOutcome(value, transcript=[attempt]).as_cached()

    def note(self, update: Any) -> None:
        """Record the ids of the verdicts a step judged (again)."""
        self.rejudged.update(v.id for v in verdicts_of(update))


def verdicts_of(update: Any) -> list[Any]:
    """The verdicts a node's update (a state update or a ``Command``) writes."""
    inner = update.update if isinstance(update, Command) else update
    return list(inner.get("verdicts") or []) if isinstance(inner, Mapping) else []


def steer_of(config: RunnableConfig | None) -> Steer | None:
    steer = ((config or {}).get("configurable") or {}).get(STEER_KEY)
    return steer if isinstance(steer, Steer) else None


def with_steer(config: RunnableConfig | None, steer: Steer) -> RunnableConfig:
    base: RunnableConfig = dict(config or {})  # type: ignore[assignment]
    base["configurable"] = {**(base.get("configurable") or {}), STEER_KEY: steer}
    return base


def probe(finish: Callable[[Any, JudgeOutcome], Any], task: Any) -> Any:
    """The step's update for a failed outcome: which verdicts it writes, with no call."""
    return finish(task, JudgeOutcome(None, error=PROBE))


def answers_of(results: Iterable[MetricResult], *, leave_out: Callable[[Verdict], bool]) -> dict[str, JudgeAttempt]:
    """Every valid answer in ``results``' transcripts by request key, less the requests of the
    verdicts ``leave_out`` picks (they are judged again)."""
    out: dict[str, JudgeAttempt] = {}
    again: set[str] = set()
    for result in results:
        attempts = list(result.transcript)
        for v in result.verdicts:
            if leave_out(v):
                again.update(a.request for a in v.transcript if a.request)
            else:
                attempts.extend(v.transcript)
        for a in attempts:
            if a.request and a.error is None and a.reply is not None:
                out[a.request] = a
    return {k: a for k, a in out.items() if k not in again}
