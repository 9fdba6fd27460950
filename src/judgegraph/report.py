"""Where metrics are composed: the one place every consumer builds its metrics (:func:`build_metric`,
:func:`metric_graphs`: one shared judge) and report graph (parallel subgraphs after ``prepare``), so all name results
alike; two metrics with one name are a ``ValueError``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from typing_extensions import Unpack  # pydantic reads these schemas; typing's TypedDict needs 3.12

from . import _renamed
from .core.compiling import CompileOptions, check_options, compile_graph
from .core.nodes import DeclaredGraph
from .core.state import MetricInput, MetricOutput, MetricState, conversation_of
from .judges import ModelLike, resolve_judge
from .metrics import MetricSpec, build_metric, canonical_name

#: A metric as every composing function takes it: a name (``"turn_relevancy"``,
#: ``"turn-relevancy"``) or import path (``"mypkg.judges:politeness"``), a
#: :class:`MetricSpec`, or a compiled metric graph (used as it is, with its own judge).
MetricLike = Union[CompiledStateGraph, MetricSpec, str]

ReportState = MetricState  # the report holds nothing of its own: the input and every metric's result

#: Names a metric's node cannot take: the ``prepare`` node and the state's keys.
RESERVED = frozenset({"prepare"} | MetricState.__required_keys__ | MetricState.__optional_keys__)


def check_unique_names(names: Sequence[str]) -> None:
    """A name given twice is a ``ValueError`` naming it: each result is keyed by its metric's name."""
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"two metrics have the same name: {', '.join(twice)}"
                         " (give one another name=...; each result is keyed by its metric's name)")


def _items(metrics: MetricLike | Sequence[MetricLike]) -> list[MetricLike]:
    items = [metrics] if isinstance(metrics, (str, MetricSpec, CompiledStateGraph)) else list(metrics)
    if not items:
        raise ValueError("no metric given: a report needs at least one metric"
                         " (a metric name, a MetricSpec, a compiled metric graph, or a list of them)")
    for item in items:
        if not isinstance(item, (str, MetricSpec, CompiledStateGraph)):
            raise TypeError("a metric is a name, a MetricSpec or a compiled metric graph,"
                            f" got {type(item).__name__}")
    return items


def metric_graphs(
    metrics: MetricLike | Sequence[MetricLike],
    *,
    model: ModelLike = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[CompiledStateGraph]:
    """Compiled metric graphs for ``metrics``: names and specs built with one judge made from
    ``model`` and ``options[name]``, compiled graphs as they are. An option a metric does not take
    is a ``TypeError``; options for a metric not built here, or two metrics with one name, a ``ValueError``."""
    items = _items(metrics)
    by_name = {canonical_name(k): dict(v) for k, v in (options or {}).items()}
    built = [m for m in items if not isinstance(m, CompiledStateGraph)]
    asked = {canonical_name(m.name if isinstance(m, MetricSpec) else m) for m in built}
    stray = sorted(set(by_name) - asked)
    if stray:
        raise ValueError(f"options for metrics not in the report: {', '.join(stray)}")
    shared = resolve_judge(model) if built else None
    graphs = [m if isinstance(m, CompiledStateGraph)
              else build_metric(m, shared, **by_name.get(canonical_name(m.name if isinstance(m, MetricSpec) else m), {}))
              for m in items]
    check_unique_names([g.name or "metric" for g in graphs])
    return graphs


def _node_names(names: Sequence[str]) -> list[str]:
    """A node name per metric: its name with ``:`` and ``.`` made ``_``, never a
    reserved name, and distinct even when two names map to one (``a.b``, ``a_b``)."""
    out: list[str] = []
    for name in names:
        base = name.replace(":", "_").replace(".", "_")
        base = f"{base}_metric" if base in RESERVED else base
        node, n = base, 2
        while node in out:
            node, n = f"{base}_{n}", n + 1
        out.append(node)
    return out


def prepare(state: ReportState) -> dict[str, Any]:
    """Validate the conversation once (or convert the messages once) for every metric."""
    return {"conversation": conversation_of(state)}


@dataclass(frozen=True)
class ReportMetrics:
    """What :func:`report_builder` declares of its graph (:class:`~judgegraph.core.nodes.DeclaredGraph`): the
    metric graphs it holds, each run from the prepared conversation."""

    metrics: tuple[CompiledStateGraph, ...]


def report_builder(metrics: Sequence[CompiledStateGraph]) -> StateGraph:
    """The uncompiled report graph over compiled metric graphs (unique names, :func:`check_unique_names`),
    declaring them (:class:`ReportMetrics`)."""
    if not metrics:
        raise ValueError("no metric given: a report needs at least one metric")
    for graph in metrics:
        if not isinstance(graph, CompiledStateGraph):
            raise TypeError(f"report metrics must be compiled graphs or metric names, got {type(graph).__name__}")
    names = [graph.name or "metric" for graph in metrics]
    check_unique_names(names)
    builder = DeclaredGraph(ReportState, input_schema=MetricInput, output_schema=MetricOutput)
    builder.add_node("prepare", prepare)
    builder.add_edge(START, "prepare")
    for node, graph in zip(_node_names(names), metrics):
        builder.add_node(node, graph)
        builder.add_edge("prepare", node)
        builder.add_edge(node, END)
    builder.declared = ReportMetrics(tuple(metrics))  # what the dry run runs one by one (runs/dry.py)
    return builder


def create_report_graph(
    metrics: MetricLike | Sequence[MetricLike],
    *,
    model: ModelLike = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    name: str = "report",
    **compile: Unpack[CompileOptions],
) -> CompiledStateGraph:
    """A compiled report over ``metrics`` (compiled graphs, names, import paths or specs,
    built by :func:`metric_graphs` with one shared judge from ``model`` and ``options[name]``)."""
    check_options(compile, create_report_graph)  # a misspelt keyword first, before any metric is built
    graphs = metric_graphs(metrics, model=model, options=options)
    return compile_graph(report_builder(graphs), name, compile, create_report_graph)


__getattr__ = _renamed(__name__, ["report_builder"])  # build_report_graph: deprecated, renamed in 0.2
__all__ = ["MetricLike", "build_metric", "check_unique_names", "create_report_graph", "metric_graphs", "report_builder"]
