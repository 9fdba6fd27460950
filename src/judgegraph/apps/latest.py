"""Judge only the latest exchange with any metric graph that splits the
conversation per exchange — one window, the earlier turns of that window as
its context, one judgement per step — without changing the metric.

The metric runs as it always does up to its splitting node (``window_turns``,
:func:`judgegraph.nodes.window_node`; or ``split_exchanges``), where it stops
(LangGraph ``interrupt_after`` on a private in-memory checkpointer). Every
list in its state that holds one item per exchange (the windows, turn
contexts or exchanges) is cut to its last item with ``update_state(...,
as_node=<splitting node>)``, and the run resumes: the fan-out sends one task,
the reduce node scores it. The judge sees exactly the request the metric's own
last window makes when it judges the whole conversation.

A metric with no splitting node (session judges, conversation-level custom
judges) is run on the whole conversation: its question is about the session.
"""

from __future__ import annotations

import pickle
import uuid
from typing import Any

from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.state import CompiledStateGraph

from ..conversation import Conversation
from ..windows import exchanges

#: Nodes that split a conversation into one item per exchange, in the order looked for.
SPLITTING_NODES = ("window_turns", "split_exchanges")


class _InProcess:
    """The private saver's serializer: the run's own objects (conversation,
    windows), pickled in this process and read back by it only, so nothing of
    judgegraph's has to be registered with LangGraph's msgpack allowlist."""

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return "pickle", pickle.dumps(obj)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return pickle.loads(data[1])  # only bytes this object wrote, never read from outside


def splitting_node(graph: CompiledStateGraph) -> str | None:
    return next((n for n in SPLITTING_NODES if n in graph.nodes), None)


def _cut(values: dict[str, Any], n: int) -> dict[str, Any]:
    """The state update keeping the last item of every per-exchange list."""
    return {k: v[-1:] for k, v in values.items() if isinstance(v, list) and n > 1 and len(v) == n}


def latest_runner(graph: CompiledStateGraph) -> RunnableLambda:
    """A runnable ``{"conversation": Conversation} → {"results": ...}`` judging
    only the latest exchange with ``graph`` (see the module docs)."""
    node = splitting_node(graph)
    if node is None:
        return RunnableLambda(lambda state: graph.invoke(state), afunc=graph.ainvoke, name=graph.name)
    # A private saver for this graph only: it holds this run's own state between two calls, in memory, and is
    # emptied after each run.
    saver = InMemorySaver(serde=_InProcess())
    paused = graph.copy(update={"checkpointer": saver, "interrupt_after_nodes": [node]})

    def start(state: dict[str, Any]) -> tuple[RunnableConfig, int]:
        conversation: Conversation = state["conversation"]
        return {"configurable": {"thread_id": f"latest-{uuid.uuid4().hex}"}}, len(exchanges(conversation))

    def run(state: dict[str, Any]) -> dict[str, Any]:
        config, n = start(state)
        try:
            paused.invoke(state, config)
            cut = _cut(paused.get_state(config).values, n)
            if cut:
                paused.update_state(config, cut, as_node=node)
            return paused.invoke(None, config)
        finally:
            saver.delete_thread(config["configurable"]["thread_id"])

    async def arun(state: dict[str, Any]) -> dict[str, Any]:
        config, n = start(state)
        try:
            await paused.ainvoke(state, config)
            cut = _cut((await paused.aget_state(config)).values, n)
            if cut:
                await paused.aupdate_state(config, cut, as_node=node)
            return await paused.ainvoke(None, config)
        finally:
            await saver.adelete_thread(config["configurable"]["thread_id"])

    return RunnableLambda(run, afunc=arun, name=graph.name)
