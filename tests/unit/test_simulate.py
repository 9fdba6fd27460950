"""The conversation simulator with scripted models and a small LangGraph app."""

import asyncio
import threading
import time

import pytest
from langchain_core.messages import AIMessage
from langgraph.graph import START, MessagesState, StateGraph

from judgegraph.apps.simulate import asimulate, create_simulator, load_scenarios, simulate
from judgegraph.apps.simulate.scenarios import ScenarioError
from judgegraph.judges.scripted import ScriptedChatModel

YES = {"reason": "It answers.", "verdict": "yes"}
NO = {"reason": "Off topic: the user wants to block a card.", "verdict": "no"}


def user(status_when_done="goal_reached"):
    """The simulated user: keeps asking until the chatbot explains 'Block card'."""
    return ScriptedChatModel(section="conversation", rules=[
        ("Block card", [{"reason": "Done.", "status": status_when_done, "message": "Thanks, done!"}]),
        ("weather", [{"reason": "Off track.", "status": "continue", "message": "No, I need to block my card!"}]),
    ], default={"reason": "Start.", "status": "continue", "message": "I lost my card. How do I block it?"})


def bot():
    """Wanders off on the first question, answers on the second."""
    return ScriptedChatModel(rules=[
        ("No, I need to block", ["Open the app, choose Cards, then Block card."]),
        ("How do I block", ["Lovely weather for a walk today."]),
    ], default="Hello!")


def chatbot_graph(model):
    def chatbot(state: MessagesState):
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("chatbot", chatbot)
    builder.add_edge(START, "chatbot")
    return builder.compile()


def judge():
    return ScriptedChatModel(rules=[("weather", [NO])], default=YES, section="reply_to_judge")


SCENARIO = {"id": "lost-card", "goal": "Block the lost card", "persona": "In a hurry", "scenario": "Card lost abroad"}


def test_the_user_talks_until_the_goal_is_reached_then_the_conversation_is_judged():
    u, j = user(), judge()
    (run,) = simulate(chatbot_graph(bot()), [SCENARIO], user_model=u, metrics="turn_relevancy", model=j, max_turns=5)
    assert run.status == "goal_reached" and run.turns == 2 and run.errors == []
    assert [(t.role, t.content) for t in run.conversation.turns] == [
        ("user", "I lost my card. How do I block it?"), ("assistant", "Lovely weather for a walk today."),
        ("user", "No, I need to block my card!"), ("assistant", "Open the app, choose Cards, then Block card."),
        ("user", "Thanks, done!"),
    ]
    assert u.call_count == 3 and run.user_usage.calls == 3
    assert run.conversation.id == "lost-card" and run.conversation.expected_outcome == "Block the lost card"
    res = run.results["turn_relevancy"]
    assert res.score == 0.5 and [v.verdict for v in res.verdicts] == ["no", "yes"] and j.call_count == 2
    # the simulated user saw the persona, the goal and the scenario, and the chatbot as "chatbot"
    first = u.prompts[1]
    assert "In a hurry" in first and "Block the lost card" in first and "Card lost abroad" in first
    assert "[chatbot]\nLovely weather" in first and "You may send 4 more message(s)." in first


def test_turn_limit_and_giving_up_end_the_conversation():
    stubborn = ScriptedChatModel(default="Lovely weather for a walk today.")
    (run,) = simulate(chatbot_graph(stubborn), [SCENARIO], user_model=user(), max_turns=3)
    assert (run.status, run.turns, len(run.conversation.turns)) == ("max_turns", 3, 6)
    assert run.results == {}
    quitter = ScriptedChatModel(section="conversation", default={"reason": "Useless.", "status": "gave_up",
                                                                  "message": ""})
    (run,) = simulate(chatbot_graph(stubborn), [{**SCENARIO, "opening": "Block my card please"}], user_model=quitter)
    assert (run.status, run.turns) == ("gave_up", 1)
    assert [t.content for t in run.conversation.turns] == ["Block my card please", "Lovely weather for a walk today."]
    assert quitter.call_count == 1  # the opening line is sent as is


def test_an_app_that_fails_keeps_the_conversation_and_reports_the_error():
    calls = []

    def flaky(messages):
        calls.append(len(messages))
        if len(calls) == 2:
            raise RuntimeError("backend down")
        return "Lovely weather for a walk today."

    (run,) = simulate(flaky, [SCENARIO], user_model=user(), metrics=["turn_relevancy"], model=judge(), max_turns=5)
    assert run.status == "app_error" and run.errors == ["app: RuntimeError: backend down"]
    assert len(run.conversation.turns) == 3 and run.results["turn_relevancy"].status == "failed"
    record = run.to_record("scenarios.yaml")
    assert record["error"] == "app: RuntimeError: backend down" and record["simulation"]["status"] == "app_error"
    assert record["conversation"]["turns"][0]["content"] == "I lost my card. How do I block it?"


def test_a_chat_model_is_an_app_too_and_async_runs_the_same_graph():
    (run,) = asyncio.run(asimulate(bot(), [SCENARIO], user_model=user(), metrics="turn_relevancy", model=judge()))
    assert run.status == "goal_reached" and run.results["turn_relevancy"].score == 0.5


def test_a_simulated_user_that_never_answers_validly_is_a_reported_error():
    broken = ScriptedChatModel(section="conversation", default="I am not JSON")
    (run,) = simulate(bot(), [SCENARIO], user_model=broken)
    assert run.status == "user_error" and "simulated user: invalid output after 3 tries" in run.errors[0]
    assert run.conversation is None and run.user_usage.calls == 3


def test_scenarios_run_concurrently():
    in_flight, peak, lock = [0], [0], threading.Lock()

    def slow(messages):
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.05)
        with lock:
            in_flight[0] -= 1
        return AIMessage("Open the app, choose Cards, then Block card.")

    scenarios = [{**SCENARIO, "id": f"s{i}"} for i in range(4)]
    runs = simulate(slow, scenarios, user_model=user(), max_concurrency=4)
    assert [r.scenario.id for r in runs] == ["s0", "s1", "s2", "s3"] and all(r.status == "goal_reached" for r in runs)
    assert peak[0] > 1


def test_the_simulator_is_a_drawable_streamable_graph():
    sim = create_simulator(chatbot_graph(bot()), user_model=user(), metrics="turn_relevancy", model=judge())
    drawing = sim.get_graph().draw_mermaid()
    for edge in ("__start__ --> simulate_user", "call_app --> check_stop", "check_stop -.-> simulate_user",
                 "simulate_user -.-> call_app", "judge_conversation --> __end__"):
        assert edge in drawing
    nodes = [node for step in sim.stream({"scenario": SCENARIO}, stream_mode="updates") for node in step]
    assert nodes == ["simulate_user", "call_app", "check_stop"] * 2 + ["simulate_user", "judge_conversation"]


def test_scenario_files_with_errors_name_the_file_line_and_field(tmp_path):
    good = tmp_path / "s.yaml"
    good.write_text("- id: a\n  goal: Block my card\n- goal: Change my PIN\n  situation: New card\n")
    assert [(s.id, s.scenario) for s in load_scenarios(good)] == [("a", ""), ("s-2", "New card")]
    bad = tmp_path / "s.jsonl"
    bad.write_text('{"id": "a", "goal": "x"}\n{"id": "b", "persona": "p"}\n')
    with pytest.raises(ScenarioError, match=r"s\.jsonl:2: goal: Field required"):
        load_scenarios(bad)
    bad.write_text('{"id": "a", "goal": "x", "max_turns": 0}\n')
    with pytest.raises(ScenarioError, match=r"s\.jsonl:1: max_turns"):
        load_scenarios(bad)


def test_an_app_with_a_checkpointer_gets_its_own_thread_and_no_duplicates():
    from langgraph.checkpoint.memory import InMemorySaver

    model = bot()

    def chatbot(state: MessagesState):
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("chatbot", chatbot)
    builder.add_edge(START, "chatbot")
    app = builder.compile(checkpointer=InMemorySaver())
    (run,) = simulate(app, [SCENARIO], user_model=user(), max_turns=5)
    assert run.status == "goal_reached" and len(run.conversation.turns) == 5
    stored = app.get_state({"configurable": {"thread_id": "simulate-lost-card"}}).values["messages"]
    assert [m.text for m in stored] == [t.content for t in run.conversation.turns[:4]]


@pytest.mark.parametrize("metrics", [None, "turn_relevancy"], ids=["simulator", "simulator_judged"])
def test_mermaid_snapshot(metrics, mermaid):
    sim = create_simulator(bot(), user_model=user(), metrics=metrics, model=judge())
    assert sim.get_graph().draw_mermaid(with_styles=False) == mermaid


def test_simulated_users_and_judges_share_the_judges_limit_on_calls_in_flight():
    from judgegraph.judges import resolve_judge

    in_flight, peak, lock = [0], [0], threading.Lock()

    class SlowModel(ScriptedChatModel):
        def _generate(self, *args, **kwargs):
            with lock:
                in_flight[0] += 1
                peak[0] = max(peak[0], in_flight[0])
            time.sleep(0.02)
            with lock:
                in_flight[0] -= 1
            return super()._generate(*args, **kwargs)

    slow_user = SlowModel(section="conversation", rules=user().rules, default=user().default)
    slow_judge = SlowModel(rules=[("weather", [NO])], default=YES, section="reply_to_judge")
    judge = resolve_judge(slow_judge, max_concurrency=2)
    scenarios = [{**SCENARIO, "id": f"s{i}"} for i in range(6)]
    runs = simulate(bot(), scenarios, user_model=slow_user, metrics="turn_relevancy", model=judge, max_concurrency=6)
    assert all(r.status == "goal_reached" for r in runs)
    assert slow_user.call_count == 18 and slow_judge.call_count >= 2  # the judge cache answers repeated windows
    assert peak[0] == 2  # six conversations at once, never more than two LLM calls (user or judge) in flight


@pytest.mark.parametrize("run", [simulate, lambda *a, **k: asyncio.run(asimulate(*a, **k))])
def test_a_misspelt_option_is_an_error_naming_the_nearest_one_before_any_turn(run):
    u = user()
    with pytest.raises(TypeError, match=r"'max_turn' \(did you mean 'max_turns'\?\)"):
        run(chatbot_graph(bot()), [SCENARIO], user_model=u, max_turn=1)
    with pytest.raises(TypeError, match=r"needs user_model="):
        run(chatbot_graph(bot()), [SCENARIO], model=judge())
    assert u.call_count == 0


def test_scenario_mistakes_in_python_name_each_record_and_field_as_files_do():
    scenarios = [SCENARIO, {"goal": "g", "persona": {"kind": "villain", "topics": ["x"]}}, {"id": "c"},
                 {"goal": "g", "max_turns": 0, "mood": "sad"}]
    with pytest.raises(ScenarioError) as info:
        simulate(chatbot_graph(bot()), scenarios, user_model=user())
    lines = str(info.value).splitlines()
    assert [line.split(": ")[0] for line in lines] == [
        "scenario[1].persona.kind", "scenario[2].goal", "scenario[3].max_turns", "scenario[3].mood"]
    assert lines[0].startswith("scenario[1].persona.kind: Input should be") and "Field required" in lines[1]
    assert "function-after" not in str(info.value) and "spec" not in lines[0].split(": ")[0]


def test_every_bad_record_of_a_scenario_file_is_reported(tmp_path):
    bad = tmp_path / "s.jsonl"
    bad.write_text('{"id": "a", "persona": "p"}\n{"id": "b", "goal": "x"}\nnot json\n{"goal": "x", "max_turns": 0}\n')
    with pytest.raises(ScenarioError) as info:
        load_scenarios(bad)
    assert [line.split(": ")[0] for line in str(info.value).splitlines()] == [
        f"{bad}:1", f"{bad}:3", f"{bad}:4"]
    assert [p.split(": ", 1)[1] for p in info.value.problems] == [
        "goal: Field required", "not JSON: Expecting value", "max_turns: Input should be greater than or equal to 1"]
