"""``diff_runs`` on constructed results files: every kind of pair (errors and n/a included), changed verdicts
matched by id with both reasons, pass rates and McNemar counts, older files (no header, no verdict ids, no
status), unreadable and torn lines, the settings comparison from headers, and Markdown that data cannot break."""

import html
import json
import re
from html.parser import HTMLParser

import pytest
from markdown_it import MarkdownIt

from judgegraph.compare import diff_runs
from judgegraph.compare.markdown import to_markdown
from judgegraph.data.results import JudgeErrorInfo, MetricResult, WindowVerdict

METRIC = "turn_relevancy"


def result(cid, status, score=None, verdicts=(), *, metric=METRIC, judge="llm:gpt-4.1-mini", threshold=0.5):
    """A metric result as ``judgegraph eval`` writes it; ``verdicts``: (label or None for a judge error, reason)."""
    vs = [WindowVerdict(window=i, turns=[2 * i + 1], verdict=v, reason=r if v else "", error=None if v else r)
          for i, (v, r) in enumerate(verdicts)]
    errors = [JudgeErrorInfo(where=f"window {i}", step="turn_relevancy/judge_turn", message="bad JSON")
              for i, (v, _) in enumerate(verdicts) if v is None]
    if score is None and status in ("passed", "failed"):
        score = 1.0 if status == "passed" else 0.0
    return MetricResult(key=metric, conversation_id=cid, score=score, threshold=threshold,
                        passed={"passed": True, "failed": False}.get(status), status=status, reason=f"{cid} {status}",
                        judge=judge, verdicts=vs, errors=errors).model_dump(mode="json")


def line(cid, *results, error=None, **extra):
    return {"type": "conversation", "conversation_id": cid, "source": f"chats.jsonl:{cid}",
            "results": {r["key"]: r for r in results}, "error": error, **extra}


def write(path, records, tail=""):
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail, encoding="utf-8")
    return path


YES, NO = ("yes", "It answers the refund question."), ("no", "It talks about the weather instead.")

OLD = [
    line("a", result("a", "passed", 1.0, [YES, YES])),
    line("b", result("b", "failed", 0.5, [YES, NO]), ),
    line("c", result("c", "passed", 1.0, [YES, YES])),
    line("d", result("d", "passed", 1.0, [YES])),
    line("e", result("e", "error", None, [(None, "invalid JSON after 3 tries")])),
    line("f", result("f", "error", None, [(None, "invalid JSON after 3 tries")])),
    line("g", result("g", "passed", 1.0, [YES])),
    line("h", result("h", "not_applicable", None)),
    line("i", result("i", "passed", 1.0, [YES])),
    line("k", result("k", "passed", 1.0, [YES])),
]
NEW = [
    line("a", result("a", "failed", 0.5, [YES, NO])),
    line("b", result("b", "passed", 1.0, [YES, YES])),
    line("c", result("c", "passed", 0.5, [NO, YES], threshold=0.5)),
    line("d", result("d", "error", None, [(None, "timeout")])),
    line("e", result("e", "passed", 1.0, [YES])),
    line("f", result("f", "error", None, [(None, "invalid JSON after 3 tries")])),
    line("g", result("g", "not_applicable", None)),
    line("h", result("h", "failed", 0.0, [NO])),
    line("j", result("j", "passed", 1.0, [YES])),
    line("k", error="RuntimeError: the app crashed"),
]


@pytest.fixture
def runs(tmp_path):
    return write(tmp_path / "old.jsonl", OLD), write(tmp_path / "new.jsonl", NEW)


def test_every_pair_is_classed_and_an_error_is_never_a_pass_or_a_fail(runs):
    diff = diff_runs(*runs)
    kinds = {p.conversation_id: p.kind for p in diff.pairs}
    assert kinds == {"a": "regressed", "b": "fixed", "c": "unchanged", "d": "errored", "e": "recovered",
                     "f": "still_error", "g": "now_not_applicable", "h": "was_not_applicable", "i": "missing",
                     "j": "new", "k": "errored"}
    m = diff.metrics[METRIC]
    assert (m.mcnemar.regressed, m.mcnemar.fixed, m.mcnemar.method) == (1, 1, "exact")
    assert m.mcnemar.p_value == 1.0
    # pass rate = passed / (passed + failed + errors); n/a left out
    assert (m.old.passed, m.old.failed, m.old.errors, m.old.not_applicable) == (6, 1, 2, 1)
    assert (m.new.passed, m.new.failed, m.new.errors, m.new.not_applicable) == (4, 2, 3, 1)
    assert m.old.rate == pytest.approx(6 / 9) and m.new.rate == pytest.approx(4 / 9)  # errors are not passes
    assert [p.conversation_id for p in diff.regressions] == ["a"]
    assert {p.conversation_id for p in diff.undecided} == {"d", "f", "k"}
    crashed = next(p for p in diff.pairs if p.conversation_id == "k")
    assert crashed.new is not None and "the app crashed" in crashed.new.reason


def test_score_deltas_pair_only_scores_on_both_sides(runs):
    diff = diff_runs(*runs)
    deltas = {p.conversation_id: p.delta for p in diff.pairs}
    assert deltas["a"] == -0.5 and deltas["b"] == 0.5 and deltas["c"] == -0.5
    assert deltas["d"] is None and deltas["i"] is None and deltas["g"] is None
    scores = diff.metrics[METRIC].scores
    assert scores.n == 3 and scores.mean == pytest.approx((-0.5 + 0.5 - 0.5) / 3)  # a, b, c


def test_each_changed_verdict_is_matched_by_id_with_both_reasons(runs):
    diff = diff_runs(*runs)
    by = {p.conversation_id: p for p in diff.pairs}
    (flip,) = by["a"].verdicts
    assert (flip.verdict_id, flip.turns) == ("1", [4])
    assert (flip.old.verdict, flip.old.reason) == ("yes", YES[1])
    assert (flip.new.verdict, flip.new.reason) == ("no", NO[1])
    assert [v.verdict_id for v in by["c"].verdicts] == ["0"]  # still passing, but a verdict flipped
    assert by["c"] in diff.changed() and by["i"] in diff.changed()
    assert by["d"].verdicts == []  # an error side: no verdict comparison
    h = diff.changed()
    assert h[0].kind == "regressed"  # what needs a look first


def test_older_files_without_header_ids_or_status_are_compared(tmp_path):
    def old_style(cid, passed, verdict):
        r = result(cid, "passed" if passed else "failed", verdicts=[("yes", "fine"), verdict])
        del r["status"]
        for v in r["verdicts"]:
            del v["id"]  # written before ids were stored: the window gives it
        return line(cid, r)

    old = write(tmp_path / "old.jsonl", [old_style("x", True, ("yes", "fine"))])
    new = write(tmp_path / "new.jsonl", [old_style("x", False, ("no", "off topic"))])
    diff = diff_runs(old, new)
    (pair,) = diff.pairs
    assert pair.kind == "regressed"
    assert [(v.verdict_id, v.old.verdict, v.new.verdict) for v in pair.verdicts] == [("1", "yes", "no")]
    assert diff.settings.unknown == "unknown: no header in OLD and NEW"
    assert diff.settings.same_judging is None


def test_unreadable_and_torn_lines_are_named_and_the_rest_compared(tmp_path):
    old = write(tmp_path / "old.jsonl", [OLD[0], OLD[1]])
    new = tmp_path / "new.jsonl"
    new.write_text(json.dumps(NEW[0]) + "\n" + "{not json\n" + '["a list"]\n'
                   + json.dumps({"id": "chat-1", "turns": []}) + "\n"
                   + json.dumps(line("q", {**result("q", "passed"), "status": "great"})) + "\n"
                   + json.dumps(NEW[1])[:40], encoding="utf-8")
    diff = diff_runs(old, new)
    assert [p.split(": ", 1)[0] for p in diff.problems] == [f"{new}:{n}" for n in (2, 3, 4, 5, 6)]
    assert "not JSON" in diff.problems[0] and "got list" in diff.problems[1]
    assert "input file" in diff.problems[2] and "'results.turn_relevancy.status'" in diff.problems[3]
    assert "torn last line" in diff.problems[4]
    assert {p.conversation_id: p.kind for p in diff.pairs} == {"a": "regressed", "b": "missing"}


def test_a_conversation_judged_again_is_compared_by_its_latest_line(tmp_path):
    # the one reader's rule (judgegraph.runs.read_run): a later line for the same id (a watch retrying a thread whose
    # judge failed) replaces the earlier one; the diff says so in a note, and no line is a problem
    old = write(tmp_path / "old.jsonl", [line("a", result("a", "error", None, [(None, "timeout")])), OLD[0]])
    diff = diff_runs(old, write(tmp_path / "new.jsonl", [NEW[0]]))
    assert [p.kind for p in diff.pairs] == ["regressed"]
    assert diff.problems == [] and diff.notes == [f"OLD ({old}) judged 1 conversation(s) again: the latest line of "
                                                  "each is compared"]


def header(model="gpt-4.1-mini", temperature=0.0, prompt="3f2a9c1b7d4e", threshold=0.5, version="0.9.0"):
    return {"type": "header", "format": 1, "judgegraph": version, "started_at": "2026-11-26T05:00:00Z",
            "argv": ["eval"], "config": None,
            "metrics": [{"name": METRIC, "options": {"threshold": threshold, "window_size": 10}}],
            "judges": [{"name": f"llm:{model}", "settings": {"temperature": temperature},
                        "prompts": {"turn_relevancy/judge_turn": prompt}}],
            "inputs": [{"path": "chats.jsonl", "sha256": "ab" * 32}]}


def test_a_jurors_timeout_is_a_speed_setting_to_diff_as_to_resume(tmp_path):
    # one comparison (runheader.compare_headers): before, diff counted a juror's timeout as a judging change
    # while --resume let it change
    from judgegraph.runs.header import differences

    def jury(timeout, repeat=1):
        h = header()
        h["judges"][0]["settings"] = {"aggregate": "majority", "jurors": [
            {"name": "llm:a", "repeat": repeat, "settings": {"temperature": 0, "timeout": timeout}}]}
        return h

    old = write(tmp_path / "old.jsonl", [jury(1), OLD[0]])
    s = diff_runs(old, write(tmp_path / "slow.jsonl", [jury(9), NEW[0]])).settings
    assert s.same_judging is True and s.judging == [] and [d.name for d in s.speed] == ["jurors"]
    assert differences(jury(1), jury(9)) == []
    s = diff_runs(old, write(tmp_path / "more.jsonl", [jury(1, repeat=3), NEW[0]])).settings
    assert s.same_judging is False and [(d.what, d.name, d.speed) for d in s.differences] == [
        ("judge setting", "jurors", False)]
    assert [d.split(" changed")[0] for d in differences(jury(1), jury(1, repeat=3))] == [
        "judge llm:gpt-4.1-mini setting jurors"]


def test_the_judging_differs_from_the_headers(tmp_path):
    old = write(tmp_path / "old.jsonl", [header(), OLD[0]])
    same = write(tmp_path / "same.jsonl", [header(), NEW[0]])
    assert diff_runs(old, same).settings.differences == []
    assert diff_runs(old, same).settings.same_judging is True
    other = write(tmp_path / "other.jsonl", [header("gpt-4o", 0.7, "0000aaaa1111", 0.7, "1.0.0"), NEW[0]])
    s = diff_runs(old, other).settings
    assert s.same_judging is False
    assert [str(d) for d in s.differences] == [
        "judgegraph version: 0.9.0 → 1.0.0", "judge: llm:gpt-4.1-mini → llm:gpt-4o",
        "metric option turn_relevancy.threshold: 0.5 → 0.7"]
    prompt_only = write(tmp_path / "prompt.jsonl", [header(prompt="0000aaaa1111"), NEW[0]])
    s = diff_runs(old, prompt_only).settings
    assert s.same_judging is False
    assert [str(d) for d in s.differences] == ["prompt turn_relevancy/judge_turn: 3f2a9c1b7d4e → 0000aaaa1111"]
    temp = write(tmp_path / "temp.jsonl", [header(temperature=1.0), NEW[0]])
    assert [str(d) for d in diff_runs(old, temp).settings.differences] == ["judge setting temperature: 0.0 → 1.0"]
    faster = header()
    faster["judges"][0]["settings"].update(concurrency=64, timeout=30)  # how fast it is asked, not what it answers
    s = diff_runs(old, write(tmp_path / "faster.jsonl", [faster, NEW[0]])).settings
    # shown (the one header comparison --resume uses, which lets them change), marked speed, not a judging change
    assert (s.judging, s.same_judging) == ([], True)
    assert [(d.name, d.old, d.new, d.speed) for d in s.speed] == [("concurrency", None, 64, True),
                                                                  ("timeout", None, 30, True)]


def test_without_a_header_the_judging_is_unknown_but_the_results_lines_still_show_a_judge_change(tmp_path):
    old = write(tmp_path / "old.jsonl", [header(), OLD[0]])
    new = write(tmp_path / "new.jsonl", [NEW[0]])
    s = diff_runs(old, new).settings
    assert (s.unknown, s.same_judging, s.headers) == ("unknown: no header in NEW", None, (True, False))
    offline = write(tmp_path / "offline.jsonl", [line("a", result("a", "failed", judge="offline:all-MiniLM-L6-v2"))])
    s = diff_runs(new, offline).settings
    assert s.same_judging is False
    assert [(str(d), d.source) for d in s.differences] == [
        ("judge turn_relevancy: llm:gpt-4.1-mini → offline:all-MiniLM-L6-v2", "results")]


def test_metrics_filter(tmp_path):
    two = [line("a", result("a", "passed"), result("a", "passed", metric="knowledge_retention"))]
    after = [line("a", result("a", "failed"), result("a", "passed", metric="knowledge_retention"))]
    diff = diff_runs(write(tmp_path / "o.jsonl", two), write(tmp_path / "n.jsonl", after), metrics=["knowledge-retention"])
    assert list(diff.metrics) == ["knowledge_retention"] and [p.kind for p in diff.pairs] == ["unchanged"]


HOSTILE = ("a | b `code` <script>alert(1)</script> <img src=x onerror=alert(2)> @octocat **bold** "
           "[click](javascript:alert(3)) ![t](http://evil.example/t.png) ~~gone~~ <!-- c -->\nnext line | x")


class Cells(HTMLParser):
    """Tags and, per table row, the text of each cell."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.rows, self._cell = [], [], None

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.rows[-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def test_markdown_shows_hostile_reasons_as_text_without_breaking_the_tables(tmp_path):
    bad_id = "conv|<b>1</b>@team"
    old = write(tmp_path / "old.jsonl", [line(bad_id, result(bad_id, "passed", verdicts=[("yes", HOSTILE)]))])
    new = write(tmp_path / "new.jsonl", [line(bad_id, result(bad_id, "failed", verdicts=[("no", "`x` | @dev")]))])
    text = to_markdown(diff_runs(old, new))
    rendered = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"]).render(text)
    parsed = Cells()
    parsed.feed(rendered)
    # no markup from the data: only the tags the report writes itself
    assert set(parsed.tags) <= {"h3", "p", "strong", "table", "thead", "tbody", "tr", "th", "td", "h4", "details",
                                "summary", "br", "blockquote", "ul", "li"}, set(parsed.tags)
    assert "<script" not in rendered and "<img" not in rendered and "<a " not in rendered
    tables = [row for row in parsed.rows]
    widths = {len(r) for r in tables}
    assert widths == {11, 6, 8}  # summary, changed results, changed verdicts: no cell split by a "|"
    flip = next(r for r in tables if len(r) == 8 and r[4] == "yes")
    reason = flip[5]
    assert "a | b `code` <script>alert(1)</script>" in reason and "**bold**" in reason
    assert "[click](javascript:alert(3))" in reason and "![t](http://evil.example/t.png)" in reason
    assert flip[1] == "conv|<b>1</b>@\u200bteam" and "@\u200bdev" in flip[7]
    assert not re.search(r"@\w", html.unescape(re.sub(r"<[^>]+>", "", rendered)))  # no @mention left


def test_markdown_says_how_the_judging_differs_and_what_is_unknown(tmp_path):
    old = write(tmp_path / "old.jsonl", [header(), OLD[0]])
    new = write(tmp_path / "new.jsonl", [header(model="gpt-4o"), NEW[0]])
    text = to_markdown(diff_runs(old, new))
    assert "**The judging differs** — a flip may be the judge's, not the bot's:" in text
    assert "> - judge: llm:gpt-4.1-mini → llm:gpt-4o\n" in text
    text = to_markdown(diff_runs(write(tmp_path / "plain.jsonl", [OLD[0]]), new))
    assert "Judges, prompts and metric options: unknown: no header in OLD." in text


def test_markdown_stays_under_the_comment_limit_and_counts_what_it_leaves_out(tmp_path):
    reason = "@everyone | <b>" * 40
    old = write(tmp_path / "old.jsonl", [line(f"c{i}", result(f"c{i}", "passed", verdicts=[("yes", reason)]))
                                         for i in range(150)])
    new = write(tmp_path / "new.jsonl", [line(f"c{i}", result(f"c{i}", "failed", verdicts=[("no", reason)]))
                                         for i in range(150)])
    text = to_markdown(diff_runs(old, new))
    assert len(text) <= 60_000 < len(to_markdown(diff_runs(old, new), max_chars=10**9))
    assert "… and " in text and "more (`judgegraph diff --json` lists every one)" in text
    parsed = Cells()
    parsed.feed(MarkdownIt("commonmark", {"html": True}).enable("table").render(text))
    assert {len(r) for r in parsed.rows} == {11, 6, 8}


def test_pairs_are_listed_what_needs_a_look_first_then_in_input_order(tmp_path):
    old = write(tmp_path / "old.jsonl", [line("z", result("z", "passed"), position=2),
                                         line("y", result("y", "failed"), position=0),
                                         line("x", result("x", "passed"), position=1)])
    new = write(tmp_path / "new.jsonl", [line("x", result("x", "failed"), position=1),
                                         line("z", result("z", "failed"), position=2),
                                         line("y", result("y", "passed"), position=0)])
    assert [(p.conversation_id, p.kind) for p in diff_runs(old, new).changed()] == [
        ("x", "regressed"), ("z", "regressed"), ("y", "fixed")]


def test_runs_where_every_conversation_failed(tmp_path, capsys):
    from judgegraph.cli import main

    crashed = [line("a", error="RuntimeError: boom"), line("b", error="RuntimeError: boom")]
    old, new = write(tmp_path / "old.jsonl", crashed), write(tmp_path / "new.jsonl", crashed)
    assert diff_runs(old, new).pairs == []
    assert main(["diff", str(old), str(new)]) == 3  # nothing was compared: never a pass
    assert "no metric result to compare" in capsys.readouterr().err
    with_header = write(tmp_path / "h.jsonl", [header(), *crashed])  # the header names the metrics judged
    diff = diff_runs(with_header, with_header)
    assert [(p.conversation_id, p.kind) for p in diff.pairs] == [("a", "still_error"), ("b", "still_error")]
    assert diff.metrics[METRIC].old.rate == 0.0


def test_a_threshold_change_is_shown_on_the_pairs_it_may_explain(tmp_path):
    from judgegraph.compare.diff import change_text

    old = write(tmp_path / "old.jsonl", [line("a", result("a", "passed", 0.5))])
    new = write(tmp_path / "new.jsonl", [line("a", result("a", "failed", 0.5, threshold=0.6))])
    diff = diff_runs(old, new)
    (pair,) = diff.pairs
    assert change_text(pair) == "regressed (threshold 0.5 → 0.6)" and pair.delta == 0.0
    assert [str(d) for d in diff.settings.differences] == ["threshold turn_relevancy: 0.5 → 0.6"]
    assert "| regressed (threshold 0.5 → 0.6) |" in to_markdown(diff)


def test_diff_and_the_html_report_read_the_same_run_facts(tmp_path):
    # one derivation (judgegraph.runs.RunFile.facts): before, diff read judges, cost and duration only from the header
    # and summary and the HTML report also from the lines, so a file without them had a judge and a cost on one only
    from judgegraph.compare.diff import describe_run
    from judgegraph.runs import read_run

    summary = {"type": "summary", "duration_s": 12.5, "cost_usd": 0.02, "pass_rate": {METRIC: 0.75},
               "usage": {"calls": 9, "input_tokens": 100, "output_tokens": 20}}
    full = write(tmp_path / "full.jsonl", [header(), *OLD, summary])
    bare = write(tmp_path / "bare.jsonl", [{**r, "cost_usd": 0.001} for r in NEW])  # no header, no summary
    diff = diff_runs(full, bare)
    for side, path in (("old", full), ("new", bare)):
        assert diff.runs[side] == read_run(path).facts()
        assert diff.to_json()["runs"][side] == read_run(path).facts().to_json()
    old, new = diff.runs["old"], diff.runs["new"]
    assert (old.header, old.version, old.judge_names, old.duration_s, old.cost_usd, old.calls) == (
        True, "0.9.0", ["llm:gpt-4.1-mini"], 12.5, 0.02, 9)
    assert old.source["judges"] == "header" and old.source["pass_rate"] == "summary"
    assert (new.header, new.judge_names, new.cost_usd, new.source["cost_usd"]) == (
        False, ["llm:gpt-4.1-mini"], pytest.approx(0.01), "lines")
    assert describe_run(new) == f"{bare} (10 conversations, no header, judge llm:gpt-4.1-mini, $0.0100)"
    assert describe_run(old) == f"{full} (10 conversations, judgegraph 0.9.0, judge llm:gpt-4.1-mini, 12.5 s, $0.0200)"
