"""The scripted chat model users run and test their judges with, and the dry
run's recorder built on it."""

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from pydantic import BaseModel

import judgegraph
from judgegraph.cost.dryrun import DryRunJudge, RecordingChatModel
from judgegraph.judges.llm import LLMJudge
from judgegraph.judges.scripted import ScriptedChatModel, ScriptedRequest
from judgegraph.judges.tokens import count_tokens, prompt_tokens
from judgegraph.metrics.relevancy import create_turn_relevancy_metric

CHAT = {"id": "c1", "turns": [
    {"role": "user", "content": "How do I block my card?"},
    {"role": "assistant", "content": "Open the app, choose Cards, then Block card."},
    {"role": "user", "content": "And the weather?"},
    {"role": "assistant", "content": "Sunny."},
]}


class Answer(BaseModel):
    reason: str
    verdict: str


def test_it_is_public_and_judges_with_no_key():
    assert judgegraph.ScriptedChatModel is ScriptedChatModel
    model = judgegraph.ScriptedChatModel(rules=[("Sunny", [{"reason": "Off topic.", "verdict": "no"}])],
                                         default={"reason": "Answers it.", "verdict": "yes"}, section="reply_to_judge")
    res = create_turn_relevancy_metric(model=LLMJudge(model)).invoke({"conversation": CHAT})["results"]["turn_relevancy"]
    assert [v.verdict for v in res.verdicts] == ["yes", "no"] and model.call_count == 2


def test_a_callable_reply_sees_the_schema_and_messages():
    seen: list[ScriptedRequest] = []

    def reply(request: ScriptedRequest):
        seen.append(request)
        return {"reason": f"asked for {request.schema_name}", "verdict": "yes"}

    model = ScriptedChatModel(default=reply)
    out = model.with_structured_output(Answer).invoke([SystemMessage("Judge."), HumanMessage("Is it relevant?")])
    assert out == Answer(reason="asked for Answer", verdict="yes")
    (request,) = seen
    assert request.schema is Answer and [m.type for m in request.messages] == ["system", "human"]
    assert request.text == "Judge.\n\nIs it relevant?" and model.prompts == [request.text]


def test_a_callable_may_answer_text_or_an_error():
    model = ScriptedChatModel(rules=[("boom", [lambda r: RuntimeError("provider down")])],
                              default=lambda r: "not json")
    assert model.invoke("hello").content == "not json"
    with pytest.raises(RuntimeError, match="provider down"):
        model.invoke("boom")


def test_usage_is_counted_as_openai_counts_it():
    message = ScriptedChatModel(default="a short reply").invoke("count these words")
    assert message.usage_metadata["input_tokens"] == prompt_tokens([HumanMessage("count these words")])
    assert message.usage_metadata["output_tokens"] == count_tokens("a short reply")
    answer = {"reason": "Answers it.", "verdict": "yes"}
    message = ScriptedChatModel(default=answer).bind_tools([Answer]).invoke("count these words")
    assert message.usage_metadata["output_tokens"] == count_tokens(json.dumps(answer))  # the JSON a server sends


def test_the_dry_run_recorder_is_the_scripted_model_with_placeholder_answers():
    recorder = RecordingChatModel()
    assert isinstance(recorder, ScriptedChatModel)
    bound = recorder.bind_tools([Answer])
    messages = [SystemMessage("Judge."), HumanMessage("Is it relevant?")]
    reply = bound.invoke(messages)
    assert reply.tool_calls[0]["name"] == "Answer" and reply.tool_calls[0]["args"] == {"reason": "ok", "verdict": "ok"}
    assert reply.usage_metadata == {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}  # nothing spent
    bound.invoke([*messages, AIMessage("bad"), HumanMessage("again")])  # a re-ask: refused, not counted
    assert recorder.counts == {"unknown/unknown": {"calls": 1, "input_tokens": prompt_tokens(messages),
                                                    "refused": 1}}
    assert recorder.prompts == []  # a dry run over a big file keeps no prompt text


def test_a_dry_run_counts_what_the_real_run_would_send():
    judge = DryRunJudge("openai:gpt-4.1-mini")
    res = create_turn_relevancy_metric(model=judge).invoke({"conversation": CHAT})["results"]["turn_relevancy"]
    estimate = judge.estimate()
    assert estimate.total.calls == 2 == res.usage.calls and estimate.total.input_tokens > 0
    assert set(estimate.steps) == {"turn_relevancy/judge_turn"}


def test_a_placeholder_answer_is_made_once_per_schema_and_given_as_a_fresh_copy():
    from judgegraph.cost.dryrun import placeholder_answer

    first = placeholder_answer(Answer)
    first["reason"] = "changed by a caller"
    assert placeholder_answer(Answer) == {"reason": "ok", "verdict": "ok"}
