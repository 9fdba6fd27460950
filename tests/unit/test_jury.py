"""Juries (judges/jury.py) and their aggregation (judges/verdicts.py): several judges answer each
request, every metric gets votes with no metric code, a failed juror is tolerated up to the quorum."""

from __future__ import annotations

import asyncio
import uuid
from enum import Enum
from typing import Literal

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from metric_cases import CASES, CONVERSATION, IDS, answer
from pydantic import BaseModel

from judgegraph import Jury, ScriptedChatModel, resolve_judge
from judgegraph.core.statements import verdicts_schema
from judgegraph.judges import JudgeRequest
from judgegraph.judges.llm import LLMJudge
from judgegraph.judges.verdicts import combine
from judgegraph.metrics import get_metric


def juror(name: str, verdict: str = "yes") -> ScriptedChatModel:
    return ScriptedChatModel(default=answer(verdict), model_name=name)


YES = {"reason": "Relevant.", "verdict": "yes"}


def plain(name: str) -> ScriptedChatModel:
    return ScriptedChatModel(default=YES, model_name=name)


def dead(name: str) -> ScriptedChatModel:
    return ScriptedChatModel(default=RuntimeError("the juror's server is down"), model_name=name)


def turn_relevancy(model, verdict_of=None):
    graph = get_metric("turn_relevancy").factory(model=model)
    return graph.invoke({"conversation": CONVERSATION})["results"]["turn_relevancy"]


def test_a_juror_who_disagrees_is_outvoted_and_its_vote_kept():
    jury = resolve_judge([juror("a", "no"), juror("b", "yes"), juror("c", "yes")], cache=False)
    res = turn_relevancy(jury)
    assert res.judge == "jury(majority):llm:a,llm:b,llm:c"
    assert res.status == "passed" and res.score == 1.0 and res.verdicts
    for v in res.verdicts:
        assert v.verdict == "yes"
        assert [(x.judge, x.verdict, x.error) for x in v.votes] == [
            ("llm:a", "no", None), ("llm:b", "yes", None), ("llm:c", "yes", None)]
        assert v.votes[0].reason == "Scripted no."
        assert v.reason == "Scripted yes."  # the reason of a juror who holds the majority's decision
        # every juror's request is kept, each attempt naming its model; usage is the jurors' sum
        assert [a.model for a in v.transcript] == ["a", "b", "c"]
        assert v.usage.calls == 3 and v.usage.total_tokens == sum(a.usage.total_tokens for a in v.transcript)


def test_one_dead_juror_is_tolerated_by_the_quorum_and_reported():
    res = turn_relevancy(resolve_judge([juror("a"), dead("b"), juror("c")], cache=False))
    assert res.status == "passed" and not res.errors
    for v in res.verdicts:
        assert v.verdict == "yes" and v.error is None
        failed = v.votes[1]
        assert failed.judge == "llm:b" and failed.verdict is None and "the juror's server is down" in failed.error
        assert any(a.model == "b" and a.error for a in v.transcript)


def test_two_dead_jurors_of_three_are_a_judge_error_never_a_verdict():
    res = turn_relevancy(resolve_judge([dead("a"), juror("b", "no"), dead("c")], cache=False))
    assert res.status == "error" and res.errors
    for v in res.verdicts:
        assert v.verdict is None and "below the quorum of 2" in v.error and "llm:a" in v.error
        assert [x.verdict for x in v.votes] == [None, "no", None]  # the one answer is kept, not counted
    # a quorum of 1 accepts the one answer
    res = turn_relevancy(resolve_judge([dead("a"), juror("b", "no"), dead("c")], quorum=1, cache=False))
    assert {v.verdict for v in res.verdicts} == {"no"}


def test_every_juror_is_asked_concurrently_under_ainvoke():
    calls: list[str] = []
    started = asyncio.Event()

    class Slow(ScriptedChatModel):
        async def _agenerate(self, messages, stop=None, run_manager=None, **kw):
            calls.append(self.model_name)
            if len(calls) == 1:  # the first juror waits for another to start: they run together
                await asyncio.wait_for(started.wait(), 10)
            else:
                started.set()
            return self._generate(messages, stop, None, **kw)

    jury = Jury([LLMJudge(Slow(default=YES, model_name=n)) for n in ("a", "b")])
    request = JudgeRequest(task="t", step="turn_relevancy/judge_turn", schema=_YesNo, values={},
                           prompt=_prompt())
    out = asyncio.run(jury.arun(request))
    assert out.ok and sorted(calls) == ["a", "b"]


class _YesNo(BaseModel):
    reason: str
    verdict: Literal["yes", "no"]


def _prompt():
    from judgegraph.data.prompts import Prompt

    return Prompt(name="t", template="Is it relevant?", documented=frozenset())


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_jury_judges_every_metric_and_each_verdict_has_its_votes(case):
    jury = resolve_judge([juror("a", "yes"), juror("b", "no"), juror("c", "yes")], cache=False)
    res = case.build(jury).invoke({"conversation": CONVERSATION})["results"][case.name]
    assert res.status != "error" and res.verdicts and res.judge.startswith("jury(majority):")
    for v in res.verdicts:
        assert [x.judge for x in v.votes] == ["llm:a", "llm:b", "llm:c"]
        votes = [x.verdict for x in v.votes]
        assert v.verdict == max(set(votes), key=votes.count)  # the majority
        if case.name == "response_relevancy":  # a vote: the juror's own questions, scored as the verdict's are
            assert v.votes[0].score == v.votes[2].score != v.votes[1].score and v.score == v.votes[0].score
        else:
            assert votes[0] == votes[2] != votes[1]


@pytest.mark.parametrize("case", [c for c in CASES if c.name in ("turn_relevancy", "knowledge_retention")],
                         ids=lambda c: c.name)
def test_a_jury_runs_async_and_under_review_with_a_checkpointer(case):
    jury = resolve_judge([juror("a", "no"), juror("b", "yes"), juror("c", "yes")], cache=False)
    graph = case.build(jury, review=True, checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": uuid.uuid4().hex}}
    out = asyncio.run(graph.ainvoke({"conversation": CONVERSATION}, cfg))
    (pause,) = out["__interrupt__"]
    assert {v["verdict"] for v in pause.value["verdicts"]} == {"yes"}


# --- aggregation over a schema -------------------------------------------------------------------


class Rating(BaseModel):
    reason: str
    score: float
    stars: int
    ok: bool


class Mood(str, Enum):
    calm = "calm"
    angry = "angry"


class Frustration(BaseModel):
    reason: str
    turns: list[int]
    verdict: Literal["none", "resolved", "unresolved"]
    mood: Mood


def yes_no(*verdicts: str) -> list[_YesNo]:
    return [_YesNo(reason=f"juror {i}", verdict=v) for i, v in enumerate(verdicts)]  # type: ignore[arg-type]


@pytest.mark.parametrize(("mode", "verdicts", "expected"), [
    ("majority", ("no", "yes", "yes"), "yes"),
    ("majority", ("no", "yes"), "no"),  # a tie: the first juror's value
    ("mean", ("yes", "no", "no"), "no"),  # a categorical decision: the majority
    ("unanimous", ("yes", "yes", "no"), "no"),
    ("unanimous", ("yes", "yes", "yes"), "yes"),
    ("any", ("no", "no", "yes"), "yes"),
    ("any", ("no", "no", "no"), "no"),
])
def test_yes_no_decisions_by_mode(mode, verdicts, expected):
    out = combine(yes_no(*verdicts), mode)
    assert out.verdict == expected
    assert out.reason == f"juror {verdicts.index(expected)}"  # the reason of the first juror who decided so


def test_numbers_take_the_mean_or_the_median_and_reasons_are_never_compared():
    answers = [Rating(reason="r1", score=0.2, stars=4, ok=True), Rating(reason="r2", score=0.9, stars=5, ok=False),
               Rating(reason="r3", score=0.4, stars=5, ok=True)]
    mean = combine(answers, "mean")
    assert mean.score == pytest.approx(0.5) and mean.stars == 5 and mean.ok is True
    majority = combine(answers, "majority")
    assert majority.score == pytest.approx(0.4) and majority.stars == 5 and majority.ok is True
    assert majority.reason == "r3"  # r3 agrees with the aggregate on stars and ok
    assert combine(answers, "unanimous").ok is False and combine(answers, "any").ok is True


def test_decisions_that_are_not_yes_no_take_the_majority_under_unanimous_and_any():
    answers = [Frustration(reason="a", turns=[4], verdict="unresolved", mood=Mood.angry),
               Frustration(reason="b", turns=[], verdict="none", mood=Mood.calm),
               Frustration(reason="c", turns=[], verdict="none", mood=Mood.calm)]
    for mode in ("majority", "unanimous", "any", "mean"):
        out = combine(answers, mode)
        assert (out.verdict, out.turns, out.mood, out.reason) == ("none", [], Mood.calm, "b")


def test_lists_of_verdicts_are_aggregated_item_by_item():
    schema = verdicts_schema(3)

    def judged(*vs):
        return schema(verdicts=[{"statement": i + 1, "reason": f"s{i + 1}={v}", "verdict": v} for i, v in enumerate(vs)])

    # each juror errs on another statement: no single answer is the majority, the aggregate is
    out = combine([judged("no", "yes", "yes"), judged("yes", "no", "yes"), judged("yes", "yes", "no")])
    assert [v.verdict for v in out.verdicts] == ["yes", "yes", "yes"]
    assert isinstance(out, schema)


def test_an_answer_with_no_decision_is_the_first_one():
    class Facts(BaseModel):
        facts: list[str]

    assert combine([Facts(facts=["a"]), Facts(facts=["b"])]).facts == ["a"]


@pytest.mark.parametrize(("kwargs", "msg"), [
    ({"aggregate": "median"}, "aggregate must be one of majority, mean, unanimous, any"),
    ({"quorum": 4}, "quorum must be a whole number from 1 to 3"),
    ({"quorum": 0}, "quorum must be a whole number from 1 to 3"),
])
def test_bad_jury_settings_are_refused_when_built(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        resolve_judge([juror("a"), juror("b"), juror("c")], **kwargs)


def test_each_juror_keeps_its_own_cache_under_its_own_keys():
    jury = resolve_judge([plain("a"), plain("b")])
    request = JudgeRequest(task="t", step="s", schema=_YesNo, values={}, prompt=_prompt())
    a, b = jury.jurors
    assert a.cache is not b.cache and a.cache_key(request) != b.cache_key(request)
    jury.run(request)
    jury.run(request)  # answered again from each juror's cache: no call
    assert [j.model.call_count for j in jury.jurors] == [1, 1]


def test_repeats_are_keyed_apart_so_no_cache_entry_serves_two():
    model = plain("a")
    jury = resolve_judge(model, repeat=3)
    assert jury.name == "jury(majority):llm:a*3" and jury.repeats == [0, 1, 2]
    request = JudgeRequest(task="t", step="s", schema=_YesNo, values={}, prompt=_prompt())
    assert len({j.cache_key(request) for j in jury.jurors}) == 3
    out = jury.run(request)
    assert model.call_count == 3 and [a.repeat for a in out.jurors] == [0, 1, 2]
    jury.run(request)
    assert model.call_count == 3  # each repeat's own entry answers it again


def test_rejudging_a_verdict_with_a_jury_gives_it_votes():
    from judgegraph.data.conversation import as_conversation
    from judgegraph.steering import rejudge_result

    old = turn_relevancy(juror("first", "yes"))
    chosen = old.verdicts[0]
    jury = resolve_judge([juror("a", "no"), juror("b", "no"), juror("c", "yes")], cache=False)
    new = rejudge_result(old.model_dump(mode="json"), as_conversation(CONVERSATION), model=jury,
                         verdict_ids=[chosen.id])
    by_id = {v.id: v for v in new.verdicts}
    assert by_id[chosen.id].verdict == "no" and [x.verdict for x in by_id[chosen.id].votes] == ["no", "no", "yes"]
    assert all(not v.votes for k, v in by_id.items() if k != chosen.id)  # the others kept as they were


def test_a_jury_of_offline_judges_needs_no_model_and_keeps_their_scores():
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from judgegraph.judges.offline import EmbeddingJudge

    jurors = [EmbeddingJudge(DeterministicFakeEmbedding(size=16), threshold=t) for t in (-1.0, 0.99, -1.0)]
    jury = Jury(jurors)
    assert jury.kind == "offline"
    res = turn_relevancy(jury)
    for v in res.verdicts:
        assert [x.verdict for x in v.votes] == ["yes", "no", "yes"] and v.verdict == "yes"
        assert v.score == pytest.approx(v.votes[0].score)  # the jurors' mean: they embed alike
