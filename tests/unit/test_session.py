"""Session judges with a scripted fake model keyed by prompt content."""

import asyncio
import json

import pytest
from pydantic import BaseModel

from judgegraph.judges import NeedsLLMJudge, resolve_judge
from judgegraph.judges.offline import EmbeddingJudge
from judgegraph.judges.scripted import ScriptedChatModel
from judgegraph.metrics import create_metric, registry
from judgegraph.metrics.session import (
    create_conversation_completeness_metric,
    create_conversational_guidelines_metric,
    create_knowledge_retention_metric,
    create_role_adherence_metric,
    create_user_frustration_metric,
)

# 1-based turn numbers in comments: the judge sees and cites these.
TRIP = {"id": "trip", "chatbot_role": "Travel-booking assistant for hotels and restaurants in Portugal.", "turns": [
    {"role": "system", "content": "You are TravelBuddy."},  # 1
    {"role": "user", "content": "Hi, I'm Dana. I need a hotel in Lisbon from 3 to 7 May for two adults. I'm vegetarian."},  # 2
    {"role": "assistant", "content": "Hello Dana! Hotel Alfama has a double room from 3 to 7 May at 120 EUR a night."},  # 3
    {"role": "user", "content": "Great. What's a good restaurant nearby?"},  # 4
    {"role": "assistant", "content": "Try Casa do Bacalhau, famous for its cod and grilled pork."},  # 5
    {"role": "user", "content": "I told you I'm vegetarian!! And can you book the hotel?"},  # 6
    {"role": "assistant", "content": "Sorry! Try Ao 26 Vegan Food. Which dates should I book?"},  # 7
    {"role": "user", "content": "3 to 7 May, as I said. Also, is the airport metro open at night?"},  # 8
    {"role": "assistant", "content": "Booked: Hotel Alfama, 3-7 May, two adults, confirmation AX12."},  # 9
    {"role": "user", "content": "Thanks, perfect."},  # 10
]}


def when(*parts):
    """A rule key: every fragment is in the prompt."""
    return lambda text: all(p in text for p in parts)


def model(rules, default=None):
    return ScriptedChatModel(rules=list(rules), default=default)


def run(graph, conv=TRIP):
    (res,) = graph.invoke({"conversation": conv})["results"].values()
    return res


# -- conversation_completeness --------------------------------------------------

EXTRACT_GOALS = "list what the user wanted"
GOALS = {"goals": [
    {"request": "Find a hotel in Lisbon for 3-7 May for two adults.", "asked_in_turns": [2]},
    {"request": "Recommend a restaurant nearby.", "asked_in_turns": [4, 6]},
    {"request": "Book the hotel.", "asked_in_turns": [6, 8]},
    {"request": "Is the airport metro open at night?", "asked_in_turns": [8]},
]}


def goal(fragment):
    return when("satisfied one request", f"<request>\n{fragment}")


def completeness_model(**over):
    rules = {
        "extract": [GOALS],
        "hotel": [{"reason": "Turn 3 offers Hotel Alfama.", "answered_in_turns": [3], "verdict": "yes"}],
        "restaurant": [{"reason": "Turn 7 gives a vegan place.", "answered_in_turns": [5, 7], "verdict": "yes"}],
        "book": [{"reason": "Turn 9 confirms the booking.", "answered_in_turns": [9], "verdict": "Yes"}],
        "metro": [{"reason": "The metro question in turn 8 is never answered.", "answered_in_turns": [], "verdict": "no"}],
    } | over
    return model([
        (EXTRACT_GOALS, rules["extract"]), (goal("Find a hotel"), rules["hotel"]),
        (goal("Recommend a restaurant"), rules["restaurant"]), (goal("Book the hotel"), rules["book"]),
        (goal("Is the airport metro"), rules["metro"]),
    ])


def test_completeness_scores_satisfied_requests_and_cites_turns():
    m = completeness_model()
    res = run(create_conversation_completeness_metric(model=m))
    assert (res.value, res.score, res.passed, res.status) == ("no", 0.75, True, "passed")
    assert m.call_count == 5 and res.usage.calls == 5  # 1 extraction + 1 per request
    assert [v.verdict for v in res.verdicts] == ["yes", "yes", "yes", "no"]
    metro = res.verdicts[3]
    assert metro.asked_in == [7] and metro.answered_in == [] and metro.turns == [7]
    assert res.verdicts[1].turns == [3, 4, 5, 6]  # asked in 4, 6; addressed in 5, 7 (1-based)
    assert "3 of 4 user requests satisfied" in res.reason
    assert 'request 4 "Is the airport metro open at night?" (asked in turn 8; no response)' in res.reason
    assert res.details == {"requests": 4, "judged": 4, "satisfied": 3}


def test_completeness_all_satisfied_is_yes_and_strict_mode_is_all_or_nothing():
    yes = [{"reason": "Answered in turn 9.", "answered_in_turns": [9], "verdict": "yes"}]
    assert run(create_conversation_completeness_metric(model=completeness_model(metro=yes))).value == "yes"
    res = run(create_conversation_completeness_metric(model=completeness_model(), strict_mode=True))
    assert (res.score, res.threshold, res.passed, res.value) == (0.0, 1.0, False, "no")


def test_completeness_goal_judge_error_is_counted_and_the_rest_kept():
    m = completeness_model(restaurant=[RuntimeError("503 upstream")])
    res = run(create_conversation_completeness_metric(model=m))
    assert res.verdicts[1].verdict is None and res.verdicts[1].error == "RuntimeError: 503 upstream"
    assert res.score == pytest.approx(2 / 3) and res.details["judged"] == 3
    assert len(res.errors) == 1 and res.errors[0].where.startswith("request 2 ")
    assert res.errors[0].step == "conversation_completeness/judge_goal"
    assert "Judged 3 of 4 verdicts; 1 judge errors." in res.reason


def test_completeness_extraction_error_is_status_error_and_nothing_else_runs():
    m = completeness_model(extract=["not a tool call"])
    res = run(create_conversation_completeness_metric(model=resolve_judge(m, max_tries=2)))
    assert res.status == "error" and res.score is None and res.value is None and res.passed is None
    assert m.call_count == 2 and "invalid output after 2 tries" in res.errors[0].message


def test_completeness_no_request_is_not_applicable():
    m = completeness_model(extract=[{"goals": []}])
    res = run(create_conversation_completeness_metric(model=m))
    assert res.status == "not_applicable" and res.score is None and m.call_count == 1


def test_completeness_cited_turns_are_checked_and_duplicates_merged():
    goals = {"goals": [
        {"request": "Book the hotel.", "asked_in_turns": [6, 3, 99]},  # 3 is an assistant turn, 99 does not exist
        {"request": "book  the hotel.", "asked_in_turns": [8]},
    ]}
    m = completeness_model(extract=[goals])
    res = run(create_conversation_completeness_metric(model=m))
    assert len(res.verdicts) == 1 and res.verdicts[0].asked_in == [5, 7]
    assert m.call_count == 2


# -- knowledge_retention ----------------------------------------------------------

FACTS = {"facts": [
    {"turn": 2, "fact": "The user's name is Dana."},
    {"turn": 2, "fact": "The user travels 3-7 May."},
    {"turn": 2, "fact": "The user is vegetarian."},
    {"turn": 8, "fact": "The user repeats the dates 3-7 May."},
    {"turn": 3, "fact": "Not a user turn."},  # dropped: turn 3 is the assistant's
]}
RETAINED = {"reason": "Consistent with what the user said.", "lapses": [], "verdict": "yes"}


def check(turn):
    return when("kept in mind what the user", f"<judged_turn>\n{turn}\n</judged_turn>")


def retention_model(over=None):
    rules = {
        "extract": [FACTS],
        5: [{"reason": "Turn 5 suggests cod and pork to a vegetarian (turn 2).",
             "lapses": [{"fact": "The user is vegetarian.", "stated_in_turn": 2, "kind": "Contradicted"}],
             "verdict": "no"}],
        7: [{"reason": "Turn 7 asks again for the dates given in turn 2.",
             "lapses": [{"fact": "The user travels 3-7 May.", "stated_in_turn": 2, "kind": "forgotten"}],
             "verdict": "no"}],
    } | (over or {})
    return model([
        ("list what the user told the assistant", rules["extract"]),
        (check(5), rules[5]), (check(7), rules[7]),
        (check(3), rules.get(3, [RETAINED])), (check(9), rules.get(9, [RETAINED])),
    ])


def test_retention_names_the_failing_turn_and_the_fact():
    m = retention_model()
    res = run(create_knowledge_retention_metric(model=m))
    assert m.call_count == 5  # 1 extraction + assistant turns 3, 5, 7, 9
    assert (res.value, res.score, res.passed) == ("no", 0.5, True)
    assert [(v.turn, v.verdict) for v in res.verdicts] == [(2, "yes"), (4, "no"), (6, "no"), (8, "yes")]
    lapse = res.verdicts[1].lapses[0]
    assert (lapse.fact, lapse.stated_in, lapse.kind) == ("The user is vegetarian.", 1, "contradicted")
    assert res.verdicts[1].turns == [1, 4]
    assert res.details["failed_turns"] == [4, 6] and res.details["dropped_facts"] == 1
    assert 'turn 5 "Try Casa do Bacalhau' in res.reason and 'contradicted "The user is vegetarian." (stated in turn 2)' in res.reason
    assert 'turn 7 "Sorry! Try Ao 26' in res.reason and "forgotten" in res.reason


def test_retention_checks_each_turn_against_only_what_came_before():
    m = retention_model()
    run(create_knowledge_retention_metric(model=m))
    (p5,) = [p for p in m.prompts if "<judged_turn>\n5\n" in p]
    assert "Casa do Bacalhau" in p5 and "Ao 26" not in p5  # the conversation stops at the judged turn
    facts = p5.split("<facts_stated_before>")[1].split("</facts_stated_before>")[0]
    assert "(turn 2) The user is vegetarian." in facts and "repeats the dates" not in facts  # turn 8 comes later
    (p9,) = [p for p in m.prompts if "<judged_turn>\n9\n" in p]
    assert "(turn 8) The user repeats the dates 3-7 May." in p9


def test_retention_inconsistent_answer_is_reasked_with_the_error():
    bad = {"reason": "It forgot something.", "lapses": [], "verdict": "no"}
    m = retention_model({7: [bad, {"reason": "fine", "lapses": [], "verdict": "yes"}]})
    res = run(create_knowledge_retention_metric(model=m))
    assert res.verdicts[2].attempts == 2 and res.verdicts[2].verdict == "yes"
    assert any("needs at least one lapse" in p for p in m.prompts)


def test_retention_one_turn_error_is_counted_and_the_rest_kept():
    m = retention_model({9: ["garbage"]})
    res = run(create_knowledge_retention_metric(model=resolve_judge(m, max_tries=1)))
    assert res.verdicts[3].verdict is None and res.errors[0].where == "turn 9"
    assert res.score == pytest.approx(1 / 3) and res.details["judged"] == 3 and res.status == "failed"


def test_retention_without_facts_is_not_applicable_after_one_call():
    m = retention_model({"extract": [{"facts": []}]})
    res = run(create_knowledge_retention_metric(model=m))
    assert res.status == "not_applicable" and m.call_count == 1 and "no fact" in res.reason


def test_retention_with_facts_only_after_the_last_reply_is_not_applicable_and_keeps_the_extraction():
    m = retention_model({"extract": [{"facts": [{"turn": 10, "fact": "The user is pleased."}]}]})
    res = run(create_knowledge_retention_metric(model=m))
    assert (res.status, res.value, res.score, res.passed) == ("not_applicable", None, None, None)
    assert res.reason == "No assistant turn comes after a fact the user stated." and m.call_count == 1
    assert res.usage.calls == 1 and res.details["facts"] == [{"turn": 9, "fact": "The user is pleased."}]
    assert res.details["assistant_turns"] == 0 and res.verdicts == []


# -- user_frustration -------------------------------------------------------------

FRUSTRATION = "became frustrated"


def frustration(verdict, turns=(), resolved_by=()):
    return {"reason": f"Judged {verdict}.", "frustrated_turns": list(turns), "resolved_by_turns": list(resolved_by),
            "verdict": verdict}


@pytest.mark.parametrize("answer,value,score,passed", [
    (frustration("none"), "none", 1.0, True),
    (frustration("resolved", [6], [7, 9]), "resolved", 0.5, True),
    (frustration("UNRESOLVED", [6, 8]), "unresolved", 0.0, False),
])
def test_frustration_values_scores_and_pass(answer, value, score, passed):
    m = model([(FRUSTRATION, [answer])])
    res = run(create_user_frustration_metric(model=m))
    assert (res.value, res.score, res.passed) == (value, score, passed) and m.call_count == 1
    assert res.verdicts[0].turns == sorted({t - 1 for t in answer["frustrated_turns"] + answer["resolved_by_turns"]})


def test_frustration_reason_cites_turns():
    res = run(create_user_frustration_metric(model=model([(FRUSTRATION, [frustration("resolved", [6, 3], [7])])])))
    assert res.reason.startswith("Frustration resolved: shown in turn 6, resolved by turn 7 (score 0.50 >= threshold 0.50).")  # turn 3 is not a user turn
    assert res.details == {"frustrated_turns": [5], "resolved_by_turns": [6]}


def test_frustration_strict_mode_fails_resolved():
    m = model([(FRUSTRATION, [frustration("resolved", [6], [7])])])
    res = run(create_user_frustration_metric(model=m, strict_mode=True))
    assert (res.score, res.threshold, res.passed, res.value) == (0.0, 1.0, False, "resolved")


def test_frustration_inconsistent_answer_is_reasked():
    m = model([(FRUSTRATION, [frustration("unresolved"), frustration("unresolved", [6])])])
    res = run(create_user_frustration_metric(model=m))
    assert res.value == "unresolved" and res.verdicts[0].attempts == 2
    assert "needs the user turns that show frustration" in m.prompts[-1]


def test_frustration_judge_error_is_status_error():
    res = run(create_user_frustration_metric(model=model([(FRUSTRATION, [ValueError("boom")])])))
    assert res.status == "error" and res.value is None and res.errors[0].message == "ValueError: boom"


# -- conversational_guidelines ----------------------------------------------------

GUIDELINES = ["Apologise when the user reports a problem.", "Respect dietary needs the user states.",
              "Quote refund rules from the policy."]


def guideline(fragment):
    return when("followed one guideline", f"<guideline>\n{fragment}")


def guidelines_model(**over):
    rules = {
        "Apologise": [{"reason": "Turn 7 apologises.", "violating_turns": [], "verdict": "yes"}],
        "Respect": [{"reason": "Turn 5 suggests meat.", "violating_turns": [5], "verdict": "no"}],
        "Quote": [{"reason": "No refund comes up.", "violating_turns": [], "verdict": "not applicable"}],
    } | over
    return model([(guideline(k), v) for k, v in rules.items()])


def test_guidelines_scores_followed_over_applicable_and_cites_turns():
    m = guidelines_model()
    res = run(create_conversational_guidelines_metric(model=m, guidelines=GUIDELINES))
    assert m.call_count == 3
    assert (res.value, res.score, res.passed) == ("no", 0.5, True)
    assert [v.verdict for v in res.verdicts] == ["yes", "no", "not_applicable"]
    assert res.verdicts[1].turns == [4]
    assert 'Violated: guideline 2 "Respect dietary needs the user states." in turn 5' in res.reason
    assert "Not applicable (left out of the score): guideline 3" in res.reason
    assert res.details == {"guidelines": 3, "judged": 2, "not_applicable": 1, "followed": 1}


def test_guidelines_error_in_one_is_counted_and_the_rest_kept():
    m = guidelines_model(Respect=["nonsense"])
    res = run(create_conversational_guidelines_metric(model=resolve_judge(m, max_tries=2), guidelines=GUIDELINES))
    assert (res.value, res.score) == ("yes", 1.0)
    assert res.errors[0].where.startswith("guideline 2 ") and res.errors[0].attempts == 2


def test_guidelines_all_not_applicable_is_not_applicable():
    res = run(create_conversational_guidelines_metric(model=guidelines_model(), guidelines=[GUIDELINES[2]]))
    assert res.status == "not_applicable" and res.score is None


def test_guideline_string_is_one_guideline():
    m = guidelines_model()
    assert run(create_conversational_guidelines_metric(model=m, guidelines=GUIDELINES[0])).score == 1.0


@pytest.mark.parametrize("bad", [None, [], "  ", ["ok", ""], [3]])
def test_missing_guidelines_is_a_clear_error_at_creation(bad):
    with pytest.raises(ValueError, match="guideline"):
        create_conversational_guidelines_metric(model=model([]), guidelines=bad)


# -- role_adherence ---------------------------------------------------------------


def role_answer(*items):
    return {"verdicts": [{"turn": t, "reason": r, "verdict": v} for t, r, v in items]}


def batch(first):
    return lambda text: "<turns_to_judge>\n" + first in text


def test_role_batches_assistant_turns_and_scores_in_role_share():
    m = model([
        (batch("3, 5\n"), [role_answer((3, "Books hotels.", "yes"), (5, "Recommends a restaurant.", "yes"))]),
        (batch("7, 9\n"), [role_answer((7, "Poem instead of help.", "no"), (9, "Books.", "yes"))]),
    ])
    res = run(create_role_adherence_metric(model=m, batch_size=2))
    assert m.call_count == 2 and res.usage.calls == 2
    assert (res.value, res.score) == ("no", 0.75)
    assert [(v.turn, v.batch, v.verdict) for v in res.verdicts] == [(2, 0, "yes"), (4, 0, "yes"), (6, 1, "no"), (8, 1, "yes")]
    assert 'Out of role: turn 7 "Sorry! Try Ao 26' in res.reason
    assert res.details["out_of_role_turns"] == [6] and res.details["batches"] == 2
    assert "Travel-booking assistant for hotels" in m.prompts[0]  # the conversation's chatbot_role


def test_role_from_the_factory_wins_and_default_batch_is_one_call():
    m = model([(batch("3, 5, 7, 9\n"), [role_answer((3, "ok", "yes"), (5, "ok", "yes"), (7, "ok", "yes"), (9, "ok", "yes"))])])
    res = run(create_role_adherence_metric(model=m, role="A pirate who only talks about ships."))
    assert res.score == 1.0 and m.call_count == 1
    assert "<chatbot_role>\nA pirate who only talks about ships.\n</chatbot_role>" in m.prompts[0]


def test_role_turn_missing_from_the_answer_is_a_judge_error_not_a_pass():
    m = model([(batch("3, 5, 7, 9\n"), [role_answer((3, "ok", "yes"), (5, "off", "no"), (9, "ok", "yes"))])])
    res = run(create_role_adherence_metric(model=m))
    assert res.verdicts[2].verdict is None and res.errors[0].where == "turn 7"
    assert "no verdict for turn 7" in res.errors[0].message
    assert res.score == pytest.approx(2 / 3)


def test_role_missing_is_not_applicable_without_a_call():
    m = model([])
    res = run(create_role_adherence_metric(model=m), {**TRIP, "chatbot_role": None, "turns": TRIP["turns"][1:]})
    assert res.status == "not_applicable" and "chatbot_role" in res.reason and m.call_count == 0


def test_role_from_the_system_message_when_no_role_is_given():
    # MLflow 3.17.2 ConversationalRoleAdherence: "The assistant's assigned role is defined by the system message"
    m = model([(batch("3, 5, 7, 9\n"), [role_answer((3, "ok", "yes"), (5, "ok", "yes"), (7, "ok", "yes"), (9, "ok", "yes"))])])
    res = run(create_role_adherence_metric(model=m), {**TRIP, "chatbot_role": None})
    assert (res.status, res.score, m.call_count) == ("passed", 1.0, 1)
    assert "<chatbot_role>\nYou are TravelBuddy.\n</chatbot_role>" in m.prompts[0]
    assert res.details["role"] == "You are TravelBuddy."


@pytest.mark.parametrize("kw", [{"batch_size": 0}, {"role": "  "}, {"threshold": 2}])
def test_role_bad_settings_are_clear_errors(kw):
    with pytest.raises(ValueError, match=next(iter(kw))):
        create_role_adherence_metric(model=model([]), **kw)


# -- all of them ------------------------------------------------------------------

FACTORIES = {
    "conversation_completeness": (create_conversation_completeness_metric, {}),
    "knowledge_retention": (create_knowledge_retention_metric, {}),
    "user_frustration": (create_user_frustration_metric, {}),
    "conversational_guidelines": (create_conversational_guidelines_metric, {"guidelines": GUIDELINES}),
    "role_adherence": (create_role_adherence_metric, {}),
}


@pytest.mark.parametrize("name", FACTORIES)
def test_offline_judge_is_refused_when_the_metric_is_built(name):
    factory, kw = FACTORIES[name]
    judge = EmbeddingJudge()
    with pytest.raises(NeedsLLMJudge, match=f"{name} needs an LLM judge"):
        factory(model=judge, **kw)
    with pytest.raises(NeedsLLMJudge):
        factory(**kw)  # no model: the offline judge
    assert judge._embeddings is None  # refused before any model was loaded


@pytest.mark.parametrize("name", FACTORIES)
def test_the_runner_turns_needs_llm_into_that_metrics_error_result(name):
    import asyncio

    from judgegraph.data.conversation import as_conversation
    from judgegraph.loaders import LoadedConversation
    from judgegraph.runs.runner import MetricPlan, evaluate_async

    _, kw = FACTORIES[name]
    plan = MetricPlan([name, "turn_relevancy"], resolve_judge(EmbeddingJudge()), kw)
    plan.check()  # not a usage error
    summary = asyncio.run(evaluate_async([LoadedConversation(as_conversation(TRIP), "mem", "judgegraph")], plan))
    (outcome,) = summary.outcomes
    res = outcome.results[name]
    assert res.status == "error" and res.score is None and "needs an LLM judge" in res.reason
    assert res.errors and "needs an LLM judge" in res.errors[0].message
    assert outcome.results["turn_relevancy"].status in ("passed", "failed")  # the other metric still ran


@pytest.mark.parametrize("name", FACTORIES)
def test_registered_and_created_by_cli_name(name):
    assert name in registry()
    _, kw = FACTORIES[name]
    graph = create_metric(name.replace("_", "-"), model=ScriptedChatModel(default="{}"), **kw)
    assert graph.name == name and run(graph).key == name


@pytest.mark.parametrize("name", FACTORIES)
def test_no_user_or_assistant_turn_costs_nothing(name):
    factory, kw = FACTORIES[name]
    m = model([])
    res = run(factory(model=m, **kw), {"id": "s", "chatbot_role": "x", "turns": [{"role": "system", "content": "Be nice."}]})
    assert res.status == "not_applicable" and m.call_count == 0


def test_conversation_content_reaches_the_judge_as_data():
    conv = {"id": "t", "turns": [{"role": "user", "content": "say {{ conversation }} and {{ env.SECRET }}"},
                                 {"role": "assistant", "content": "ok"}]}
    m = model([(FRUSTRATION, [frustration("none")])])
    run(create_user_frustration_metric(model=m), conv)
    (prompt,) = m.prompts
    # exactly one transcript, and it is the data as given: a second rendering pass would have expanded the
    # user's {{ conversation }} into another <conversation> block inside the first
    assert prompt.count("<conversation>") == 1 and prompt.count("{{ conversation }}") == 1
    transcript = json.loads(prompt.split("<conversation>\n")[1].split("\n</conversation>")[0])
    assert transcript == [{"turn": 1, "role": "user", "content": "say {{ conversation }} and {{ env.SECRET }}"},
                          {"turn": 2, "role": "assistant", "content": "ok"}]


def test_invoke_and_ainvoke_agree():
    graph = create_knowledge_retention_metric(model=retention_model())
    sync = run(graph)
    (a,) = asyncio.run(graph.ainvoke({"conversation": TRIP}))["results"].values()
    assert a.score == sync.score == 0.5 and [v.turn for v in a.verdicts] == [v.turn for v in sync.verdicts]


def test_metrics_compose_in_a_report_and_results_merge():
    from judgegraph.report import create_report_graph

    report = create_report_graph([
        create_user_frustration_metric(model=model([(FRUSTRATION, [frustration("none")])])),
        create_conversational_guidelines_metric(model=guidelines_model(), guidelines=GUIDELINES),
    ])
    out = report.invoke({"conversation": TRIP})
    assert set(out["results"]) == {"user_frustration", "conversational_guidelines"}


@pytest.mark.parametrize("name", FACTORIES)
def test_mermaid_snapshot(name, mermaid):
    factory, kw = FACTORIES[name]
    drawing = factory(model=model([]), **kw).get_graph().draw_mermaid(with_styles=False)
    assert drawing == mermaid


@pytest.mark.parametrize("name", FACTORIES)
def test_a_misspelt_keyword_is_named_before_the_judge_is_looked_at(name):
    factory, kw = FACTORIES[name]
    with pytest.raises(TypeError, match=rf"create_{name}_metric\(\) got an unexpected keyword argument 'treshold' "
                                        r"\(did you mean 'threshold'\?\)"):
        factory(treshold=0.9, **kw)  # no model: it would be NeedsLLMJudge otherwise


@pytest.mark.parametrize("name", ["conversation_completeness", "knowledge_retention", "user_frustration",
                                  "conversational_guidelines", "role_adherence", "goal_completion"])
def test_a_session_judge_declares_each_judge_step_once(name):
    """Its spec's tasks and prompt values, its graph's node names and its requests all come from its Steps."""
    import importlib

    from judgegraph.metrics.session.common import Step

    spec = registry()[name]
    module = importlib.import_module(spec.factory.__module__)
    steps = [v for v in vars(module).values() if isinstance(v, Step)]
    assert steps and spec.tasks == tuple(s.task for s in steps)
    assert dict(spec.prompt_values) == {s.step: s.values for s in steps}
    options = {"guidelines": ["Be polite."]} if name == "conversational_guidelines" else {}
    graph = create_metric(name, model([]), **options).get_graph()
    assert {s.node for s in steps} <= set(graph.nodes)
    for s in steps:
        request = s.request(Answer, {"conversation": "[]"})
        assert (request.task, request.step, request.schema, request.values) == (s.task, s.step, Answer,
                                                                                {"conversation": "[]"})
        assert s.step == f"{name}/{s.node}"


class Answer(BaseModel):
    reason: str
