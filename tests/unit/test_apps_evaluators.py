"""as_evaluator against the installed langsmith package's own evaluator machinery (no network)."""

import asyncio
import datetime
import uuid

import pytest
from langchain_core.messages import AIMessage, HumanMessage, messages_to_dict
from langsmith.evaluation.evaluator import DynamicRunEvaluator, EvaluationResult, run_evaluator
from langsmith.schemas import Example, Run

from judgegraph.apps import as_evaluator
from judgegraph.apps.evaluators import find_conversation
from judgegraph.judges.scripted import ScriptedChatModel

YES = {"reason": "It answers the question.", "verdict": "yes"}
NO = {"reason": "The user asked about a card; the reply is about the weather.", "verdict": "no"}
ASKED = [{"role": "user", "content": "How do I block my card?"}]
OFF_TOPIC = {"role": "assistant", "content": "Sunny with a light breeze today."}
ON_TOPIC = {"role": "assistant", "content": "Open the app, choose Cards, then Block card."}


@pytest.fixture(autouse=True)
def offline_langsmith(monkeypatch):
    monkeypatch.setenv("LANGSMITH_TRACING", "false")
    monkeypatch.setenv("LANGCHAIN_TRACING_V2", "false")
    monkeypatch.setenv("LANGSMITH_ENDPOINT", "http://127.0.0.1:9")  # anything that tried to upload would fail here


def judge():
    return ScriptedChatModel(rules=[("Sunny", [NO])], default=YES, section="reply_to_judge")


def run_and_example(outputs, inputs=None, reference=None):
    now = datetime.datetime.now(datetime.timezone.utc)
    example = Example(id=uuid.uuid4(), dataset_id=uuid.uuid4(), inputs=inputs or {"messages": ASKED},
                      outputs=reference or {}, created_at=now)
    run = Run(id=uuid.uuid4(), name="app", start_time=now, run_type="chain", inputs=example.inputs, outputs=outputs,
              reference_example_id=example.id)
    return run, example


def test_langsmith_wraps_it_and_passes_inputs_outputs_reference():
    m = judge()
    wrapped = run_evaluator(as_evaluator("turn_relevancy", model=m))
    assert isinstance(wrapped, DynamicRunEvaluator)
    run, example = run_and_example({"messages": [*ASKED, OFF_TOPIC]})
    res = wrapped.evaluate_run(run, example)
    assert isinstance(res, EvaluationResult)
    assert (res.key, res.score, res.value) == ("turn_relevancy", 0.0, False)
    assert "weather" in res.comment and "turn 2" in res.comment
    assert res.metadata["status"] == "failed" and res.metadata["conversation_id"] == str(example.id)
    assert res.metadata["usage"]["calls"] == 1 == m.call_count


def test_outputs_with_only_the_new_messages_are_appended_to_the_inputs():
    run, example = run_and_example({"messages": messages_to_dict([AIMessage(ON_TOPIC["content"])])})
    res = run_evaluator(as_evaluator("turn_relevancy", model=judge())).evaluate_run(run, example)
    assert (res.score, res.value, res.metadata["status"]) == (1.0, True, "passed")


def test_a_reply_string_in_outputs_output_and_a_question_input():
    conv = find_conversation({"question": "How do I block my card?"}, {"output": "Sunny today."})
    assert [(t.role, t.content) for t in conv.turns] == [("user", "How do I block my card?"),
                                                          ("assistant", "Sunny today.")]
    conv = find_conversation({"messages": ASKED}, {"output": AIMessage("Sunny.")}, {"expected_outcome": "blocked"})
    assert conv.turns[-1].content == "Sunny." and conv.expected_outcome == "blocked"


def test_missing_outputs_is_a_clear_error():
    with pytest.raises(ValueError, match="outputs\\['messages'\\]"):
        find_conversation({"messages": ASKED}, {"weird": 1})


def test_openevals_calling_convention_and_old_run_example_call():
    ev = as_evaluator("turn_relevancy", model=judge())
    out = ev(inputs={"messages": ASKED}, outputs={"messages": [HumanMessage(ASKED[0]["content"]), AIMessage("Sunny.")]},
             reference_outputs=None)
    assert set(out) == {"key", "score", "value", "comment", "metadata"}
    assert out["score"] == 0.0 and out["metadata"]["status"] == "failed"
    run, example = run_and_example({"messages": [*ASKED, ON_TOPIC]})
    assert ev(run, example)["score"] == 1.0
    assert asyncio.run(ev.acall(inputs={"messages": ASKED}, outputs=[*ASKED, ON_TOPIC]))["score"] == 1.0


def test_several_metrics_give_several_results_and_judge_errors_are_not_scores():
    broken = ScriptedChatModel(default="not json at all", section="reply_to_judge")
    wrapped = run_evaluator(as_evaluator(["turn_relevancy", "conversation_relevance"], model=broken))
    run, example = run_and_example({"messages": [*ASKED, ON_TOPIC]})
    res = wrapped.evaluate_run(run, example)
    assert set(res) == {"results"}
    assert {r.key for r in res["results"]} == {"turn_relevancy", "conversation_relevance"}
    for r in res["results"]:
        assert r.score is None and r.value is None and r.metadata["status"] == "error"
        assert r.metadata["judge_errors"] == 1


def test_plain_string_inputs_outputs_and_reference_as_openevals_takes_them():
    # openevals' create_llm_as_judge types inputs, outputs and reference_outputs `str | dict` (python/openevals/llm.py)
    relevancy = as_evaluator("turn_relevancy", model=judge())
    res = relevancy(inputs={"question": "How do I block my card?"}, outputs="Sunny with a light breeze today.")
    assert (res["key"], res["score"]) == ("turn_relevancy", 0.0)
    conv = find_conversation("How do I block my card?", "Open the app, choose Cards.", "The card gets blocked.")
    assert [(t.role, t.content) for t in conv.turns] == [("user", "How do I block my card?"),
                                                         ("assistant", "Open the app, choose Cards.")]
    assert conv.expected_outcome == "The card gets blocked."
    assert asyncio.run(relevancy.acall(inputs="How do I block my card?", outputs=ON_TOPIC["content"]))["score"] == 1.0
