"""Judge only the latest exchange with any metric graph — one window, the
earlier turns of that window as its context, one judgement per step — without
changing the metric.

The metric runs with the latest scope in its config
(``configurable[judgegraph.core.nodes.SCOPE_KEY] = "latest"``): the building
blocks that split a conversation per exchange (:func:`judgegraph.core.nodes.window_node`,
and every metric's own splitting through :func:`judgegraph.core.nodes.in_scope`)
keep only the last one, so the judge sees exactly the request the metric's own
last window makes when it judges the whole conversation. A metric that reads
the whole conversation (session judges, conversation-level custom judges)
judges the whole conversation: its question is about the session (its
:class:`~judgegraph.metrics.MetricSpec` says so: ``scope="conversation"``).
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.graph.state import CompiledStateGraph

from ..core.nodes import SCOPE_KEY
from ..core.state import MetricInput


def latest_config(config: RunnableConfig | None) -> RunnableConfig:
    """``config`` with the latest scope set."""
    base = config or RunnableConfig()
    return {**base, "configurable": {**(base.get("configurable") or {}), SCOPE_KEY: "latest"}}


def latest_runner(graph: CompiledStateGraph) -> RunnableLambda:
    """A runnable ``{"conversation": Conversation} → {"results": ...}`` judging
    only the latest exchange with ``graph`` (see the module docs)."""

    def run(state: MetricInput, config: RunnableConfig) -> dict[str, Any]:
        return graph.invoke(state, latest_config(config))

    async def arun(state: MetricInput, config: RunnableConfig) -> dict[str, Any]:
        return await graph.ainvoke(state, latest_config(config))

    return RunnableLambda(run, afunc=arun, name=graph.name)
