"""goal_completion: ragas' documented AgentGoalAccuracy case, where the goal is read, the turn where it was reached
or lost, and judge errors reported, never scored."""

from __future__ import annotations

from typing import Any

import pytest

from judgegraph import ScriptedChatModel
from judgegraph.judges import NeedsLLMJudge
from judgegraph.judges.scripted import ScriptedRequest
from judgegraph.metrics.goal import create_goal_completion_metric

# ragas docs/concepts/metrics/available_metrics/agents.md, "Agent Goal accuracy" (the same sample in
# src/ragas/metrics/_goal_accuracy.py's InferGoalOutcomePrompt example): with this reference ragas prints 1.0.
RESTAURANT = [
    {"role": "user", "content": "Hey, book a table at the nearest best Chinese restaurant for 8:00pm"},
    {"role": "assistant", "content": "Sure, let me find the best options for you.",
     "tool_calls": [{"name": "restaurant_search", "arguments": {"cuisine": "Chinese", "time": "8:00pm"}, "id": "1",
                     "output": "Found a few options: 1. Golden Dragon, 2. Jade Palace"}]},
    {"role": "tool", "content": "Found a few options: 1. Golden Dragon, 2. Jade Palace"},
    {"role": "assistant", "content": "I found some great options: Golden Dragon and Jade Palace. Which one would you prefer?"},
    {"role": "user", "content": "Let's go with Golden Dragon."},
    {"role": "assistant", "content": "Great choice! I'll book a table for 8:00pm at Golden Dragon.",
     "tool_calls": [{"name": "restaurant_book", "arguments": {"name": "Golden Dragon", "time": "8:00pm"}, "id": "2",
                     "output": "Table booked at Golden Dragon for 8:00pm."}]},
    {"role": "tool", "content": "Table booked at Golden Dragon for 8:00pm."},
    {"role": "assistant", "content": "Your table at Golden Dragon is booked for 8:00pm. Enjoy your meal!"},
    {"role": "user", "content": "thanks"},
]
REFERENCE = "Table booked at one of the chinese restaurants at 8 pm"


def judge(verdict: str = "yes", turn: int | None = 8, goal: str = "Book a Chinese restaurant table for 8pm."):
    def reply(request: ScriptedRequest) -> dict[str, Any]:
        return {"user_goal": goal, "end_state": "A table is booked at Golden Dragon for 8:00pm.",
                "reason": f"Scripted {verdict}.", "turn": turn, "verdict": verdict}

    return ScriptedChatModel(default=reply)


def run(conversation: dict[str, Any], model: ScriptedChatModel):
    graph = create_goal_completion_metric(model=model)
    return graph.invoke({"conversation": conversation})["results"]["goal_completion"]


def test_ragas_documented_case_with_reference_scores_one_and_cites_the_booking_turn():
    model = judge("yes", 8)
    res = run({"id": "r", "turns": RESTAURANT, "expected_outcome": REFERENCE}, model)
    assert res.score == 1.0 and res.passed is True and res.value == "yes"
    (prompt,) = model.prompts  # one call: the goal, and the tool calls with their results, shown to the judge
    assert REFERENCE in prompt and '"restaurant_book"' in prompt and "Table booked at Golden Dragon" in prompt
    (v,) = res.verdicts
    assert v.turns == [7] and res.details["reached_in_turn"] == 8 and res.details["goal_source"] == "expected_outcome"
    assert res.reason.startswith("Goal reached in turn 8") and REFERENCE[:40] in res.reason


def test_ragas_documented_case_without_reference_infers_the_goal():
    model = judge("yes", 8, goal="Book a table at the nearest best Chinese restaurant for 8:00pm.")
    res = run({"id": "r", "turns": RESTAURANT}, model)
    assert "no goal is stated" in model.prompts[0] and res.score == 1.0
    assert res.details["goal_source"] == "inferred" and res.verdicts[0].goal.startswith("Book a table")


def test_a_goal_not_reached_names_the_turn_where_it_was_lost():
    res = run({"id": "r", "turns": RESTAURANT, "expected_outcome": "A table booked at Jade Palace."}, judge("no", 6))
    assert res.score == 0.0 and res.passed is False and res.details["lost_in_turn"] == 6
    assert res.reason.startswith("Goal not reached (lost in turn 6)")


def test_a_cited_turn_that_is_no_assistant_turn_is_dropped():
    res = run({"id": "r", "turns": RESTAURANT, "expected_outcome": REFERENCE}, judge("yes", 5))  # turn 5 is the user's
    assert res.verdicts[0].turns == [] and res.details["reached_in_turn"] is None
    assert run({"id": "r", "turns": RESTAURANT}, judge("yes", 99)).verdicts[0].turns == []


@pytest.mark.parametrize(("fields", "source"), [
    ({"expected_outcome": "G", "metadata": {"goal": "other"}}, "expected_outcome"),
    ({"metadata": {"goal": "G"}}, "metadata.goal"),
    ({"metadata": {"reference": "G"}}, "metadata.reference"),  # ragas' reference, as its loader keeps it
    ({"metadata": {"expectations": {"expected_output": "G"}}}, "metadata.expectations.expected_output"),  # MLflow
    ({"metadata": {"expectations": "G"}}, "metadata.expectations"),
])
def test_where_the_goal_is_read(fields, source):
    model = judge()
    res = run({"id": "r", "turns": RESTAURANT, **fields}, model)
    assert res.details["goal_source"] == source and res.verdicts[0].goal == "G"
    assert "<goal>\nG\n</goal>" in model.prompts[0]


def test_a_simulated_scenario_s_goal_is_the_conversation_s_goal():
    from langchain_core.messages import AIMessage, HumanMessage

    from judgegraph.apps.simulate.graph import conversation_of

    conv = conversation_of({"scenario": {"id": "s", "persona": "A diner.", "goal": "Book a table for 8pm."},
                            "messages": [HumanMessage("Book a table"), AIMessage("Booked for 8pm.")]})
    model = judge("yes", 2)
    res = run(conv.model_dump(), model)
    assert res.details["goal_source"] == "expected_outcome" and "Book a table for 8pm." in model.prompts[0]


def test_a_judge_error_is_reported_not_scored():
    bad = ScriptedChatModel(default=lambda request: {"reason": "?", "verdict": "maybe"})
    res = run({"id": "r", "turns": RESTAURANT, "expected_outcome": REFERENCE}, bad)
    assert res.status == "error" and res.score is None and res.errors and res.verdicts[0].verdict is None


def test_no_user_turn_is_not_applicable_and_the_offline_judge_is_refused():
    res = run({"id": "r", "turns": [{"role": "assistant", "content": "Hello!"}]}, judge())
    assert res.status == "not_applicable"
    with pytest.raises(NeedsLLMJudge):
        create_goal_completion_metric()
