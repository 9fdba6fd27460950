"""One graph for a whole conversation report: any set of metric graphs, run as
named subgraphs in parallel from a single invocation.

    START → prepare ─┬→ turn_relevancy ─────────┐
                     ├→ turn_contextual_relevancy ├→ END
                     └→ my_custom_judge ─────────┘

``prepare`` validates the conversation once (or converts ``messages`` once);
every metric reads it. Metrics built here by name share one judge, so they
share one limit on judge calls in flight and one cache: a statement extraction
two metrics need is made once.

``report.invoke({"conversation": ...})["results"]`` holds every metric's
result; ``report.stream(..., subgraphs=True)`` shows each metric's nodes as they
run; ``report.get_graph(xray=1)`` draws the nested graph.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from typing_extensions import Unpack  # pydantic reads these schemas; typing's TypedDict needs 3.12

from .compiling import CompileOptions, compile_graph
from .judges import ModelLike, resolve_judge
from .state import MetricInput, MetricOutput, MetricState, conversation_of

RESERVED = {"prepare", "conversation", "messages", "results"}


ReportState = MetricState  # the report holds nothing of its own: the input and every metric's result


def prepare(state: ReportState) -> dict[str, Any]:
    """Validate the conversation once (or convert the messages once) for every metric."""
    return {"conversation": conversation_of(state)}


def _node_name(name: str) -> str:
    base = name.replace(":", "_").replace(".", "_")
    return f"{base}_metric" if base in RESERVED else base


def build_report_graph(metrics: Sequence[CompiledStateGraph]) -> StateGraph:
    """The uncompiled report graph over compiled metric graphs. Each metric's
    result is keyed by its graph's name, so two metrics with the same name are a
    ``ValueError`` naming them (rename one: every factory takes ``name=``)."""
    if not metrics:
        raise ValueError("a report needs at least one metric")
    for graph in metrics:
        if not isinstance(graph, CompiledStateGraph):
            raise TypeError(f"report metrics must be compiled graphs or metric names, got {type(graph).__name__}")
    names = [graph.name or "metric" for graph in metrics]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"two metrics of the report have the same name: {', '.join(twice)}"
                         " (give one another name=...; each result is keyed by its metric's name)")
    builder = StateGraph(ReportState, input_schema=MetricInput, output_schema=MetricOutput)
    builder.add_node("prepare", prepare)
    builder.add_edge(START, "prepare")
    for name, graph in zip(names, metrics):
        node = _node_name(name)
        builder.add_node(node, graph)
        builder.add_edge("prepare", node)
        builder.add_edge(node, END)
    return builder


def create_report_graph(
    metrics: Sequence[CompiledStateGraph | str],
    *,
    model: ModelLike = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    name: str = "report",
    **compile: Unpack[CompileOptions],
) -> CompiledStateGraph:
    """A report over ``metrics``: compiled metric graphs (built-in or custom,
    used as they are) and/or metric names (``"turn_relevancy"``,
    ``"mypkg.judges:politeness"``), built here with one shared judge (``model``:
    see :func:`~judgegraph.resolve_judge`) and ``options[name]`` as their keyword
    options. An option a metric does not take is a ``TypeError``; options for a
    metric that is not in the report are a ``ValueError``."""
    from .metrics import canonical_name, get_metric

    by_name = {canonical_name(k): dict(v) for k, v in (options or {}).items()}
    asked = {canonical_name(m) for m in metrics if isinstance(m, str)}
    stray = sorted(set(by_name) - asked)
    if stray:
        raise ValueError(f"options for metrics not in the report: {', '.join(stray)}")
    shared = resolve_judge(model) if asked else None
    graphs = [get_metric(m).factory(model=shared, **by_name.get(canonical_name(m), {})) if isinstance(m, str) else m
              for m in metrics]
    return compile_graph(build_report_graph(graphs), name, compile, create_report_graph)
