import asyncio

from judgegraph.judges import JudgeRequest, resolve_judge
from judgegraph.judges.scripted import ScriptedChatModel
from judgegraph.metrics.relevancy import TurnVerdict, create_turn_relevancy_metric

YES = {"reason": "ok", "verdict": "yes"}


def request(reply="hello"):
    return JudgeRequest(task="turn_relevance", step="turn_relevancy/judge_turn", schema=TurnVerdict,
                        values={"rubric": "r", "system": "(none)", "context": "(none)", "user_message": "hi", "reply": reply})


def test_identical_requests_are_made_once_and_hits_cost_nothing():
    model = ScriptedChatModel(default=YES)
    judge = resolve_judge(model=model)
    first, second, other = judge.run(request()), judge.run(request()), judge.run(request("bye"))
    assert model.call_count == 2
    assert first.usage.calls == 1 and not first.cached
    assert second.cached and second.usage.calls == 0 and second.value == first.value
    assert judge.cache.hits == 1 and judge.cache.misses == 2 and not other.cached


def test_concurrent_identical_async_requests_wait_for_the_first():
    model = ScriptedChatModel(default=YES)
    judge = resolve_judge(model=model)

    async def go():
        return await asyncio.gather(*(judge.arun(request()) for _ in range(5)))

    outs = asyncio.run(go())
    assert model.call_count == 1 and sum(o.cached for o in outs) == 4


def test_failures_are_not_cached():
    model = ScriptedChatModel(rules=[("hello", ["junk", YES])], default=YES)
    judge = resolve_judge(model=model, max_tries=1)
    assert judge.run(request()).error and judge.run(request()).ok
    assert model.call_count == 2


def test_cache_can_be_turned_off():
    model = ScriptedChatModel(default=YES)
    judge = resolve_judge(model=model, cache=False)
    judge.run(request()), judge.run(request())
    assert judge.cache is None and model.call_count == 2


def test_a_repeated_conversation_is_judged_once_per_judge():
    model = ScriptedChatModel(default=YES, section="reply_to_judge")
    graph = create_turn_relevancy_metric(model=model)
    conv = {"id": "a", "turns": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}
    first = graph.invoke({"conversation": conv})["results"]["turn_relevancy"]
    again = graph.invoke({"conversation": {**conv, "id": "b"}})["results"]["turn_relevancy"]
    assert model.call_count == 1 and first.usage.calls == 1 and again.usage.calls == 0 and again.score == 1.0


def test_a_cache_that_fails_mid_run_is_turned_off_once_and_keeps_every_answer(tmp_path, caplog):
    """Writes start failing after the first answer (a real SQLite error: the
    connection made read-only): every answer already paid for is returned, the
    cache is off for the rest of the run, one warning names the file."""
    model = ScriptedChatModel(default=YES)
    path = tmp_path / "jc.sqlite"
    judge = resolve_judge(model=model, cache=str(path))
    assert judge.run(request("r0")).ok and judge.cache.disk.stored == 1
    judge.cache.disk._conn.execute("PRAGMA query_only = ON")
    outs = [judge.run(request(f"r{i}")) for i in range(1, 6)]
    asyncio.run(judge.arun(request("r-async")))
    assert all(o.ok and o.value.verdict == "yes" and o.usage.calls == 1 for o in outs)
    assert model.call_count == 7 and judge.cache.disk.stored == 1
    assert "could not be written" in judge.cache.disk.problem
    warned = [r.getMessage() for r in caplog.records if r.name == "judgegraph.cache"]
    assert len(warned) == 1 and str(path) in warned[0] and "--no-cache" in warned[0]

