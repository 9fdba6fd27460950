"""judgegraph: LLM judges for chatbot conversations, built as LangGraph graphs.

Everything is imported lazily: ``import judgegraph`` builds no model, loads no weights and opens no connection. Type
checkers see the exports through the ``TYPE_CHECKING`` imports below (the package ships ``py.typed``). Each built-in
metric's factory (``create_turn_relevancy_metric``...) is exported too, read from the metric registry: a new metric
needs no line here (typed where it is defined, ``judgegraph.metrics.<module>``). Authors of metrics import from
:mod:`judgegraph.metric`. Names renamed in 0.2 still work for one release, with a ``DeprecationWarning``
(:func:`_renamed`).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Iterable
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
    from .metrics.custom import make_metric
    from .metrics.pairwise import Criterion, create_pairwise_metric
    from .outputs.export import load_results
    from .report import create_report_graph, report_builder
    from .trust.agreement import agreement
    from .trust.alignment import align

_EXPORTS, _import = lazy_exports(__name__, {
    "data.conversation": ("Conversation", "Turn", "RetrievalNode", "ToolCall", "from_messages"),
    "data.results": ("MetricResult", "Verdict", "WindowVerdict", "JudgeErrorInfo", "Usage"),
    "core.scoring": ("build_result",),
    "metrics.custom": ("make_metric",),
    "metrics": ("create_metric",),
    "report": ("create_report_graph", "report_builder"),
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
    "metrics.pairwise": ("create_pairwise_metric", "Criterion"),
    "apps.pairwise": ("compare_pairwise", "PairwiseReport"),
    "trust.alignment": ("align",),
    "judges.aligned": ("AlignedJudge",),
    "outputs.export": ("load_results",),
})

#: Renamed in 0.2 (issue 26: "judge" is the model that answers): a metric graph's factory is ``create_<name>_metric``
#: (was ``create_<name>_judge``; ``make_metric`` was ``make_judge``: renamed in 0.2); and these, new name → old name.
RENAMED_FROM = {"report_builder": "build_report_graph"}  # renamed in 0.2


def _renamed(module: str, new: Iterable[str] | Callable[[], Iterable[str]],
             fallback: Callable[[str], Any] | None = None) -> Callable[[str], Any]:
    """A module's ``__getattr__`` serving the old names of ``new``, its names renamed in 0.2 (or a function giving
    them, called only for a name that may be old): the old name is the new name's object, with one
    ``DeprecationWarning`` naming the new name; it is in neither ``__all__`` nor ``dir()``. Other names go to
    ``fallback``."""
    def __getattr__(name: str) -> Any:
        if name.endswith("_judge") or name in RENAMED_FROM.values():
            names = new() if callable(new) else new
            old = {RENAMED_FROM.get(n) or n.removesuffix("_metric") + "_judge": n for n in names
                   if n in RENAMED_FROM or n.endswith("_metric")}
            # ``from package import name`` asks importlib's hasattr first, then the importer: it alone is warned
            if name in old and sys._getframe(1).f_code.co_name != "_handle_fromlist":
                warnings.warn(f"{module}.{name} is deprecated (renamed in judgegraph 0.2, removed in 0.3): use "
                              f"{module}.{old[name]}", DeprecationWarning, stacklevel=2)
            if name in old:
                return getattr(sys.modules[module], old[name])
        if fallback is not None:
            return fallback(name)
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    return __getattr__


def _metric_factories() -> dict[str, Any]:
    """Each built-in metric's factory by its name, from the registry (importing the metric modules)."""
    from .metrics import built_ins

    return {spec.factory.__name__: spec.factory for spec in built_ins().values()}


def _export(name: str) -> Any:
    if name in _EXPORTS:
        return _import(name)
    if name == "__all__":  # the public names: the table above and the metrics' factories
        return sorted({*_EXPORTS, *_metric_factories()})
    if name.startswith("create_") and name in (factories := _metric_factories()):
        return factories[name]
    return _import(name)  # AttributeError


__getattr__ = _renamed(__name__, lambda: ["make_metric", "create_pairwise_metric", "report_builder", *_metric_factories()],
                       _export)


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS, *_metric_factories()})
