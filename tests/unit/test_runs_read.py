"""The one results-file reader (judgegraph.runs.read_run) and its rule, the same in every command that reads
a results file: a bad line is left out and named ``FILE:LINE: why`` (the field at fault), the rest is read; a file
that is not a results file is refused with one message and one exit status by every command."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from judgegraph.apps.pairwise import read_version
from judgegraph.data import results
from judgegraph.judges import resolve_judge
from judgegraph.loaders import InputError
from judgegraph.outputs.export import load_results
from judgegraph.runs import ConversationLine, HeaderLine, ResultLine, VerdictLine, header, read_run, record
from judgegraph.runs.resultsfile import ResultsWriter
from judgegraph.runs.runner import MetricPlan, RunSummary
from judgegraph.trust.agreement import conversation_lines


def conversation(cid: str, **extra: object) -> dict[str, object]:
    return {"type": "conversation", "conversation_id": cid, "results": {"m": {"status": "passed", "score": 1.0}},
            "conversation": {"id": cid, "turns": [{"role": "user", "content": "hi"}]}, **extra}


BAD = [  # (line, why) of the file below
    (3, "not JSON (Expecting property name enclosed in double quotes at column 2)"),
    (4, "a results line is a JSON object, got list"),
    (5, "field 'type': missing: not a results line (is it an input file rather than a results file?)"),
    (6, "field 'type': expected one of 'header', 'conversation', 'input_error', 'summary', 'batch', got 'pairwise'"),
    (7, "field 'results.m.status': 'great' is not one of error, failed, not_applicable, passed"),
    (8, "field 'results.m.errors': expected a list of objects"),
    (9, "field 'cost_usd': not a finite number (1e999 reads as infinity): the line is left out"),
    (12, "a torn last line (a run killed while writing it): left out"),
]


def bad_file(path: Path) -> Path:
    lines = [
        json.dumps({"type": "header", "format": 1}),
        json.dumps(conversation("a")),
        "{not json",
        '["a list"]',
        json.dumps({"conversation_id": "chat-1", "turns": []}),  # an input file's line
        json.dumps({"type": "pairwise", "conversation_id": "a"}),  # pairwise --out, not a results file
        json.dumps(conversation("s", results={"m": {"status": "great"}})),
        json.dumps(conversation("e", results={"m": {"status": "error", "errors": "timeout"}})),
        json.dumps(conversation("inf", cost_usd=1e999)),
        json.dumps(conversation("a", results={"m": {"status": "failed", "score": 0.0}})),
        json.dumps(conversation("b")),
    ]
    path.write_text("\n".join(lines) + "\n" + json.dumps(conversation("c"))[:30], encoding="utf-8")
    return path


def test_the_reader_reads_typed_lines_and_names_every_bad_line(tmp_path):
    path = bad_file(tmp_path / "r.jsonl")
    run = read_run(path)
    assert run.problems == [f"{path}:{n}: {why}" for n, why in BAD]
    assert isinstance(run.header, HeaderLine) and run.header.data()["format"] == 1
    assert all(isinstance(c, ConversationLine) for c in run.conversations.values())
    assert [(c.line, c.conversation_id) for c in run.conversations.values()] == [(10, "a"), (11, "b")]
    # a conversation judged again (a watch's retry) is read as its latest line, in its first line's place
    first = run.conversations["a"]
    assert first.results["m"].score == 0.0 and first.replaces == (2,) and run.rejudged == 1
    assert first.results["m"].verdicts == [] and first.results["m"].errors == []
    assert first.data()["conversation"] == {"id": "a", "turns": [{"role": "user", "content": "hi"}]}


def test_every_command_reads_a_results_file_by_the_same_rule(tmp_path):
    # before, each copy had its own: agree read the typeless and the 'pairwise' lines as conversations, diff
    # skipped the 'pairwise' line, pairwise skipped a list line unsaid and read the infinite number; the torn line was "not JSON" to agree and report, torn to diff
    path = bad_file(tmp_path / "r.jsonl")
    expected = [f"{path}:{n}: {why}" for n, why in BAD]
    records, problems = conversation_lines(path)  # agree, stability
    assert problems == expected
    assert [r.conversation_id for r in records] == ["a", "b"]
    run = read_run(path)  # diff
    assert run.problems == expected and list(run.conversations) == ["a", "b"]
    assert run.conversations["a"].results["m"].status == "failed" and run.rejudged == 1
    report = read_run(path)  # report
    assert report.problems == expected and list(report.conversations) == ["a", "b"]
    assert load_results(path).run.problems == expected  # export, show, junit
    version = read_version(path)  # pairwise, on a file whose lines carry the conversation
    assert version.errors == expected and list(version.conversations) == ["a", "b"]


def test_a_result_and_its_verdicts_read_as_typed_lines_and_write_back_as_read(tmp_path):
    # before, a result was a raw dict: every reader dug in it with .get and computed pass/fail, ids and counts itself
    new = {"key": "m", "score": 1, "threshold": 0.5, "passed": True, "status": "passed", "reason": "ok",
           "verdicts": [{"turns": [0, 2], "verdict": "yes", "reason": "r", "usage": {"calls": 1, "input_tokens": 3},
                         "window": 2, "id": "3"}],
           "errors": [{"where": "window 1", "step": "m/judge", "message": "timeout", "attempts": 2}],
           "usage": {"calls": 2, "input_tokens": 5, "output_tokens": 1}, "details": {"x": [1]}, "custom": "kept"}
    old = {"passed": False, "score": 0.0, "verdicts": [{"window": 4, "verdict": "no"}, {"turns": [1], "verdict": "yes"}]}
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(json.dumps(conversation(c, results={"m": r})) for c, r in (("a", new), ("b", old))) + "\n",
                    encoding="utf-8")
    run = read_run(path)
    a, b = run.conversations["a"].results["m"], run.conversations["b"].results["m"]
    assert isinstance(a, ResultLine) and isinstance(a.verdicts[0], VerdictLine)
    assert (a.status, a.outcome, a.score, a.judged, a.failing) == ("passed", "passed", 1, True, True)  # a judge error
    assert a.verdicts[0].key == "3" and a.verdicts[0].turn_numbers == [1, 3] and a.verdicts[0].decided
    assert a.errors[0].message == "timeout" and a.usage is not None and a.usage.tokens == 6
    # a result written before results had a status, and verdicts before ids were stored, still read
    assert (b.status, b.outcome, b.judged, b.failing) == (None, "failed", False, False)
    assert [v.key for v in b.verdicts] == ["4", "2"] and not b.verdicts[1].decided
    # a line written back is the line read: keys in their order, ints kept ints, unknown fields kept (an absent
    # errors list read as empty, as the reader always filled it in)
    assert [json.dumps(c.data()) for c in run.conversations.values()] == [
        json.dumps(conversation(c, results={"m": r})) for c, r in (("a", new), ("b", {**old, "errors": []}))]


def test_a_result_field_of_the_wrong_type_is_a_bad_line_naming_the_field(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(conversation("a", results={"m": {"status": "passed", "passed": "yes"}})) + "\n"
                    + json.dumps(conversation("b")) + "\n", encoding="utf-8")
    run = read_run(path)
    assert list(run.conversations) == ["b"]
    assert run.problems == [f"{path}:1: field 'results.m.passed': Input should be a valid boolean"]


#: writing model -> its reading model, and the written fields the reader keeps as extra fields (not typed)
WRITTEN_AND_READ = [
    (results.Usage, record.UsageLine, {"estimated"}),
    (results.JudgeErrorInfo, record.ErrorLine, set()),
    (results.JudgeAttempt, record.AttemptLine, {"system_fingerprint"}),
    (results.Vote, record.VoteLine, set()),
    (results.Review, record.ReviewLine, set()),
    (results.Verdict, record.VerdictLine, set()),
    (results.WindowVerdict, record.VerdictLine, {"window"}),
    (results.MetricResult, record.ResultLine, set()),
]


@pytest.mark.parametrize(("writer", "reader", "extra"), WRITTEN_AND_READ, ids=lambda x: getattr(x, "__name__", ""))
def test_every_field_a_run_writes_is_one_its_reader_declares(writer, reader, extra):
    # a results line is declared twice on purpose (a strict writer, a lenient reader: every field optional, kept
    # in order, extra kept); this keeps the two lists of names from drifting apart
    written = set(writer.model_fields) | set(writer.model_computed_fields)
    assert written - set(reader.model_fields) == extra
    assert not extra & set(reader.model_fields)


def test_a_header_a_summary_and_an_input_error_are_written_with_their_reading_models_keys_in_order(tmp_path):
    plan = MetricPlan(["turn_relevancy"], resolve_judge())
    started = datetime(2026, 1, 1, tzinfo=timezone.utc)
    head = header.run_header(plan, inputs=[], argv=["eval"], started_at=started)
    assert list(head) == [k for k in record.HeaderLine.model_fields if k not in ("rejudged", "watch")]
    summary = header.run_summary(RunSummary(), started, ended_at=started)
    assert list(summary) == list(record.SummaryLine.model_fields)
    assert record.SummaryLine.model_validate(summary).data() == summary
    writer = ResultsWriter(tmp_path / "r.jsonl")
    writer.input_error(InputError("in.jsonl", 3, 2, "turns", "expected a list"))
    writer.close()
    line = json.loads((tmp_path / "r.jsonl").read_text(encoding="utf-8"))
    assert list(line) == list(record.InputErrorLine.model_fields)
    assert line["error"] == "in.jsonl:3: turns: expected a list" and line["record"] == 2
