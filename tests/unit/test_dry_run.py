"""The dry run without the graph's run (cost.dryrun): a metric of the window shape counted by its own nodes,
the same figures as its graph run; token counts by pieces; the prefix counter's short requests."""

from __future__ import annotations

import asyncio
import random

import pytest
from metric_cases import CASES, CONVERSATION, IDS

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
