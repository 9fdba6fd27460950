"""A small tool-calling agent for the thread readers' tests: a StateGraph whose model (a
:class:`~judgegraph.ScriptedChatModel`, no key) asks for the ``get_weather`` and ``search_docs`` tools on a
user's message, a ``ToolNode`` runs them, and the model answers from their results. Its state has ``messages``
and ``documents`` (what it retrieved last). ``graph`` (no checkpointer) is what ``langgraph dev`` serves;
:func:`build_agent` compiles it with a checkpointer."""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from typing_extensions import TypedDict

from judgegraph import ScriptedChatModel
from judgegraph.judges.scripted import ScriptedRequest

DOC = "Paris forecast: sunny, 21C, light wind."


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}, 21C."


@tool
def search_docs(query: str) -> str:
    """Search the forecast documents."""
    return DOC


class AgentState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    documents: list[str]


class ToolCallingModel(ScriptedChatModel):
    """A scripted model whose reply may be a whole ``AIMessage`` (with any tool calls)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolCallingModel:
        return self

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        reply = self.respond(ScriptedRequest(text="\n\n".join(m.text for m in messages), messages=list(messages)))
        message = reply if isinstance(reply, AIMessage) else AIMessage(content=str(reply))
        return ChatResult(generations=[ChatGeneration(message=message)])


def _act(request: ScriptedRequest) -> AIMessage | str:
    """Tools for a user's message (ids unique per turn), then an answer from their results."""
    last = request.messages[-1]
    turn = sum(1 for m in request.messages if m.type == "human")
    if last.type == "human":
        city = "Paris"
        return AIMessage(content="", tool_calls=[
            {"name": "get_weather", "args": {"city": city}, "id": f"call_w{turn}", "type": "tool_call"},
            {"name": "search_docs", "args": {"query": f"{city} forecast"}, "id": f"call_d{turn}", "type": "tool_call"},
        ])
    results = [m.text for m in request.messages if isinstance(m, ToolMessage)]
    return f"It is sunny in Paris ({results[-2]})." if len(results) >= 2 else "I could not find the weather."


MODEL = ToolCallingModel(default=_act)


def _agent(state: AgentState) -> dict[str, Any]:
    return {"messages": [MODEL.invoke(state["messages"])]}


def _remember_documents(state: AgentState) -> dict[str, Any]:
    docs = [m.text for m in state["messages"] if isinstance(m, ToolMessage) and m.name == "search_docs"]
    return {"documents": docs[-1:]}


def builder() -> StateGraph[AgentState]:
    g: StateGraph[AgentState] = StateGraph(AgentState)
    g.add_node("agent", _agent)
    g.add_node("tools", ToolNode([get_weather, search_docs]))
    g.add_node("remember", _remember_documents)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
    g.add_edge("tools", "remember")
    g.add_edge("remember", "agent")
    return g


def build_agent(checkpointer: Any) -> Any:
    """The agent compiled with ``checkpointer`` (a ``BaseCheckpointSaver``)."""
    return builder().compile(checkpointer=checkpointer)


graph = builder().compile()
