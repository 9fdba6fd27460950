"""tool_correctness: the reference trajectory modes (the peers' own cases), argument comparison, the LLM
judgements, where the reference is read, and bad references as input errors."""

from __future__ import annotations

import json
from typing import Any

import pytest
from metric_cases import answer

from judgegraph import ScriptedChatModel
from judgegraph.data.conversation import Conversation
from judgegraph.metrics.tools import create_tool_correctness_metric

SF, LONDON, SAN_FRANCISCO = {"city": "SF"}, {"city": "London"}, {"city": "San Francisco"}


def call(name: str, args: dict[str, Any], i: int = 0) -> dict[str, Any]:
    return {"name": name, "arguments": json.dumps(args), "id": f"c{i}", "output": "sunny"}


def openai_ref(*calls: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """A reference step as openevals' tests write it: OpenAI tool calls, arguments as JSON strings."""
    return [{"function": {"name": n, "arguments": json.dumps(a)}} for n, a in calls]


def agent_conversation(steps: list[list[dict[str, Any]]], expected: Any, question: str = "What is the weather?") -> dict:
    """A user message, then one assistant message per step of calls (each followed by its tool results), then the
    answer; ``expected`` on the user turn."""
    turns: list[dict[str, Any]] = [{"role": "user", "content": question, "metadata": {"expected_tools": expected}}]
    for calls in steps:
        turns.append({"role": "assistant", "content": "", "tool_calls": calls})
        turns += [{"role": "tool", "content": c["output"]} for c in calls]
    turns.append({"role": "assistant", "content": "It is sunny."})
    return {"id": "agent", "turns": turns}


def result(conversation: dict, model: Any = None, **options: Any):
    graph = create_tool_correctness_metric(model=model, **options)
    return graph.invoke({"conversation": conversation})["results"]["tool_correctness"]


MODES = ("unordered", "superset", "subset", "strict")


# openevals python/tests/trajectory/test_trajectory.py (agentevals' trajectory/match.py re-exports openevals'
# create_trajectory_match_evaluator): each test's trajectories as one exchange, and its expected score per mode.
OPENEVALS_CASES = {
    # test_trajectory_match: the same call
    "same_call": ([[call("get_weather", SAN_FRANCISCO)]], [openai_ref(("get_weather", SAN_FRANCISCO))],
                  dict.fromkeys(MODES, True)),
    # test_trajectory_with_different_tool_message_order: two calls of one message, in the other order
    "parallel_calls_other_order": ([[call("get_weather", SF, 1), call("get_weather", LONDON, 2)]],
                                   [openai_ref(("get_weather", LONDON), ("get_weather", SF))],
                                   dict.fromkeys(MODES, True)),
    # test_trajectory_with_different_message_count: the two calls made in two messages, the reference's in one
    "two_messages_for_one": ([[call("get_weather", SF, 1)], [call("get_weather", LONDON, 2)]],
                             [openai_ref(("get_weather", LONDON), ("get_weather", SF))],
                             {"unordered": True, "superset": True, "subset": True, "strict": False}),
    # test_trajectory_subset_tool_call: one of the reference's two calls made
    "one_of_two": ([[call("get_weather", SF)]], [openai_ref(("get_weather", LONDON), ("get_weather", SF))],
                   {"unordered": False, "superset": False, "subset": True, "strict": False}),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", sorted(OPENEVALS_CASES))
def test_the_trajectory_modes_give_openevals_scores_on_its_own_cases(case, mode):
    steps, expected, scores = OPENEVALS_CASES[case]
    res = result(agent_conversation(steps, expected), trajectory=mode)
    (v,) = res.verdicts
    assert v.by == "reference" and v.transcript == [] and res.usage.calls == 0  # no judge call: a deterministic verdict
    assert (v.verdict == "yes") is scores[mode], v.reason
    assert res.score == (1.0 if scores[mode] else 0.0)


def test_a_wrong_tool_fails_every_mode_and_the_reason_names_it():
    """agentevals python/tests/test_trajectory.py::test_exact_matcher_with_different_called_tools."""
    for mode in MODES:
        res = result(agent_conversation([[call("get_weather", SF)]], [openai_ref(("accuweather_forecast", SF))]),
                     trajectory=mode)
        assert res.verdicts[0].verdict == "no" and res.passed is False
        assert "accuweather_forecast" in res.reason


@pytest.mark.parametrize(("arguments", "passed"), [("exact", False), ("ignore", True)])
def test_arguments_exact_or_ignored(arguments, passed):
    """openevals python/tests/trajectory/test_trajectory.py::test_trajectory_match_strict_params."""
    conv = agent_conversation([[call("get_weather", SF)]], [{"name": "get_weather", "args": SAN_FRANCISCO}])
    assert result(conv, trajectory="strict", arguments=arguments).passed is passed


def test_a_custom_comparator_decides_arguments():
    """openevals test_tool_args_match_mode_superset: a call whose arguments hold the reference's (a comparator the
    caller writes; exact arguments fail it)."""
    conv = agent_conversation([[call("get_flight_info", {"is_cool": True, "flight_no": "LX0112"})]],
                              [{"name": "get_flight_info", "input_parameters": {"flight_no": "LX0112"}}])
    seen: list[tuple[Any, Any]] = []

    def holds(called: Any, expected: Any) -> bool:
        seen.append((called, expected))
        return all(called.get(k) == v for k, v in expected.items())

    assert result(conv, arguments="exact").passed is False
    assert result(conv, arguments=holds).passed is True
    assert seen == [({"is_cool": True, "flight_no": "LX0112"}, {"flight_no": "LX0112"})]  # the call's, then the reference's


def test_a_reference_call_without_arguments_matches_any():
    conv = agent_conversation([[call("get_weather", SF)]], ["get_weather"])
    assert result(conv, trajectory="strict").passed is True


def test_a_repeated_call_is_extra_for_subset_and_unordered_not_for_superset():
    conv = agent_conversation([[call("search", SF, 1)], [call("search", SF, 2)]], [{"name": "search", "arguments": SF}])
    by_mode = {m: result(conv, trajectory=m).verdicts[0].verdict for m in MODES}
    assert by_mode == {"unordered": "no", "superset": "yes", "subset": "no", "strict": "no"}
    assert "not in the reference search" in result(conv, trajectory="unordered").reason


def test_an_empty_reference_means_no_tool_should_be_called():
    called = agent_conversation([[call("search", SF)]], [])
    assert result(called, trajectory="unordered").passed is False
    quiet = agent_conversation([], [])
    assert result(quiet).passed is True


# deepeval tests/test_metrics/test_tool_correctness.py is not in the index; its metric's non-exact score (expected
# tools found among the called, order not considered) is our "superset" mode on names (arguments ignored):
def test_deepeval_s_default_case_is_superset_on_names():
    """deepeval deepeval/metrics/tool_correctness/tool_correctness.py (_calculate_non_exact_match_score: each expected
    tool found among the called ones; extra calls do not lower the score) is ``superset`` with arguments ignored."""
    conv = agent_conversation([[call("WebSearch", {"q": "x"}, 1), call("ToolQuery", {"q": "y"}, 2)]],
                              [{"name": "WebSearch", "input_parameters": {"q": "other"}}])
    assert result(conv, trajectory="superset", arguments="ignore").passed is True
    assert result(conv, trajectory="strict", arguments="ignore").passed is False  # should_exact_match


def test_llm_arguments_pair_names_by_reference_then_ask_the_judge_once():
    model = ScriptedChatModel(default=answer("no"))
    conv = agent_conversation([[call("get_weather", SF)]], [{"name": "get_weather", "args": SAN_FRANCISCO}])
    res = result(conv, model, arguments="llm")
    (v,) = res.verdicts
    assert model.call_count == 1 and v.by == "arguments" and v.verdict == "no" and len(v.transcript) == 1
    (prompt,) = model.prompts
    assert '"city": "SF"' in prompt and '"city": "San Francisco"' in prompt
    wrong_tool = agent_conversation([[call("get_forecast", SF)]], [{"name": "get_weather", "args": SAN_FRANCISCO}])
    again = ScriptedChatModel(default=answer("yes"))
    assert result(wrong_tool, again, arguments="llm").verdicts[0].verdict == "no" and again.call_count == 0


def test_without_a_reference_the_llm_judges_each_exchange_that_called_tools():
    model = ScriptedChatModel(default=answer("no"))
    turns = [{"role": "user", "content": "Weather in SF?"},
             {"role": "assistant", "content": "", "tool_calls": [call("get_weather", SF, 1), call("get_weather", SF, 2)]},
             {"role": "assistant", "content": "Sunny."},
             {"role": "user", "content": "Thanks!"}, {"role": "assistant", "content": "You're welcome."}]
    res = result({"id": "x", "turns": turns}, model)
    (v,) = res.verdicts  # the second exchange called nothing: not checked
    assert v.by == "judge" and v.check == "exchange-1" and v.turns == [1, 2] and v.verdict == "no"
    assert model.call_count == 1 and "[call 2] get_weather" in model.prompts[0] and "output: sunny" in model.prompts[0]
    assert res.reason.startswith("0 of 1 tool-call checks right")
    assert result({"id": "x", "turns": turns}, ScriptedChatModel(default=answer("no")),
                  judge_unreferenced=False).status == "not_applicable"


def test_the_offline_judge_checks_references_and_leaves_the_rest():
    turns = [{"role": "user", "content": "q", "metadata": {"expected_tools": ["a"]}},
             {"role": "assistant", "content": "r", "tool_calls": [{"name": "a"}]},
             {"role": "user", "content": "q2"}, {"role": "assistant", "content": "r2", "tool_calls": [{"name": "b"}]}]
    res = result({"id": "x", "turns": turns})
    assert [v.check for v in res.verdicts] == ["exchange-1"] and res.passed is True
    with pytest.raises(ValueError, match="arguments='llm' needs an LLM judge"):
        create_tool_correctness_metric(arguments="llm")


def test_the_offline_judge_says_calls_were_made_and_why_none_was_checked():
    """Issue 27.8: a thread that called two tools read "No tool call to check: no exchange called a tool"."""
    turns = [{"role": "user", "content": "q", "metadata": {}},
             {"role": "assistant", "content": "", "tool_calls": [{"name": "search"}]},
             {"role": "tool", "content": "found"}, {"role": "assistant", "content": "r"},
             {"role": "user", "content": "q2"}, {"role": "assistant", "content": "r2", "tool_calls": [{"name": "book"}]}]
    res = result({"id": "x", "turns": turns})
    assert res.verdicts == [] and res.passed is None
    assert res.reason.startswith("2 exchange(s) called tools, with no reference to check them against, and the offline"
                                 " judge cannot judge calls")
    assert "no exchange called a tool" not in res.reason and res.details["unchecked"] == 2
    plain = result({"id": "y", "turns": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "r"}]})
    assert plain.reason.startswith("No tool call to check")


def test_a_conversation_reference_checks_the_whole_trajectory_once():
    turns = [{"role": "user", "content": "Book a table."},
             {"role": "assistant", "content": "", "tool_calls": [call("restaurant_search", {"cuisine": "Chinese"})]},
             {"role": "assistant", "content": "Golden Dragon or Jade Palace?"},
             {"role": "user", "content": "Golden Dragon."},
             {"role": "assistant", "content": "", "tool_calls": [call("restaurant_book", {"name": "Golden Dragon"})]},
             {"role": "assistant", "content": "Booked."}]
    # ragas' reference_tool_calls (its ToolCall: name, args), as the ragas loader keeps it in the metadata
    conv = {"id": "x", "turns": turns, "metadata": {"reference_tool_calls": [
        {"name": "restaurant_search", "args": {"cuisine": "Chinese"}}, {"name": "restaurant_book", "args": {"name": "Golden Dragon"}}]}}
    res = result(conv, ScriptedChatModel(default=answer("yes")), trajectory="strict", judge_unreferenced=False)
    (v,) = res.verdicts
    assert v.check == "conversation" and v.id == "conversation" and v.turns == [1, 4] and v.verdict == "yes"


def test_the_latest_scope_checks_only_the_latest_exchange():
    from judgegraph.apps.metrics import latest_runner

    turns = [{"role": "user", "content": "q", "metadata": {"expected_tools": ["a"]}},
             {"role": "assistant", "content": "r", "tool_calls": [{"name": "b"}]},
             {"role": "user", "content": "q2", "metadata": {"expected_tools": ["c"]}},
             {"role": "assistant", "content": "r2", "tool_calls": [{"name": "c"}]}]
    graph = create_tool_correctness_metric()
    res = latest_runner(graph).invoke({"conversation": Conversation.model_validate({"id": "x", "turns": turns})})
    assert [v.check for v in res["results"]["tool_correctness"].verdicts] == ["exchange-2"]


@pytest.mark.parametrize(("expected", "message"), [
    ("get_weather", "expected_tools: expected a list of tool calls, got str"),
    ([{"args": {}}], "expected_tools[0].name: a tool call needs a non-empty string 'name'"),
    ([{"name": "a", "argz": {}}], "expected_tools[0]: unknown key 'argz'"),
    ([{"name": "a", "args": {}, "arguments": {}}], "give only one of 'arguments', 'args'"),
    ([["a"], []], "expected_tools[1]: a step of calls made together must not be empty"),
    ([{"name": "a", "args": 3}], "expected_tools[0].args: arguments must be an object or a JSON string"),
])
def test_a_bad_reference_is_a_validation_error_naming_the_item(expected, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")):
        Conversation.model_validate(agent_conversation([], expected))


def test_a_bad_reference_in_a_file_names_the_file_line_and_field(tmp_path):
    from judgegraph.loaders import InputError, iter_records

    good = agent_conversation([[call("a", {})]], ["a"])
    bad = {**agent_conversation([[call("a", {})]], [{"nam": "a"}]), "id": "bad"}
    path = tmp_path / "chats.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    items = list(iter_records(path))
    (error,) = [i for i in items if isinstance(i, InputError)]
    text = str(error)
    assert text.startswith(f"{path}:2") and "turns.0.metadata" in text and "expected_tools[0]" in text
    assert sum(not isinstance(i, InputError) for i in items) == 1  # the good conversation is still read


def test_rejudging_keeps_reference_verdicts_not_chosen_and_checks_a_chosen_one_again_with_no_call():
    from judgegraph.steering import rejudge_result

    turns = [{"role": "user", "content": "q", "metadata": {"expected_tools": ["a"]}},
             {"role": "assistant", "content": "r", "tool_calls": [{"name": "a"}]},
             {"role": "user", "content": "q2"}, {"role": "assistant", "content": "r2", "tool_calls": [{"name": "b"}]}]
    conv = Conversation.model_validate({"id": "x", "turns": turns})
    old = result(conv.model_dump(), ScriptedChatModel(default=answer("yes")))
    assert [(v.check, v.by) for v in old.verdicts] == [("exchange-1", "reference"), ("exchange-2", "judge")]
    again = ScriptedChatModel(default=answer("no"))
    new = rejudge_result(old.model_dump(mode="json"), conv, model=again, verdict_ids=["exchange-2"],
                         metric="tool_correctness")
    assert again.call_count == 1 and new.details["rejudged"]["verdicts"] == ["exchange-2"]
    new = rejudge_result(old.model_dump(mode="json"), conv, model=again, verdict_ids=["exchange-1"],
                         metric="tool_correctness")
    assert again.call_count == 1 and new.details["rejudged"]["verdicts"] == ["exchange-1"]
    assert [v.verdict for v in new.verdicts] == ["yes", "yes"]  # checked again by reference; the judged one kept


@pytest.mark.parametrize("mode", MODES)
def test_langchain_messages_with_a_reference_from_langchain_tool_calls(mode):
    """openevals python/tests/trajectory/test_trajectory.py::test_trajectory_match_langchain_messages: the outputs as
    LangChain messages (from_messages keeps each AI message's tool calls with its ToolMessage's output), the reference
    as the reference AI message's own tool calls ({"id", "name", "args"})."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from judgegraph.data.conversation import from_messages

    reference = AIMessage(content="Let me check that for you!",
                          tool_calls=[{"id": "4321", "name": "get_weather", "args": {"city": "San Francisco"}}])
    outputs = [HumanMessage("What is the weather in SF?"),
               AIMessage(content="", tool_calls=[{"id": "1234", "name": "get_weather", "args": {"city": "San Francisco"}}]),
               ToolMessage(tool_call_id="1234", content="It's 80 degrees and sunny in SF."),
               AIMessage("The weather in SF is 80 degrees and sunny.")]
    conv = from_messages(outputs, id="lc", metadata={"expected_tools": [dict(c) for c in reference.tool_calls]})
    res = result(conv.model_dump(), trajectory=mode)
    (v,) = res.verdicts
    assert v.check == "conversation" and v.verdict == "yes"
    assert conv.turns[1].tool_calls[0].output == "It's 80 degrees and sunny in SF."


def test_rejudging_reads_back_the_trajectory_and_argument_modes_the_result_was_made_with():
    from judgegraph.steering import rejudge_result

    conv = Conversation.model_validate(agent_conversation([[call("get_weather", SF)]],
                                                          [{"name": "get_weather", "args": SAN_FRANCISCO}, "other"]))
    old = result(conv.model_dump(), trajectory="subset", arguments="ignore")
    assert old.passed is True and old.details["trajectory"] == "subset" and old.details["arguments"] == "ignore"
    new = rejudge_result(old.model_dump(mode="json"), conv, model=ScriptedChatModel(default=answer("no")),
                         metric="tool_correctness")
    assert new.verdicts[0].verdict == "yes"  # unordered or exact arguments would say no
    custom = result(conv.model_dump(), trajectory="subset", arguments=lambda a, b: True)
    assert custom.details["arguments"] is None


def test_deepeval_tool_calls_and_reference_through_its_format_type_ignored(tmp_path):
    """deepeval tests/test_metrics/test_tool_correctness_metric.py::test_type_is_ignored_by_default: the same call
    (name, input_parameters) with an MCP type called and a FUNCTION type expected scores 1 by default. Read here
    from a deepeval ConversationalTestCase record (``tools_called``; the reference in ``additional_metadata``)."""
    from judgegraph.loaders import load_file

    params = {"repoName": "confident-ai/deepeval"}
    record = {"scenario": "Ask about the repo.", "turns": [
        {"role": "user", "content": "What does the confident-ai/deepeval repo use for metrics?",
         "additional_metadata": {"expected_tools": [{"name": "ask_question", "type": "FUNCTION",
                                                     "input_parameters": params}]}},
        {"role": "assistant", "content": "ask_question({})",
         "tools_called": [{"name": "ask_question", "type": "MCP", "input_parameters": params}]}]}
    path = tmp_path / "deepeval.json"
    path.write_text(json.dumps([record]), encoding="utf-8")
    loaded = load_file(path)
    assert loaded.ok, loaded.errors
    (item,) = loaded.conversations
    res = result(item.conversation.model_dump(), trajectory="strict")
    assert res.score == 1.0 and res.verdicts[0].called == ['ask_question({"repoName": "confident-ai/deepeval"})']
