"""pytest assertions: :func:`assert_judged` judges a conversation in a test and fails with a message that names
the failing turns and the judge's reasons; a judge error fails too, never passes (docs/apps.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.nodes import quote, turn_label
from ..data.results import MetricResult
from ..judges import ModelLike
from . import listeners
from .metrics import MetricLike, Scope, judge_graph, to_conversation

#: Verdict values that count against a metric (turn-level "no", user frustration "unresolved").
NEGATIVE = frozenset({"no", "unresolved"})


class JudgementFailed(AssertionError):
    """A conversation failed (or could not be judged by) one of its metrics."""

    def __init__(self, message: str, results: dict[str, MetricResult]) -> None:
        super().__init__(message)
        self.results = results


def describe(result: MetricResult) -> list[str]:
    """Readable lines for a result that did not pass: the score against the threshold, every failing verdict with
    its turns and reason, every judge error."""
    score = "no score" if result.score is None else f"score {result.score:.2f}"
    threshold = "" if result.threshold is None else f" (threshold {result.threshold:.2f})"
    lines = [f"{result.key}: {result.status}, {score}{threshold}"]
    for v in result.verdicts:
        if v.verdict in NEGATIVE:
            reply = getattr(v, "reply", "") or ""
            what = f" {quote(reply, 80)}" if reply else ""
            lines.append(f"  - {turn_label(v.turns)}{what}: {v.reason or v.verdict}")
    lines += [f"  - judge error at {e.where} ({e.step}): {e.message}" for e in result.errors]
    if len(lines) == 1 and result.reason:
        lines.append(f"  {result.reason}")
    return lines


def assert_judged(
    conversation: Any,
    metrics: MetricLike | Sequence[MetricLike],
    *,
    model: ModelLike = None,
    scope: Scope = "conversation",
    allow_not_applicable: bool = True,
    **fields: Any,
) -> dict[str, MetricResult]:
    """Judge ``conversation`` (messages, a ``{"messages": ...}`` dict, a Conversation or a judgegraph conversation
    dict) with ``metrics`` (names built with ``model``, or compiled graphs) and raise :class:`JudgementFailed`
    naming each metric that did not pass, its failing turns and the judge's reasons. Returns the results when all
    pass. ``fields`` set conversation fields (``id``, ``chatbot_role``, ``expected_outcome``)."""
    conv = to_conversation(conversation, **fields)
    results: dict[str, MetricResult] = judge_graph(metrics, model=model, scope=scope).invoke(
        {"conversation": conv})["results"]
    for listener in listeners:
        listener(conv.id, results)
    ok = {"passed", "not_applicable"} if allow_not_applicable else {"passed"}
    bad = [r for r in results.values() if r.status not in ok]
    if bad:
        name = f"conversation {conv.id!r}" if conv.id else "the conversation"
        head = f"{len(bad)} of {len(results)} metric(s) did not pass for {name}:"
        raise JudgementFailed("\n".join([head, *(line for r in bad for line in describe(r))]), results)
    return results
