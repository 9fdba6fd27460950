"""Loaders: format detection, conversion and precise error reporting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judgegraph.data.conversation import Conversation
from judgegraph.loaders import (
    InputError,
    InputFormatError,
    LoadedConversation,
    detect_format,
    iter_records,
    load_conversations,
    load_file,
    load_files,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DATA = ROOT / "tests" / "data" / "loaders"


@pytest.fixture(autouse=True)
def _cwd_root(monkeypatch):
    # relative paths make the expected messages short and exact
    monkeypatch.chdir(ROOT)


def ex(name: str) -> str:
    return f"examples/{name}"


def fx(name: str) -> str:
    return f"tests/data/loaders/{name}"


def by_id(result) -> dict[str, LoadedConversation]:
    return {c.conversation.id: c for c in result.conversations}


def messages(result) -> list[str]:
    return [str(e) for e in result.errors]


# --------------------------------------------------------------------------- examples


def test_support_chats_example():
    result = load_file(ex("support_chats.jsonl"))
    assert result.ok, messages(result)
    convs = by_id(result)
    assert len(convs) == 6
    assert "refund-ok" in convs
    for c in convs.values():
        assert c.format == "judgegraph"
        exchanges = sum(t.role == "assistant" for t in c.conversation.turns)
        assert 3 <= exchanges <= 6
    assert convs["refund-ok"].source == "examples/support_chats.jsonl:1"
    with_context = [c for c in convs.values() if c.conversation.has_retrieval_context]
    assert len(with_context) == 1
    node = with_context[0].conversation.turns[1].retrieval_context[1]
    assert node.source == "policies/warranty.md"


def test_promptfoo_example_docs_conversation():
    result = load_file(ex("promptfoo_tests.yaml"))
    assert result.ok, messages(result)
    first = result.conversations[0]
    assert first.format == "promptfoo"
    conv = first.conversation
    assert [t.role for t in conv.turns] == ["user", "assistant"] * 3
    assert conv.turns[0].content == "What is 2+2?"
    assert conv.turns[3].content == "The capital of France is Paris."
    assert conv.turns[4].content == "And 5+5?"
    assert first.options == {
        "metric": "conversation_relevance",
        "threshold": 0.8,
        "window_size": 2,
        "model": "openai:gpt-4o-mini",
    }
    assert first.source == "examples/promptfoo_tests.yaml:16"
    assert conv.id == "math-conversation-with-one-irrelevant-answer"
    single = result.conversations[-1].conversation
    assert [(t.role, t.content) for t in single.turns] == [
        ("user", "You are a helpful assistant. Answer the question: What is the capital of Portugal?"),
        ("assistant", "The capital of Portugal is Lisbon."),
    ]


def test_deepeval_example_snake_and_camel():
    result = load_file(ex("deepeval_cases.json"))
    assert result.ok, messages(result)
    snake, camel = result.conversations
    assert snake.format == camel.format == "deepeval"
    assert snake.source == "examples/deepeval_cases.json#0"
    s = snake.conversation
    assert s.id == "loyalty-points"
    assert s.expected_outcome == "The customer understands how points are earned and redeemed."
    assert s.metadata["scenario"].startswith("A customer asks")
    assert s.metadata["user_description"].startswith("A returning")
    assert s.metadata["tags"] == ["loyalty", "account"]
    assert s.turns[0].metadata == {"user_id": "cust-981"}
    call = s.turns[3].tool_calls[0]
    assert (call.name, call.arguments, call.output) == ("get_points_balance", {"customer_id": "cust-981"}, 1200)
    c = camel.conversation
    assert c.id == "gift-card-balance"
    assert c.expected_outcome == "The customer learns the remaining balance of the gift card."
    assert c.chatbot_role.startswith("Customer-support")
    assert c.metadata["channel"] == "chat"
    assert c.turns[0].metadata == {"user_id": "cust-207"}
    assert c.turns[1].metadata == {"latency_ms": 840}
    assert c.turns[1].tool_calls[0].arguments == {"card_suffix": "4411"}
    assert c.turns[3].retrieval_context[0].context.startswith("Gift cards are valid")


def test_openai_example_parts_and_tool_calls():
    result = load_file(ex("openai_messages.jsonl"))
    assert result.ok, messages(result)
    tool, parts, anon = (c.conversation for c in result.conversations)
    assert [t.role for t in tool.turns] == ["system", "user", "assistant", "tool", "assistant", "user", "assistant"]
    call = tool.turns[2].tool_calls[0]
    assert (call.name, call.arguments, call.id) == ("get_order_status", {"order_id": "48213"}, "call_1")
    assert tool.turns[2].content == ""
    assert tool.turns[3].content.startswith('{"status"')
    assert tool.turns[3].metadata["tool_call_id"] == "call_1"
    assert parts.turns[0].role == "system"  # developer
    assert parts.turns[1].content == "Is the Porto store open on Sunday?"  # image part skipped
    assert parts.turns[2].content == "Yes, the Porto store is open on Sundays\nfrom 11am to 4pm."
    assert parts.metadata == {"channel": "web"}
    assert anon.id == "openai_messages:3"


# --------------------------------------------------------------------------- jsonl errors


def test_mixed_jsonl_keeps_good_records_and_names_errors():
    result = load_file(fx("mixed.jsonl"))
    assert sorted(by_id(result)) == ["good-1", "good-2", "mixed:11"]
    assert messages(result) == [
        "tests/data/loaders/mixed.jsonl:4: turns.2.role: Input should be 'user', 'assistant', 'system' or 'tool' (got 'bot')",
        "tests/data/loaders/mixed.jsonl:5: turns.0.content: Field required",
        "tests/data/loaders/mixed.jsonl:6: turns: a conversation needs at least one turn",
        "tests/data/loaders/mixed.jsonl:7: turns.0.content: Input should be a valid string (got int)",
        "tests/data/loaders/mixed.jsonl:8: expected_outcom: unknown key 'expected_outcom' (did you mean "
        "'expected_outcome'?); allowed: id, turns, expected_outcome, chatbot_role, metadata, conversation_id",
        "tests/data/loaders/mixed.jsonl:9: invalid JSON: Expecting value (column 28)",
        "tests/data/loaders/mixed.jsonl:10: a record must be an object (got list)",
    ]
    err = result.errors[0]
    assert (err.file, err.line, err.field) == ("tests/data/loaders/mixed.jsonl", 4, "turns.2.role")
    good2 = by_id(result)["good-2"].conversation
    assert [n.context for n in good2.turns[2].retrieval_context] == ["Refunds within 30 days.", "Sale items excluded."]
    # a conversation without any assistant turn is valid input
    assert [t.role for t in by_id(result)["mixed:11"].conversation.turns] == ["user"]


def test_iter_records_streams_errors_in_order():
    items = list(iter_records(fx("mixed.jsonl")))
    kinds = ["ok" if isinstance(i, LoadedConversation) else "err" for i in items]
    assert kinds == ["ok"] + ["err"] * 7 + ["ok", "ok"]


def test_jsonl_bad_utf8_line_and_bom(tmp_path):
    f = tmp_path / "x.jsonl"
    good = b'{"id": "a", "turns": [{"role": "user", "content": "hi"}]}\n'
    f.write_bytes(b"\xef\xbb\xbf" + good + b'{"id": "\xff"}\n' + good.replace(b'"a"', b'"b"'))
    result = load_file(f)
    assert sorted(by_id(result)) == ["a", "b"]
    assert len(result.errors) == 1
    assert result.errors[0].line == 2
    assert "not valid UTF-8" in result.errors[0].message


# --------------------------------------------------------------------------- json / yaml


def test_json_container_record_lines_and_fallback_id():
    result = load_file(fx("conversations.json"))
    assert sorted(by_id(result)) == ["conversations#2", "json-good"]
    assert messages(result) == ["tests/data/loaders/conversations.json:4: turns.1.content: Field required"]
    assert result.errors[0].record == 1
    assert by_id(result)["json-good"].source == "tests/data/loaders/conversations.json#0"


def test_json_syntax_error_line_and_column():
    result = load_file(fx("bad_syntax.json"))
    assert [c.conversation.id for c in result.conversations] == ["a"]  # read as streamed: the records before it load
    assert messages(result) == [
        "tests/data/loaders/bad_syntax.json:3: invalid JSON: Expecting ',' delimiter (line 3, column 14)"
    ]


def test_yaml_record_lines_and_field_lines():
    result = load_file(fx("records.yaml"))
    convs = by_id(result)
    assert convs["yaml-good"].source == "tests/data/loaders/records.yaml:2"
    assert convs["records#2"].source == "tests/data/loaders/records.yaml:17"
    assert convs["yaml-good"].conversation.chatbot_role == "Support bot"
    [err] = result.errors
    assert (err.line, err.record, err.field) == (16, 1, "turns.1.retrieval_contxt")
    assert "did you mean 'retrieval_context'" in err.message


def test_yaml_syntax_error():
    [err] = load_file(fx("bad_syntax.yaml")).errors
    assert err.line == 6
    assert str(err).startswith("tests/data/loaders/bad_syntax.yaml:6: invalid YAML:")
    assert "column 1" in err.message


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("empty.yaml", "", "x: file is empty"),
        ("scalar.yml", "just text\n", "x:1: expected a record, a list of records or a promptfoo document (got str)"),
        ("two.yaml", "id: a\n---\nid: b\n", "x:2: invalid YAML:"),
    ],
)
def test_yaml_whole_file_problems(tmp_path, name, content, expected):
    f = tmp_path / name
    f.write_text(content)
    [err] = load_file(f).errors
    assert str(err).replace(str(f), "x").startswith(expected)


def test_single_record_json_and_extra_top_level_key(tmp_path):
    f = tmp_path / "one.json"
    f.write_text('{"id": "solo", "turns": [{"role": "user", "content": "hi"}]}')
    [c] = load_file(f).conversations
    assert c.conversation.id == "solo" and c.source == f"{f}#0"
    g = tmp_path / "wrapped.json"
    g.write_text('{"conversations": [], "version": 1}')
    [err] = load_file(g).errors
    assert (err.field, err.line) == ("version", 1)


# --------------------------------------------------------------------------- files


def test_file_level_errors(tmp_path):
    (tmp_path / "dir.json").mkdir()
    result = load_files([fx("notes.txt"), fx("missing.jsonl"), str(tmp_path / "dir.json")])
    assert [str(e) for e in result.errors[:2]] == [
        "tests/data/loaders/notes.txt: unsupported file extension '.txt'; expected .jsonl, .json, .yaml or .yml",
        "tests/data/loaders/missing.jsonl: file not found",
    ]
    assert result.errors[2].message == "is a directory, not a file"
    assert all(e.line is None and e.record is None for e in result.errors)


def test_unreadable_file(tmp_path, monkeypatch):
    # chmod 0 does not stop root (CI runs as root), so make the open itself fail
    import pathlib

    f = tmp_path / "secret.jsonl"
    f.write_text("{}\n")
    real_open = pathlib.Path.open

    def deny(self, *args, **kwargs):
        if self.name == "secret.jsonl":
            raise PermissionError(13, "Permission denied")
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "open", deny)
    monkeypatch.setattr("builtins.open", lambda file, *a, **k: deny(pathlib.Path(file), *a, **k))
    [err] = load_file(f).errors
    assert err.message == "cannot read file: Permission denied"


def test_duplicate_ids_within_and_across_files():
    result = load_files([fx("dup_a.jsonl"), fx("dup_b.yaml")])
    assert len(result.conversations) == 1
    assert result.conversations[0].conversation.turns[0].content == "first"
    assert messages(result) == [
        "tests/data/loaders/dup_a.jsonl:2: id: duplicate conversation id 'same' (first seen at tests/data/loaders/dup_a.jsonl:1)",
        "tests/data/loaders/dup_b.yaml:1: id: duplicate conversation id 'same' (first seen at tests/data/loaders/dup_a.jsonl:1)",
    ]


def test_load_conversations_raises_with_all_errors():
    convs = load_conversations(ex("support_chats.jsonl"))
    assert all(isinstance(c, Conversation) for c in convs) and len(convs) == 6
    with pytest.raises(InputFormatError) as info:
        load_conversations(fx("mixed.jsonl"))
    assert len(info.value.errors) == 7
    assert "mixed.jsonl:4: turns.2.role" in str(info.value)
    assert isinstance(info.value, ValueError)


def test_input_error_str_forms():
    assert str(InputError("x.json", None, 3, None, "boom")) == "x.json: record 3: boom"
    assert str(InputError("x.yaml", 12, 0, "turns.0", "bad")) == "x.yaml:12: turns.0: bad"
    assert str(InputError("x.txt", None, None, None, "nope")) == "x.txt: nope"


# --------------------------------------------------------------------------- promptfoo


def test_promptfoo_single_turn_options_and_errors():
    result = load_file(fx("promptfoo_single.yaml"))
    rendered, direct = result.conversations
    # one-pass rendering: the var value's {{ env.SECRET }} and {{ticket}} stay literal,
    # and so does the template's unknown {{ env.SECRET }}
    assert rendered.conversation.turns[0].content == (
        "Customer asks: My key is {{ env.SECRET }} and {{ticket}} (ticket 7) {{ env.SECRET }}"
    )
    assert rendered.conversation.turns[1].content == "We have received your question."
    assert rendered.options == {
        "metric": "conversation_relevance", "threshold": 0.6,
        "model": "openai:gpt-4o", "rubric": "Judge relevance strictly.",
    }
    assert direct.conversation.id == "promptfoo_single#1"
    assert [t.content for t in direct.conversation.turns] == ["Direct prompt var", "Test-level output"]
    # promptfoo runs defaultTest's assertions and then the test's own (both), each with its own fields
    assert direct.assertions == (
        {"metric": "conversation_relevance", "threshold": 0.6, "model": "openai:gpt-4o",
         "rubric": "Judge relevance strictly."},
        {"metric": "conversation_relevance", "threshold": 0.9, "model": "openai:gpt-4o-mini",
         "rubric": "Custom rubric", "key": "conversation-relevance#2"},
    )
    errs = {(e.line, e.record, e.field) for e in result.errors}
    assert errs == {
        (28, 2, "tests.2.vars.output"),
        (33, 3, "tests.3.vars._conversation.0.output"),
        (41, 4, "tests.4.assert.0.config.windowSize"),
    }
    assert "test 2 has no conversation and no output" in messages(result)[0]


def test_promptfoo_bare_list_without_prompt():
    result = load_file(fx("promptfoo_bare.json"))
    [ok] = result.conversations
    assert ok.format == "promptfoo" and ok.options == {"metric": "conversation_relevance", "threshold": 0.8}
    [err] = result.errors
    assert (err.record, err.field) == (1, "vars.prompt")
    assert "test 1 has an output but no prompt" in err.message


def test_promptfoo_bad_default_test_reported_once(tmp_path):
    f = tmp_path / "pf.yaml"
    f.write_text(
        "defaultTest:\n  assert:\n    - type: conversation-relevance\n      threshold: high\n"
        "tests:\n  - vars: {prompt: a, output: b}\n  - vars: {prompt: c, output: d}\n"
    )
    result = load_file(f)
    assert len(result.conversations) == 2
    [err] = result.errors
    assert (err.line, err.field) == (4, "defaultTest.assert.0.threshold")


def test_promptfoo_external_tests_rejected(tmp_path):
    f = tmp_path / "pf.yaml"
    f.write_text("tests: file://tests.csv\n")
    [err] = load_file(f).errors
    assert err.field == "tests" and "external test files" in err.message


# --------------------------------------------------------------------------- openai / deepeval errors


def test_openai_errors_and_raw_arguments():
    result = load_file(fx("openai_bad.jsonl"))
    [raw] = result.conversations
    call = raw.conversation.turns[1].tool_calls[0]
    assert (call.name, call.arguments, call.id) == ("weather", "city=Lisbon", "c9")
    tool_turn = raw.conversation.turns[2]
    assert tool_turn.role == "tool" and tool_turn.metadata["name"] == "weather"
    assert [(e.line, e.field) for e in result.errors] == [
        (1, "messages.1.role"),
        (3, "messages.0.content.0.text"),
        (4, "modle"),
    ]
    assert "unknown role 'bot'" in result.errors[0].message


def test_deepeval_errors_name_raw_keys(tmp_path):
    f = tmp_path / "d.jsonl"
    f.write_text(
        '{"name": "x", "turns": [{"role": "user", "content": "hi", "toolsCalled": [{"inputParameters": {}}]}]}\n'
        '{"scenario": "s", "turns": [{"role": "user", "content": "hi", "user_idd": 1}]}\n'
    )
    result = load_file(f)
    assert [(e.line, e.field) for e in result.errors] == [
        (1, "turns.0.toolsCalled.0.name"),
        (2, "turns.0.user_idd"),
    ]
    assert "did you mean 'user_id'" in result.errors[1].message


# --------------------------------------------------------------------------- detection


@pytest.mark.parametrize(
    ("record", "fmt"),
    [
        ({"id": "a", "turns": []}, "judgegraph"),
        ({"turns": [], "scenario": "s"}, "deepeval"),
        ({"turns": [{"role": "user", "content": "x", "user_id": "u"}]}, "deepeval"),
        ({"turns": [{"role": "user", "content": "x", "retrievalContext": []}]}, "deepeval"),
        ({"messages": []}, "openai"),
        ({"vars": {}}, "promptfoo"),
        ({"description": "d", "output": "o"}, "promptfoo"),
        ({"foo": 1}, "judgegraph"),
        ({"user_input": "q", "response": "a"}, "ragas"),
        ({"question": "q", "answer": "a", "contexts": []}, "ragas"),
        ({"retrieved_contexts": []}, "ragas"),
        ({"user_input": "q", "turns": []}, "judgegraph"),  # turns, messages and promptfoo keys win
        ({"question": "q", "messages": []}, "openai"),
        ({"question": "q", "vars": {}}, "promptfoo"),
    ],
)
def test_detect_format(record, fmt):
    assert detect_format(record) == fmt


# --------------------------------------------------------------------------- ragas


def test_ragas_example_single_turn_samples():
    result = load_file(ex("ragas_samples.jsonl"))
    assert result.ok, messages(result)
    convs = result.conversations
    assert len(convs) == 5 and {c.format for c in convs} == {"ragas"}
    first = convs[0].conversation
    assert first.id == "ragas_samples:1" and convs[0].source == "examples/ragas_samples.jsonl:1"
    assert [(t.role, t.content) for t in first.turns] == [
        ("user", "When was the first Super Bowl played?"),
        ("assistant", "The first Super Bowl was played on January 15, 1967, at the Los Angeles Memorial Coliseum."),
    ]
    assert first.turns[1].retrieval_context[0].context.startswith("The First AFL-NFL World Championship Game")
    assert first.turns[0].retrieval_context == []
    assert first.metadata == {"reference": "January 15, 1967"}
    assert convs[0].options == {}
    old = convs[4].conversation  # the older ragas names: question, answer, contexts, ground_truth
    assert [t.content for t in old.turns][0] == "What do plants need for photosynthesis?"
    assert len(old.turns[1].retrieval_context) == 1 and old.metadata == {"ground_truth": "Light, water and carbon dioxide."}


def test_ragas_multi_turn_messages_and_extras(tmp_path):
    f = tmp_path / "mt.json"
    f.write_text("""[{"id": "mt", "user_input": [
        {"type": "human", "content": "Book a table for two"},
        {"type": "ai", "content": "", "tool_calls": [{"name": "book", "args": {"people": 2}}]},
        {"type": "tool", "content": "booked"},
        {"type": "ai", "content": "Done: a table for two at 8pm."}],
      "reference": "A table is booked", "reference_tool_calls": [{"name": "book", "args": {"people": 2}}],
      "metadata": {"source": "ragas"}}]""")
    [c] = load_file(f).conversations
    conv = c.conversation
    assert c.format == "ragas" and conv.id == "mt"
    assert [t.role for t in conv.turns] == ["user", "assistant", "tool", "assistant"]
    assert conv.turns[1].tool_calls[0].name == "book" and conv.turns[1].tool_calls[0].arguments == {"people": 2}
    assert conv.metadata == {"source": "ragas", "reference": "A table is booked",
                             "reference_tool_calls": [{"name": "book", "args": {"people": 2}}]}


def test_ragas_errors_name_file_line_and_field(tmp_path):
    f = tmp_path / "r.jsonl"
    f.write_text("\n".join([
        '{"user_input": "q", "response": "a", "retrieved_context": ["c"]}',
        '{"user_input": "q"}',
        '{"user_input": "q", "question": "q2", "response": "a"}',
        '{"user_input": "q", "response": 3, "retrieved_contexts": "one string"}',
        '{"user_input": "q", "response": "a", "retrieved_contexts": ["ok", 7, ""]}',
        '{"user_input": [{"type": "human", "content": "hi"}, {"type": "bot", "content": "yo"}]}',
        '{"user_input": [{"type": "human", "content": "hi"}], "response": "a"}',
        '{"answer": "only an answer"}',
        '{"question": "q", "answer": "a", "contexts": null, "ground_truths": ["g"]}',
    ]) + "\n")
    result = load_file(f)
    [ok] = result.conversations
    assert ok.source.endswith(":9") and ok.conversation.metadata == {"ground_truths": ["g"]}
    errs = [(e.line, e.field) for e in result.errors]
    assert errs == [
        (1, "retrieved_context"),
        (2, "response"),
        (3, "question"),
        (4, "response"),
        (4, "retrieved_contexts"),
        (5, "retrieved_contexts.1"),
        (5, "retrieved_contexts.2"),
        (6, "user_input.1.type"),
        (7, "response"),
        (8, "user_input"),
    ]
    by_line = {e.line: str(e) for e in result.errors}
    assert "did you mean 'retrieved_contexts'" in by_line[1]
    assert str(result.errors[0]).startswith(f"{f}:1: retrieved_context: unknown key 'retrieved_context' (did you mean")
    assert "[ragas format]" in str(result.errors[0])
    assert "give only one of 'user_input', 'question'" in by_line[3]
    assert "unknown message type 'bot'" in by_line[6]
    assert "not used with a multi-turn user_input" in by_line[7]


def _no_id(reply):
    return json.dumps({"turns": [{"role": "user", "content": "Hi?"}, {"role": "assistant", "content": reply}]})


def test_files_with_the_same_name_in_different_folders_get_distinct_ids(tmp_path, monkeypatch):
    for folder in ("a", "b"):
        (tmp_path / "runs" / folder).mkdir(parents=True)
        (tmp_path / "runs" / folder / "chats.jsonl").write_text(_no_id(folder) + "\n" + _no_id(folder + "2") + "\n")
    (tmp_path / "runs" / "a" / "chats.json").write_text("[" + _no_id("json") + "]")
    (tmp_path / "solo.jsonl").write_text(_no_id("solo") + "\n")
    monkeypatch.chdir(tmp_path)
    paths = ["runs/a/chats.jsonl", str(tmp_path / "runs" / "b" / "chats.jsonl"), "solo.jsonl"]
    res = load_files(paths)
    assert res.errors == []  # before: both lines of b/chats.jsonl refused as duplicates of a/chats.jsonl's
    assert [c.conversation.id for c in res.conversations] == ["a/chats:1", "a/chats:2", "b/chats:1", "b/chats:2",
                                                              "solo:1"]
    assert load_files(paths).conversations[2].conversation.id == "b/chats:1"  # the same on every run
    # the same stem twice in one folder: the extension tells them apart
    res = load_files(["runs/a/chats.jsonl", "runs/a/chats.json"])
    assert [c.conversation.id for c in res.conversations] == ["chats.jsonl:1", "chats.jsonl:2", "chats.json#0"]
    # alone, a file's records are named after its stem, as before
    assert [c.conversation.id for c in load_file("runs/b/chats.jsonl").conversations] == ["chats:1", "chats:2"]
    # the same file given twice: one name, so its records are duplicates
    res = load_files(["runs/a/chats.jsonl", str(tmp_path / "runs/a/chats.jsonl")])
    assert len(res.conversations) == 2 and [e.field for e in res.errors] == ["id", "id"]
