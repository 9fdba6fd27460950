"""A metric whose verdicts carry votes, for testing what is computed from votes through the real
``judgegraph eval`` path before any judge writes them (``-m tests.kit.voted_metric:create``).

Each assistant reply holding ``votes=a,b,c`` becomes one window verdict whose repeats answered ``a``, ``b``
and ``c`` (their plurality is the verdict); the score is the share of "yes" verdicts, threshold 0.5."""

from __future__ import annotations

import re
from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from judgegraph.core.scoring import make_result
from judgegraph.core.state import MetricInput, MetricOutput, MetricState, conversation_of
from judgegraph.data.results import Vote, WindowVerdict

NAME = "voted"
JUDGE = "llm:scripted-repeats"


def _verdicts(state: Any) -> dict[str, Any]:
    conversation = conversation_of(state)
    verdicts: list[WindowVerdict] = []
    for i, turn in enumerate(conversation.turns):
        found = re.search(r"votes=([a-z,]+)", turn.content) if turn.role == "assistant" else None
        if found is None:
            continue
        labels = found.group(1).split(",")
        votes = [Vote(judge=JUDGE, repeat=r, verdict=lab, reason=f"repeat {r}: {lab}") for r, lab in enumerate(labels)]
        majority = max(dict.fromkeys(labels), key=labels.count)
        verdicts.append(WindowVerdict(window=len(verdicts), turns=[i - 1, i], verdict=majority, votes=votes))
    result = make_result(NAME, conversation, verdicts, judge=JUDGE, threshold=0.5)
    return {"results": {NAME: result}}


def create() -> CompiledStateGraph:
    builder = StateGraph(MetricState, input_schema=MetricInput, output_schema=MetricOutput)
    builder.add_node("reduce_score", _verdicts)
    builder.add_edge(START, "reduce_score")
    builder.add_edge("reduce_score", END)
    return builder.compile(name=NAME)
