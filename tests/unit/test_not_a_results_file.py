"""Every command that reads a results file refuses one that is not (a conversations file, a labels file, a line of
garbage, a missing path) with the same message, naming the file, and the same exit status (3); ``export --out -``
writes the table to stdout; a file written before the run header (header-less) still reads."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from judgegraph.cli import main
from judgegraph.runs import NOT_RESULTS, read_run

CONVERSATION = {"id": "c1", "turns": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
LABEL = {"conversation_id": "c1", "metric": "turn_relevancy", "turn": 1, "label": "yes"}


def _results(tmp_path: Path) -> Path:
    """A results file as an older judgegraph wrote it: no header, no summary, no positions."""
    path = tmp_path / "old-results.jsonl"
    lines = [{"type": "conversation", "conversation_id": cid, "source": "chats.jsonl:1",
              "results": {"turn_relevancy": {"status": status, "score": score, "threshold": 0.5, "judge": "llm:j",
                                             "verdicts": [{"turns": [1], "verdict": "yes", "reason": "fine"}]}}}
             for cid, status, score in (("c2", "failed", 0.2), ("c1", "passed", 1.0))]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def _not_results(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """Each kind of file that is not a results file, and the message naming it."""
    chats, labels, garbage = tmp_path / "chats.jsonl", tmp_path / "labels.jsonl", tmp_path / "garbage.jsonl"
    chats.write_text(json.dumps(CONVERSATION) + "\n", encoding="utf-8")
    labels.write_text(json.dumps(LABEL) + "\n", encoding="utf-8")
    garbage.write_text("this is not JSON\n", encoding="utf-8")
    missing = tmp_path / "missing.jsonl"
    typeless = "line 1: field 'type': missing: not a results line (is it an input file rather than a results file?)"
    return {
        "conversations": (chats, f"error: {chats}: a conversations file (what `eval` reads), not a results file "
                                 "(`eval --out`): to compare two versions' conversations, use `judgegraph pairwise "
                                 "FILE FILE --model M`"),
        "labels": (labels, f"error: {labels}: {NOT_RESULTS} ({typeless})"),
        "garbage": (garbage, f"error: {garbage}: {NOT_RESULTS} (line 1: not JSON (Expecting value at column 1))"),
        "missing": (missing, f"error: {missing}: no such file"),
    }


def _commands(bad: Path, good: Path, labels: Path, tmp_path: Path) -> dict[str, list[str]]:
    return {
        "export": ["export", str(bad), "--out", str(tmp_path / "t.csv")],
        "show": ["show", str(bad)],
        "report": ["report", str(bad), "-o", str(tmp_path / "r.html")],
        "diff OLD": ["diff", str(bad), str(good)],
        "diff NEW": ["diff", str(good), str(bad)],
        "agree": ["agree", str(bad), "--labels", str(labels)],
        "stability": ["stability", str(bad)],
    }


@pytest.mark.parametrize("kind", ["conversations", "labels", "garbage", "missing"])
def test_every_reading_command_refuses_a_file_that_is_not_a_results_file_alike(kind, tmp_path, capsys):
    good = _results(tmp_path)
    bad, message = _not_results(tmp_path)[kind]
    labels = tmp_path / "labels.jsonl"
    seen = {}
    for name, argv in _commands(bad, good, labels, tmp_path).items():
        status = main(argv)
        err = capsys.readouterr().err
        seen[name] = (status, [line for line in err.splitlines() if line.startswith("error:")])
    assert seen == {name: (3, [message]) for name in seen}
    assert not (tmp_path / "t.csv").exists() and not (tmp_path / "r.html").exists()  # nothing written for it


def test_export_out_dash_writes_the_table_to_stdout(tmp_path, capsys):
    results = _results(tmp_path)
    assert main(["export", str(results), "--out", "-"]) == 0
    captured = capsys.readouterr()
    rows = list(csv.DictReader(io.StringIO(captured.out)))
    assert [(r["conversation_id"], r["status"]) for r in rows] == [("c2", "failed"), ("c1", "passed")]
    assert "wrote stdout: 2 result rows" in captured.err and not Path("-").exists()


def test_a_header_less_file_written_before_the_run_record_still_reads(tmp_path, capsys):
    results = _results(tmp_path)
    run = read_run(results)
    assert run.header is None and run.summary is None and run.problems == []
    assert list(run.conversations) == ["c2", "c1"] and run.pass_rate == {"turn_relevancy": 0.5}
    assert run.judges == ["llm:j"] and run.thresholds == {"turn_relevancy": 0.5}
    assert run.facts().source == {"judges": "lines", "thresholds": "lines", "pass_rate": "lines"}
    assert main(["show", str(results), "--conversation", "c1"]) == 0
    assert main(["report", str(results), "-o", str(tmp_path / "r.html")]) == 0
    assert main(["export", str(results), "--out", str(tmp_path / "t.csv")]) == 0
    assert main(["diff", str(results), str(results)]) == 0


def test_export_names_a_bad_line_and_exits_3_as_report_does(tmp_path, capsys):
    results = _results(tmp_path)
    with results.open("a", encoding="utf-8") as fh:
        fh.write("{torn\n")
    assert main(["export", str(results), "--out", str(tmp_path / "t.csv")]) == 3
    assert f"{results}:3: not JSON" in capsys.readouterr().err
    assert len(list(csv.DictReader((tmp_path / "t.csv").open(encoding="utf-8")))) == 2  # the rest is exported
