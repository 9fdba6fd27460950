"""judgegraph: LLM judges for chatbot conversations, built as LangGraph graphs.

Everything is imported lazily: ``import judgegraph`` builds no model, loads no
weights and opens no connection. Type checkers see the exports through the
``TYPE_CHECKING`` imports below (the package ships ``py.typed``). Each built-in
metric's factory (``create_turn_relevancy_judge``...) is exported too, read from the
metric registry: a new metric needs no line here (typed where it is defined,
``judgegraph.metrics.<module>``). Authors of metrics import from :mod:`judgegraph.metric`.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

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

_EXPORTS = {
    "Conversation": "data.conversation",
    "Turn": "data.conversation",
    "RetrievalNode": "data.conversation",
    "ToolCall": "data.conversation",
    "from_messages": "data.conversation",
    "MetricResult": "data.results",
    "Verdict": "data.results",
    "WindowVerdict": "data.results",
    "JudgeErrorInfo": "data.results",
    "Usage": "data.results",
    "build_result": "core.scoring",
    "make_judge": "metrics.custom",
    "create_metric": "metrics",
    "create_report_graph": "report",
    "build_report_graph": "report",
    "CompileOptions": "core.compiling",
    "load_file": "loaders",
    "load_files": "loaders",
    "load_conversations": "loaders",
    "from_thread": "loaders.langgraph_threads",
    "exchanges": "data.windows",
    "sliding_windows": "data.windows",
    "Judge": "judges",
    "ModelLike": "judges",
    "NeedsLLMJudge": "judges",
    "resolve_judge": "judges",
    "JudgeCache": "judges",
    "CallLimiter": "judges",
    "LLMJudge": "judges.llm",
    "Jury": "judges.jury",
    "EmbeddingJudge": "judges.offline",
    "ScriptedChatModel": "judges.scripted",
    "judge_node": "apps.node",
    "route_on_verdict": "apps.node",
    "verdict_reason": "apps.node",
    "as_evaluator": "apps.evaluators",
    "assert_judged": "apps.assertions",
    "simulate": "apps.simulate",
    "asimulate": "apps.simulate",
    "Scenario": "apps.simulate",
    "agreement": "trust.agreement",
    "create_pairwise_judge": "metrics.pairwise",
    "Criterion": "metrics.pairwise",
    "compare_pairwise": "apps.pairwise",
    "PairwiseReport": "apps.pairwise",
    "align": "trust.alignment",
    "AlignedJudge": "judges.aligned",
    "load_aligned": "judges",
    "load_results": "outputs.export",
}



def _metric_factories() -> dict[str, Any]:
    """Each built-in metric's factory by its name, from the registry (importing the metric modules)."""
    from .metrics import built_ins

    return {spec.factory.__name__: spec.factory for spec in built_ins().values()}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    if name == "__all__":  # the public names: the table above and the metrics' factories
        return sorted([*_EXPORTS, *_metric_factories()])
    if name.startswith("create_") and name in (factories := _metric_factories()):
        return factories[name]
    raise AttributeError(f"module 'judgegraph' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS, *_metric_factories()})
