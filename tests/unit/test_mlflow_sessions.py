"""Reading MLflow sessions without a server: history de-duplication, blank
messages and the expectations rule, on plain TraceRecords (build_sessions)."""

import json

import pytest

from judgegraph.integrations.mlflow import ExpectationRecord, TraceRecord, build_sessions, new_messages
from judgegraph.integrations.mlflow.messages import Msg


def msgs(*pairs):
    return [Msg(role, content) for role, content in pairs]


def test_history_trimmed_at_the_front_still_lines_up():
    prior = msgs(("system", "S"), ("user", "u1"), ("assistant", "a1"), ("user", "u2"), ("assistant", "a2"))
    new, mismatch = new_messages(prior, msgs(("system", "S"), ("user", "u2"), ("assistant", "a2"), ("user", "u3")))
    assert new == msgs(("user", "u3")) and not mismatch


def test_rewritten_history_keeps_only_what_follows_its_last_reply():
    prior = msgs(("user", "u1"), ("assistant", "a1"))
    new, mismatch = new_messages(prior, msgs(("user", "summary of u1/a1"), ("assistant", "ok"), ("user", "u2")))
    assert new == msgs(("user", "u2")) and mismatch


def test_single_message_requests_and_repeated_questions_are_kept():
    prior = msgs(("system", "S"), ("user", "yes"), ("assistant", "a1"))
    assert new_messages(prior, msgs(("system", "S"), ("user", "yes"))) == (msgs(("user", "yes")), False)


def test_build_sessions_without_a_server_and_ties_broken_by_trace_id():
    records = [
        TraceRecord("tr-b", "s", 5, {"messages": [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "r1"},
                                                  {"role": "user", "content": "q2"}]}, "r2"),
        TraceRecord("tr-a", "s", 5, {"question": "q1", "session_id": "s"}, [{"role": "assistant", "content": "r1"}]),
        TraceRecord("tr-c", "s", 9, "q3", None, state="ERROR"),
        TraceRecord("tr-d", "s", 12, "q4", "r4"),
    ]
    out = build_sessions(records, tracking_uri="file:x", experiment="e")
    # an ERROR trace with no response keeps its user message, unanswered (MLflow 3.17.2
    # resolve_conversation_from_session appends the user message, then the reply only if there is one)
    assert [(t.role, t.content) for t in out[0].conversation.turns] == [
        ("user", "q1"), ("assistant", "r1"), ("user", "q2"), ("assistant", "r2"), ("user", "q3"),
        ("user", "q4"), ("assistant", "r4")]
    assert out.errors == []
    assert out[0].conversation.metadata["mlflow_no_response"] == ["tr-c"]
    assert out[0].conversation.metadata["mlflow_trace_ids"] == ["tr-a", "tr-b", "tr-c", "tr-d"]


def test_blank_messages_dropped_without_a_server():
    records = [
        TraceRecord("t1", "s", 1, {"messages": [{"role": "user", "content": "q1"}]}, "   "),
        TraceRecord("t2", "s", 2, {"messages": [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "   "},
                                                {"role": "user", "content": "\t"}, {"role": "user", "content": "q2"}]},
                    {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "lookup", "arguments": "{}"}}]}),
        TraceRecord("t3", "only-blank", 3, " ", "\n"),
    ]
    out = build_sessions(records, tracking_uri="file:x", experiment="e")
    (conv,) = [s.conversation for s in out]
    # the history of t2 still lines up with t1's (blank reply included): nothing repeated, no mismatch
    assert [(t.role, t.content) for t in conv.turns] == [("user", "q1"), ("user", "q2"), ("assistant", "")]
    assert conv.turns[-1].tool_calls[0].name == "lookup"  # no content but a tool call: kept
    assert not any(t.metadata.get("mlflow_history_mismatch") for t in conv.turns)
    assert conv.metadata["mlflow_blank_replies"] == ["t1"] and conv.metadata["mlflow_trace_ids"] == ["t1", "t2"]
    (err,) = out.errors  # a session with nothing but blank messages is reported, not silently gone
    assert (err.record, err.field) == ("t3", "response") and "blank" in err.message


def test_expectations_rule_without_a_server():
    records = [
        TraceRecord("t2", "s", 2, "q2", "a2", expectations=(
            ExpectationRecord("goal", "later goal", session_level=True),  # the earliest trace wins a name
            ExpectationRecord("must_mention", "terrace", session_level=True),  # a later trace adds a name
            ExpectationRecord("expected_response", "a2!"),  # trace-level: stays on the reply turn
        )),
        TraceRecord("t1", "s", 1, "q1", "a1", expectations=(
            ExpectationRecord("goal", "first goal", session_level=True, source="HUMAN"),
            ExpectationRecord("synthetic", "x", session_level=True, source="CODE"),  # not ground truth
            ExpectationRecord("judged", "y", session_level=True, source="LLM_JUDGE"),
        )),
        TraceRecord("solo", None, 3, "q", "a", expectations=(ExpectationRecord("expected_response", "a"),
                                                             ExpectationRecord("auto", "z", source="CODE"))),
        TraceRecord("bare", "plain", 4, "q", "a"),
    ]
    convs = {s.conversation.id: s.conversation for s in build_sessions(records)}
    s = convs["s"]
    assert s.metadata["expectations"] == {"goal": "first goal", "must_mention": "terrace"}
    assert [t.metadata.get("mlflow_expectations") for t in s.turns] == [None, None, None, {"expected_response": "a2!"}]
    # a trace of its own: its human expectations are the conversation's, as MLflow reads a single trace's
    assert convs["solo"].metadata["expectations"] == {"expected_response": "a"}
    assert "mlflow_expectations" not in convs["solo"].turns[-1].metadata
    assert "expectations" not in convs["plain"].metadata


@pytest.mark.parametrize(("content", "where", "why"), [  # where the MLflow reader and the OpenAI loader disagreed
    ([{"type": "text", "text": None}], "content.0.text", "a text part needs a string 'text'"),
    (["q1", 7], "content.1", "content part must be an object (got int)"),
    ({"text": "q1"}, "content", "content must be a string or a list of parts (got dict)"),
])
def test_message_content_is_read_alike_in_an_mlflow_trace_and_an_openai_chat_file(tmp_path, content, where, why):
    from judgegraph.loaders import load_files

    messages = [{"role": "user", "content": content}, {"role": "assistant", "content": "r1"}]
    (error,) = build_sessions([TraceRecord("tr-1", None, 1, {"messages": messages[:1]}, "r1")]).errors
    assert (error.field, error.message) == (f"request.messages.0.{where}", why)
    chat = tmp_path / "chat.jsonl"
    chat.write_text(json.dumps({"id": "c1", "messages": messages}) + "\n", encoding="utf-8")
    (error,) = load_files([str(chat)]).errors
    assert (error.field, error.message) == (f"messages.0.{where}", f"{why} [openai format]")


def test_the_text_parts_of_a_content_list_are_joined_alike():
    from judgegraph.loaders.formats.openai import content_text

    parts = ["a", {"type": "input_text", "text": "b"}, {"type": "image_url", "image_url": {"url": "x"}},
             {"type": "output_text", "text": "c"}]
    (session,) = build_sessions([TraceRecord("tr-1", None, 1, {"messages": [{"role": "user", "content": parts}]},
                                             "r1")])
    assert session.conversation.turns[0].content == content_text(parts) == "a\nb\nc"


def test_request_and_response_keys_pick_the_argument_and_errors_name_its_path():
    records = [
        TraceRecord("tr-1", None, 1, {"question": "q1", "notes": "n"}, {"answer": "a1", "sources": ["x"]}),
        TraceRecord("tr-2", None, 2, {"notes": "n"}, {"answer": "a2"}),  # no "question"
        TraceRecord("tr-3", None, 3, {"question": {"a": 1, "b": 2}}, {"answer": "a3"}),  # nothing readable under it
    ]
    out = build_sessions(records, tracking_uri="http://mlflow", request_key="question", response_key="answer")
    assert [[(t.role, t.content) for t in c.conversation.turns] for c in out] == [[("user", "q1"), ("assistant", "a1")]]
    by_trace = {e.record: e for e in out.errors}
    assert by_trace["tr-2"].field == "request"
    assert "no 'question' in the trace's inputs (has: notes)" in str(by_trace["tr-2"])
    assert by_trace["tr-3"].field == "request.question"
