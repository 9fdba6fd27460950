"""Re-judging chosen windows of a checkpointed thread (judgegraph.steering)."""

import asyncio

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from judgegraph.judges.scripted import ScriptedChatModel
from judgegraph.metrics.relevancy import create_conversation_relevance_metric, create_turn_relevancy_metric
from judgegraph.steering import RejudgeError, arejudge, rejudge, rejudge_result

YES = {"reason": "It answers the question.", "verdict": "yes"}
NO = {"reason": "Too vague for the strict rubric.", "verdict": "no"}
MATH = {"id": "math", "turns": [
    {"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "2+2 equals 4."},
    {"role": "user", "content": "What about 3+3?"}, {"role": "assistant", "content": "The capital of France is Paris."},
    {"role": "user", "content": "Can you solve 5+5?"}, {"role": "assistant", "content": "5+5 equals 10."},
]}
CFG = {"configurable": {"thread_id": "t1"}}


def judged(factory=create_turn_relevancy_metric):
    first = ScriptedChatModel(rules=[("Paris", [{"reason": "Off topic.", "verdict": "no"}])], default=YES,
                              section="reply_to_judge")
    graph = factory(model=first, checkpointer=InMemorySaver())
    res = graph.invoke({"conversation": MATH}, CFG)["results"][graph.name]
    assert res.score == pytest.approx(2 / 3) and first.call_count == 3
    return graph


def strict_model():
    # says "no" only under the new rubric: a call made with the old one would say "yes"
    return ScriptedChatModel(rules=[("STRICT RUBRIC", [NO])], default=YES)


@pytest.mark.parametrize("factory", [create_turn_relevancy_metric, create_conversation_relevance_metric])
def test_rejudge_one_window_costs_one_call_and_replaces_its_verdict(factory):
    graph = judged(factory)
    strict = strict_model()
    res = rejudge(graph, CFG, model=strict, verdict_ids=["0"], rubric="STRICT RUBRIC: exact numbers only.")
    assert strict.call_count == 1 and "STRICT RUBRIC" in strict.prompts[0] and "2+2 equals 4." in strict.prompts[0]
    assert [v.verdict for v in res.verdicts] == ["no", "no", "yes"]  # replaced, not appended
    assert res.verdicts[0].reason == NO["reason"]
    assert res.score == pytest.approx(1 / 3) and res.status == "failed"
    assert "1 of 3" in res.reason
    state = graph.get_state(CFG)
    assert state.next == () and state.values["results"][graph.name].score == pytest.approx(1 / 3)
    assert len(state.values["verdicts"]) == 3


def test_rejudge_with_a_prompt_file(tmp_path):
    graph = judged()
    path = tmp_path / "judge_turn.md"
    path.write_text("<!--\nplaceholders:\n  reply: the reply\n-->\nMY PROMPT. Judge <reply_to_judge>{{ reply }}"
                    "</reply_to_judge>\n", encoding="utf-8")
    m = ScriptedChatModel(rules=[("MY PROMPT", [NO])], default=YES)
    res = rejudge(graph, CFG, model=m, verdict_ids=[2], prompt=path)
    assert m.call_count == 1 and m.prompts[0].startswith("MY PROMPT") and "5+5 equals 10." in m.prompts[0]
    assert [v.verdict for v in res.verdicts] == ["yes", "no", "no"]


def test_arejudge_runs_the_same_path_async():
    graph = judged()
    strict = strict_model()
    res = asyncio.run(arejudge(graph, CFG, model=strict, verdict_ids=["0", "2"], rubric="STRICT RUBRIC"))
    assert strict.call_count == 2
    assert [v.verdict for v in res.verdicts] == ["no", "no", "no"] and res.score == 0.0


def test_judge_errors_on_rejudge_are_reported_not_scored():
    graph = judged()
    broken = ScriptedChatModel(default="not json at all")
    res = rejudge(graph, CFG, model=broken, verdict_ids=["1"], rubric="STRICT RUBRIC")
    assert res.verdicts[1].verdict is None and res.verdicts[1].error
    assert res.score == 1.0 and len(res.errors) == 1 and "window 1" in res.errors[0].where


def test_bad_requests_are_clear_errors():
    graph = judged()
    with pytest.raises(RejudgeError, match="no window 7"):
        rejudge(graph, CFG, model=strict_model(), verdict_ids=["7"], rubric="x")
    with pytest.raises(RejudgeError, match="no checkpointer"):
        rejudge(create_turn_relevancy_metric(model=strict_model()), CFG, model=strict_model(), rubric="x")
    with pytest.raises(RejudgeError, match="run the graph"):
        rejudge(graph, {"configurable": {"thread_id": "never-run"}}, model=strict_model(), rubric="x")


def test_rejudge_result_keeps_the_other_verdicts_without_calls():
    from judgegraph.data.conversation import as_conversation

    first = ScriptedChatModel(rules=[("Paris", [{"reason": "Off topic.", "verdict": "no"}])], default=YES,
                              section="reply_to_judge")
    old = create_conversation_relevance_metric(model=first, window_size=2, threshold=0.8).invoke(
        {"conversation": MATH})["results"]["conversation_relevance"]
    strict = strict_model()
    new = rejudge_result(old.model_dump(mode="json"), as_conversation(MATH), model=strict, windows=[1],
                         rubric="STRICT RUBRIC")
    assert strict.call_count == 1
    assert [v.verdict for v in new.verdicts] == ["yes", "no", "yes"]
    assert new.verdicts[1].reason == NO["reason"] and new.verdicts[0].reason == YES["reason"]
    assert (new.threshold, new.details["window_size"], new.details["rejudged"]["windows"]) == (0.8, 2, [1])
    assert new.usage.calls == 3  # two kept calls + one new


def test_rejudge_on_a_reviewed_thread_keeps_the_person_s_verdict_and_can_pause_again():
    from langgraph.types import Command

    first = ScriptedChatModel(default=YES)
    graph = create_turn_relevancy_metric(model=first, review=True, checkpointer=InMemorySaver())
    out = graph.invoke({"conversation": MATH}, CFG)
    assert out["__interrupt__"] and not out.get("results")
    out = graph.invoke(Command(resume={"1": {"verdict": "no", "reason": "Paris."}}), CFG)
    assert out["results"]["turn_relevancy"].score == pytest.approx(2 / 3)
    strict = strict_model()
    res = rejudge(graph, CFG, model=strict, verdict_ids=["0"], rubric="STRICT RUBRIC")
    assert res.score == pytest.approx(1 / 3) and strict.call_count == 1
    assert res.verdicts[1].review is not None and res.verdicts[1].verdict == "no"
    # review=True: the new verdicts go to the person first
    assert rejudge(graph, CFG, model=strict, verdict_ids=["2"], rubric="STRICT RUBRIC", review=True) is None
    state = graph.get_state(CFG)
    assert state.next == ("review_verdicts",)
    out = graph.invoke(Command(resume=[]), CFG)
    assert out["results"]["turn_relevancy"].score == 0.0
