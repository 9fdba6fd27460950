"""The dry run without the graph's run (cost.dryrun): a metric of the window shape counted by its own nodes,
the same figures as its graph run, found by what window_graph and report_builder declare (never by node names,
counts or function names); token counts by pieces; the prefix counter's short requests."""

from __future__ import annotations

import asyncio
import random

import pytest
from metric_cases import CASES, CONVERSATION, IDS

from judgegraph.core.nodes import judge_step, score_node, window_graph, window_node
from judgegraph.core.state import MetricInput, MetricOutput
from judgegraph.cost.dryrun import DryRunJudge, window_steps
from judgegraph.data.conversation import as_conversation
from judgegraph.judges.scripted import ScriptedRequest
from judgegraph.judges.tokens import PieceCounter, count_tokens
from judgegraph.loaders import LoadedConversation
from judgegraph.metrics import build_metric
from judgegraph.providers import cache_rule, get
from judgegraph.providers.prefixcache import PrefixCache
from judgegraph.runs.dry import DryRunConversations
from judgegraph.runs.runner import MetricPlan, judge_conversation


def figures(judge: DryRunJudge) -> dict:
    return {step: (c.calls, c.input_tokens, c.answers, c.cached_input_tokens)
            for step, c in judge.estimate().steps.items()}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_metric_its_own_nodes_count_counts_what_its_graph_run_counts(case):
    by_graph, by_nodes = DryRunJudge("llm:gpt-4.1-mini"), DryRunJudge("llm:gpt-4.1-mini")
    case.build(by_graph).invoke({"conversation": CONVERSATION})
    steps = window_steps(case.build(by_nodes))
    if steps is None:  # another shape: the dry run runs its graph (DryRunConversations)
        return
    steps.run(as_conversation(CONVERSATION))
    assert figures(by_nodes) == figures(by_graph) and figures(by_graph)


def test_the_window_metrics_are_counted_by_their_nodes_and_other_shapes_by_their_graph():
    judge = DryRunJudge("llm:gpt-4.1-mini")
    assert window_steps(build_metric("turn_relevancy", judge)) is not None
    assert window_steps(build_metric("conversation_relevance", judge, window_size=2)) is not None
    for options in ({"reason": "llm"}, {"review": True}):  # a step after the judge's, a pause: the graph runs
        assert window_steps(build_metric("turn_relevancy", judge, **options)) is None
    assert window_steps(build_metric("conversation_completeness", judge)) is None  # extraction, then a judgement


def test_a_report_counts_each_metric_its_way_and_the_figures_are_the_graph_runs():
    item = LoadedConversation(as_conversation(CONVERSATION), "chats.jsonl:1", "judgegraph")
    counted = {}
    for way in ("graph", "nodes"):
        judge = DryRunJudge("llm:claude-sonnet-4-5", rule=cache_rule("anthropic:claude-sonnet-4-5"))
        plan = MetricPlan(["turn_relevancy", "conversation_completeness", "conversation_relevance"], judge)
        outcome = asyncio.run(judge_conversation(item, plan) if way == "graph" else DryRunConversations(plan)(item))
        assert outcome.error is None
        counted[way] = figures(judge)
    assert counted["nodes"] == counted["graph"]
    # each metric's steps counted, by its nodes or its graph; conversation_relevance asks turn_relevancy's prompt
    # (its step), and on three exchanges its windows are turn_relevancy's: the run answers them once, from the cache
    assert set(counted["graph"]) == {"turn_relevancy/judge_turn", "conversation_completeness/extract_goals",
                                     "conversation_completeness/judge_goal"}
    assert counted["graph"]["turn_relevancy/judge_turn"][0] == 3


def _own_window_metric(judge, *, step: str, name: str):
    """A user's metric of the window shape built by window_graph, its nodes and functions named its own way."""
    from types import SimpleNamespace

    from judgegraph.metrics.relevancy import RelevancyState, turn_request

    def split_into_windows(state):  # a plain function, not a node factory's
        return window_node(10, name="anything").invoke(state)

    def total(state):  # its own reduce: no score_node
        return {"results": {name: len(state.get("verdicts") or [])}}

    rate = judge_step(f"{step}_lambda", judge, lambda task: turn_request(task["window"], rubric="Be on topic."),
                      lambda task, outcome: {"verdicts": []})
    settings = SimpleNamespace(window_size=10, review=False, name=name)
    return window_graph(settings, RelevancyState, [(step, rate)], total, windows=split_into_windows).compile(name=name)


@pytest.mark.parametrize("step", ["judge_turn", "rate_the_reply"])
def test_renaming_a_node_or_its_functions_does_not_change_the_dry_runs_path_or_figures(step):
    """What the dry run takes a metric for is what window_graph declared when it built it: a step, windowing
    function or reduce named otherwise (a user's own) is counted by its nodes, with its graph run's figures."""
    by_graph, by_nodes = DryRunJudge("llm:gpt-4.1-mini"), DryRunJudge("llm:gpt-4.1-mini")
    _own_window_metric(by_graph, step=step, name=f"own_{step}").invoke({"conversation": CONVERSATION})
    graph = _own_window_metric(by_nodes, step=step, name=f"own_{step}")
    steps = window_steps(graph)
    assert steps is not None
    item = LoadedConversation(as_conversation(CONVERSATION), "chats.jsonl:1", "judgegraph")
    dry = DryRunConversations(MetricPlan([], by_nodes))
    assert dry.metrics(graph) == [(graph, steps)]
    steps.run(item.conversation)
    assert figures(by_nodes) == figures(by_graph) and figures(by_graph)["turn_relevancy/judge_turn"][0] == 3


def test_a_graph_named_like_a_window_metric_is_run_whole_unless_window_graph_declared_it():
    """The same nodes under the same names, wired by hand: not declared, so the dry run runs the graph (no reading
    back of names); a node added to window_graph's builder afterwards drops the declaration."""
    from langgraph.graph import END, START, StateGraph

    from judgegraph.core.nodes import fan_out
    from judgegraph.metrics.relevancy import RelevancyState, turn_request

    judge = DryRunJudge("llm:gpt-4.1-mini")
    step = judge_step("judge_turn", judge, lambda task: turn_request(task["window"], rubric="r"),
                      lambda task, outcome: {"verdicts": []})
    reduce = score_node("by_hand", lambda state, conversation, verdicts: None)  # never run here
    builder = StateGraph(RelevancyState, input_schema=MetricInput, output_schema=MetricOutput)
    builder.add_node("window_turns", window_node(10))
    builder.add_node("judge_turn", step)
    builder.add_node("reduce_score", reduce)
    builder.add_edge(START, "window_turns")
    builder.add_conditional_edges("window_turns", fan_out("judge_turn", "windows", item="window", empty="reduce_score"),
                                  ["judge_turn", "reduce_score"])
    builder.add_edge("judge_turn", "reduce_score")
    builder.add_edge("reduce_score", END)
    assert window_steps(builder.compile(name="by_hand")) is None

    from types import SimpleNamespace
    declared = window_graph(SimpleNamespace(window_size=10, review=False, name="x"), RelevancyState,
                            [("judge_turn", step)], reduce)
    assert window_steps(declared.compile(name="x")) is not None
    declared.add_node("after", lambda state: {})
    assert declared.declared is None and window_steps(declared.compile(name="x")) is None


def test_a_report_is_run_metric_by_metric_by_the_graphs_it_declares():
    judge = DryRunJudge("llm:gpt-4.1-mini")
    graphs = [build_metric("turn_relevancy", judge), build_metric("conversation_completeness", judge),
              build_metric("turn_relevancy", judge, name="prepare")]  # a metric named as the report's first node
    from judgegraph.report import create_report_graph

    report = create_report_graph(graphs)
    dry = DryRunConversations(MetricPlan([], judge))
    assert [g for g, _ in dry.metrics(report)] == graphs
    assert [steps is not None for _, steps in dry.metrics(report)] == [True, False, True]
    assert dry.metrics(graphs[0]) == [(graphs[0], window_steps(graphs[0]))]  # a metric graph alone: itself


def test_the_llm_judge_and_the_dry_run_begin_with_one_first_request():
    """LLMJudge.first_request: the message the judge sends first, or why it is not sent (what its judgement says
    and the dry run leaves to the judge's whole path)."""
    from judgegraph.judges.llm import LLMJudge
    from judgegraph.judges.scripted import ScriptedChatModel
    from judgegraph.metrics.relevancy import turn_request

    conversation = as_conversation(CONVERSATION)
    window = window_node(10).invoke({"conversation": conversation})["windows"][0]
    request = turn_request(window, rubric="Be on topic.")
    model = ScriptedChatModel(rules=[])
    message = LLMJudge(model).first_request(request)
    assert not isinstance(message, str) and message.text == request.rendered
    short = LLMJudge(model, max_prompt_tokens=20)
    reason = short.first_request(request)
    assert isinstance(reason, str) and reason.startswith("prompt too long:")
    assert short.judge(request).error == reason
    dry = DryRunJudge("llm:gpt-4.1-mini")
    dry._inner.max_prompt_tokens = 20  # over the limit: the judge's own path says why, nothing is counted
    assert dry.judge(request).error == reason and not dry.estimate().steps


def test_the_pieces_of_a_text_add_up_to_its_token_count():
    spaces = [chr(c) for c in range(0x3001) if chr(c).isspace()]
    parts = ["\n", "\n\n", " ", ".", "?", "a", "12", '"', "'s", "\r", "[user]", "é", "😀", "<|endoftext|>", *spaces]
    rnd = random.Random(7)
    texts = ["".join(rnd.choice(parts) for _ in range(rnd.randint(0, 40))) for _ in range(5000)]
    counter = PieceCounter(maxsize=64)  # forgets often: counts stay right
    assert [counter(t) for t in texts] == [count_tokens(t) for t in texts]
    assert counter("line one\nline two\n  indented\nend") == count_tokens("line one\nline two\n  indented\nend")


def test_the_openai_prefix_counter_serves_what_it_served_when_it_skips_short_requests():
    """Requests too short to be served are not encoded nor remembered: every figure stays the one the cache
    gives when it sees every request."""
    from langchain_core.messages import HumanMessage

    from judgegraph.judges.tokens import prompt_tokens
    from judgegraph.metrics.relevancy import TurnVerdict
    from judgegraph.providers.openai import request_tokens

    rule = cache_rule("openai:gpt-4.1-mini")
    counter = get("openai").cache_counter(rule)
    every = PrefixCache(rule.min_tokens)
    rnd = random.Random(3)
    long = " ".join(f"word{i}" for i in range(900))
    served = []
    for _ in range(300):
        text = rnd.choice([long, long[: rnd.randint(0, len(long))], "short"]) + f" tail {rnd.randint(0, 5)}"
        request = ScriptedRequest(text=text, messages=[HumanMessage(text)], schema=TurnVerdict)
        tokens = prompt_tokens(request.messages)
        served.append((counter(request, tokens), min(tokens, every.serve(request_tokens(request)))))
    assert all(a == b for a, b in served) and any(a for a, _ in served)
