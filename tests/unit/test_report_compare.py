"""Runs side by side (reporting/compare.py) and the comparison page the report writes from them
(the browser tests are in tests/integration/test_html_browser.py)."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest

from judgegraph.cli import main
from judgegraph.outputs.compare import compare_runs, differs_in, run_labels
from judgegraph.outputs.html import report_data, write_report
from judgegraph.runs import ConversationLine, HeaderLine, RunFile, read_run
from tests.kit.results import HOSTILE_REASON, QUOTED_ID, write_sample_run, write_two_runs


def _line(cid: str, status: str | None = "passed", score: float | None = 1.0, *, metric: str = "m",
          error: str | None = None, position: int | None = None) -> dict:
    record: dict = {"type": "conversation", "conversation_id": cid, "source": "x", "error": error,
                    "results": {} if status is None else {metric: {"status": status, "score": score, "threshold": 0.5,
                                                                   "judge": "llm:x", "verdicts": [], "errors": []}}}
    if position is not None:
        record["position"] = position
    return record


def _run(path: str, *lines: dict) -> RunFile:
    return RunFile(path, conversations={line["conversation_id"]: ConversationLine.model_validate(line) for line in lines})


def test_conversations_are_matched_by_id_with_missing_and_new_ones():
    old = _run("old", _line("a"), _line("b"), _line("gone"))
    new = _run("new", _line("b"), _line("new"), _line("a"))
    rows = {r.conversation_id: r for r in compare_runs([old, new]).rows}
    assert set(rows) == {"a", "b", "gone", "new"}
    assert [r is None for r in rows["gone"].records] == [False, True]
    assert [r is None for r in rows["new"].records] == [True, False]
    assert rows["a"].records[0] is old.conversations["a"] and rows["a"].records[1] is new.conversations["a"]
    assert not rows["a"].differs and not rows["b"].differs
    assert rows["gone"].differs and rows["new"].differs  # present in one run only


def test_only_differences_are_status_score_or_a_failed_run():
    old = _run("old", _line("same"), _line("status", "passed", 0.6), _line("score", "passed", 0.9),
               _line("crash"), _line("both-failed", "failed", 0.2))
    new = _run("new", _line("same"), _line("status", "failed", 0.4), _line("score", "passed", 0.95),
               _line("crash", None, error="RuntimeError: boom"), _line("both-failed", "failed", 0.2))
    differs = {r.conversation_id: r.differs for r in compare_runs([old, new]).rows}
    assert differs == {"same": False, "status": True, "score": True, "crash": True, "both-failed": False}
    assert differs_in([old.conversations["status"], new.conversations["status"]], "m")
    assert not differs_in([old.conversations["same"], new.conversations["same"]], "m")
    assert not compare_runs([old]).rows[0].differs  # one run: nothing to differ from


def test_failures_come_first_then_input_order():
    # the new run wrote its lines in completion order; "position" puts them back in input order
    old = _run("old", _line("c0"), _line("c1"), _line("c2", "failed", 0.1), _line("c3"))
    new = _run("new", _line("c3", position=3), _line("c1", "error", None, position=1), _line("c0", position=0),
               _line("c2", position=2), _line("c4", position=4))
    rows = compare_runs([old, new]).rows
    assert [r.conversation_id for r in rows] == ["c1", "c2", "c0", "c3", "c4"]
    assert [r.failing for r in rows] == [True, True, False, False, False]
    assert [r.position for r in rows] == [1, 2, 0, 3, 4]
    # a judge error and a failed run count among the failures too; a conversation only missing does not
    judge_error = _line("je")
    judge_error["results"]["m"]["errors"] = [{"where": "window 0", "step": "s", "message": "bad JSON", "attempts": 3}]
    rows = compare_runs([_run("x", _line("ok"), judge_error, _line("crash", None, error="boom"))]).rows
    assert [r.conversation_id for r in rows] == ["je", "crash", "ok"]


def test_run_facts_from_header_and_summary_else_lines_else_unknown(tmp_path):
    _, old, new = write_two_runs(tmp_path)
    a, b = read_run(old), read_run(new)
    assert b.problems == [] and b.header is not None and b.summary is not None  # header/summary lines are records
    facts_a, facts_b = a.facts("A"), b.facts("B")
    assert facts_b.version == "9.9.9" and facts_b.duration_s == 125.0
    assert facts_b.judges == ["gpt-4.1-mini · temperature 0 · prompts judge 0123456789ab"]
    assert facts_b.cost_usd == 0.0123 and facts_b.pass_rate == {"turn_relevancy": 0.875, "knowledge_retention": 1.0}
    assert facts_b.calls == 40 and facts_b.tokens == 8160
    assert facts_b.source["pass_rate"] == "summary" and facts_b.source["judges"] == "header"
    # the old file has no header: what its lines show, the rest unknown
    assert facts_a.version is None and facts_a.duration_s is None and facts_a.cost_usd is None
    assert facts_a.judges == ["llm:gpt-4.1-mini"] and facts_a.source["judges"] == "lines"
    assert facts_a.thresholds == {"turn_relevancy": 0.8, "knowledge_retention": 0.5}
    assert facts_a.pass_rate == {"turn_relevancy": pytest.approx(6 / 7), "knowledge_retention": 1.0}
    assert facts_a.calls == 14 and "duration_s" not in facts_a.source
    # thresholds: the header's metric options when it gives one for every metric
    assert facts_b.source["thresholds"] == "lines"  # the header's options hold none
    header = HeaderLine.model_validate({**b.header.data(), "metrics": [
        {"name": "turn-relevancy", "options": {"threshold": 0.7}}, {"name": "knowledge_retention", "options": {"threshold": 0.6}}]})
    b = RunFile(b.path, header, b.summary, b.conversations)  # the facts are computed once per RunFile
    assert b.facts("B").thresholds == {"turn_relevancy": 0.7, "knowledge_retention": 0.6}
    assert b.thresholds == b.facts("B").thresholds and b.pass_rate == facts_b.pass_rate  # properties of the record
    # per-line costs add up when there is no summary
    b = RunFile(b.path, header, None, b.conversations)
    assert b.facts("B").cost_usd == pytest.approx(0.008) and b.facts("B").source["cost_usd"] == "lines"


def test_run_labels():
    assert run_labels(3) == ["A", "B", "C"]
    assert run_labels(28)[25:] == ["Z", "AA", "AB"]


def test_a_resumed_run_keeps_its_first_header_and_last_summary(tmp_path):
    path = tmp_path / "r.jsonl"
    lines = [{"type": "header", "judgegraph": "1"}, _line("a"), {"type": "summary", "duration_s": 1.0},
             _line("b"), {"type": "summary", "duration_s": 2.0}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    parsed = read_run(path)
    assert parsed.header is not None and parsed.summary is not None
    assert parsed.header.data() == lines[0] and parsed.summary.data() == lines[-1] and parsed.problems == []
    assert parsed.facts("A").duration_s == 2.0


class _Page(HTMLParser):
    """Tags, attributes and text as a browser's tokenizer reads the page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: dict[str, str] = {}
        self._script: str | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._script = (dict(attrs).get("id") or "inline") if tag == "script" else None

    def handle_data(self, data):
        if self._script:
            self.scripts[self._script] = self.scripts.get(self._script, "") + data

    def handle_endtag(self, tag):
        self._script = None


def test_the_comparison_page_keeps_hostile_content_as_data(tmp_path):
    chats, old, new = write_two_runs(tmp_path)
    out = tmp_path / "cmp.html"
    assert main(["report", str(old), str(new), "--input", str(chats), "-o", str(out)]) == 0
    html = out.read_text(encoding="utf-8")
    page = _Page()
    page.feed(html)
    assert [a for t, a in page.tags if t == "script"] == [{"type": "application/json", "id": "report-data"}, {}]
    assert "</script><script>window" not in html and "<b>" not in html.split("<main>")[1].split("</main>")[0]
    data = json.loads(page.scripts["report-data"])
    reasons = [v["reason"] for c in data["conversations"] for run in c["runs"] if run
               for r in run["results"].values() for v in r["verdicts"]]
    assert HOSTILE_REASON in reasons
    # the id with quotes and markup: an attribute value and a text, read back exactly
    rows = [a for t, a in page.tags if t == "tr" and "row" in (a.get("class") or "")]
    assert QUOTED_ID in [a["data-id"] for a in rows]
    assert html.count(QUOTED_ID) == 0 and "conv &#34;quoted&#34; &#39;it&#39; &lt;b&gt;" in html
    assert not re.search(r"\.innerHTML|outerHTML|insertAdjacentHTML|document\.write", html)


def test_the_comparison_page_reads_without_javascript(tmp_path):
    chats, old, new = write_two_runs(tmp_path)
    made = write_report([old, new], tmp_path / "cmp.html", inputs=[chats])
    html = made.path.read_text(encoding="utf-8")
    page = _Page()
    page.feed(html)
    rows = [a for t, a in page.tags if t == "tr" and "row" in (a.get("class") or "")]
    # failures first (in either run), then input order; the new conversation last
    assert [a["data-id"] for a in rows] == ["conv-0000", "conv-0003", "conv-0004", "conv-0005", "conv-0001",
                                            "conv-0002", "conv-0006", "conv-0007", QUOTED_ID]
    assert {a["data-id"] for a in rows if a["data-differs"] == "1"} == {"conv-0000", "conv-0003", "conv-0005",
                                                                        "conv-0006", QUOTED_ID}
    cells = [a for t, a in page.tags if t == "td" and a.get("data-metric") == "turn_relevancy"]
    assert len(cells) == 2 * len(rows)  # a column per run and metric
    assert html.count('data-status="missing"') == 2 * 2  # conv-0006 in B, the new id in A, both metrics
    assert "only differences (5)" in html and "run B" in html and "2 min 05 s" in html and "$0.0123" in html
    assert ">unknown<" in html  # the old run's duration
    assert "run failed in A: RuntimeError" in html
    assert "<td>missing <span class=\"muted\">(run A)</span></td>" in html  # an input error: which run met it


def test_one_run_page_lists_rows_facts_and_labelled_histograms(tmp_path):
    chats, results = write_sample_run(tmp_path, 8)
    data, _ = report_data(read_run(results), inputs=[chats])
    assert [c["id"] for c in data["conversations"]][:3] == ["conv-0003", "conv-0004", "conv-0005"]
    html = write_report(results, tmp_path / "r.html", inputs=[chats]).path.read_text(encoding="utf-8")
    assert 'id="filter-differs"' not in html and 'id="runs-table"' in html
    hist = re.search(r'<svg class="hist".*?</svg>', html, re.S)
    assert hist and ">score<" in hist.group(0) and ">0.5<" in hist.group(0) and ">6<" in hist.group(0)
    # the graph is folded away, after the conversations
    assert html.index('id="conversations"') < html.index('id="graphs"') and "<details open" not in html


def test_without_input_each_run_shows_the_turns_its_header_names_when_unchanged(tmp_path):
    import hashlib

    chats, old, new = write_two_runs(tmp_path)
    conversations = [json.loads(x) for x in chats.read_text(encoding="utf-8").splitlines()]
    conversations[0]["turns"][1]["content"] = "The new bot's reply."
    chats_new = tmp_path / "chats-new.jsonl"
    chats_new.write_text("".join(json.dumps(c) + "\n" for c in conversations), encoding="utf-8")

    def point(results, path, sha):
        lines = [json.loads(x) for x in results.read_text(encoding="utf-8").splitlines()]
        header = lines[0] if lines[0]["type"] == "header" else {"type": "header", "format": 1}
        header["inputs"] = [{"path": path, "sha256": sha}]
        body = lines[1:] if lines[0]["type"] == "header" else lines
        results.write_text("".join(json.dumps(x) + "\n" for x in [header, *body]), encoding="utf-8")

    point(old, str(chats), hashlib.sha256(chats.read_bytes()).hexdigest())  # absolute
    point(new, "chats-new.jsonl", hashlib.sha256(chats_new.read_bytes()).hexdigest())  # beside the results file
    data, problems = report_data([read_run(old), read_run(new)])
    assert problems == []
    first = next(c for c in data["conversations"] if c["id"] == "conv-0000")
    assert first["turns"] is None  # no --input: no shared turns
    assert first["runs"][0]["turns"][1]["content"].startswith("Answer 1: go to Orders")
    assert first["runs"][1]["turns"][1]["content"] == "The new bot's reply."
    # a file changed since the run (another SHA-256) is not used
    point(new, "chats-new.jsonl", "0" * 64)
    data, _ = report_data([read_run(old), read_run(new)])
    first = next(c for c in data["conversations"] if c["id"] == "conv-0000")
    assert first["runs"][1]["turns"] is None and first["runs"][0]["turns"]
    # one run: its header's input fills the turns as --input would
    single, _ = report_data(read_run(old))
    assert all(c["turns"] for c in single["conversations"] if c["id"].startswith("conv-"))
    # --input is shown only under the run that judged it, never another version's replies under run B
    point(old, "moved-old.jsonl", hashlib.sha256(chats.read_bytes()).hexdigest())
    point(new, "moved-new.jsonl", hashlib.sha256(chats_new.read_bytes()).hexdigest())
    for given, judged_by in ((chats, 0), (chats_new, 1)):
        data, problems = report_data([read_run(old), read_run(new)], inputs=[given])
        first = next(c for c in data["conversations"] if c["id"] == "conv-0000")
        assert first["turns"] is None and first["runs"][1 - judged_by]["turns"] is None
        assert first["runs"][judged_by]["turns"] == conversations[0]["turns"] if judged_by else \
            first["runs"][0]["turns"][1]["content"].startswith("Answer 1: go to Orders")
        (said,) = problems
        assert said == (f"--input {given} is not what {(new, old)[judged_by]} judged (its header names other input "
                        "files): their turns are not shown under that run")


def test_pass_rate_from_lines_counts_errors_as_the_summary_record_does():
    run = _run("r", _line("a"), _line("b", "failed", 0.1), _line("c", "error", None), _line("d", "not_applicable", None))
    facts = run.facts("A")
    assert facts.pass_rate == {"m": pytest.approx(1 / 3)} and facts.source["pass_rate"] == "lines"


def test_a_jury_and_an_offline_run_read_in_human_words_everywhere_a_person_reads(tmp_path):
    """The judge cell of a jury says who judges and how (never the jurors' Python repr, 25 lines); an offline run
    costs nothing (not "unknown") and the cache being on is not news (no ``cache=True``)."""
    jurors = [{"name": f"llm:{m}", "repeat": 0, "settings": {"temperature": 0.0, "timeout": 120.0, "max_retries": 3}}
              for m in ("gpt-4.1-mini", "gpt-4.1-nano", "gpt-4o-mini")]
    header = {"type": "header", "judgegraph": "0.1.0", "judges": [{"name": "jury(majority):llm:gpt-4.1-mini,llm:gpt-4.1-"
              "nano,llm:gpt-4o-mini", "settings": {"model": ["openai:gpt-4.1-mini"], "max_tries": 3, "cache": True,
              "aggregate": "majority", "quorum": 2, "jurors": jurors}, "prompts": {}}]}
    jury = tmp_path / "jury.jsonl"
    jury.write_text("\n".join(json.dumps(r) for r in (header, _line("c1"))) + "\n")
    (judge,) = read_run(str(jury)).facts("A").judges
    assert judge == ("jury of 3: gpt-4.1-mini, gpt-4.1-nano, gpt-4o-mini (majority, quorum 2) · 3 tries · "
                     "temperature 0 · timeout 120 s · 3 retries")
    chats = tmp_path / "chats.jsonl"
    chats.write_text(json.dumps({"id": "c1", "turns": [{"role": "user", "content": "Hi, when do you open?"},
                                                       {"role": "assistant", "content": "We open at 9."}]}) + "\n")
    out, page = tmp_path / "off.jsonl", tmp_path / "off.html"
    assert main(["eval", str(chats), "--repeat", "3", "--out", str(out), "-q", "--no-progress"]) in (0, 1)
    assert main(["report", str(out), "-o", str(page)]) in (0, 1)
    text = page.read_text()
    assert "no cost (offline judge)" in text and "offline all-MiniLM-L6-v2, asked 3 times (majority, quorum 2)" in text
    for raw in ("cache=True", "jurors=", "{&#39;", "{'", "repeat="):
        assert raw not in text
