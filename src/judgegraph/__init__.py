"""judgegraph: LLM judges for chatbot conversations, built as LangGraph graphs.

Everything is imported lazily: ``import judgegraph`` builds no model, loads no
weights and opens no connection. Type checkers see the exports through the
``TYPE_CHECKING`` imports below (the package ships ``py.typed``). Each built-in
metric's factory (``create_turn_relevancy_judge``...) is exported too, read from the
metric registry: a new metric needs no line here (typed where it is defined,
``judgegraph.metrics.<module>``). Authors of metrics import from :mod:`judgegraph.metric`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._lazy import lazy_exports

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .apps.assertions import assert_judged
    from .apps.evaluators import as_evaluator
    from .apps.node import judge_node, route_on_verdict, verdict_reason
    from .apps.pairwise import PairwiseReport, compare_pairwise
    from .apps.simulate import Scenario, asimulate, simulate
    from .core.compiling import CompileOptions
    from .core.scoring import build_result
    from .data.conversation import Conversation, RetrievalNode, ToolCall, Turn, from_messages
    from .data.results import JudgeErrorInfo, MetricResult, Usage, Verdict, WindowVerdict
    from .data.windows import exchanges, sliding_windows
    from .judges import CallLimiter, Judge, JudgeCache, ModelLike, NeedsLLMJudge, load_aligned, resolve_judge
    from .judges.aligned import AlignedJudge
    from .judges.jury import Jury
    from .judges.llm import LLMJudge
    from .judges.offline import EmbeddingJudge
    from .judges.scripted import ScriptedChatModel
    from .loaders import load_conversations, load_file, load_files
    from .loaders.langgraph_threads import from_thread
    from .metrics import create_metric
    from .metrics.custom import make_judge
    from .metrics.pairwise import Criterion, create_pairwise_judge
    from .outputs.export import load_results
    from .report import build_report_graph, create_report_graph
    from .trust.agreement import agreement
    from .trust.alignment import align

_EXPORTS, _import = lazy_exports(__name__, {
    "data.conversation": ("Conversation", "Turn", "RetrievalNode", "ToolCall", "from_messages"),
    "data.results": ("MetricResult", "Verdict", "WindowVerdict", "JudgeErrorInfo", "Usage"),
    "core.scoring": ("build_result",),
    "metrics.custom": ("make_judge",),
    "metrics": ("create_metric",),
    "report": ("create_report_graph", "build_report_graph"),
    "core.compiling": ("CompileOptions",),
    "loaders": ("load_file", "load_files", "load_conversations"),
    "loaders.langgraph_threads": ("from_thread",),
    "data.windows": ("exchanges", "sliding_windows"),
    "judges": ("Judge", "ModelLike", "NeedsLLMJudge", "resolve_judge", "JudgeCache", "CallLimiter", "load_aligned"),
    "judges.llm": ("LLMJudge",),
    "judges.jury": ("Jury",),
    "judges.offline": ("EmbeddingJudge",),
    "judges.scripted": ("ScriptedChatModel",),
    "apps.node": ("judge_node", "route_on_verdict", "verdict_reason"),
    "apps.evaluators": ("as_evaluator",),
    "apps.assertions": ("assert_judged",),
    "apps.simulate": ("simulate", "asimulate", "Scenario"),
    "trust.agreement": ("agreement",),
    "metrics.pairwise": ("create_pairwise_judge", "Criterion"),
    "apps.pairwise": ("compare_pairwise", "PairwiseReport"),
    "trust.alignment": ("align",),
    "judges.aligned": ("AlignedJudge",),
    "outputs.export": ("load_results",),
})


def _metric_factories() -> dict[str, Any]:
    """Each built-in metric's factory by its name, from the registry (importing the metric modules)."""
    from .metrics import built_ins

    return {spec.factory.__name__: spec.factory for spec in built_ins().values()}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return _import(name)
    if name == "__all__":  # the public names: the table above and the metrics' factories
        return sorted([*_EXPORTS, *_metric_factories()])
    if name.startswith("create_") and name in (factories := _metric_factories()):
        return factories[name]
    return _import(name)  # AttributeError


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS, *_metric_factories()})
