"""promptfoo's rules for a result, applied after the metric has run: a ``not-`` assertion inverts it. The loader marks
the assertion ``negate: True`` (plain data, picklable); :func:`result_transform` gives the runner the function."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

from judgegraph.data.results import MetricResult

#: A function applied to a metric's result before it is written (e.g. promptfoo's negation).
ResultTransform = Callable[[MetricResult], MetricResult]


def negate_result(result: MetricResult) -> MetricResult:
    """A negated assertion's result: passes only when the score is strictly below the threshold (promptfoo 0.121.20:
    ``pass = (score >= threshold - EPSILON) !== inverse``), the score becoming ``1 - score``. A result not judged
    (error, not applicable, no score) is never flipped into a pass: returned as is, its reason saying so."""
    note = f"negated assertion {result.key!r}"
    if result.status in ("error", "not_applicable") or result.score is None or result.threshold is None:
        return result.model_copy(update={"reason": f"{note}: not flipped ({result.status}); {result.reason}",
                                         "details": {**result.details, "negated": True}})
    passed = not result.score >= result.threshold - sys.float_info.epsilon  # promptfoo's Number.EPSILON
    return result.model_copy(update={
        "score": 1.0 - result.score,
        "passed": passed,
        "status": "passed" if passed else "failed",
        "reason": (f"{note}: passes when the metric's score {result.score:.2f} is below the threshold "
                   f"{result.threshold:g} — {'it is' if passed else 'it is not'}; the metric said: {result.reason}"),
        "details": {**result.details, "negated": True, "metric_score": result.score, "metric_passed": result.passed},
    })


def result_transform(assertion: Mapping[str, Any]) -> ResultTransform | None:
    """What to apply to the result of an input file's assertion
    (:attr:`~judgegraph.loaders.LoadedConversation.assertions`): :func:`negate_result` for a ``not-`` one, else None."""
    return negate_result if assertion.get("negate") else None
