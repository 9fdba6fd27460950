"""A ``.json`` list is read one record at a time (issue 21 C.16): records come
out before the file is read to its end, memory holds one record, and a bad or
too-big record is skipped without keeping it."""

from __future__ import annotations

import io
import json
import os
import threading
import tracemalloc

import pytest

from judgegraph.loaders import LoadedConversation, iter_records, load_file
from judgegraph.loaders.jsonstream import JsonArray, JsonSyntaxError
from judgegraph.loaders.limits import Limits


def rec(cid: str, content: str = "a") -> dict:
    return {"id": cid, "turns": [{"role": "user", "content": "q"}, {"role": "assistant", "content": content}]}


@pytest.mark.timeout(30)
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo")
def test_records_come_out_before_the_file_ends(tmp_path):
    path = tmp_path / "chats.json"
    os.mkfifo(path)
    go_on = threading.Event()

    def write() -> None:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write("[\n" + json.dumps(rec("first")) + ",\n")
            fh.flush()
            if go_on.wait(10):  # the rest is written only once the first record was read
                fh.write(json.dumps(rec("second")) + "\n]\n")

    writer = threading.Thread(target=write)
    writer.start()
    try:
        records = iter_records(path)
        first = next(records)  # the old reader read the whole file first: here it got only '[first,' and failed
        assert isinstance(first, LoadedConversation), first
        assert first.conversation.id == "first" and first.source == f"{path}#0"
    finally:
        go_on.set()
    assert [c.conversation.id for c in records] == ["second"]
    writer.join()


def test_a_bad_record_then_huge_junk_costs_one_chunk(tmp_path):
    path = tmp_path / "chats.json"
    with path.open("w", encoding="utf-8") as fh:
        fh.write("[\n" + json.dumps(rec("a")) + ",\n" + '{"id": "b" "turns": []},\n')
        fh.write("x" * 40_000_000)
    tracemalloc.start()
    try:
        res = load_file(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8_000_000  # the old reader held the 40 MB file (bytes and text) before parsing it
    assert [c.conversation.id for c in res.conversations] == ["a"]
    (err,) = res.errors
    assert err.line == 3 and err.message == "invalid JSON: Expecting ',' delimiter (line 3, column 12)"


def test_a_record_over_the_limit_is_skipped_unkept_and_the_next_loads(tmp_path):
    path = tmp_path / "chats.json"
    tricky = 'brackets ] } [ { and "quotes" and \\ escapes ' * 3000  # ~140 KB, over the limit
    doc = [rec("a"), rec("big", tricky), rec("c")]
    path.write_text(json.dumps(doc, indent=1))
    res = load_file(path, limits=Limits(max_record_chars=100_000))
    assert [c.conversation.id for c in res.conversations] == ["a", "c"]
    (err,) = res.errors
    assert err.record == 1 and err.line == json.dumps(doc, indent=1).splitlines().index(" {", 10) + 1
    assert "more than the limit of 100,000 characters: refused unread" in err.message


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 1 << 20])
def test_any_chunk_size_decodes_the_same_values(chunk):
    values = [rec("é€😀 \"x\" \\ ]"), 12345678901234567890, -1.5e-300, True, None, "a\\u00e9\"]", [], {},
              {"deep": [[[{"k": [1, 2, {"z": "}"}]}]]]}, 0, "", rec("last")]
    data = ("\ufeff  [\n " + ",\n  ".join(json.dumps(v, ensure_ascii=i % 2 == 0) for i, v in enumerate(values))
            + "\n]  \n").encode("utf-8")
    got = [(e.index, e.value, e.problem) for e in JsonArray(io.BytesIO(data), 10**6, chunk=chunk)]
    assert got == [(i, v, None) for i, v in enumerate(values)]


@pytest.mark.parametrize("text,message", [
    ('[{"a": 1}, ]', "Expecting value (a ',' before ']') (line 1, column 12)"),
    ('[{"a": 1}] [', "Extra data (line 1, column 12)"),
    ('[{"a": 1}', "Expecting ',' or ']' (line 1, column 10)"),
    ('[{"a": 1} {"b": 2}]', "Expecting ',' delimiter (line 1, column 11)"),
])
def test_syntax_errors_name_line_and_column(text, message):
    stream = JsonArray(io.BytesIO(text.encode()), 10**6, chunk=3)
    with pytest.raises(JsonSyntaxError) as info:
        list(stream)
    assert str(info.value) == message


@pytest.mark.parametrize("early", [True, False])
def test_bytes_that_are_not_utf8_end_the_list_with_an_error(tmp_path, early):
    path = tmp_path / "chats.json"
    good = json.dumps(rec("a")).encode()
    bad = b'{"id": "b\xff"}'
    path.write_bytes(b"[" + (bad + b",\n" + good if early else good + b",\n" + bad) + b"]")
    res = load_file(path)  # exit 4 (UnicodeDecodeError) if it escaped
    assert [c.conversation.id for c in res.conversations] == ([] if early else ["a"])
    (err,) = res.errors
    assert "not valid UTF-8" in err.message
