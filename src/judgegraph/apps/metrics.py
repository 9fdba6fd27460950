"""Metrics given as names, specs or compiled graphs → one runnable judge, for
the judge node, the evaluators, the assertions and the simulator.

The metrics are composed by :mod:`judgegraph.report` (the one place metrics
are composed): names are built with one judge made from ``model`` (a chat
model, a ``"provider:model"`` string, a :class:`~judgegraph.judges.Judge`, or
None for the offline embedding judge), so they share its limit on calls in
flight and its cache; two metrics with one name are a ``ValueError``, as in a
report or a run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import Runnable

from ..judges import ModelLike
from ..report import MetricLike, create_report_graph, metric_graphs
from .latest import latest_runner
from .messages import Scope

__all__ = ["MetricLike", "judge_graph"]


def judge_graph(metrics: MetricLike | Sequence[MetricLike], *, model: ModelLike = None,
                scope: Scope = "conversation") -> Runnable[Any, Any]:
    """One runnable reading ``{"conversation": ...}`` and writing ``results``
    for every metric: the metric's own graph when there is one, else the report
    graph of them all (:func:`~judgegraph.report.create_report_graph`, named
    ``judges``). ``scope="latest"`` runs it on the latest exchange only
    (:func:`.latest.latest_runner`)."""
    if scope not in ("conversation", "latest"):
        raise ValueError(f"scope must be 'conversation' or 'latest', got {scope!r}")
    graphs = metric_graphs(metrics, model=model)
    graph = graphs[0] if len(graphs) == 1 else create_report_graph(graphs, name="judges")
    return latest_runner(graph) if scope == "latest" else graph
