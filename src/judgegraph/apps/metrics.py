"""Metrics given as names, specs or compiled graphs → one runnable judge, for the judge node, the evaluators,
the assertions and the simulator; and what they judge: messages or conversations in, one Conversation out.

The metrics are composed by :mod:`judgegraph.report` (the one place metrics are composed): names are built with
one judge made from ``model``, so they share its limit on calls in flight and its cache; two metrics with one name
are a ``ValueError``, as in a report or a run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from langchain_core.runnables import Runnable
from langgraph.graph.state import CompiledStateGraph

from ..core.nodes import SCOPE_KEY
from ..data.conversation import Conversation, as_conversation, from_messages
from ..judges import ModelLike
from ..report import MetricLike, create_report_graph, metric_graphs

__all__ = ["MetricLike", "judge_graph"]

#: What a judge looks at: every exchange, or only the latest one (:func:`latest_runner`).
Scope = Literal["conversation", "latest"]


def latest_runner(graph: CompiledStateGraph) -> CompiledStateGraph:
    """``graph`` judging only the latest exchange (one window, one judgement per step) with no change to the
    metric: it runs with ``configurable[SCOPE_KEY] = "latest"`` (docs/apps.md, "A judge as a node")."""
    return graph.with_config(configurable={SCOPE_KEY: "latest"})


def judge_graph(metrics: MetricLike | Sequence[MetricLike], *, model: ModelLike = None,
                scope: Scope = "conversation") -> Runnable[Any, Any]:
    """One runnable reading ``{"conversation": ...}`` and writing ``results`` for every metric: the metric's own
    graph when there is one, else the report graph of them all (named ``judges``). ``scope="latest"`` runs it on
    the latest exchange only (:func:`latest_runner`)."""
    if scope not in ("conversation", "latest"):
        raise ValueError(f"scope must be 'conversation' or 'latest', got {scope!r}")
    graphs = metric_graphs(metrics, model=model)
    graph = graphs[0] if len(graphs) == 1 else create_report_graph(graphs, name="judges")
    return latest_runner(graph) if scope == "latest" else graph


def to_conversation(value: Any, **fields: Any) -> Conversation:  # Any: checked below, a TypeError otherwise
    """A :class:`Conversation` from a Conversation, a dict in judgegraph's format (``{"turns": [...]}``), a
    ``{"messages": [...]}`` dict, or a list of LangChain messages / their dicts / ``{"role", "content"}`` dicts."""
    if isinstance(value, Conversation):
        return value.model_copy(update=fields) if fields else value
    if isinstance(value, dict) and "messages" in value and "turns" not in value:
        return from_messages(value["messages"], **{**{k: v for k, v in value.items() if k != "messages"}, **fields})
    if isinstance(value, dict):
        return as_conversation({**value, **fields})
    if isinstance(value, (list, tuple)):
        return from_messages(value, **fields)
    raise TypeError(f"expected messages, a Conversation or a conversation dict, got {type(value).__name__}")
