"""Files written by the peers themselves load (issue 8.7)."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage, messages_to_dict

from judgegraph.loaders import detect_format, load_file

# What deepeval 4's ConversationalTestCase(...).model_dump() writes (fields of
# deepeval/test_case/conversational_test_case.py): every field, None where unset,
# the multimodal/voice flags, and per turn audio and the MCP lists.
DEEPEVAL4_DUMP = {
    "turns": [
        {"role": "user", "content": "Where is my parcel?", "audio": None, "user_id": "u-7",
         "retrieval_context": None, "tools_called": None, "mcp_tools_called": None,
         "mcp_resources_called": None, "mcp_prompts_called": None, "metadata": None},
        {"role": "assistant", "content": "It ships tomorrow.", "audio": None, "user_id": None,
         "retrieval_context": ["Orders ship within 24 hours."],
         "tools_called": [{"name": "track", "type": "FUNCTION", "description": None, "reasoning": None,
                           "output": "in transit", "input_parameters": {"order": 42}}],
         "mcp_tools_called": None, "mcp_resources_called": None, "mcp_prompts_called": None,
         "metadata": {"latency": 0.4}},
    ],
    "scenario": "A customer asks about a parcel.", "context": None, "name": "parcel",
    "user_description": None, "expected_outcome": "The customer learns when it ships.",
    "chatbot_role": "Support bot.", "metadata": None, "comments": None, "tags": ["shipping"],
    "mcp_servers": None, "multimodal": False, "voice": False,
}


def test_deepeval4_model_dump_loads(tmp_path):
    path = tmp_path / "cases.json"
    path.write_text(json.dumps([DEEPEVAL4_DUMP, {**DEEPEVAL4_DUMP, "name": "voice", "voice": True}]))
    res = load_file(path)
    assert res.errors == []
    first, second = (c.conversation for c in res.conversations)
    assert {c.format for c in res.conversations} == {"deepeval"}
    assert (first.id, first.chatbot_role, first.expected_outcome) == ("parcel", "Support bot.",
                                                                     "The customer learns when it ships.")
    assert first.metadata == {"scenario": "A customer asks about a parcel.", "tags": ["shipping"]}  # no False flags
    assert second.metadata["voice"] is True
    call = first.turns[1].tool_calls[0]
    assert (call.name, call.arguments, call.output) == ("track", {"order": 42}, "in transit")
    assert [n.context for n in first.turns[1].retrieval_context] == ["Orders ship within 24 hours."]
    assert first.turns[0].metadata == {"user_id": "u-7"}


def test_deepeval_voice_turn_keys_are_kept(tmp_path):
    turn = {"role": "assistant", "content": "Hi", "audio": {"url": "https://x/a.wav"}, "latency_ms": 320,
            "interrupted": True}
    path = tmp_path / "v.jsonl"
    path.write_text(json.dumps({"name": "v", "turns": [{"role": "user", "content": "q"}, turn]}) + "\n")
    (item,) = load_file(path).conversations
    assert item.conversation.turns[1].metadata == {"audio": {"url": "https://x/a.wav"}, "latency_ms": 320,
                                                   "interrupted": True}


def test_unknown_keys_stay_errors_in_judgegraphs_own_format(tmp_path):
    path = tmp_path / "own.jsonl"
    path.write_text(json.dumps({"id": "x", "turns": [{"role": "user", "content": "q", "contnet": "typo"}],
                                "multimodel": True}) + "\n")
    messages = [str(e) for e in load_file(path).errors]
    assert any("unknown key 'multimodel'" in m for m in messages)


MESSAGES = [
    SystemMessage("You are a weather bot."),
    HumanMessage("Weather in Oslo?"),
    AIMessage("", tool_calls=[{"name": "weather", "args": {"city": "Oslo"}, "id": "c1"}]),
    ToolMessage("5C and rain", tool_call_id="c1"),
    AIMessage("It is 5C and raining."),
]


@pytest.mark.parametrize("dump", [messages_to_dict, lambda ms: [m.model_dump() for m in ms]],
                         ids=["messages_to_dict", "model_dump"])
def test_langchain_message_dumps_load_as_records_and_as_a_whole_file(tmp_path, dump):
    dumped = dump(MESSAGES)
    (tmp_path / "recs.jsonl").write_text(json.dumps({"id": "oslo", "messages": dumped}) + "\n")
    (tmp_path / "one.json").write_text(json.dumps(dumped))
    for name in ("recs.jsonl", "one.json"):
        res = load_file(tmp_path / name)
        assert res.errors == []
        (item,) = res.conversations
        assert item.format == "langchain"
        turns = item.conversation.turns
        assert [t.role for t in turns] == ["system", "user", "assistant", "tool", "assistant"]
        assert turns[2].tool_calls[0].output == "5C and rain"
    assert detect_format({"messages": dumped}) == "langchain"
    assert detect_format({"messages": [{"role": "user", "content": "hi"}]}) == "openai"


def test_bad_langchain_message_names_its_index(tmp_path):
    dumped = messages_to_dict(MESSAGES[:2]) + [{"type": "ai", "data": {"content": 42}}]
    (tmp_path / "bad.jsonl").write_text(json.dumps({"messages": dumped, "extra": 1}) + "\n"
                                        + json.dumps({"messages": dumped}) + "\n")
    first, second = load_file(tmp_path / "bad.jsonl").errors
    assert (first.line, first.field) == (1, "extra") and "unknown key" in first.message
    assert (second.line, second.field) == (2, "messages.2") and "[langchain format]" in second.message
