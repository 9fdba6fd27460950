"""Everything a metric's author needs, in one public module (docs/guide/custom.md): the :class:`MetricSpec` that
declares a metric once (its settings class, a :class:`MetricOptions` or :class:`WindowOptions` subclass whose
fields are made with :func:`option`, and ``build``, settings → a LangGraph graph), and the blocks that graph is built
from (``window_node``, ``fan_out``, ``judge_step``, ``window_verdict``, ``scoring_edges``, ``score_node``,
``make_result``). Another package adds its metrics through an entry point in the group ``judgegraph.metrics``
(:data:`ENTRY_POINT_GROUP`). These are the core's own objects, re-exported: importing this module builds nothing.
"""

from __future__ import annotations

from .core.nodes import (
    WindowTask,
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
    window_graph,
    window_node,
)
from .core.scoring import (
    JudgeOptions,
    MetricOptions,
    ScoringPolicy,
    Tally,
    WindowOptions,
    check_flag,
    check_threshold,
    check_whole,
    make_result,
    option,
    share_reason,
)
from .core.state import MetricInput, MetricOutput, MetricState, conversation_of
from .core.verdicts import answer_fields, window_verdict
from .data.prompts import Prompt, load_prompt, parse_prompt
from .data.results import JudgeErrorInfo, MetricResult, Usage, Verdict, WindowVerdict, merge_verdicts
from .data.windows import Exchange, Window, exchanges, sliding_windows
from .judges import Judge, JudgeOutcome, JudgeRequest, ModelLike, require_tasks, resolve_judge
from .metrics import ENTRY_POINT_GROUP, MetricSpec, create_metric

__all__ = [
    "ENTRY_POINT_GROUP", "Exchange", "Judge", "JudgeErrorInfo", "JudgeOptions", "JudgeOutcome", "JudgeRequest",
    "MetricInput", "MetricOptions", "MetricOutput", "MetricResult", "MetricSpec", "MetricState", "ModelLike", "Prompt",
    "ScoringPolicy", "Tally", "Usage", "Verdict", "Window", "WindowOptions", "WindowTask", "WindowVerdict", "answer_fields", "check_flag",
    "check_threshold", "check_whole", "conversation_json", "conversation_of", "create_metric", "exchanges", "fan_out",
    "in_scope", "judge_step", "load_prompt", "make_result", "merge_verdicts", "option", "outcome_fields",
    "parse_prompt", "quote", "render_messages", "require_tasks", "resolve_judge", "score_node", "scoring_edges",
    "share_reason", "sliding_windows", "turn_label", "window_graph", "window_node", "window_verdict",
]
