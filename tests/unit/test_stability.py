"""Stability across repeats and a jury's agreement, from the votes behind verdicts (results built here)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from metric_cases import CASES, CONVERSATION, IDS, model

from judgegraph.core.scoring import make_result
from judgegraph.data.conversation import as_conversation
from judgegraph.data.results import MetricResult, Verdict, Vote, WindowVerdict
from judgegraph.runs.resultsfile import ResultsWriter
from judgegraph.runs.runner import ConversationOutcome
from judgegraph.trust.stability import (
    as_repeated,
    flipped,
    graph_rescorer,
    jury_agreement,
    merge_runs,
    result_stability,
    stability,
    stable_gate,
)

JUDGE = "llm:scripted"


def window(i: int, labels: list[str | None], *, judge: str = JUDGE, verdict: str | None = None) -> WindowVerdict:
    """Window ``i`` judged once per repeat with ``labels`` (None: that repeat failed); its verdict the majority."""
    votes = [Vote(judge=judge, repeat=r, verdict=lab, reason=f"r{r}", error=None if lab else "timeout")
             for r, lab in enumerate(labels)]
    answered = [lab for lab in labels if lab]
    majority = verdict or max(set(answered), key=answered.count)
    return WindowVerdict(window=i, turns=[2 * i, 2 * i + 1], verdict=majority, votes=votes)


def result(cid: str, verdicts: list[Verdict], threshold: float = 0.5) -> MetricResult:
    return make_result("turn_relevancy", cid, verdicts, judge=JUDGE, threshold=threshold)


def share_rescorer(result: MetricResult, verdicts: list[Verdict]) -> MetricResult:
    """The share-of-yes rule of the results built here, standing in for a metric's graph."""
    return make_result(result.key, result.conversation_id, verdicts, judge=result.judge, threshold=result.threshold)


def test_flip_rate_counts_verdicts_whose_repeats_disagree_and_ignores_failed_repeats():
    v = [window(0, ["yes", "yes", "yes"]), window(1, ["yes", "no", "yes"]), window(2, ["no", None, "no"])]
    assert [flipped(x) for x in v] == [False, True, False]
    s = result_stability(result("c", v), share_rescorer)
    assert (s.repeats, s.verdicts, s.flipped, s.failed_votes) == (3, 3, 1, 1)
    assert s.flip_rate == pytest.approx(1 / 3) and s.label == "flaky"


def test_per_repeat_scores_use_the_rescorer_and_give_the_spread_and_pass_fail():
    v = [window(0, ["yes", "no", "no"], verdict="no"), window(1, ["no", "no", "yes"], verdict="no"),
         window(2, ["yes", "yes", "yes"])]
    res = result("c", v, threshold=0.6)  # aggregate: 1 of 3 yes, failed
    s = result_stability(res, share_rescorer)
    assert s.scores == pytest.approx([2 / 3, 1 / 3, 2 / 3]) and s.passed == [True, False, True]
    assert s.spread == pytest.approx(1 / 3) and s.rescored == "rescored"
    assert res.status == "failed" and s.failure_holds is False  # it passed in repeats 0 and 2


def test_repeat_zero_of_each_verdict_is_what_that_repeat_answered():
    v = window(3, ["no", "yes", None])
    assert [as_repeated(v, r).verdict for r in range(3)] == ["no", "yes", None]
    assert as_repeated(v, 2).error == "timeout" and as_repeated(v, 1).votes == [] and as_repeated(v, 1).window == 3


def test_identical_repeats_need_no_rescoring_and_their_failure_holds():
    res = result("c", [window(0, ["no"] * 4), window(1, ["yes"] * 4)], threshold=0.9)
    s = result_stability(res)  # no rescorer needed: every repeat answered alike
    assert s.rescored == "identical" and s.scores == [0.5] * 4 and s.passed == [False] * 4
    assert s.label == "stable" and s.spread == 0.0 and s.failure_holds is True


def test_without_a_rescorer_a_flaky_result_stays_at_the_verdict_level():
    s = result_stability(result("c", [window(0, ["no", "yes", "no"], verdict="no")]))
    assert s.scores is None and s.spread is None and s.failure_holds is None and s.label == "flaky"
    assert "needs the conversation" in s.note


def test_results_without_votes_say_no_repeats_not_zeros():
    plain = make_result("turn_relevancy", "c", [WindowVerdict(window=0, verdict="no")], judge=JUDGE, threshold=0.5)
    report = stability([plain])
    m = report.metrics["turn_relevancy"]
    assert m.flip_rate is None and m.mean_spread is None and m.jury is None and m.count("flaky") == 0
    s = report.results[0]
    assert s.label is None and s.failure_holds is True  # judged once: its failure is what it is
    data = report.to_json()
    assert data["metrics"]["turn_relevancy"]["flip_rate"] is None and data["results"] == []


def test_the_gate_counts_only_failures_that_hold_in_every_repeat():
    holds = result("holds", [window(0, ["no"] * 3), window(1, ["no"] * 3)])
    flips = result("flips", [window(0, ["no", "yes", "no"], verdict="no"), window(1, ["no", "yes", "no"], verdict="no")])
    passes = result("passes", [window(0, ["yes"] * 3)])
    gate = stable_gate([holds, flips, passes], rescore=share_rescorer)
    assert [r.conversation_id for r in gate.holding] == ["holds"]
    assert [r.conversation_id for r in gate.flipped] == ["flips"] and gate.failed
    assert "1 failure(s) hold in every repeat; 1 not counted because they flipped" in gate.summary()
    only_flaky = stable_gate([flips, passes])  # no rescorer: unknown, not counted either
    assert not only_flaky.failed and len(only_flaky.unknown) == 1 and "could not be re-scored" in only_flaky.summary()


def test_a_results_file_is_read_with_its_header_and_summary_lines(tmp_path):
    path = tmp_path / "r.jsonl"
    w = ResultsWriter(path)
    w.write({"type": "header", "format": 1, "judgegraph": "0", "metrics": []})
    for res in (result("a", [window(0, ["yes", "no", "yes"]), window(1, ["yes"] * 3)]),
                result("b", [window(0, ["no"] * 3)])):
        w.outcome(ConversationOutcome(res.conversation_id, "f.jsonl", {res.key: res}))
    w.write({"type": "summary", "ended_at": "x"})
    w.close()
    report = stability(path, metrics=["turn-relevancy"])
    m = report.metrics["turn_relevancy"]
    assert (m.verdicts, m.flipped, m.count("stable"), m.count("flaky")) == (3, 1, 1, 1)
    assert json.loads(json.dumps(report.to_json()))["metrics"]["turn_relevancy"]["flip_rate"] == pytest.approx(1 / 3)
    assert stability(path, metrics=["other"]).metrics == {}


# -- a jury --------------------------------------------------------------------------------------------------


def jury_verdict(i: int, labels: dict[str, str | None]) -> WindowVerdict:
    votes = [Vote(judge=name, verdict=lab, error=None if lab else "HTTP 500") for name, lab in labels.items()]
    return WindowVerdict(window=i, verdict="yes", votes=votes)


def test_jury_kappa_matches_statsmodels_and_counts_failed_jurors():
    from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

    rng = np.random.default_rng(5)
    verdicts, rows = [], []
    for i in range(30):
        truth = rng.choice(["yes", "no"])
        labels = {j: (truth if rng.random() < 0.8 else ("no" if truth == "yes" else "yes")) for j in ("a", "b", "c")}
        verdicts.append(jury_verdict(i, labels))
        rows.append([list(labels.values()).count("no"), list(labels.values()).count("yes")])
    verdicts.append(jury_verdict(30, {"a": "yes", "b": None, "c": "no"}))  # b failed: left out of the kappa
    jury = jury_agreement("m", verdicts, resamples=100)
    assert jury is not None and jury.items == 30 and jury.left_out == 1 and jury.labels == ["no", "yes"]
    assert jury.kappa == pytest.approx(sm_fleiss_kappa(np.array(rows), method="fleiss"), abs=1e-9)
    assert jury.interval is not None and jury.interval.low <= jury.kappa <= jury.interval.high
    by = {j.judge: j for j in jury.jurors}
    assert by["b"].failed == 1 and by["b"].votes == 31 and by["a"].failed == 0
    # the last verdict: a says yes, c no, b failed: a tie, no majority, not compared
    assert by["a"].compared == 30 and by["b"].compared == 30


def test_per_juror_agreement_with_the_majority():
    verdicts = [jury_verdict(0, {"a": "yes", "b": "yes", "odd": "no"}),
                jury_verdict(1, {"a": "no", "b": "no", "odd": "no"}),
                jury_verdict(2, {"a": "yes", "b": "yes", "odd": "no"})]
    jury = jury_agreement("m", verdicts, resamples=0)
    assert jury is not None and jury.interval is None
    assert {j.judge: j.agreement for j in jury.jurors} == pytest.approx({"a": 1.0, "b": 1.0, "odd": 1 / 3})


# -- the metric's own rule, for every metric ------------------------------------------------------------------


def _with_votes(first: MetricResult, second: MetricResult) -> MetricResult:
    """``first`` whose every verdict was judged twice: repeat 0 as ``first`` answered, repeat 1 as ``second``."""
    others = {v.id: v for v in second.verdicts}

    def voted(v: Verdict) -> Verdict:
        w = others.get(v.id, v)
        return v.model_copy(update={"votes": [Vote(judge=first.judge, repeat=0, verdict=v.verdict, score=v.score),
                                              Vote(judge=first.judge, repeat=1, verdict=w.verdict, score=w.score)]})

    return first.model_copy(update={"verdicts": [voted(v) for v in first.verdicts]})


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_metric_is_rescored_per_repeat_by_its_own_graph_or_says_why_not(case):
    conversation = as_conversation(CONVERSATION)
    yes = case.build(model("yes")).invoke({"conversation": CONVERSATION})["results"][case.name]
    no = case.build(model("no")).invoke({"conversation": CONVERSATION})["results"][case.name]
    assert yes.score != no.score
    metric = {"reply_language": "examples.reply_language:SPEC", "resolves_issue": case.build(model("yes"))}.get(
        case.name)
    rescore = graph_rescorer({conversation.id: conversation}, metric=metric, options=case.options)
    s = result_stability(_with_votes(yes, no), rescore)
    assert s.repeats == 2 and s.verdicts == len(yes.verdicts)
    if case.name == "response_relevancy":  # its verdicts are made by a node after the judge's answer (embeddings)
        assert s.scores is None and s.note.startswith("not re-scored"), s.note
        return
    assert s.flipped > 0 and s.rescored == "rescored", s.note
    assert s.scores == pytest.approx([yes.score, no.score]) and s.passed == [yes.passed, no.passed]
    assert s.label == "flaky" and s.spread == pytest.approx(abs(yes.score - no.score))


def test_merge_runs_makes_each_run_a_repeat_and_the_plurality_the_verdict():
    runs = [result("c", [WindowVerdict(window=0, verdict=a, reason=f"run {i}"), WindowVerdict(window=1, verdict=b)])
            for i, (a, b) in enumerate([("no", "yes"), ("yes", "yes"), ("no", None)])]
    merged = merge_runs(runs, share_rescorer)
    first, second = merged.verdicts
    assert [(v.repeat, v.verdict) for v in first.votes] == [(0, "no"), (1, "yes"), (2, "no")]
    assert first.verdict == "no" and first.reason == "run 0" and second.verdict == "yes" and merged.score == 0.5
    s = result_stability(merged, share_rescorer)
    assert s.flipped == 1 and s.failed_votes == 1 and s.scores == pytest.approx([0.5, 1.0, 0.0])
    with pytest.raises(ValueError, match="not of one metric"):
        merge_runs([runs[0], result("other", [])])


def test_a_jury_with_repeats_flips_per_juror_and_each_repeat_is_the_jurors_plurality():
    votes = [Vote(judge=j, repeat=r, verdict=lab) for r, labels in enumerate([("yes", "yes", "no"), ("no", "no", "no"),
                                                                               ("yes", None, "no")])
             for j, lab in zip("abc", labels)]
    v = WindowVerdict(window=0, verdict="yes", votes=votes)
    assert flipped(v)  # a said yes, then no
    assert [as_repeated(v, r).verdict for r in range(3)] == ["yes", "no", "yes"]  # repeat 2: a tie, the aggregate's
    tied = WindowVerdict(window=0, verdict=None, votes=[Vote(judge="a", verdict="yes"), Vote(judge="b", verdict="no")])
    assert as_repeated(tied, 0).verdict is None and as_repeated(tied, 0).error == "the jurors tied"
    steady = WindowVerdict(window=0, verdict="no", votes=[Vote(judge=j, repeat=r, verdict=lab) for r in range(2)
                                                          for j, lab in (("a", "no"), ("b", "yes"))])
    assert not flipped(steady)  # the jurors disagree, but each one says the same in every repeat
