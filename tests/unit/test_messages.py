"""LangChain messages → Conversation (judgegraph.data.conversation.from_messages)."""

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage, messages_to_dict

from judgegraph.data.conversation import from_messages

MESSAGES = [
    SystemMessage("You are a weather bot."),
    HumanMessage("Weather in Oslo?"),
    AIMessage("", tool_calls=[{"name": "weather", "args": {"city": "Oslo"}, "id": "c1"}]),
    ToolMessage("5C and rain", tool_call_id="c1"),
    AIMessage("It is 5C and raining.", additional_kwargs={"retrieval_context": ["Oslo forecast: 5C, rain"]}),
]


def test_roles_tool_calls_outputs_and_retrieval_context():
    conv = from_messages(MESSAGES, id="oslo")
    assert conv.id == "oslo"
    assert [t.role for t in conv.turns] == ["system", "user", "assistant", "tool", "assistant"]
    call = conv.turns[2].tool_calls[0]
    assert (call.name, call.arguments, call.id, call.output) == ("weather", {"city": "Oslo"}, "c1", "5C and rain")
    assert conv.turns[3].metadata == {"tool_call_id": "c1"}
    assert [n.context for n in conv.turns[4].retrieval_context] == ["Oslo forecast: 5C, rain"]


@pytest.mark.parametrize("dump", [messages_to_dict, lambda ms: [m.model_dump() for m in ms]],
                         ids=["messages_to_dict", "model_dump"])
def test_dict_dumps_give_the_same_turns(dump):
    assert from_messages(dump(MESSAGES)).turns == from_messages(MESSAGES).turns


def test_list_content_blocks_become_text_and_openai_dicts_load():
    conv = from_messages([{"role": "user", "content": "hi"},
                          AIMessage(content=[{"type": "text", "text": "Hello"}, {"type": "text", "text": " there"}])])
    assert [(t.role, t.content) for t in conv.turns] == [("user", "hi"), ("assistant", "Hello there")]


def test_not_a_message_is_a_clear_error():
    with pytest.raises(ValueError, match=r"messages\[1\]: expected a LangChain message"):
        from_messages([HumanMessage("hi"), 42])
