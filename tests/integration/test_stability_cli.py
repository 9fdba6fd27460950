"""``judgegraph stability`` and ``eval --gate stable`` on results judged through the real eval path: three runs
of the loopback server's scripted judge merged into votes, and a metric whose verdicts carry votes."""

import json

import pytest

from judgegraph.cli import main
from judgegraph.data.results import MetricResult
from judgegraph.loaders import load_files
from judgegraph.runs import read_run
from judgegraph.runs.resultsfile import ResultsWriter
from judgegraph.runs.runner import ConversationOutcome
from judgegraph.trust.stability import graph_rescorer, merge_runs
from tests.kit.openai_server import FakeOpenAIServer, ScriptedResponder, structured

pytestmark = pytest.mark.integration

YES = structured({"reason": "It answers.", "verdict": "yes"})
NO = structured({"reason": "It does not answer.", "verdict": "no"})
IDS = ("steady", "broken", "wobbly")
#: the replies the scripted judge calls irrelevant, in each of three runs: "wobbly-3" flips in run 1
IRRELEVANT = [{"broken-2", "broken-3", "wobbly-2", "wobbly-3"}, {"broken-2", "broken-3", "wobbly-2"},
              {"broken-2", "broken-3", "wobbly-2", "wobbly-3"}]


def conversation(cid):
    turns = []
    for k in (1, 2, 3):
        turns += [{"role": "user", "content": f"Question {k}?"}, {"role": "assistant", "content": f"Answer {cid}-{k}."}]
    return {"id": cid, "turns": turns}


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """(the inputs, a results file of the three runs merged into votes, the first run's file)."""
    tmp = tmp_path_factory.mktemp("stability")
    chats = tmp / "chats.jsonl"
    chats.write_text("".join(json.dumps(conversation(c)) + "\n" for c in IDS), encoding="utf-8")
    runs = []
    for r, irrelevant in enumerate(IRRELEVANT):
        out = tmp / f"run{r}.jsonl"
        responder = ScriptedResponder([(lambda req, bad=irrelevant: any(f"Answer {b}." in req.text for b in bad), [NO])],
                                      default=YES)
        with FakeOpenAIServer(responder) as server:
            assert main(["eval", str(chats), "--model", "gpt-4.1-mini", "--base-url", server.base_url,
                         "--window-size", "1", "--no-cache", "--out", str(out), "-q", "--no-progress"]) == 1
        runs.append({cid: MetricResult.model_validate(conv.results["turn_relevancy"].data())
                     for cid, conv in read_run(out).conversations.items()})
    conversations = {c.conversation.id: c.conversation for c in load_files([chats]).conversations}
    merged = tmp / "merged.jsonl"
    writer = ResultsWriter(merged)
    for cid in IDS:
        res = merge_runs([run[cid] for run in runs], graph_rescorer(conversations))
        writer.outcome(ConversationOutcome(cid, str(chats), {res.key: res}))
    writer.close()
    return chats, merged, tmp / "run0.jsonl"


def test_stability_reports_the_flip_rate_the_per_repeat_scores_and_the_failures_that_hold(judged, capsys):
    chats, merged, _ = judged
    assert main(["stability", str(merged), "--json", "--input", str(chats)]) == 0
    report = json.loads(capsys.readouterr().out)
    m = report["metrics"]["turn_relevancy"]
    assert (m["verdicts"], m["flipped"], m["stable"], m["flaky"]) == (9, 1, 2, 1)
    assert m["flip_rate"] == pytest.approx(1 / 9) and m["max_spread"] == pytest.approx(1 / 3)
    assert (m["failures"], m["failures_holding"], m["jury"]) == (2, 1, None)
    by = {r["conversation_id"]: r for r in report["results"]}
    wobbly = by["wobbly"]
    assert wobbly["label"] == "flaky" and wobbly["rescored"] == "rescored" and wobbly["failure_holds"] is False
    assert wobbly["scores"] == pytest.approx([1 / 3, 2 / 3, 1 / 3]) and wobbly["passed"] == [False, True, False]
    assert by["broken"]["failure_holds"] is True and by["broken"]["rescored"] == "identical"


def test_without_the_inputs_a_flaky_result_is_not_rescored_and_says_so(judged, capsys):
    _, merged, _ = judged
    assert main(["stability", str(merged), "--json", "-m", "turn-relevancy"]) == 0
    wobbly = {r["conversation_id"]: r for r in json.loads(capsys.readouterr().out)["results"]}["wobbly"]
    assert wobbly["scores"] is None and wobbly["failure_holds"] is None and "needs the conversation" in wobbly["note"]
    assert main(["stability", str(merged)]) == 0
    shown = capsys.readouterr().out
    assert "stability across repeats" in shown and "1 flaky results" in shown and "(1 unknown)" in shown
    assert "no verdict was judged by several judges" in shown


def test_results_judged_once_say_no_repeats(judged, capsys):
    _, _, once = judged
    assert main(["stability", str(once), "--json"]) == 0
    m = json.loads(capsys.readouterr().out)["metrics"]["turn_relevancy"]
    assert m["with_repeats"] == 0 and m["flip_rate"] is None and m["mean_spread"] is None and m["stable"] == 0
    assert main(["stability", str(once)]) == 0
    assert "no repeats" in capsys.readouterr().out


def test_an_unreadable_results_line_is_named_and_exit_3_the_rest_still_reported(judged, tmp_path, capsys):
    _, merged, _ = judged
    torn = tmp_path / "torn.jsonl"
    torn.write_text(merged.read_text(encoding="utf-8") + '{"type": "conversation", "conversation_id": "x', "utf-8")
    assert main(["stability", str(torn), "--json"]) == 3
    captured = capsys.readouterr()
    assert json.loads(captured.out)["metrics"]["turn_relevancy"]["flipped"] == 1
    assert f"{torn}:4: a torn last line" in captured.err  # named as torn, as diff and report name it


def test_usage_errors(judged, tmp_path, capsys):
    _, merged, _ = judged
    assert main(["stability", str(tmp_path / "none.jsonl")]) == 3  # a missing file: exit 3 in every command
    assert main(["stability", str(merged), "-m", "role-adherence"]) == 2
    assert "no result of role-adherence" in capsys.readouterr().err


def test_eval_gate_stable_fails_only_on_failures_that_hold_in_every_repeat(tmp_path, capsys):
    def chats(*replies):
        path = tmp_path / f"chats{len(replies)}.jsonl"
        path.write_text("".join(json.dumps({"id": cid, "turns": [{"role": "user", "content": "Hi?"},
                                                                 {"role": "assistant", "content": text}]}) + "\n"
                                for cid, text in replies), encoding="utf-8")
        return str(path)

    holds, flips = ("holds", "votes=no,no,no"), ("flips", "votes=no,yes,no")
    metric = ["-m", "tests.kit.voted_metric:create", "-q", "--no-progress"]
    both = chats(holds, flips, ("fine", "votes=yes,yes,yes"))
    assert main(["eval", both, *metric, "--out", str(tmp_path / "a.jsonl")]) == 1  # no gate: both failures count
    capsys.readouterr()
    assert main(["eval", both, *metric, "--out", str(tmp_path / "b.jsonl"), "--gate", "stable"]) == 1
    assert "1 failure(s) hold in every repeat; 1 not counted because they flipped" in capsys.readouterr().out
    only_flips = chats(flips)
    assert main(["eval", only_flips, *metric, "--out", str(tmp_path / "c.jsonl"), "--gate", "stable"]) == 0
    assert "0 failure(s) hold in every repeat; 1 not counted because they flipped" in capsys.readouterr().out


def test_the_gate_re_scores_a_flaky_failure_from_the_inputs_and_finds_it_passed_in_a_repeat(judged):
    from judgegraph.trust.stability import gate_for_run

    chats, merged, _ = judged
    inputs = [c.conversation for c in load_files([chats]).conversations]
    gate = gate_for_run(merged, inputs)
    assert [r.conversation_id for r in gate.holding] == ["broken"] and not gate.unknown
    assert [(r.conversation_id, r.passed) for r in gate.flipped] == [("wobbly", [False, True, False])]
    blind = gate_for_run(merged)  # no inputs: wobbly is not known to hold, and not counted either
    assert [r.conversation_id for r in blind.unknown] == ["wobbly"] and len(blind.holding) == 1


@pytest.mark.parametrize("command", [["stability"], ["agree", "--no-reviews", "--labels", "LABELS"]])
def test_json_of_a_results_file_holding_a_lone_surrogate_writes_its_escape(judged, tmp_path, bare_env, command):
    """A conversation id can hold a lone surrogate (JSON "\\udfff", from the input): ``--json`` writes the same
    escape, as ``diff --json`` does (one JSON writer, common.json_text), and reads back as the same id."""
    import subprocess
    import sys

    _, merged, _ = judged
    odd = tmp_path / "odd.jsonl"
    odd.write_text(merged.read_text(encoding="utf-8").replace('"steady"', '"odd\\udfffid"'), encoding="utf-8")
    labels = tmp_path / "labels.jsonl"
    labels.write_text(json.dumps({"conversation_id": "odd\udfffid", "metric": "turn_relevancy", "turn": 2,
                                  "label": "no"}) + "\n", encoding="utf-8")  # the judge said yes: a disagreement
    argv = [str(labels) if a == "LABELS" else a for a in command]
    done = subprocess.run([sys.executable, "-m", "judgegraph.cli", command[0], str(odd), *argv[1:], "--json"],
                          capture_output=True, env=bare_env, timeout=120)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert "odd\\udfffid" in done.stdout.decode("utf-8")
    report = json.loads(done.stdout)
    found = report["results"] if command[0] == "stability" else report["metrics"]["turn_relevancy"]["disagreements"]
    assert "odd\udfffid" in {r["conversation_id"] for r in found}
