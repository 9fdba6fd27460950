"""Every capability for every metric: each test runs over every built-in metric,
``make_metric`` and the one-file example metric (``examples/reply_language.py``),
with a scripted LLM judge that answers any of their requests (metric_cases)."""

from __future__ import annotations

import uuid

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from metric_cases import CASES, CONVERSATION, IDS, LATEST_TURNS, Case, model

from judgegraph.apps import judge_node
from judgegraph.apps.metrics import latest_runner
from judgegraph.cost.dryrun import DryRunJudge
from judgegraph.data.conversation import as_conversation
from judgegraph.data.results import MetricResult
from judgegraph.metrics import get_metric
from judgegraph.outputs.transcripts import transcript_of
from judgegraph.steering import rejudge, rejudge_result


def run(case: Case, verdict: str = "yes", **options):
    m = model(verdict)
    graph = case.build(m, **options)
    return m, graph, graph.invoke({"conversation": CONVERSATION})["results"][case.name]


def attempts(result: MetricResult):
    return [*result.transcript, *(a for v in result.verdicts for a in v.transcript)]


def flip(case: Case, verdict):
    """A person's decision that disagrees with the judge's ``verdict`` label."""
    return {"none": "unresolved"}.get(verdict.verdict, "no" if verdict.verdict == "yes" else "yes")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_request_behind_a_result_is_kept_and_shown(case):
    m, _, res = run(case)
    kept = attempts(res)
    assert m.call_count > 0 and len(kept) == m.call_count  # one transcript entry per request, none twice
    for prompt in m.prompts:  # each request sent is in a transcript, exactly as sent
        assert any(all(msg["content"] in prompt for msg in a.messages) for a in kept)
    assert all(a.request for a in kept)  # each is keyed by its request (re-judging replays by it)
    shown = transcript_of(res.model_dump(mode="json"))  # `judgegraph show` prints this
    assert "no verdicts" not in shown and "(no transcript kept" not in shown
    for a in kept:
        assert a.messages[-1]["content"] in shown


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_review_pauses_with_every_verdict_then_scores_the_person_s_decision(case):
    graph = case.build(model("yes"), review=True, checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": uuid.uuid4().hex}}
    out = graph.invoke({"conversation": CONVERSATION}, cfg)
    (pause,) = out["__interrupt__"]
    shown = pause.value["verdicts"]
    assert pause.value["metric"] == case.name and shown and all(v["id"] for v in shown)
    unreviewed = run(case)[2]
    target = next(v for v in unreviewed.verdicts if v.id == shown[0]["id"])
    decision = flip(case, target)
    res = graph.invoke(Command(resume={shown[0]["id"]: {"verdict": decision, "reason": "A person disagreed."}}),
                       cfg)["results"][case.name]
    reviewed = next(v for v in res.verdicts if v.id == shown[0]["id"])
    assert reviewed.verdict == decision and reviewed.review is not None
    assert reviewed.review.judge_verdict == target.verdict
    assert res.score is not None and unreviewed.score is not None
    assert res.score > unreviewed.score if decision in ("yes", "none") else res.score < unreviewed.score


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_rejudging_one_verdict_pays_only_for_it(case):
    first, _, old = run(case, "yes")
    chosen = old.verdicts[0]
    again = model("no")
    metric = {"reply_language": "examples.reply_language:SPEC",  # a metric from a file, by its import path
              "resolves_issue": case.build(model("yes"))}.get(case.name)  # make_metric: its graph
    new = rejudge_result(old.model_dump(mode="json"), as_conversation(CONVERSATION), model=again,
                         verdict_ids=[chosen.id], options=case.options, metric=metric)
    redone = set(new.details["rejudged"]["verdicts"])
    assert chosen.id in redone
    requests = {a.request for a in attempts(old)}
    assert 0 < again.call_count < first.call_count or len(requests) == 1  # one request judged every verdict
    assert again.call_count == sum(1 for a in attempts(new) if not a.cached and a.latency_s is not None
                                   and a not in attempts(old))
    by_id = {v.id: v for v in new.verdicts}
    assert by_id[chosen.id].reason == "Scripted no." or by_id[chosen.id].verdict != chosen.verdict
    for v in old.verdicts:  # the others are kept as they were
        if v.id not in redone:
            assert by_id[v.id].verdict == v.verdict and by_id[v.id].reason == v.reason


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_rejudging_a_checkpointed_thread(case):
    graph = case.build(model("yes"), checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": uuid.uuid4().hex}}
    old = graph.invoke({"conversation": CONVERSATION}, cfg)["results"][case.name]
    again = model("no")
    new = rejudge(graph, cfg, model=again, verdict_ids=[old.verdicts[-1].id])
    assert again.call_count >= 1 and new is not None
    assert graph.get_state(cfg).values["results"][case.name].score == new.score


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_latest_scope_judges_only_the_latest_exchange_where_the_metric_is_per_exchange(case):
    m = model("yes")
    graph = case.build(m)
    res = latest_runner(graph).invoke({"conversation": as_conversation(CONVERSATION)})["results"][case.name]
    full = run(case)[0]
    if case.windowed:
        assert res.verdicts and all(set(v.turns) <= LATEST_TURNS for v in res.verdicts)
        assert m.call_count < full.call_count
    else:  # a question about the whole session: judged as a whole, and its spec says so
        assert m.call_count == full.call_count
        assert case.name == "resolves_issue" or get_metric(case.name).scope == "conversation"
    node = judge_node(graph, scope="latest", output="result")
    out = node.invoke({"messages": [{"type": "human", "content": "Bonjour, vous ouvrez quand ?"},
                                    {"type": "ai", "content": "Nous ouvrons à 9 h."}]})
    assert out["judgements"][case.name].status in ("passed", "failed", "not_applicable")


#: Metrics whose later calls depend on how many items an earlier call extracts: the dry run counts one each.
PER_EXTRACTED_ITEM = {"conversation_completeness", "knowledge_retention"}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_dry_run_estimates_the_calls_the_run_makes(case):
    m, _, res = run(case)
    dry = DryRunJudge("llm:scripted")
    assert case.build(dry).invoke({"conversation": CONVERSATION})["results"][case.name]
    estimate = dry.estimate()
    assert not estimate.uncounted_after  # every step's placeholder answer passes the metric's checks
    if case.name in PER_EXTRACTED_ITEM:
        assert 0 < estimate.total.calls <= m.call_count and "one extracted item each" in estimate.basis
    else:
        assert estimate.total.calls == m.call_count


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_turn_has_one_number_in_the_review_payload_ids_show_and_reasons(case):
    """Stored ``turns`` are 0-based indices; every place a person reads a turn (the review payload, a verdict's id,
    ``judgegraph show``, reasons, the HTML report's ``turnLabel``) names it by its 1-based number."""
    graph = case.build(model("no"), review=True, checkpointer=InMemorySaver())
    out = graph.invoke({"conversation": CONVERSATION}, {"configurable": {"thread_id": uuid.uuid4().hex}})
    res = run(case, "no")[2]
    by_id = {v.id: v for v in res.verdicts}
    for shown in out["__interrupt__"][0].value["verdicts"]:
        assert shown["turns"] == [t + 1 for t in by_id[shown["id"]].turns]
    text = transcript_of(res)
    for v in res.verdicts:
        if v.turns:
            numbers = ", ".join(str(t + 1) for t in sorted(v.turns))
            assert f"turn {numbers}" in text or f"turns {numbers}" in text
        for field in ("turn", "turns"):
            if field in type(v).id_fields:
                assert str(sorted(v.turns)[-1] + 1) in v.id.split("/")[type(v).id_fields.index(field)]
