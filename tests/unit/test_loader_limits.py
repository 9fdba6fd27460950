"""Input that must not break a run: every bad record is reported (file, line,
field), every other record loads, nothing raises."""

from __future__ import annotations

import io
import json
import tracemalloc

import pytest

from judgegraph.loaders import iter_records, load_file, load_files
from judgegraph.loaders.limits import CHUNK_BYTES, Limits, TooLong, read_lines

GOOD = {"turns": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}


def rec(cid: str, **extra) -> str:
    return json.dumps({"id": cid, **GOOD, **extra})


def ids(result) -> list[str]:
    return [c.conversation.id for c in result.conversations]


def test_lone_surrogate_refuses_the_record_and_names_the_field(tmp_path):
    bad = '{"id": "bad", "turns": [{"role": "user", "content": "x\\udfff"}, {"role": "assistant", "content": "a"}]}'
    (tmp_path / "s.jsonl").write_text(rec("ok") + "\n" + bad + "\n" + rec("ok2") + "\n")
    (tmp_path / "s.yaml").write_text('- id: s\n  turns: [{role: user, content: "\\udfff"}, {role: assistant, content: a}]\n')
    res = load_files([tmp_path / "s.jsonl", tmp_path / "s.yaml"])
    assert ids(res) == ["ok", "ok2"]
    (jsonl, yml) = res.errors
    assert (jsonl.line, jsonl.field) == (2, "turns.0.content") and "lone surrogate" in jsonl.message
    assert (yml.line, yml.field) == (2, "turns.0.content") and "lone surrogate" in yml.message


def test_surrogate_in_a_key_is_refused(tmp_path):
    (tmp_path / "k.jsonl").write_text('{"id": "k", "metadata": {"\\ud800": 1}, ' + rec("x")[1:].split(", ", 1)[1] + "\n")
    (err,) = load_file(tmp_path / "k.jsonl").errors
    assert err.field == "metadata" and "lone surrogate" in err.message


DEEP = "[" * 5000 + "]" * 5000


def test_json_nested_thousands_deep_refuses_only_that_record(tmp_path):
    (tmp_path / "d.jsonl").write_text(rec("a") + "\n" + '{"id": "deep", "metadata": {"x": ' + DEEP + "}}\n")
    (tmp_path / "d.json").write_text("[\n" + rec("b") + ",\n" + '{"metadata": ' + DEEP + "},\n" + rec("c") + "\n]\n")
    res = load_files([tmp_path / "d.jsonl", tmp_path / "d.json"])
    assert ids(res) == ["a", "b", "c"]
    assert [(e.file.rsplit("/", 1)[-1], e.line) for e in res.errors] == [("d.jsonl", 2), ("d.json", 3)]
    assert all("nested too deeply" in e.message for e in res.errors)


def test_nesting_past_the_depth_limit_names_the_field(tmp_path):
    (tmp_path / "m.json").write_text("[" + rec("a") + ', {"metadata": {"x": ' + "[" * 150 + "]" * 150 + "}}]")
    res = load_file(tmp_path / "m.json")
    assert ids(res) == ["a"]
    (err,) = res.errors
    assert err.field.startswith("metadata.x.0.0") and "more levels" in err.field
    assert "nested more than 100 levels" in err.message
    (err,) = load_file(tmp_path / "m.json", limits=Limits(max_depth=200)).errors  # within a raised limit
    assert (err.field, err.message) == ("turns", "Field required")


def test_yaml_nested_over_a_thousand_deep_refuses_only_that_record(tmp_path):
    (tmp_path / "d.yaml").write_text(
        "- id: ok\n  turns: [{role: user, content: q}, {role: assistant, content: a}]\n"
        "- id: deep\n  metadata:\n    x: " + "[" * 1200 + "]" * 1200 + "\n")
    res = load_file(tmp_path / "d.yaml")
    assert ids(res) == ["ok"]
    (err,) = res.errors
    assert err.line == 5 and err.field.startswith("metadata.x.0") and "nested more than 100 levels" in err.message


def test_yaml_absurd_flow_nesting_is_refused_before_scanning(tmp_path):
    (tmp_path / "d.yaml").write_text("- id: ok\n- x: " + "[" * 200_000 + "\n")
    (err,) = load_file(tmp_path / "d.yaml").errors
    assert err.line == 2 and "nested more than 1,500 levels deep" in err.message


def billion_laughs() -> str:
    anchors = ['a0: &a0 "lololololol"'] + [
        f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)]
    return ("- id: ok\n  turns: [{role: user, content: q}, {role: assistant, content: a}]\n"
            "- id: lol\n  turns: [{role: user, content: q}, {role: assistant, content: a}]\n  metadata:\n"
            + "".join(f"    {a}\n" for a in anchors))


def test_yaml_alias_expansion_is_capped(tmp_path):
    text = billion_laughs()
    assert len(text) < 700  # expands to ~10^10 characters if followed
    (tmp_path / "lol.yaml").write_text(text)
    res = load_file(tmp_path / "lol.yaml")  # memory and time: benchmarks/input_limits.py
    assert ids(res) == ["ok"]
    (err,) = res.errors
    assert (err.line, err.field) == (12, "metadata.a6") and "expands to more than 10,000,000 characters" in err.message


def test_record_size_limit_is_configurable(tmp_path):
    (tmp_path / "big.jsonl").write_text(rec("small") + "\n" + rec("big", metadata={"x": "y" * 5000}) + "\n")
    res = load_file(tmp_path / "big.jsonl", limits=Limits(max_record_chars=1000))
    assert ids(res) == ["small"]
    assert res.errors[0].line == 2 and "more than the limit of 1,000" in res.errors[0].message
    (tmp_path / "big.yaml").write_text("- id: big\n  turns: [{role: user, content: q}, {role: assistant, content: a}]\n"
                                       "  metadata: {x: " + "y" * 5000 + "}\n")
    (err,) = load_file(tmp_path / "big.yaml", limits=Limits(max_record_chars=1000)).errors
    assert (err.line, err.field) == (3, "metadata") and "more than 1,000 characters" in err.message
    assert ids(load_file(tmp_path / "big.jsonl")) == ["small", "big"]  # the default is far above


def test_limits_from_the_environment(tmp_path, monkeypatch):
    (tmp_path / "big.jsonl").write_text(rec("big", metadata={"x": "y" * 5000}) + "\n")
    monkeypatch.setenv("JUDGEGRAPH_MAX_RECORD_CHARS", "1_000")
    assert "limit of 1,000" in load_file(tmp_path / "big.jsonl").errors[0].message
    monkeypatch.setenv("JUDGEGRAPH_MAX_RECORD_CHARS", "lots")  # an input error naming the setting, not a crash
    (err,) = load_file(tmp_path / "big.jsonl").errors
    assert "JUDGEGRAPH_MAX_RECORD_CHARS must be a whole number (got 'lots')" in err.message


def test_recursive_yaml_alias_is_an_error_not_a_hang(tmp_path):
    (tmp_path / "r.yaml").write_text("- &a [*a]\n")
    (err,) = load_file(tmp_path / "r.yaml").errors
    assert err.line == 1 and "contains it" in err.message


@pytest.mark.parametrize("name,content", [
    ("e.jsonl", ""), ("b.jsonl", "\n  \n// only a comment\n"), ("e.json", ""), ("b.json", " \n"),
    ("e.yaml", ""), ("c.yaml", "# nothing\n"), ("l.json", "[]"), ("l.yaml", "[]\n"),
])
def test_empty_or_blank_file_is_an_input_error(tmp_path, name, content):
    (tmp_path / name).write_text(content)
    res = load_file(tmp_path / name)
    assert res.conversations == []
    (err,) = res.errors
    assert err.file.endswith(name) and "empty" in err.message


def test_iter_records_is_lazy_for_jsonl(tmp_path):
    path = tmp_path / "many.jsonl"
    path.write_text("".join(rec(f"c{i}") + "\n" for i in range(20_000)))
    items = iter_records(path)
    assert next(items).conversation.id == "c0"
    path.write_text("")  # what was not read yet is gone: a lazy reader never sees it
    assert len(list(items)) < 1_000


class _CountingFile(io.BytesIO):
    """A binary file that remembers how many bytes were read from it."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.read_bytes = 0
        self.largest_read = 0

    def _count(self, data: bytes) -> bytes:
        self.read_bytes += len(data)
        self.largest_read = max(self.largest_read, len(data))
        return data

    def read(self, size: int | None = -1) -> bytes:
        return self._count(super().read(size))

    def readline(self, size: int | None = -1) -> bytes:
        return self._count(super().readline(size))


def test_a_line_over_the_limit_is_refused_after_reading_at_most_the_limit(tmp_path):
    fh = _CountingFile(b"x" * 5_000_000 + b"\n" + rec("after").encode() + b"\n")
    lines = read_lines(fh, 1000)
    assert next(lines) == (1, TooLong(1000))
    assert fh.read_bytes == 1001  # refused once the 1,001st character is read, not after the line's 5 MB
    assert next(lines) == (2, (rec("after") + "\n").encode())  # the rest was skipped, chunk by chunk
    assert fh.largest_read <= CHUNK_BYTES
    # multi-byte text: counted in characters, as before (1000 'é' = 2000 bytes pass; 1001 do not)
    assert list(read_lines(_CountingFile("é".encode() * 1000), 1000)) == [(1, "é".encode() * 1000)]
    assert list(read_lines(_CountingFile("é".encode() * 1001 + b"\n\n"), 1000)) == [(1, TooLong(1000)), (2, b"\n")]


def test_a_huge_jsonl_line_is_never_held_in_memory(tmp_path):
    path = tmp_path / "big.jsonl"
    with path.open("wb") as fh:
        fh.write(rec("a").encode() + b"\n")
        fh.write(b'{"id": "big", "metadata": "' + b"x" * 30_000_000)  # 30 MB, no newline until the end
        fh.write(b'"}\n' + rec("b").encode() + b"\n")
    tracemalloc.start()
    try:
        res = load_file(path, limits=Limits(max_record_chars=100_000))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5_000_000  # the old reader held the 30 MB line (twice: bytes and text) before refusing it
    assert ids(res) == ["a", "b"]
    (err,) = res.errors
    assert err.line == 2 and "more than the limit of 100,000 characters: refused unread" in err.message
