"""Writing: judgegraph's results back to MLflow as feedback assessments (:func:`log_assessments`); a judge error
is written as feedback carrying an error, never as a value."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias, Union

from ...data.conversation import Conversation, as_conversation
from ...loaders import LoadedConversation
from .common import FIRST_TRACE_KEY, SESSION_ID_KEY, SESSION_KEY, TRACE_ID_KEY, import_mlflow, unreachable

if TYPE_CHECKING:
    from mlflow.entities import Assessment, AssessmentSource, Feedback

    from ...data.results import MetricResult, Verdict
    from ...runs.runner import ConversationOutcome, RunSummary

#: What :func:`log_assessments` reads results from (see there).
Outcomes: TypeAlias = Union["RunSummary", Iterable["ConversationOutcome | MetricResult"],
                            Mapping[str, Mapping[str, "MetricResult"]]]

MAX_ERRORS_IN_METADATA = 20  # a result's judge errors listed in its metadata (all are counted in judge_errors)


@dataclass
class AssessmentLog:
    """What :func:`log_assessments` wrote."""

    session: int = 0  # session-level feedback (one per metric result), on each session's first trace
    turn: int = 0  # per-verdict feedback ("<metric>/turn") on the verdict's trace
    errors: int = 0  # of those, feedback carrying a judge error instead of a value
    skipped: list[str] = field(default_factory=list)  # not written, and why
    failures: list[str] = field(default_factory=list)  # writes MLflow refused or that failed
    assessment_ids: list[str] = field(default_factory=list)

    @property
    def written(self) -> int:
        return self.session + self.turn

    def __str__(self) -> str:
        parts = [f"{self.written} assessments written to MLflow ({self.session} session-level, {self.turn} per-turn"
                 + (f", {self.errors} judge errors" if self.errors else "") + ")"]
        if self.skipped:
            parts.append(f"{len(self.skipped)} skipped")
        if self.failures:
            parts.append(f"{len(self.failures)} failed")
        return "; ".join(parts)


def _meta(**values: Any) -> dict[str, str]:
    """MLflow keeps assessment metadata as strings: JSON-encode everything else."""
    return {k: v if isinstance(v, str) else json.dumps(v, default=str) for k, v in values.items()}


def _iter_results(outcomes: Outcomes) -> Iterator[tuple[str, dict[str, MetricResult], str | None]]:
    """(conversation id, {metric: MetricResult}, run error) from a RunSummary, a
    list of ConversationOutcome or MetricResult, or {conversation id: {metric: result}}."""
    read: Any = getattr(outcomes, "outcomes", outcomes)  # read by shape, as documented: items are duck-typed
    if isinstance(read, Mapping):
        for cid, results in read.items():
            yield str(cid), dict(results), None
        return
    flat: dict[str, dict[str, MetricResult]] = {}
    for item in read:
        if hasattr(item, "results") and hasattr(item, "conversation_id"):
            yield item.conversation_id, dict(item.results), getattr(item, "error", None)
        elif hasattr(item, "key") and hasattr(item, "conversation_id"):
            flat.setdefault(item.conversation_id, {})[item.key] = item
        else:
            raise TypeError(f"log_assessments: cannot read results from {type(item).__name__}")
    for cid, results in flat.items():
        yield cid, results, None


def _source(judge: str, source_id: str | None) -> AssessmentSource:
    from mlflow.entities import AssessmentSource, AssessmentSourceType

    kind = AssessmentSourceType.LLM_JUDGE if judge.startswith("llm") else AssessmentSourceType.CODE
    return AssessmentSource(source_type=kind, source_id=source_id or judge or "judgegraph")


def log_assessments(
    tracking_uri: str,
    outcomes: Outcomes,
    sessions: Iterable[LoadedConversation | Conversation],
    *,
    source_id: str | None = None,
    per_turn: bool = True,
    max_workers: int = 4,
) -> AssessmentLog:
    """Write judgegraph's results back to MLflow as feedback assessments: one per metric result on the session's
    first trace (from :meth:`MetricResult.to_feedback`, marked ``mlflow.trace.session`` as MLflow's session judges
    mark theirs) and, with ``per_turn``, one per verdict (``<metric>/turn``) on the trace of its last turn. A judge
    error is an ``AssessmentError``, never a value; ``not_applicable`` results are not written; the source is
    ``LLM_JUDGE`` or ``CODE`` (the offline judge). ``outcomes``: a ``RunSummary``, outcomes, results, or ``{id:
    {metric: result}}``; ``sessions``: what :func:`load_sessions` returned. Every field: docs/mlflow.md, "What is
    written back". MLflow keeps every assessment: running this twice writes them twice."""
    from ... import __version__

    import_mlflow()
    from mlflow.tracing.client import TracingClient

    log = AssessmentLog()
    why = unreachable(tracking_uri)
    if why:
        log.failures.append(why)
        return log
    convs = {c.id: c for c in (s.conversation if isinstance(s, LoadedConversation) else as_conversation(s)
                               for s in sessions)}
    jobs: list[tuple[str, str, Feedback]] = []  # (kind, trace id, feedback)

    for cid, results, run_error in _iter_results(outcomes):
        conv = convs.get(cid)
        first = conv.metadata.get(FIRST_TRACE_KEY) if conv is not None else None
        if conv is None or not first:
            log.skipped.extend(f"{cid}/{key}: not an MLflow session" for key in results or ["(run)"])
            continue
        sid = conv.metadata.get(SESSION_ID_KEY)
        session_mark = {SESSION_KEY: str(sid)} if sid else {}  # MLflow's mark of a session assessment
        if run_error:
            jobs.append(("session", first, _feedback(
                "judgegraph", _source("", source_id), {**_meta(conversation_id=cid, judgegraph_version=__version__),
                                                       **session_mark}, error=run_error, code="JUDGEGRAPH_RUN_ERROR")))
        for key, result in results.items():
            if result.status == "not_applicable":
                log.skipped.append(f"{cid}/{key}: not applicable ({result.reason or 'nothing to judge'})")
                continue
            fb = result.to_feedback()
            name = fb["key"] or key
            source = _source(result.judge, source_id)
            extra = fb["extra"].copy()
            if len(extra["errors"]) > MAX_ERRORS_IN_METADATA:
                extra["errors"] = extra["errors"][:MAX_ERRORS_IN_METADATA]
            meta = {**_meta(score=fb["score"], **extra, judgegraph_version=__version__), **session_mark}
            value = _value(result, fb)
            detail = "; ".join(f"{e.where}: {e.message}" for e in result.errors[:5]) or fb["comment"]
            jobs.append(("session", first, _feedback(
                name, source, meta, value, fb["comment"] or None,
                (detail or "the judge could not decide") if result.status == "error" or value is None else None)))
            if per_turn:
                jobs += _verdict_jobs(conv, cid, name, result.verdicts, source, __version__)

    client = TracingClient(tracking_uri)

    def write(job: tuple[str, str, Feedback]) -> tuple[str, Assessment, str | None]:
        kind, trace_id, feedback = job
        try:
            return kind, client.log_assessment(trace_id, feedback), None
        except Exception as exc:  # noqa: BLE001 - reported, the other writes go on
            return kind, feedback, f"{trace_id} {feedback.name}: {exc}"

    with ThreadPoolExecutor(max_workers=max(1, max_workers)) as pool:
        for kind, written, failure in pool.map(write, jobs):
            if failure:
                log.failures.append(failure)
                continue
            if kind == "session":
                log.session += 1
            else:
                log.turn += 1
            if getattr(written, "error", None) is not None:
                log.errors += 1
            if assessment_id := getattr(written, "assessment_id", None):
                log.assessment_ids.append(assessment_id)
    return log


def _value(result: MetricResult, fb: Mapping[str, Any]) -> Any:
    """One MLflow value: the metric's declared value, else the score, else passed. (``to_feedback()["value"]`` is the
    declared value or passed: LangSmith keeps the score apart, MLflow has one value.)"""
    if getattr(result, "value", None) is not None:
        return fb["value"]
    return fb["score"] if fb["score"] is not None else fb["value"]


def _verdict_jobs(conv: Conversation, cid: str, name: str, verdicts: Iterable[Verdict], source: AssessmentSource,
                  version: str) -> list[tuple[str, str, Feedback]]:
    """One per-turn feedback (``<metric>/turn``) per verdict, on the trace of its last turn."""
    jobs: list[tuple[str, str, Feedback]] = []
    for verdict in verdicts:
        trace_id = _trace_of(conv, verdict.turns)
        if trace_id is None:
            continue
        vmeta = _meta(turns=list(verdict.turns), conversation_id=cid, attempts=verdict.attempts,
                      **({"window": verdict.window} if hasattr(verdict, "window") else {}),
                      **({"score": verdict.score} if verdict.score is not None else {}),
                      judgegraph_version=version)
        jobs.append(("turn", trace_id, _feedback(f"{name}/turn", source, vmeta, verdict.verdict, verdict.reason or None,
                                                 (verdict.error or "no verdict") if verdict.verdict is None else None)))
    return jobs


def _feedback(name: str, source: AssessmentSource, metadata: dict[str, str], value: Any = None,
              rationale: str | None = None, error: str | None = None, code: str = "JUDGE_ERROR") -> Feedback:
    """A feedback carrying ``value``; with ``error``, carrying that error and no value."""
    from mlflow.entities import AssessmentError, Feedback

    if error is not None:
        return Feedback(name=name, source=source, rationale=rationale, metadata=metadata,
                        error=AssessmentError(error_code=code, error_message=error))
    return Feedback(name=name, source=source, value=value, rationale=rationale, metadata=metadata)


def _trace_of(conv: Conversation, turns: Iterable[int]) -> str | None:
    """The trace of the last of these turns that came from a trace."""
    for index in sorted(turns, reverse=True):
        if 0 <= index < len(conv.turns):
            trace_id = conv.turns[index].metadata.get(TRACE_ID_KEY)
            if trace_id:
                return str(trace_id)
    return None

