"""An agent's LangGraph thread read as a conversation: from the graph, from an InMemorySaver and from a real
SqliteSaver file written by a small tool-calling agent (tests/kit/agent.py); unreadable threads name the thread
and the field."""

from __future__ import annotations

import sqlite3
from typing import Annotated

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from judgegraph.loaders import InputError, LoadedConversation
from judgegraph.loaders.langgraph_threads import (
    ThreadError,
    checkpointer_threads,
    conversation_from_values,
    from_thread,
    load_checkpointer,
    open_checkpointer,
)
from tests.kit.agent import DOC, build_agent

sqlite_saver = pytest.importorskip("langgraph.checkpoint.sqlite", reason="pip install 'judgegraph[threads]'")


def chat(app, thread_id, *questions):
    for q in questions:
        app.invoke({"messages": [HumanMessage(q)]}, {"configurable": {"thread_id": thread_id}})


def check_agent_thread(conversation, thread_id="t1"):
    turns = conversation.turns
    assert conversation.id == thread_id
    assert [t.role for t in turns] == ["user", "assistant", "tool", "tool", "assistant"] * 2
    calls = turns[1].tool_calls
    assert [(c.name, c.arguments, c.id) for c in calls] == [
        ("get_weather", {"city": "Paris"}, "call_w1"), ("search_docs", {"query": "Paris forecast"}, "call_d1")]
    # each call joined to its ToolMessage by tool_call_id
    assert [c.output for c in calls] == ["Sunny in Paris, 21C.", DOC]
    assert [c.id for c in turns[6].tool_calls] == ["call_w2", "call_d2"]
    assert turns[4].content == "It is sunny in Paris (Sunny in Paris, 21C.)."
    # the state's `documents` (retrieved last) go to the last reply only
    assert [n.context for n in turns[9].retrieval_context] == [DOC]
    assert not turns[4].retrieval_context
    assert conversation.metadata["langgraph_thread_id"] == thread_id
    assert conversation.metadata["langgraph_checkpoint_id"]


def test_a_thread_read_from_the_graph_and_from_its_in_memory_checkpointer():
    saver = InMemorySaver()
    app = build_agent(saver)
    chat(app, "t1", "Weather in Paris?", "And tomorrow?")
    by_graph, by_saver = from_thread(app, "t1"), from_thread(saver, "t1")
    check_agent_thread(by_graph)
    assert by_graph == by_saver


def test_every_thread_of_a_real_sqlite_file(tmp_path):
    path = tmp_path / "agent.sqlite"
    conn = sqlite3.connect(path, check_same_thread=False)
    app = build_agent(sqlite_saver.SqliteSaver(conn))
    chat(app, "t1", "Weather in Paris?", "And tomorrow?")
    chat(app, "t2", "Weather?")
    conn.close()
    with open_checkpointer(f"sqlite:{path}") as saver:  # read-only
        threads = checkpointer_threads(saver)
        items = list(load_checkpointer(saver, f"sqlite:{path}"))
    assert [t.thread_id for t in threads] == ["t1", "t2"]  # oldest update first
    assert all(isinstance(i, LoadedConversation) for i in items)
    check_agent_thread(items[0].conversation)
    assert items[0].source == f"langgraph:sqlite:{path}#t1" and items[0].format == "langgraph"
    assert len(items[1].conversation.turns) == 5


def test_a_missing_thread_and_a_state_without_messages_name_the_thread_and_field(tmp_path):
    saver = InMemorySaver()
    app = build_agent(saver)
    chat(app, "t1", "Weather in Paris?")
    from langgraph.graph import START, StateGraph
    from typing_extensions import TypedDict

    class Other(TypedDict):
        count: int

    g = StateGraph(Other)
    g.add_node("inc", lambda s: {"count": s["count"] + 1})
    g.add_edge(START, "inc")
    g.compile(checkpointer=saver).invoke({"count": 1}, {"configurable": {"thread_id": "counter"}})

    items = list(load_checkpointer(saver, "memory", ["t1", "counter", "nope"]))
    assert isinstance(items[0], LoadedConversation)
    assert items[1] == InputError("memory", None, None, "values.messages",
                                  "thread 'counter': the thread's state has no 'messages' (its keys: 'count');"
                                  " --messages-key KEY (messages_key=) reads another key")
    assert items[2] == InputError("memory", None, None, "thread",
                                  "thread 'nope': the checkpointer has no checkpoint for this thread")
    with pytest.raises(ThreadError, match="thread 'nope': thread: the graph's checkpointer has no checkpoint"):
        from_thread(app, "nope")


def test_a_bad_message_and_bad_documents_name_their_index():
    with pytest.raises(ThreadError) as bad:
        conversation_from_values("t", {"messages": [HumanMessage("hi"), 42]})
    assert bad.value.field == "values.messages.1" and "got int" in bad.value.message
    with pytest.raises(ThreadError) as docs:
        conversation_from_values("t", {"messages": [HumanMessage("hi"), AIMessage("yo")], "documents": ["ok", 3]})
    assert docs.value.field == "values.documents.1"
    with pytest.raises(ThreadError, match="no messages"):
        conversation_from_values("t", {"messages": []})


def test_server_json_messages_documents_and_a_message_s_own_context():
    """A server returns messages and Documents as JSON; a reply's own additional_kwargs context wins."""
    values = {
        "messages": [
            {"type": "human", "content": "Weather?", "id": "h1"},
            {"type": "ai", "content": "", "id": "a1", "tool_calls": [
                {"name": "search_docs", "args": {"query": "w"}, "id": "c1", "type": "tool_call"}]},
            {"type": "tool", "content": DOC, "tool_call_id": "c1", "name": "search_docs", "id": "x1"},
            {"type": "ai", "content": "Sunny.", "id": "a2",
             "additional_kwargs": {"retrieval_context": ["its own context"]}},
        ],
        "documents": [{"page_content": DOC, "metadata": {"source": "forecast.txt"}, "type": "Document"}],
    }
    conv = conversation_from_values("t", values)
    assert conv.turns[1].tool_calls[0].output == DOC
    assert [n.context for n in conv.turns[3].retrieval_context] == ["its own context"]
    del values["messages"][3]["additional_kwargs"]
    conv = conversation_from_values("t", values)
    assert [(n.context, n.source) for n in conv.turns[3].retrieval_context] == [(DOC, "forecast.txt")]
    assert not conversation_from_values("t", values, context_key=None).turns[3].retrieval_context


def test_a_file_that_is_not_a_checkpoint_file(tmp_path):
    bad = tmp_path / "x.sqlite"
    bad.write_text("not sqlite")
    with pytest.raises(OSError, match="not a SqliteSaver checkpoint file"), open_checkpointer(f"sqlite:{bad}"):
        pass
    with pytest.raises(FileNotFoundError), open_checkpointer(f"sqlite:{tmp_path / 'missing.sqlite'}"):
        pass


def test_a_checkpointer_s_threads_filtered_by_their_run_metadata():
    """A run's config["metadata"] is in its checkpoints' metadata: --metadata and --assistant filter on it."""
    saver = InMemorySaver()
    app = build_agent(saver)
    for tid, meta in (("a", {"user": "alice", "graph_id": "agent"}), ("b", {"user": "bob"}), ("c", {})):
        app.invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": tid}, "metadata": meta})

    def ids(**filters):
        return [i.conversation.id for i in load_checkpointer(saver, "memory", **filters)]

    assert ids() == ["a", "b", "c"]
    assert ids(metadata={"user": "bob"}) == ["b"]
    assert ids(assistant="agent") == ["a"]
    assert ids(assistant="agent", metadata={"user": "bob"}) == []
    assert ids(metadata={"user": "None"}) == []  # a missing key is not the text "None"


class Chat(TypedDict):
    history: Annotated[list, add_messages]


def history_app(saver):
    """An agent keeping its messages under ``history`` (as judge_node's messages_key= reads)."""
    from langgraph.graph import START, StateGraph

    g = StateGraph(Chat)
    g.add_node("bot", lambda s: {"history": [AIMessage(f"You said: {s['history'][-1].text}")]})
    g.add_edge(START, "bot")
    app = g.compile(checkpointer=saver)
    app.invoke({"history": [("user", "Hello")]}, {"configurable": {"thread_id": "h1"}})
    return app


def test_a_state_key_other_than_messages_is_read_with_messages_key():
    saver = InMemorySaver()
    app = history_app(saver)
    for source in (app, saver):
        conversation = from_thread(source, "h1", messages_key="history")
        assert [(t.role, t.content) for t in conversation.turns] == [("user", "Hello"), ("assistant", "You said: Hello")]
    (item,) = load_checkpointer(saver, "memory", messages_key="history")
    assert isinstance(item, LoadedConversation) and item.conversation.id == "h1"
    with pytest.raises(ThreadError, match=r"no 'messages' \(its keys: 'history'\); .*messages_key") as info:
        from_thread(saver, "h1")
    assert info.value.field == "values.messages"
    with pytest.raises(ThreadError, match="no 'chat'") as info:
        from_thread(saver, "h1", messages_key="chat")
    assert info.value.field == "values.chat"
