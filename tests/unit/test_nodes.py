"""The public building blocks of judgegraph.core.nodes, and the composed policy
judge example (examples/policy_judge) built from them."""

import asyncio
import operator
import sys
import threading
from pathlib import Path
from typing import Annotated

import pytest
from langgraph.graph import START, StateGraph
from langgraph.types import Send
from typing_extensions import TypedDict

from judgegraph.core.nodes import fan_out, judge_step, make_result, outcome_fields, router, window_node
from judgegraph.data.conversation import Conversation
from judgegraph.data.results import Usage, Verdict
from judgegraph.judges import JudgeOutcome, JudgeRequest
from judgegraph.judges.base import Judge
from judgegraph.loaders import load_conversations

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))

from policy_judge import canned, create_policy_metric  # noqa: E402
from policy_judge.graph import EXTRACT_STEP, NO_POLICY, PROMPT_VALUES, load_prompt  # noqa: E402

CHATS = {c.id: c for c in load_conversations(ROOT / "examples" / "policy_judge" / "chats.jsonl")}
THREE = Conversation(id="t", turns=[
    {"role": "system", "content": "be nice"},
    *[{"role": r, "content": f"{r} {i}"} for i in range(3) for r in ("user", "assistant")],
])


# -- window_node / fan_out -----------------------------------------------------------


def test_window_node_makes_one_window_per_exchange():
    out = window_node(2)({"conversation": THREE.model_dump()})
    assert isinstance(out["conversation"], Conversation)
    assert [[ex.index for ex in w.exchanges] for w in out["windows"]] == [[0], [0, 1], [1, 2]]
    assert out["windows"][0].system == ("be nice",)


def test_window_node_reads_messages_when_there_is_no_conversation():
    from langchain_core.messages import AIMessage, HumanMessage

    out = window_node(5)({"messages": [HumanMessage("hi"), AIMessage("hello"), HumanMessage("bye"), AIMessage("ciao")]})
    assert [w.target.reply_text for w in out["windows"]] == ["hello", "ciao"]


@pytest.mark.parametrize("size", [0, -1, 1.5, True])
def test_window_node_rejects_bad_sizes_when_built(size):
    with pytest.raises(ValueError, match="window_size"):
        window_node(size)


def test_window_node_name():
    assert window_node(3, name="split").__name__ == "split"


def test_fan_out_sends_one_task_per_item_or_routes_to_empty():
    route = fan_out("judge", "items", item="item", empty="reduce", extra=lambda s: {"mode": s["mode"]})
    assert route({"items": [], "mode": 1}) == "reduce" and route({"mode": 1}) == "reduce"
    sends = route({"items": ["a", "b"], "mode": 7})
    assert sends == [Send("judge", {"mode": 7, "item": "a"}), Send("judge", {"mode": 7, "item": "b"})]


@pytest.mark.parametrize("make", [
    lambda extra: fan_out("each", "items", item="item", empty="done", extra=extra),
    lambda extra: router(lambda s: [Send("each", {**extra(s), "item": x}) for x in s["items"]]),
], ids=["fan_out", "router"])
def test_a_router_runs_on_the_event_loop_thread_under_an_async_run(make):
    """LangGraph runs a plain sync router in a worker thread under ``ainvoke`` (a thread hop per conversation);
    fan_out's and router's run where the graph runs, and still route."""
    seen: list[threading.Thread] = []

    def extra(state):
        seen.append(threading.current_thread())
        return {}

    class State(TypedDict, total=False):
        items: list[int]
        got: Annotated[list[int], operator.add]

    builder = StateGraph(State)
    builder.add_node("each", lambda task: {"got": [task["item"] * 10]})
    builder.add_node("done", lambda state: {})
    builder.add_conditional_edges(START, make(extra), ["each", "done"])
    out = asyncio.run(builder.compile().ainvoke({"items": [1, 2, 3]}))
    assert sorted(out["got"]) == [10, 20, 30]
    assert seen and set(seen) == {threading.main_thread()}


# -- judge_step / outcome_fields ---------------------------------------------------------


class EchoJudge(Judge):
    name = "echo"

    def judge(self, request):
        if request.values["x"] == "fail":
            return JudgeOutcome(None, "boom", 2, Usage(calls=2))
        return JudgeOutcome(request.schema(reason=request.values["x"], verdict="yes"), None, 1, Usage(calls=1), score=0.9)


def _step():
    from judgegraph.metrics.relevancy import TurnVerdict

    def build(task):
        return JudgeRequest("t", "s", TurnVerdict, {"x": task["x"]})

    def finish(task, outcome):
        value = outcome.value if outcome.ok else None
        return {"verdicts": [Verdict(verdict=getattr(value, "verdict", None), reason=getattr(value, "reason", ""),
                                     **outcome_fields(outcome))]}

    return judge_step("ask", EchoJudge(), build, finish)


def test_judge_step_runs_sync_and_async_and_outcome_fields_fill_the_verdict():
    step = _step()
    assert step.name == "ask"
    (ok,) = step.invoke({"x": "hello"})["verdicts"]
    (bad,) = asyncio.run(step.ainvoke({"x": "fail"}))["verdicts"]
    assert (ok.verdict, ok.reason, ok.error, ok.attempts, ok.usage.calls, ok.score) == ("yes", "hello", None, 1, 1, 0.9)
    assert (bad.verdict, bad.error, bad.attempts, bad.usage.calls) == (None, "boom", 2, 2)


# -- make_result -----------------------------------------------------------------------


def V(verdict, turn=0, **kw):
    return Verdict(verdict=verdict, turns=[turn], reason=kw.pop("reason", f"r{turn}"), usage=Usage(calls=1), **kw)


def test_make_result_scores_the_positive_share_and_keeps_errors_out_of_it():
    verdicts = [V("yes", 1), V("no", 3, reason="off topic."), V(None, 5, error="timeout", attempts=3), V("yes", 7)]
    res = make_result("m", "c", verdicts, judge="llm:x", threshold=0.7, step="s/step")
    assert res.score == pytest.approx(2 / 3) and res.status == "failed" and res.passed is False
    assert [(e.where, e.step, e.message, e.attempts) for e in res.errors] == [("turn 6", "s/step", "timeout", 3)]
    assert res.usage.calls == 4 and res.details == {"verdicts": 4, "judged": 3}
    assert res.reason == ("2 of 3 verdicts 'yes' (score 0.67 < threshold 0.70). Not 'yes': turn 4: off topic. "
                          "Judged 3 of 4 verdicts; 1 judge errors.")


@pytest.mark.parametrize("verdicts,status,score", [
    ([], "not_applicable", None),
    ([V(None, error="x"), V(None, error="y")], "error", None),
    ([V("yes")], "passed", 1.0),
])
def test_make_result_status_rules(verdicts, status, score):
    res = make_result("m", "c", verdicts, judge="j", threshold=0.5)
    assert (res.status, res.score) == (status, score)
    assert res.passed is (True if status == "passed" else None)


def test_make_result_without_threshold_records_the_score_without_gating():
    res = make_result("m", "c", [V("no"), V("yes")], judge="j", threshold=None)
    assert (res.score, res.passed, res.status, res.threshold) == (0.5, None, "not_applicable", None)
    assert "no threshold, not gated" in res.reason


def test_make_result_strict_mode_positive_set_score_function_and_options():
    vs = [V("supported"), V("partly"), V("unsupported")]
    strict = make_result("m", "c", vs, judge="j", threshold=0.2, positive={"supported", "partly"}, strict_mode=True)
    assert (strict.score, strict.threshold, strict.status, strict.strict_mode) == (0.0, 1.0, "failed", True)
    mean = make_result("m", "c", vs, judge="j", threshold=0.5, score=lambda valid: 0.9, reason="custom",
                       value="v", details={"k": 1}, usage=Usage(calls=5), where=lambda v: "here")
    assert (mean.score, mean.reason, mean.value, mean.details, mean.usage.calls) == (0.9, "custom", "v", {"k": 1}, 8)
    called = make_result("m", "c", vs, judge="j", threshold=0.5, reason=lambda s, t, v: f"{s:.1f}/{t}/{len(v)}")
    assert called.reason == "0.0/0.5/3"


def test_make_result_names_a_non_llm_judges_rule():
    class Rule(EchoJudge):
        rule = "cosine >= 0.3"

    res = make_result("m", Conversation(id="conv", turns=[{"role": "user", "content": "x"}]), [V("yes")],
                      judge=Rule(), threshold=0.5)
    assert res.judge == "echo" and res.details["judge_rule"] == "cosine >= 0.3" and res.conversation_id == "conv"


def test_generic_blocks_never_import_a_metric():
    import subprocess
    import sys

    code = ("import sys, judgegraph.core.nodes, judgegraph.core.statements, judgegraph.core.state, judgegraph.data.results; "
            "print(sorted(m for m in sys.modules if m.startswith('judgegraph.metrics')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# -- the composed policy judge (examples/policy_judge) ---------------------------------


def policy(**overrides):
    model = canned.scripted_model(**overrides)
    return create_policy_metric(model=model), model


def results(graph, ids=("returns-grounded", "warranty-invented", "shipping-unretrieved")):
    outs = graph.batch([{"conversation": CHATS[i]} for i in ids])
    return {i: o["results"]["policy_grounding"] for i, o in zip(ids, outs)}


def test_policy_judge_end_to_end():
    graph, model = policy()
    res = results(graph)
    ok, invented, unretrieved = res["returns-grounded"], res["warranty-invented"], res["shipping-unretrieved"]
    assert (ok.status, ok.score) == ("passed", 1.0)
    assert (invented.status, invented.score) == ("failed", pytest.approx(1 / 3))
    assert [v.verdict for v in invented.verdicts] == ["supported", "unsupported", "unsupported"]
    assert "lasts for life" in invented.reason and "2-year" in invented.reason
    assert (unretrieved.status, unretrieved.score) == ("failed", pytest.approx(2 / 3))
    first = unretrieved.verdicts[0]
    assert first.claim == "Express shipping is free on orders over $50." and first.reason == NO_POLICY
    assert first.usage.calls == 0 and first.turns == [2]
    # 5 replies extracted + 6 claims with policy checked (the unretrieved claim costs nothing)
    assert model.call_count == 12 == sum(r.usage.calls for r in res.values())
    assert ok.details == {"window_size": 3, "replies": 2, "claims": 2, "judged": 2}


def test_policy_judge_streams_its_nodes_and_runs_async():
    graph, _ = policy()
    nodes_seen = [list(c)[0] for c in graph.stream({"conversation": CHATS["warranty-invented"]}, stream_mode="updates")]
    assert nodes_seen == ["window_turns", "extract_claims", "plan_checks", "verify_claim", "verify_claim",
                          "verify_claim", "reduce_score"]
    out = asyncio.run(graph.ainvoke({"conversation": CHATS["warranty-invented"]}))
    assert out["results"]["policy_grounding"].score == pytest.approx(1 / 3)


def test_policy_judge_errors_are_counted_and_the_rest_kept():
    graph, _ = policy(**{
        "<reply>\nThe Trailblazer": [RuntimeError("503")],  # extraction fails for that reply
        "<claim>\nStandard shipping takes": ["not json"],  # a check never becomes valid
    })
    res = results(graph, ("warranty-invented", "shipping-unretrieved"))
    invented, unretrieved = res["warranty-invented"], res["shipping-unretrieved"]
    assert invented.status == "error" and invented.score is None
    (err,) = invented.errors
    assert (err.where, err.step, err.message) == ("turn 3 (claim extraction)", EXTRACT_STEP, "RuntimeError: 503")
    assert unretrieved.score == pytest.approx(1 / 2) and unretrieved.details["judged"] == 2
    (err,) = unretrieved.errors
    assert err.where.startswith("turn 5, claim 'Standard shipping takes") and "invalid output after 3 tries" in err.message


def test_policy_judge_reply_without_claims_is_not_applicable():
    conv = {"id": "hi", "turns": [{"role": "user", "content": "Thanks!"},
                                  {"role": "assistant", "content": "You're welcome! Anything else I can help with?"}]}
    graph, model = policy()
    res = graph.invoke({"conversation": conv})["results"]["policy_grounding"]
    assert res.status == "not_applicable" and model.call_count == 1 and res.usage.calls == 1


def test_policy_judge_content_is_data_in_its_prompts():
    conv = {"id": "inj", "turns": [{"role": "user", "content": "{{ reply }}"},
                                   {"role": "assistant", "content": "Say {{ claim }} {policy}",
                                    "retrieval_context": ["{{ claim }}"]}]}
    graph, model = policy(**{"<reply>\nSay {{ claim }} {policy}\n</reply>": [{"claims": ["{{ policy }}"]}],
                             "<claim>\n{{ policy }}\n</claim>": [{"reason": "r", "verdict": "unsupported"}]})
    res = graph.invoke({"conversation": conv})["results"]["policy_grounding"]
    assert res.score == 0.0 and model.call_count == 2
    assert "<policy>\n[1] {{ claim }}\n</policy>" in model.prompts[1]


@pytest.mark.parametrize("step", sorted(PROMPT_VALUES))
def test_policy_prompt_files_document_exactly_what_their_nodes_pass(step):
    prompt = load_prompt(step)
    assert prompt.placeholders == prompt.documented == PROMPT_VALUES[step]


def test_policy_judge_mermaid_snapshot(mermaid):
    drawing = create_policy_metric().get_graph().draw_mermaid(with_styles=False)
    assert drawing == mermaid


def test_each_judge_step_is_one_traced_run():
    from langchain_core.callbacks import BaseCallbackHandler

    from judgegraph.judges import resolve_judge
    from judgegraph.judges.scripted import ScriptedChatModel
    from judgegraph.metrics.relevancy import create_turn_relevancy_metric

    runs: list[str] = []

    class Names(BaseCallbackHandler):
        def on_chain_start(self, serialized, inputs, *, name=None, **kwargs):  # type: ignore[override]
            runs.append(name or "")

    judge = resolve_judge(model=ScriptedChatModel(default={"reason": "ok", "verdict": "yes"}))
    graph = create_turn_relevancy_metric(model=judge)
    chat = {"id": "c", "turns": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                                 {"role": "user", "content": "and?"}, {"role": "assistant", "content": "ciao"}]}
    for out in (asyncio.run(graph.ainvoke({"conversation": chat}, {"callbacks": [Names()]})),
                graph.invoke({"conversation": chat}, {"callbacks": [Names()]})):
        assert out["results"]["turn_relevancy"].score == 1.0
    # one run per node task (LangGraph's own), not a second one of the same name inside it
    assert runs.count("judge_turn") == 4 and runs.count("window_turns") == 2 and runs.count("reduce_score") == 2
