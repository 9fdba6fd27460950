"""One graph for a whole conversation report: any set of metric graphs, run as
named subgraphs in parallel from a single invocation.

    START → prepare ─┬→ turn_relevancy ─────────┐
                     ├→ turn_contextual_relevancy ├→ END
                     └→ my_custom_judge ─────────┘

``prepare`` validates the conversation once and computes its exchanges once;
every metric reads them. Metrics built here by name share one judge, so they
share one limit on judge calls in flight and one cache: a statement extraction
two metrics need is made once.

``report.invoke({"conversation": ...})["results"]`` holds every metric's
result; ``report.stream(..., subgraphs=True)`` shows each metric's nodes as they
run; ``report.get_graph(xray=1)`` draws the nested graph.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from typing_extensions import TypedDict  # pydantic reads these schemas; typing's TypedDict needs 3.12

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from .conversation import Conversation, as_conversation
from .judges import Judge, resolve_judge
from .results import MetricResult, merge_results
from .state import MetricInput, MetricOutput
from .windows import Exchange, exchanges

RESERVED = {"prepare", "conversation", "exchanges", "results"}


class ReportState(TypedDict, total=False):
    conversation: Conversation | dict[str, Any]
    exchanges: list[Exchange]
    results: Annotated[dict[str, MetricResult], merge_results]


def prepare(state: ReportState) -> dict[str, Any]:
    conversation = as_conversation(state["conversation"])
    return {"conversation": conversation, "exchanges": exchanges(conversation)}


def _node_name(graph: CompiledStateGraph, taken: set[str]) -> str:
    base = (graph.name or "metric").replace(":", "_").replace(".", "_")
    name, n = base, 2
    while name in taken or name in RESERVED:
        name, n = f"{base}_{n}", n + 1
    taken.add(name)
    return name


def build_report_graph(metrics: Sequence[CompiledStateGraph]) -> StateGraph:
    """The uncompiled report graph over compiled metric graphs."""
    if not metrics:
        raise ValueError("a report needs at least one metric")
    builder = StateGraph(ReportState, input_schema=MetricInput, output_schema=MetricOutput)
    builder.add_node("prepare", prepare)
    builder.add_edge(START, "prepare")
    taken: set[str] = set()
    for graph in metrics:
        if not isinstance(graph, CompiledStateGraph):
            raise TypeError(f"report metrics must be compiled graphs or metric names, got {type(graph).__name__}")
        node = _node_name(graph, taken)
        builder.add_node(node, graph)
        builder.add_edge("prepare", node)
        builder.add_edge(node, END)
    return builder


def create_report_graph(
    metrics: Sequence[CompiledStateGraph | str],
    *,
    model: Any = None,
    judge: Judge | None = None,
    max_concurrency: int = 16,
    max_tries: int = 3,
    options: dict[str, dict[str, Any]] | None = None,
    name: str = "report",
    **model_kwargs: Any,
) -> CompiledStateGraph:
    """A report over ``metrics``: compiled metric graphs (built-in or custom,
    used as they are) and/or metric names (``"turn_relevancy"``,
    ``"mypkg.judges:politeness"``), built here with one shared judge and
    ``options[name]`` as their keyword options."""
    from .metrics import canonical_name, get_metric

    shared: Judge | None = None
    graphs: list[CompiledStateGraph] = []
    for metric in metrics:
        if isinstance(metric, str):
            if shared is None:
                shared = resolve_judge(model=model, judge=judge, max_concurrency=max_concurrency,
                                       max_tries=max_tries, **model_kwargs)
            spec = get_metric(metric)
            opts = dict((options or {}).get(metric) or (options or {}).get(canonical_name(metric)) or {})
            graphs.append(spec.factory(judge=shared, **opts))
        else:
            graphs.append(metric)
    return build_report_graph(graphs).compile(name=name)
