"""Steering a judge with LangGraph: verdicts keyed by id, state updates that replace, human review."""

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from judgegraph import (
    create_conversation_completeness_metric,
    create_turn_contextual_relevancy_metric,
    create_turn_relevancy_metric,
)
from judgegraph.core.nodes import apply_review
from judgegraph.data.results import WindowVerdict, merge_verdicts
from judgegraph.judges.scripted import ScriptedChatModel

YES = {"reason": "on topic", "verdict": "yes"}
NO = {"reason": "about tulips", "verdict": "no"}
CONV = {"id": "c", "turns": [
    {"role": "user", "content": "How do I reset my password?"},
    {"role": "assistant", "content": "Open Settings, then Security, then Reset."},
    {"role": "user", "content": "And change my email?"},
    {"role": "assistant", "content": "OFF: Tulips bloom in spring."},
]}


def model():
    return ScriptedChatModel(rules=[("OFF:", [NO])], default=YES, section="reply_to_judge")


def cfg(thread="t"):
    return {"configurable": {"thread_id": thread}}


def test_merge_verdicts_replaces_by_id_and_keeps_order():
    a, b = WindowVerdict(window=0, verdict="yes"), WindowVerdict(window=1, verdict="no")
    merged = merge_verdicts([a, b], [WindowVerdict(window=1, verdict="yes"), WindowVerdict(window=2, verdict="no")])
    assert [(v.window, v.verdict) for v in merged] == [(0, "yes"), (1, "yes"), (2, "no")]


def test_update_state_before_reduce_score_replaces_a_verdict_instead_of_appending_one():
    graph = create_turn_relevancy_metric(model=model(), checkpointer=InMemorySaver(), interrupt_before=["reduce_score"])
    graph.invoke({"conversation": CONV}, cfg())
    (judged,) = [v for v in graph.get_state(cfg()).values["verdicts"] if v.verdict == "no"]
    fixed = judged.model_copy(update={"verdict": "yes", "reason": "a person says the tulips answer is fine"})
    graph.update_state(cfg(), {"verdicts": [fixed]}, as_node="judge_turn")
    result = graph.invoke(None, cfg())["results"]["turn_relevancy"]
    assert len(result.verdicts) == 2 and result.score == 1.0  # was 3 verdicts and 0.67 when lists appended


def test_review_interrupts_with_the_verdicts_and_a_resume_overrides_one():
    graph = create_turn_relevancy_metric(model=model(), review=True, checkpointer=InMemorySaver())
    assert "review_verdicts" in graph.get_graph().nodes
    out = graph.invoke({"conversation": CONV}, cfg())
    (pending,) = out["__interrupt__"]
    shown = {v["id"]: v["verdict"] for v in pending.value["verdicts"]}
    assert pending.value["metric"] == "turn_relevancy" and shown == {"0": "yes", "1": "no"}
    result = graph.invoke(Command(resume={"1": {"verdict": "yes", "reason": "the user asked for flowers"}}),
                          cfg())["results"]["turn_relevancy"]
    assert result.score == 1.0 and result.status == "passed"
    reviewed = result.verdicts[1]
    assert reviewed.review.by == "human" and reviewed.review.judge_verdict == "no"
    assert reviewed.review.judge_reason == "about tulips" and reviewed.reason == "the user asked for flowers"
    assert result.verdicts[0].review is None


def test_review_with_no_change_keeps_the_judges_verdicts():
    graph = create_turn_relevancy_metric(model=model(), review=True, checkpointer=InMemorySaver())
    graph.invoke({"conversation": CONV}, cfg())
    result = graph.invoke(Command(resume=[]), cfg())["results"]["turn_relevancy"]  # [] (or None values): keep all
    assert result.score == 0.5 and all(v.review is None for v in result.verdicts)


def test_review_decisions_as_a_list_of_records():
    v = [WindowVerdict(window=0, verdict="yes"), WindowVerdict(window=1, verdict="no", reason="off")]
    (first, second) = apply_review(v, [{"id": "1", "verdict": "yes", "reason": "fine", "by": "ana"}])
    assert first is v[0] and (second.verdict, second.review.by, second.review.judge_reason) == ("yes", "ana", "off")


def test_review_of_an_unknown_id_or_an_invalid_verdict_is_a_clear_error():
    v = [WindowVerdict(window=0, verdict="yes")]
    with pytest.raises(ValueError, match="no verdict with id 7; the verdicts are 0"):
        apply_review(v, {"7": "no"})
    with pytest.raises(ValueError, match="verdict"):
        apply_review(v, {"0": "maybe"})


def test_review_on_statements_and_on_a_session_judge():
    ctx_conv = {"id": "r", "turns": [
        {"role": "user", "content": "Refund window?"},
        {"role": "assistant", "content": "30 days.", "retrieval_context": ["Refunds within 30 days.", "OFF: Tulips."]},
    ]}
    m = ScriptedChatModel(default={"verdicts": [{"statement": 1, "reason": "r", "verdict": "no"}]})
    graph = create_turn_contextual_relevancy_metric(review=True, checkpointer=InMemorySaver())  # offline statements
    out = graph.invoke({"conversation": ctx_conv}, cfg("ctx"))
    ids = [v["id"] for v in out["__interrupt__"][0].value["verdicts"]]
    before = graph.get_state(cfg("ctx")).values
    result = graph.invoke(Command(resume={i: "yes" for i in ids}), cfg("ctx"))["results"]["turn_contextual_relevancy"]
    assert result.score == 1.0 and all(v.review for v in result.verdicts) and len(before["verdicts"]) == len(ids)
    del m

    goals = ScriptedChatModel(rules=[
        ("list what the user wanted", [{"goals": [{"request": "reset password", "asked_in_turns": [1]}]}]),
    ], default={"reason": "not done", "verdict": "no", "answered_in_turns": []})
    session = create_conversation_completeness_metric(model=goals, review=True, checkpointer=InMemorySaver())
    out = session.invoke({"conversation": CONV}, cfg("s"))
    if "__interrupt__" in out:  # the scripted extraction matched: one goal to review
        (goal,) = out["__interrupt__"][0].value["verdicts"]
        res = session.invoke(Command(resume={goal["id"]: "yes"}), cfg("s"))["results"]["conversation_completeness"]
        assert res.score == 1.0 and res.verdicts[0].review.judge_verdict == goal["verdict"]
    else:
        pytest.fail(f"the completeness judge did not reach review: {out['results']}")
