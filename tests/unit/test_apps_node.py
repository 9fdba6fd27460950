"""judge_node / route_on_verdict / verdict_reason inside real LangGraph graphs."""

import asyncio
import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph

from judgegraph.apps import judge_node, route_on_verdict, verdict_reason
from judgegraph.data.results import MetricResult
from judgegraph.judges.scripted import ScriptedChatModel
from judgegraph.metrics.relevancy import create_turn_relevancy_metric

YES = {"reason": "It answers the question.", "verdict": "yes"}
NO = {"reason": "It talks about Paris, not arithmetic.", "verdict": "no"}

HISTORY = [
    SystemMessage("You are a maths tutor."),
    HumanMessage("What is 2+2?"), AIMessage("2+2 equals 4."),
    HumanMessage("What about 3+3?"), AIMessage("The capital of France is Paris."),
    HumanMessage("Can you solve 5+5?"), AIMessage("5+5 equals 10."),
]


class State(MessagesState):
    judgements: dict[str, Any]


def judge_model():
    return ScriptedChatModel(rules=[("Paris", [NO])], default=YES, section="reply_to_judge")


def app_with(node):
    builder = StateGraph(State)
    builder.add_node("judge", node)
    builder.add_edge(START, "judge")
    builder.add_edge("judge", END)
    return builder.compile()


def test_whole_conversation_is_judged_from_messages_state():
    m = judge_model()
    out = app_with(judge_node("turn_relevancy", model=m)).invoke({"messages": HISTORY})
    written = out["judgements"]["turn_relevancy"]
    assert isinstance(written, dict) and json.loads(json.dumps(written)) == written  # plain JSON by default
    res = MetricResult.model_validate(written)
    assert [v.verdict for v in res.verdicts] == ["yes", "no", "yes"]
    assert res.verdicts[1].turns == [4]  # the Paris reply, counted in the messages as given (system first)
    assert m.call_count == 3


def test_latest_scope_makes_one_call_with_the_earlier_turns_as_context():
    m = judge_model()
    node = judge_node(create_turn_relevancy_metric(model=m), scope="latest", output="result")
    res = app_with(node).invoke({"messages": HISTORY})["judgements"]["turn_relevancy"]
    assert m.call_count == 1
    assert [v.verdict for v in res.verdicts] == ["yes"] and res.verdicts[0].turns == [6]
    (prompt,) = m.prompts
    judged = prompt.split("<reply_to_judge>")[1].split("</reply_to_judge>")[0]
    earlier = prompt.split("<earlier_messages>")[1].split("</earlier_messages>")[0]
    assert "5+5 equals 10." in judged
    assert "What is 2+2?" in earlier and "The capital of France is Paris." in earlier and "5+5" not in earlier
    assert "You are a maths tutor." in prompt.split("<system_instructions>")[1].split("</system_instructions>")[0]


def test_latest_scope_judges_the_off_topic_reply_when_it_is_the_latest():
    m = judge_model()
    out = app_with(judge_node("turn_relevancy", model=m, scope="latest")).invoke({"messages": HISTORY[:5]})
    res = out["judgements"]["turn_relevancy"]
    assert (res["status"], m.call_count) == ("failed", 1)
    assert verdict_reason(out, "turn_relevancy") == NO["reason"]


def test_latest_scope_keeps_the_metrics_window_and_sends_the_same_request_as_its_last_window():
    from judgegraph.judges import resolve_judge

    m = judge_model()
    metric = create_turn_relevancy_metric(model=resolve_judge(m), window_size=2)  # one judge, one cache
    app_with(judge_node(metric)).invoke({"messages": HISTORY})
    whole = next(p for p in m.prompts if "<reply_to_judge>\n5+5 equals 10." in p)
    assert m.call_count == 3
    out = app_with(judge_node(metric, scope="latest")).invoke({"messages": HISTORY})
    assert m.call_count == 3  # the very request the whole-conversation run made: a cache hit
    fresh = judge_model()
    app_with(judge_node(create_turn_relevancy_metric(model=fresh, window_size=2), scope="latest")).invoke(
        {"messages": HISTORY})
    assert fresh.prompts == [whole]
    assert out["judgements"]["turn_relevancy"]["verdicts"][0]["turns"] == [6]
    earlier = whole.split("<earlier_messages>")[1].split("</earlier_messages>")[0]
    assert "What about 3+3?" in earlier and "What is 2+2?" not in earlier


def test_every_output_form_routes_and_explains_alike():
    for output in ("dict", "result", "feedback"):
        node = judge_node("turn_relevancy", model=judge_model(), scope="latest", output=output)
        out = app_with(node).invoke({"messages": HISTORY[:5]})
        route = route_on_verdict("turn_relevancy", passed="ok", failed="again")
        assert route(out) == "again", output
        assert NO["reason"] in verdict_reason(out, "turn_relevancy"), output
    assert set(out["judgements"]["turn_relevancy"]) == {"key", "score", "value", "comment", "extra"}


def test_results_in_a_checkpointed_state_survive_a_strict_serializer():
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    def stored(output):
        app = StateGraph(State)
        app.add_node("judge", judge_node("turn_relevancy", model=judge_model(), scope="latest", output=output))
        app.add_edge(START, "judge")
        # only LangGraph's own safe types may come back from this checkpointer (strict msgpack)
        graph = app.compile(checkpointer=InMemorySaver(serde=JsonPlusSerializer(allowed_msgpack_modules=None)))
        config = {"configurable": {"thread_id": "t"}}
        graph.invoke({"messages": HISTORY[:5]}, config)
        return graph.get_state(config).values["judgements"]["turn_relevancy"]

    assert stored("dict")["status"] == "failed"
    assert not isinstance(stored("result"), MetricResult)  # objects do not survive it


def test_async_runs_the_same_node_and_names_the_thread():
    m = judge_model()
    app = StateGraph(State)
    app.add_node("judge", judge_node("turn_relevancy", model=m, scope="latest"))
    app.add_edge(START, "judge")
    graph = app.compile(checkpointer=InMemorySaver())
    out = asyncio.run(graph.ainvoke({"messages": HISTORY[:5]}, {"configurable": {"thread_id": "t-7"}}))
    res = out["judgements"]["turn_relevancy"]
    assert res["status"] == "failed" and res["conversation_id"] == "t-7" and m.call_count == 1


def test_several_metrics_in_one_node_share_the_latest_scope():
    m = judge_model()
    node = judge_node(["turn_relevancy", "conversation_relevance"], model=m, scope="latest", results_key="checks")
    builder = StateGraph(_ChecksState)
    builder.add_node("judge", node)
    builder.add_edge(START, "judge")
    out = builder.compile().invoke({"messages": HISTORY})
    assert set(out["checks"]) == {"turn_relevancy", "conversation_relevance"}
    assert m.call_count == 1  # both ask the same question of one judge: the second is a cache hit
    assert all(len(r["verdicts"]) == 1 for r in out["checks"].values())


class _ChecksState(MessagesState):
    checks: dict[str, Any]


def test_a_state_without_the_messages_key_is_a_clear_error():
    with pytest.raises(KeyError, match="no 'history' key"):
        app_with(judge_node("turn_relevancy", model=judge_model(), messages_key="history")).invoke(
            {"messages": HISTORY})


@pytest.mark.parametrize("status,expected", [
    ("passed", "__end__"), ("failed", "regenerate"), ("error", "regenerate"), ("not_applicable", "__end__"),
])
def test_route_on_verdict_follows_the_status_and_fails_closed_on_judge_errors(status, expected):
    route = route_on_verdict("turn_relevancy", passed=END, failed="regenerate")
    res = MetricResult(key="turn_relevancy", conversation_id="", score=None, threshold=0.5, passed=None,
                       status=status, reason="", judge="x")
    assert route({"judgements": {"turn_relevancy": res}}) == expected
    assert route({"judgements": {"turn_relevancy": res.model_dump(mode="json")}}) == expected
    assert set(route.destinations) == {"__end__", "regenerate"}


def test_route_without_a_result_is_an_error_route():
    route = route_on_verdict("turn_relevancy", passed="respond", failed="regenerate", error="apologise")
    assert route({"messages": []}) == "apologise"


def test_latest_scope_judges_only_the_latest_replys_retrieval_context():
    import re

    from judgegraph.metrics.contextual import create_turn_contextual_relevancy_metric

    def in_section(name, text):
        return lambda p: bool(m := re.search(rf"<{name}>(.*?)</{name}>", p, re.DOTALL)) and text in m.group(1)

    m = ScriptedChatModel(rules=[
        (in_section("retrieved_nodes", "Sale items"),
         [{"nodes": [{"node": 1, "statements": ["Sale items: 14 days.", "We are hiring."]}]}]),
        (lambda p: "<statements>" in p, [{"verdicts": [{"statement": 1, "reason": "on topic", "verdict": "yes"},
                                                        {"statement": 2, "reason": "hiring", "verdict": "no"}]}]),
    ])
    messages = [
        HumanMessage("Can I return shoes?"),
        AIMessage("Yes, within 30 days.", additional_kwargs={"retrieval_context": ["Unworn shoes: 30 days."]}),
        HumanMessage("Do sale items count too?"),
        AIMessage("Yes, within 14 days.",
                  additional_kwargs={"retrieval_context": ["Sale items can be returned within 14 days. We are hiring."]}),
    ]
    node = judge_node(create_turn_contextual_relevancy_metric(model=m), scope="latest")
    res = app_with(node).invoke({"messages": messages})["judgements"]["turn_contextual_relevancy"]
    assert m.call_count == 2  # one extraction and one judgement, for the latest reply only
    assert res["score"] == 0.5 and {tuple(v["turns"]) for v in res["verdicts"]} == {(3,)}


def guarded_app(metric_name: str):
    """chatbot → judge → (passed: END | failed: regenerate → judge): a guardrail as the docs build it."""
    from langchain_core.messages import RemoveMessage

    calls = {"regenerate": 0}

    def chatbot(state: State) -> dict[str, Any]:
        return {"messages": [AIMessage("The capital of France is Paris.")]}

    def regenerate(state: State) -> dict[str, Any]:
        calls["regenerate"] += 1
        assert verdict_reason(state, metric_name) == NO["reason"]
        return {"messages": [RemoveMessage(id=state["messages"][-1].id), AIMessage("3+3 equals 6.")]}

    builder = StateGraph(State)
    builder.add_node("chatbot", chatbot)
    builder.add_node("judge", judge_node(metric_name, model=judge_model(), scope="latest"))
    builder.add_node("regenerate", regenerate)
    builder.add_edge(START, "chatbot")
    builder.add_edge("chatbot", "judge")
    route = route_on_verdict(metric_name, passed=END, failed="regenerate")
    builder.add_conditional_edges("judge", route, route.destinations)
    builder.add_edge("regenerate", "judge")
    return builder.compile(), calls


@pytest.mark.parametrize("name", ["turn-relevancy", "Turn_Relevancy", " turn_relevancy"])
def test_a_metric_named_any_way_the_cli_takes_routes_and_explains(name):
    app, calls = guarded_app(name)
    out = app.invoke({"messages": [HumanMessage("What about 3+3?")]}, {"recursion_limit": 12})
    assert calls["regenerate"] == 1 and out["messages"][-1].content == "3+3 equals 6."
    assert out["judgements"]["turn_relevancy"]["status"] == "passed"
    assert verdict_reason(out, name) == out["judgements"]["turn_relevancy"]["reason"]


@pytest.mark.parametrize("build", [
    lambda: route_on_verdict("turn_relevancey", passed=END, failed="regenerate"),
    lambda: verdict_reason({"judgements": {}}, "turn-relevance"),
])
def test_a_misspelt_metric_name_is_an_error_naming_the_nearest_one(build):
    with pytest.raises(ValueError, match=r"unknown metric 'turn[_-]relevan.*did you mean 'turn[_-]relevancy'"):
        build()


def test_a_router_on_a_metric_the_judge_node_does_not_judge_is_an_error_not_a_loop():
    route = route_on_verdict("conversation_completeness", passed=END, failed="regenerate")
    out = app_with(judge_node("turn_relevancy", model=judge_model(), scope="latest")).invoke({"messages": HISTORY[:5]})
    with pytest.raises(KeyError, match="no result for 'conversation_completeness'.*turn_relevancy"):
        route(out)


def test_a_router_on_a_metric_of_your_own_takes_its_graph_or_spec():
    from judgegraph.metrics.custom import make_metric

    mine = make_metric(name="politeness", instructions="Is this polite? {{ conversation }}", model=judge_model())
    route = route_on_verdict(mine, passed="ok", failed="again")
    res = MetricResult(key="politeness", conversation_id="", score=1.0, threshold=0.5, passed=True,
                       status="passed", reason="", judge="x")
    assert route({"judgements": {"politeness": res}}) == "ok"
    with pytest.raises(ValueError, match="unknown metric 'politeness'.*pass its compiled graph or MetricSpec"):
        route_on_verdict("politeness")
