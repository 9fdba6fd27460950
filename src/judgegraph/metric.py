"""Everything a metric's author needs, in one public module (docs/guide/custom.md).

A metric is a :class:`MetricSpec` (its name, factory, summary, options, needs and scope) plus a LangGraph graph
built from the blocks below: ``window_node`` splits the conversation, ``fan_out`` sends one task per window,
``judge_step`` asks the judge (:class:`JudgeRequest` in, :class:`JudgeOutcome` out), ``scoring_edges`` adds the
optional review, ``score_node`` and ``make_result`` (the :class:`ScoringPolicy`) turn verdicts into a result.
:func:`create_metric` builds any metric's graph by name or spec. Another package adds its metrics through an entry
point in the group ``judgegraph.metrics`` naming a :class:`MetricSpec` (:data:`ENTRY_POINT_GROUP`).

These are the core's own objects, re-exported: importing this module builds nothing.
"""

from __future__ import annotations

from .judges import Judge, JudgeOutcome, JudgeRequest, ModelLike, require_tasks, resolve_judge
from .metrics import ENTRY_POINT_GROUP, MetricSpec, create_metric
from .nodes import (
    conversation_json,
    fan_out,
    in_scope,
    judge_step,
    outcome_fields,
    quote,
    render_messages,
    score_node,
    scoring_edges,
    turn_label,
    window_node,
)
from .prompts import Prompt, load_prompt, parse_prompt
from .results import JudgeErrorInfo, MetricResult, Usage, Verdict, WindowVerdict, merge_verdicts
from .scoring import ScoringPolicy, Tally, check_threshold, make_result, share_reason
from .state import MetricInput, MetricOutput, MetricState, conversation_of
from .windows import Exchange, Window, exchanges, sliding_windows

__all__ = [
    "ENTRY_POINT_GROUP", "Exchange", "Judge", "JudgeErrorInfo", "JudgeOutcome", "JudgeRequest", "MetricInput",
    "MetricOutput", "MetricResult", "MetricSpec", "MetricState", "ModelLike", "Prompt", "ScoringPolicy", "Tally",
    "Usage", "Verdict", "Window", "WindowVerdict", "check_threshold", "conversation_json", "conversation_of",
    "create_metric", "exchanges", "fan_out", "in_scope", "judge_step", "load_prompt", "make_result", "merge_verdicts",
    "outcome_fields", "parse_prompt", "quote", "render_messages", "require_tasks", "resolve_judge", "score_node",
    "scoring_edges", "share_reason", "sliding_windows", "turn_label", "window_node",
]
