import asyncio

import pytest

from judgegraph.judges import resolve_judge
from judgegraph.judges.limiter import CallLimiter
from judgegraph.judges.llm import LLMJudge
from judgegraph.judges.scripted import ScriptedChatModel
from judgegraph.metrics.relevancy import create_conversation_relevance_metric, create_turn_relevancy_metric

YES = {"reason": "It answers the question.", "verdict": "yes"}
NO = {"reason": "It talks about something else.", "verdict": "no"}

MATH = {"id": "math", "turns": [
    {"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "2+2 equals 4."},
    {"role": "user", "content": "What about 3+3?"}, {"role": "assistant", "content": "The capital of France is Paris."},
    {"role": "user", "content": "Can you solve 5+5?"}, {"role": "assistant", "content": "5+5 equals 10."},
]}



def model(rules=(), default=YES, **kw):
    # keyed on the reply being judged: windows finish in any order
    return ScriptedChatModel(rules=list(rules), default=default, section="reply_to_judge", **kw)


def result(graph, conv=MATH):
    (res,) = graph.invoke({"conversation": conv})["results"].values()
    return res


def test_seed_example_window_2_scores_two_thirds_and_fails_0_8():
    m = model([("Paris", [NO])])
    res = result(create_conversation_relevance_metric(model=m, window_size=2, threshold=0.8))
    assert res.score == pytest.approx(2 / 3)
    assert res.passed is False and res.status == "failed"
    assert [v.verdict for v in res.verdicts] == ["yes", "no", "yes"]
    assert res.verdicts[1].turns == [3]
    assert "turn 4" in res.reason and "2 of 3" in res.reason
    assert m.call_count == 3  # one judge call per window, no reason call
    assert res.usage.calls == 3 and res.usage.input_tokens > 0 and not res.usage.estimated


def test_windows_hold_the_earlier_exchanges_as_context():
    m = model()
    create_conversation_relevance_metric(model=m, window_size=2).invoke({"conversation": MATH})
    last = next(p for p in m.prompts if "<reply_to_judge>\n5+5 equals 10." in p)
    earlier = last.split("<earlier_messages>")[1].split("</earlier_messages>")[0]
    assert "What about 3+3?" in earlier and "What is 2+2?" not in earlier


def test_all_relevant_passes_with_score_one():
    res = result(create_turn_relevancy_metric(model=model()))
    assert (res.score, res.passed, res.status) == (1.0, True, "passed")


def test_strict_mode_is_all_or_nothing_with_threshold_one():
    res = result(create_turn_relevancy_metric(model=model([("Paris", [NO])]), strict_mode=True, threshold=0.2))
    assert res.score == 0.0 and res.threshold == 1.0 and res.passed is False
    res = result(create_turn_relevancy_metric(model=model(), strict_mode=True))
    assert res.score == 1.0 and res.passed is True


def test_verdict_case_is_normalised():
    res = result(create_turn_relevancy_metric(model=model(default={"reason": "fine", "verdict": " YES "})))
    assert res.score == 1.0


def test_invalid_output_is_reasked_with_the_error_and_then_used():
    m = model([("Paris", ["this is not a tool call", {"reason": "ok", "verdict": "maybe"}, NO])])
    res = result(create_turn_relevancy_metric(model=m))
    v = res.verdicts[1]
    assert v.verdict == "no" and v.attempts == 3 and v.usage.calls == 3
    reasks = [p for p in m.prompts if "Paris" in p and "could not be used" in p]
    assert len(reasks) == 2 and "verdict" in reasks[-1]  # the validation error names the field
    assert res.errors == [] and res.score == pytest.approx(2 / 3)


def test_output_that_never_becomes_valid_is_a_counted_judge_error_not_a_verdict():
    m = model([("Paris", ["garbage"])])
    res = result(create_turn_relevancy_metric(model=resolve_judge(m, max_tries=2)))
    bad = res.verdicts[1]
    assert bad.verdict is None and bad.relevant is None and bad.attempts == 2
    assert "invalid output after 2 tries" in bad.error
    assert len(res.errors) == 1 and res.errors[0].where == "window 1 (turn 4)"
    assert res.score == 1.0  # 2 of 2 judged windows; the failed one is neither relevant nor irrelevant
    assert "Judged 2 of 3 verdicts; 1 judge errors." in res.reason
    assert res.details == {"window_size": 10, "windows": 3, "judged": 2}


def test_provider_exception_is_a_judge_error_and_the_rest_is_kept():
    m = model([("Paris", [RuntimeError("429 Too Many Requests")])])
    res = result(create_turn_relevancy_metric(model=m))
    assert res.verdicts[1].error == "RuntimeError: 429 Too Many Requests"
    assert [v.verdict for v in res.verdicts] == ["yes", None, "yes"]


def test_every_window_failing_is_status_error_with_no_score():
    res = result(create_turn_relevancy_metric(model=resolve_judge(model(default="nope"), max_tries=1)))
    assert res.status == "error" and res.score is None and res.passed is None and len(res.errors) == 3


def test_no_exchange_is_not_applicable_and_costs_nothing():
    m = model()
    res = result(create_turn_relevancy_metric(model=m), {"id": "u", "turns": [{"role": "user", "content": "hello?"}]})
    assert res.status == "not_applicable" and res.score is None and m.call_count == 0


def test_llm_reason_is_one_extra_node_and_call():
    m = ScriptedChatModel(rules=[("<reply_to_judge>\nThe capital", [NO]), ("<verdicts>", [{"reason": "One reply ignored the sum."}])], default=YES)
    graph = create_turn_relevancy_metric(model=m, reason="llm")
    res = result(graph)
    assert res.reason == "One reply ignored the sum."
    assert m.call_count == 4 and res.usage.calls == 4
    assert "write_reason" in graph.get_graph().nodes


def test_llm_reason_needs_an_llm_judge():
    with pytest.raises(ValueError, match="needs an LLM judge"):
        create_turn_relevancy_metric(reason="llm")


@pytest.mark.parametrize("kw,msg", [({"window_size": 0}, "window_size"), ({"threshold": 1.5}, "threshold")])
def test_bad_settings_are_clear_errors(kw, msg):
    with pytest.raises(ValueError, match=msg):
        create_turn_relevancy_metric(model=model(), **kw)


def test_bad_conversation_input_names_the_field():
    with pytest.raises(Exception, match=r"turns\.0\.role"):
        create_turn_relevancy_metric(model=model()).invoke({"conversation": {"turns": [{"role": "bot", "content": "x"}]}})


def test_invoke_ainvoke_batch_and_stream_agree():
    graph = create_conversation_relevance_metric(model=model([("Paris", [NO])]), window_size=2)
    sync = result(graph).score
    (a,) = asyncio.run(graph.ainvoke({"conversation": MATH}))["results"].values()
    batch = [next(iter(o["results"].values())).score for o in graph.batch([{"conversation": MATH}] * 3)]
    updates = [list(chunk)[0] for chunk in graph.stream({"conversation": MATH}, stream_mode="updates")]
    assert sync == a.score == batch[0] == batch[2] == pytest.approx(2 / 3)
    assert updates[0] == "window_turns" and updates.count("judge_turn") == 3 and updates[-1] == "reduce_score"


class SlowModel(ScriptedChatModel):
    async def _agenerate(self, messages, stop=None, run_manager=None, **kw):
        await asyncio.sleep(0.02)
        return self._generate(messages, stop, None, **kw)


def test_one_global_limit_on_judge_calls_in_flight():
    limiter = CallLimiter(3)
    judge = LLMJudge(SlowModel(rules=[], default=YES), limiter=limiter)
    graph = create_turn_relevancy_metric(model=judge)
    convs = [{**MATH, "id": f"c{i}"} for i in range(5)]
    outs = asyncio.run(graph.abatch([{"conversation": c} for c in convs]))
    assert len(outs) == 5 and limiter.peak == 3 and limiter.in_flight == 0


def test_limiter_bounds_threads_too():
    limiter = CallLimiter(2)
    judge = LLMJudge(model(), limiter=limiter)
    graph = create_turn_relevancy_metric(model=judge)
    graph.batch([{"conversation": {**MATH, "id": str(i)}} for i in range(4)])
    assert 1 <= limiter.peak <= 2


@pytest.mark.parametrize("factory,kw", [
    (create_turn_relevancy_metric, {}),
    (create_turn_relevancy_metric, {"reason": "llm"}),
    (create_conversation_relevance_metric, {}),
], ids=["turn_relevancy", "turn_relevancy_llm_reason", "conversation_relevance"])
def test_mermaid_snapshot(factory, kw, mermaid):
    drawing = factory(model=model(), **kw).get_graph().draw_mermaid(with_styles=False)
    assert drawing == mermaid


def test_a_greeting_before_the_user_speaks_is_context_of_exchange_one_not_a_judged_reply():
    m = ScriptedChatModel(default={"reason": "ok", "verdict": "yes"})
    conv = {"id": "g", "turns": [{"role": "assistant", "content": "Hi! I am Bob, the booking bot."},
                                 {"role": "user", "content": "Weather?"}, {"role": "assistant", "content": "Sunny."}]}
    res = create_turn_relevancy_metric(model=m).invoke({"conversation": conv})["results"]["turn_relevancy"]
    assert [v.reply for v in res.verdicts] == ["Sunny."] and m.call_count == 1  # deepeval: one exchange
    (prompt,) = m.prompts
    earlier = prompt.split("<earlier_messages>")[1].split("</earlier_messages>")[0]
    assert "Hi! I am Bob, the booking bot." in earlier
