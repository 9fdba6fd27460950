"""agreement(): people's labels matched to the verdicts of every metric (the verdict record is the same for
built-ins, session judges, make_metric and a user's metric), and the figures per metric."""

from __future__ import annotations

import json
import uuid

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from metric_cases import CASES, CONVERSATION, IDS, model

from judgegraph import agreement
from judgegraph.trust import Label


def record(result, cid="capabilities"):
    return {"type": "conversation", "conversation_id": cid, "results": {result.key: result.model_dump(mode="json")}}


def flipped(verdict):
    return {"none": "unresolved", "unresolved": "none"}.get(verdict, "no" if verdict == "yes" else "yes")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_agreement_of_every_metric_from_a_review_and_labels(case, tmp_path):
    from sklearn.metrics import cohen_kappa_score

    graph = case.build(model("yes"), review=True, checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": uuid.uuid4().hex}}
    shown = graph.invoke({"conversation": CONVERSATION}, cfg)["__interrupt__"][0].value["verdicts"]
    first = shown[0]
    decision = flipped(first["verdict"])
    result = graph.invoke(Command(resume={first["id"]: {"verdict": decision, "reason": "A person disagreed."}}),
                          cfg)["results"][case.name]
    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps(record(result)) + "\n")
    others = [v for v in result.verdicts if v.id != first["id"] and v.verdict is not None]
    labels = tmp_path / "labels.jsonl"  # the person agrees with every other verdict
    labels.write_text("".join(json.dumps({"conversation_id": "capabilities", "metric": case.name,
                                          "verdict_id": v.id, "label": v.verdict}) + "\n" for v in others))

    report = agreement(results, [labels], resamples=50)

    assert not report.unmatched and not report.label_errors
    m = report.metrics[case.name]
    assert m.kind == "categorical" and m.n == 1 + len(others)
    (dis,) = m.disagreements  # the review: the person's decision beside what the judge had said, and its reason
    assert (dis.verdict_id, dis.human, dis.judge, dis.source) == (first["id"], decision, first["verdict"], "review")
    assert dis.reason == first["reason"] and dis.reason
    assert m.agreement == pytest.approx(len(others) / (1 + len(others)))
    humans = [decision] + [v.verdict for v in others]
    judges = [first["verdict"]] + [v.verdict for v in others]
    expected = cohen_kappa_score(humans, judges) if len(set(humans) | set(judges)) > 1 else None
    assert m.kappa == (None if expected != expected else pytest.approx(expected, abs=1e-9))  # nan: undefined
    assert sum(map(sum, m.confusion)) == m.n
    one = agreement(str(results), str(labels), metrics=case.name, resamples=0)  # one file and one metric, as strings
    assert one.metrics[case.name].n == m.n


def _turn_relevancy(verdict="yes"):
    case = next(c for c in CASES if c.name == "turn_relevancy")
    return case.build(model(verdict)).invoke({"conversation": CONVERSATION})["results"]["turn_relevancy"]


def test_a_label_names_its_verdict_by_turn_number_as_everywhere_in_judgegraph():
    result = _turn_relevancy()
    last = result.verdicts[-1]
    turn = max(last.turns) + 1  # 1-based: the reply of the last exchange
    report = agreement([record(result)], [Label("capabilities", "turn-relevancy", "no", turn=turn, source="t")],
                       resamples=0)
    (dis,) = report.metrics["turn_relevancy"].disagreements
    assert dis.verdict_id == last.id and dis.turns == [t + 1 for t in last.turns] and dis.judge == "yes"


def test_labels_that_match_nothing_are_listed_with_why():
    result = _turn_relevancy()
    labels = [Label("capabilities", "turn_relevancy", "yes", verdict_id="99", source="a"),
              Label("capabilities", "turn_relevancy", "yes", turn=1, source="b"),  # the system turn: no verdict
              Label("nobody", "turn_relevancy", "yes", source="c"),
              Label("capabilities", "user_frustration", "yes", source="d")]
    report = agreement([record(result)], labels, resamples=0)
    whys = {u.label.source: u.why for u in report.unmatched}
    assert "no verdict '99'" in whys["a"] and "no verdict is about turn 1" in whys["b"]
    assert whys["c"] == "no such conversation in the results"
    assert whys["d"] == "no user_frustration result for this conversation"
    assert report.metrics == {}


def test_a_label_on_a_verdict_the_judge_could_not_make_is_a_judge_error_not_a_disagreement():
    result = _turn_relevancy()
    data = record(result)
    broken = data["results"]["turn_relevancy"]["verdicts"][0]
    broken.update(verdict=None, error="judge failed")
    report = agreement([data], [Label("capabilities", "turn_relevancy", "no", verdict_id=broken["id"])], resamples=0)
    m = report.metrics["turn_relevancy"]
    assert m.n == 0 and m.disagreements == [] and [p.verdict_id for p in m.judge_errors] == [broken["id"]]
    assert report.below(0.5) == ["turn_relevancy: no labelled verdict the judge judged"]


def test_ordinal_labels_get_weighted_kappa_and_spearman_and_result_level_numbers_compare_with_the_score():
    from scipy.stats import spearmanr
    from sklearn.metrics import cohen_kappa_score

    records, labels = [], []
    humans, judges = [1, 2, 3, 4, 5, 3, 2], [1, 2, 4, 4, 3, 3, 1]
    for i, (h, j) in enumerate(zip(humans, judges)):
        records.append({"type": "conversation", "conversation_id": f"c{i}", "results": {"rating": {
            "key": "rating", "score": j, "reason": f"judge says {j}", "verdicts": []}}})
        labels.append(Label(f"c{i}", "rating", float(h)))
    m = agreement(records, labels, resamples=100).metrics["rating"]
    assert m.kind == "ordinal" and m.scale == [1, 2, 3, 4, 5]
    assert m.weighted_kappa == pytest.approx(cohen_kappa_score(humans, judges, weights="quadratic"), abs=1e-9)
    assert m.spearman == pytest.approx(spearmanr(humans, judges).statistic, abs=1e-9)
    assert {(p.conversation_id, p.human, p.judge, p.reason) for p in m.disagreements} == {
        ("c2", 3.0, 4.0, "judge says 4"), ("c4", 5.0, 3.0, "judge says 3"), ("c6", 2.0, 1.0, "judge says 1")}
    assert set(m.intervals) == {"agreement", "kappa", "weighted_kappa", "spearman"}


def test_a_label_file_label_replaces_a_review_of_the_same_verdict(tmp_path):
    result = _turn_relevancy()
    data = record(result)
    v = data["results"]["turn_relevancy"]["verdicts"][0]
    v["review"] = {"by": "ann", "judge_verdict": "yes", "judge_reason": "r", "note": ""}
    v["verdict"] = "no"
    report = agreement([data], [Label("capabilities", "turn_relevancy", "yes", verdict_id=v["id"], source="file")],
                       resamples=0)
    m = report.metrics["turn_relevancy"]
    assert m.n == 1 and m.disagreements == []
    assert agreement([data], reviews=False).labels == 0


def test_the_html_section_tells_an_undefined_kappa_from_a_figure_the_kind_has_not():
    from judgegraph.outputs.agreement import agreement_section

    result = _turn_relevancy("yes")
    labels = [Label("capabilities", "turn_relevancy", "yes", verdict_id=v.id) for v in result.verdicts]
    report = agreement([record(result)], labels, resamples=10)
    m = report.metrics["turn_relevancy"]
    assert m.kappa is None and m.agreement == 1.0  # one label on both sides: kappa says nothing
    row = agreement_section(report).split("<tr><td>turn_relevancy</td>", 1)[1].split("</tr>", 1)[0]
    cells = row.split('<td class="n">')[1:]
    assert "1.000" in cells[1] and "undefined" in cells[2] and "—" in cells[3] and "—" in cells[4]


def test_odd_values_in_a_results_record_are_named_not_crashed_on():
    # a verdict's fields are typed (judgegraph.runs.VerdictLine): a record whose verdict is not text is named
    # (the field at fault) and left out, as read_run leaves out such a line of a results file; the others are read
    odd = {"type": "conversation", "conversation_id": "c", "results": {"m": {"key": "m", "value": True, "verdicts": [
        {"id": "1", "turns": [1], "verdict": {"odd": 1}, "reason": "r"}]}}}
    fine = {"type": "conversation", "conversation_id": "d", "results": {"m": {"key": "m", "value": True, "verdicts": [
        {"id": "2", "turns": [1], "verdict": "no", "reason": "r"}]}}}
    labels = [Label("c", "m", "yes", turn=2), Label("d", "m", "no", verdict_id="2"), Label("d", "m", "yes")]
    report = agreement([odd, fine], labels, resamples=0)
    assert report.unreadable == ["record 1: field 'results.m.verdicts.0.verdict': Input should be a valid string"]
    assert [u.why for u in report.unmatched] == ["no such conversation in the results"]
    assert report.metrics["m"].n == 2 and report.metrics["m"].disagreements == []


@pytest.mark.parametrize(("yes", "no"), [("relevant", "irrelevant"), ("pass", "fail"), ("True", "false"), (1, 0)])
def test_agree_reads_the_label_words_align_reads(yes, no, tmp_path, capsys):
    """One vocabulary for a yes/no verdict (trust.labels.polarity): a person's relevant/pass/true/1 is the judge's
    yes, so labels that agree with the judge give agreement 1 and kappa 1, never 0 and 'disagreements'."""
    from judgegraph.cli import main

    data = record(_turn_relevancy())
    verdicts = data["results"]["turn_relevancy"]["verdicts"]
    verdicts[0]["verdict"] = "no"
    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps(data) + "\n")
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"conversation_id": "capabilities", "metric": "turn_relevancy",
                                          "verdict_id": v["id"], "label": yes if v["verdict"] == "yes" else no}) + "\n"
                              for v in verdicts))
    report = agreement(results, labels, resamples=0)
    m = report.metrics["turn_relevancy"]
    assert (m.n, m.agreement, m.kappa, m.disagreements, report.label_errors) == (len(verdicts), 1.0, 1.0, [], [])
    assert main(["agree", str(results), "--labels", str(labels), "--no-reviews", "--min-kappa", "0.9"]) == 0


def test_a_label_outside_the_yes_no_words_is_an_error_naming_file_line_and_word(tmp_path, capsys):
    from judgegraph.cli import main

    data = record(_turn_relevancy())
    verdicts = data["results"]["turn_relevancy"]["verdicts"]
    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps(data) + "\n")
    labels = tmp_path / "labels.jsonl"
    words = ["relevant", "meh"] + ["relevant"] * (len(verdicts) - 2)
    labels.write_text("".join(json.dumps({"conversation_id": "capabilities", "metric": "turn_relevancy",
                                          "verdict_id": v["id"], "label": w}) + "\n" for v, w in zip(verdicts, words)))
    report = agreement(results, labels, resamples=0)
    (error,) = report.label_errors
    assert str(error).startswith(f"{labels}:2: label: \"meh\" is not a word of turn_relevancy's yes/no verdicts")
    assert report.metrics["turn_relevancy"].n == len(verdicts) - 1
    assert main(["agree", str(results), "--labels", str(labels), "--no-reviews"]) == 3
    assert f"{labels}:2" in capsys.readouterr().err
