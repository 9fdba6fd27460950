"""Metrics given as names or compiled graphs → one compiled judge graph.

Shared by the judge node, the evaluators, the assertions and the simulator,
so each of them takes metrics the same way: a compiled metric graph, a metric
name (``"turn_relevancy"``, ``"turn-relevancy"``, ``"mypkg.judges:politeness"``),
or a list of these. Names are built with one judge made from ``model`` (a chat
model, a ``"provider:model"`` string, a :class:`~judgegraph.judges.Judge`, or
None for the offline embedding judge), so they share its limit on calls in
flight and its cache.

Several metrics run as parallel nodes of one graph (its callers pass a
validated :class:`Conversation`, so there is no ``prepare`` node).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from ..judges import Judge, resolve_judge
from ..metrics import get_metric
from ..report import ReportState
from ..state import MetricInput, MetricOutput
from .latest import latest_runner
from .messages import Scope

MetricLike = CompiledStateGraph | str

RESERVED = {"conversation", "exchanges", "results"}


def as_judge(model: Any = None) -> Judge:
    """``model`` as a :class:`Judge` (a Judge is used as it is)."""
    return model if isinstance(model, Judge) else resolve_judge(model=model)


def build_metric(name: str, judge: Judge, **options: Any) -> CompiledStateGraph:
    """The metric ``name`` built with ``judge`` (passed as ``judge=`` to factories
    that have that parameter, else as ``model=``, which takes a Judge)."""
    factory = get_metric(name).factory
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}  # type: ignore[assignment]
    key = "judge" if "judge" in params else "model"
    return factory(**{key: judge}, **options)


def metric_graphs(metrics: MetricLike | Sequence[MetricLike], *, model: Any = None) -> list[CompiledStateGraph]:
    """Compiled metric graphs for ``metrics``; names share one judge made from ``model``."""
    items = [metrics] if isinstance(metrics, (str, CompiledStateGraph)) else list(metrics)
    if not items:
        raise ValueError("no metric given: pass a metric name, a compiled metric graph, or a list of them")
    judge: Judge | None = None
    graphs: list[CompiledStateGraph] = []
    for item in items:
        if isinstance(item, CompiledStateGraph):
            graphs.append(item)
        elif isinstance(item, str):
            judge = judge or as_judge(model)
            graphs.append(build_metric(item, judge))
        else:
            raise TypeError(f"a metric is a name or a compiled metric graph, got {type(item).__name__}")
    return graphs


def judge_graph(metrics: MetricLike | Sequence[MetricLike], *, model: Any = None,
                scope: Scope = "conversation") -> Any:
    """One runnable reading ``{"conversation": Conversation}`` and writing
    ``results`` for every metric: the metric's own graph when there is one,
    else the metrics as parallel nodes of one graph. ``scope="latest"`` runs
    each metric on the latest exchange only (:func:`.latest.latest_runner`)."""
    if scope not in ("conversation", "latest"):
        raise ValueError(f"scope must be 'conversation' or 'latest', got {scope!r}")
    graphs: list[Any] = metric_graphs(metrics, model=model)
    if scope == "latest":
        graphs = [latest_runner(g) for g in graphs]
    if len(graphs) == 1:
        return graphs[0]
    builder = StateGraph(ReportState, input_schema=MetricInput, output_schema=MetricOutput)
    taken: set[str] = set()
    for graph in graphs:
        base = (graph.name or "metric").replace(":", "_").replace(".", "_")
        node, n = base, 2
        while node in taken or node in RESERVED:
            node, n = f"{base}_{n}", n + 1
        taken.add(node)
        builder.add_node(node, graph)
        builder.add_edge(START, node)
        builder.add_edge(node, END)
    return builder.compile(name="judges")
