"""The HTML report file itself (the browser tests are in tests/integration/test_html_browser.py)."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

from judgegraph.cli import main
from judgegraph.outputs.html import report_data, write_report
from judgegraph.runs import read_run
from tests.kit.results import HOSTILE_IMG, HOSTILE_SCRIPT, write_sample_run


class _Scripts(HTMLParser):
    """Every element the page holds, as a browser's tokenizer sees them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.data: dict[str, str] = {}
        self._in: str | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in = dict(attrs).get("id") if tag == "script" else None

    def handle_data(self, data):
        if self._in:
            self.data[self._in] = self.data.get(self._in, "") + data

    def handle_endtag(self, tag):
        self._in = None


def _page(tmp_path, n=8):
    chats, results = write_sample_run(tmp_path, n)
    out = tmp_path / "r.html"
    made = write_report(results, out, inputs=[chats])
    return out.read_text(encoding="utf-8"), made


def test_the_page_is_one_offline_file_with_the_data_as_inert_json(tmp_path):
    html, made = _page(tmp_path)
    assert made.conversations == 8 and made.problems == []
    parser = _Scripts()
    parser.feed(html)
    scripts = [a for t, a in parser.tags if t == "script"]
    assert scripts == [{"type": "application/json", "id": "report-data"}, {}]  # the data, the inline script
    assert not [a for t, a in parser.tags if t in ("link", "img", "iframe") or a.get("src") or a.get("href")]
    assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", html)  # nothing to fetch
    data = json.loads(parser.data["report-data"])
    replies = [t["content"] for c in data["conversations"] for t in (c["turns"] or [])]
    assert HOSTILE_SCRIPT in replies and HOSTILE_IMG in replies
    assert "<script>window" not in html and "<img src=x" not in html  # only as \u003c… in the JSON
    assert not re.search(r"\.innerHTML|outerHTML|insertAdjacentHTML|document\.write", html)  # text only


def test_summary_counts_and_score_distribution(tmp_path):
    _, results = write_sample_run(tmp_path, 8)
    data, problems = report_data(read_run(results))
    assert problems == []
    rel = data["summary"]["turn_relevancy"]
    assert (rel["passed"], rel["failed"], rel["error"], rel["judge_errors"]) == (6, 1, 0, 1)
    assert rel["histogram"][5] == 1 and rel["histogram"][9] == 6  # one 0.5, six 1.0
    assert data["totals"]["run_errors"] == 1 and data["totals"]["input_errors"] == 1
    assert all(c["turns"] is None for c in data["conversations"])  # no input file given


def test_bad_lines_are_reported_not_raised(tmp_path, capsys):
    _, results = write_sample_run(tmp_path, 3)
    with results.open("a") as fh:
        fh.write("{not json\n")
        fh.write(json.dumps({"type": "mystery"}) + "\n")
        fh.write(json.dumps({"type": "conversation", "conversation_id": "x", "results": {"m": {"verdicts": "no"}}}) + "\n")
        fh.write(json.dumps({"type": "conversation", "conversation_id": "y",
                             "results": {"m": {"verdicts": [{"transcript": "hi"}]}}}) + "\n")
    parsed = read_run(results)
    assert len(parsed.conversations) == 3
    assert parsed.problems == [
        f"{results}:5: not JSON (Expecting property name enclosed in double quotes at column 2)",
        f"{results}:6: field 'type': expected one of 'header', 'conversation', 'input_error', 'summary', 'batch', "
        "got 'mystery'",
        f"{results}:7: field 'results.m.verdicts': expected a list of objects",
        f"{results}:8: field 'results.m.verdicts[0].transcript': expected a list of objects",
    ]
    out = tmp_path / "r.html"
    assert main(["report", str(results), "-o", str(out)]) == 3
    err = capsys.readouterr().err
    assert f"{results}:5: not JSON" in err and "3 conversations" in err and out.exists()


def test_cli_report_usage(tmp_path, capsys):
    # a missing file is refused as every reading command refuses it (tests/unit/test_runs_read.py): exit 3
    assert main(["report", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "r.html")]) == 3
    assert f"{tmp_path / 'missing.jsonl'}: no such file" in capsys.readouterr().err
    chats, results = write_sample_run(tmp_path, 4)
    out = tmp_path / "sub" / "r.html"
    assert main(["report", str(results), "--input", str(chats), "-o", str(out), "--title", "a <b> title"]) == 0
    html = out.read_text()
    assert "<title>a &lt;b&gt; title</title>" in html
    assert 'class="cluster" data-name="turn_relevancy"' in html  # the metrics' graph is drawn in the page


def test_graph_of_offline_results_with_a_metric_only_an_llm_judge_runs(tmp_path):
    _, results = write_sample_run(tmp_path, 3)
    lines = [json.loads(x) for x in results.read_text().splitlines()]
    for record in lines:
        for r in record.get("results", {}).values():
            r["judge"] = "offline:all-MiniLM-L6-v2"
    results.write_text("".join(json.dumps(x) + "\n" for x in lines))
    html = write_report(results, tmp_path / "r.html").path.read_text()
    assert 'data-name="turn_relevancy"' in html and 'data-name="knowledge_retention"' in html


def test_a_score_that_is_not_finite_is_a_reported_line_not_an_empty_page(tmp_path, capsys):
    _, results = write_sample_run(tmp_path, 3)
    lines = results.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    metric = next(iter(first["results"]))
    bad = lines[0].replace(json.dumps(first["conversation_id"]), '"inf-score"', 1)
    bad = bad.replace(f'"score": {json.dumps(first["results"][metric]["score"])}', '"score": 1e999', 1)
    assert "1e999" in bad
    with results.open("a", encoding="utf-8") as fh:
        fh.write(bad + "\n" + lines[0].replace(json.dumps(first["conversation_id"]), '"nan-id"', 1)
                 .replace('"type": "conversation"', '"type": "conversation", "extra": NaN', 1) + "\n")
    out = tmp_path / "r.html"
    assert main(["report", str(results), "-o", str(out)]) == 3  # exit 0 and a page of 0 rows before
    err = capsys.readouterr().err
    n = len(lines)
    assert f"{results}:{n + 1}: field 'results.{metric}.score': not a finite number" in err
    assert f"{results}:{n + 2}: field 'extra': not a finite number" in err
    parser = _Scripts()
    parser.feed(out.read_text(encoding="utf-8"))
    data = json.loads(parser.data["report-data"])  # strict JSON, as the browser's JSON.parse reads it
    ids = [c["id"] for c in data["conversations"]]
    assert len(ids) == 3 and "inf-score" not in ids and "nan-id" not in ids
    assert data["totals"]["unreadable_lines"] == 2


def test_bad_bytes_and_deep_lines_are_reported_lines(tmp_path, capsys):
    _, results = write_sample_run(tmp_path, 2)
    n = len(results.read_text(encoding="utf-8").splitlines())
    with results.open("ab") as fh:
        fh.write(b'{"type": "conversation", "conversation_id": "\xff"}\n' + b"[" * 100_000 + b"]" * 100_000 + b"\n")
    out = tmp_path / "r.html"
    assert main(["report", str(results), "-o", str(out)]) == 3  # exit 4 (UnicodeDecodeError, RecursionError) before
    err = capsys.readouterr().err
    assert f"{results}:{n + 1}: not valid UTF-8 (byte 46 of the line)" in err
    assert f"{results}:{n + 2}: nested too deeply to read" in err and "2 conversations" in err
    assert main(["show", str(results), "--conversation", "nope"]) == 2  # a usage answer, not exit 4
    assert "no conversation 'nope'" in capsys.readouterr().err
