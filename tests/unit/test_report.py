
import pytest

import judgegraph.report as report_mod
from judgegraph.data.conversation import as_conversation
from judgegraph.judges.scripted import ScriptedChatModel
from judgegraph.metrics.relevancy import create_conversation_relevance_metric, create_turn_relevancy_metric
from judgegraph.report import create_report_graph

YES = {"reason": "on topic", "verdict": "yes"}
NO = {"reason": "off topic", "verdict": "no"}
CONV = {"id": "r", "turns": [
    {"role": "user", "content": f"question {i}" if i != 5 else "question 5"} if r == "user" else
    {"role": "assistant", "content": "OFF: tulips" if i == 5 else f"answer {i}"}
    for i in range(7) for r in ("user", "assistant")
]}


def fake():
    return ScriptedChatModel(rules=[("OFF:", [NO])], default=YES, section="reply_to_judge")


def test_one_invocation_returns_every_metric():
    report = create_report_graph(["turn_relevancy", "conversation-relevance"], model=fake(),
                                 options={"conversation_relevance": {"threshold": 0.9}})
    results = report.invoke({"conversation": CONV})["results"]
    assert set(results) == {"turn_relevancy", "conversation_relevance"}
    assert results["turn_relevancy"].score == pytest.approx(6 / 7)
    assert results["conversation_relevance"].threshold == 0.9 and results["conversation_relevance"].passed is False


def test_metrics_built_by_name_share_one_judge_and_its_cache():
    model = fake()
    report = create_report_graph(["turn_relevancy", "conversation_relevance"], model=model)
    results = report.invoke({"conversation": CONV})["results"]
    # windows 0-4 are identical for window sizes 10 and 5 (at most 5 exchanges): asked once
    assert model.call_count == 7 + 2
    assert sum(r.usage.calls for r in results.values()) == model.call_count


def test_conversation_is_validated_once(monkeypatch):
    calls = []
    real = report_mod.conversation_of
    monkeypatch.setattr(report_mod, "conversation_of", lambda s: calls.append(s) or real(s))
    out = create_report_graph(["turn_relevancy", "conversation_relevance"], model=fake()).invoke({"conversation": CONV})
    assert len(calls) == 1 and set(out["results"]) == {"turn_relevancy", "conversation_relevance"}


def test_messages_in_are_converted_once_for_every_metric():
    from langchain_core.messages import AIMessage, HumanMessage

    from judgegraph.data.conversation import from_messages

    messages = [HumanMessage(t.content) if t.role == "user" else AIMessage(t.content)
                for t in as_conversation(CONV).turns if t.role in ("user", "assistant")]
    report = create_report_graph(["turn_relevancy", "conversation_relevance"], model=fake())
    by_messages = report.invoke({"messages": messages})["results"]
    by_conversation = report.invoke({"conversation": from_messages(messages)})["results"]
    for key in ("turn_relevancy", "conversation_relevance"):
        assert by_messages[key].score == by_conversation[key].score
        assert len(by_messages[key].verdicts) == len(by_conversation[key].verdicts) > 0


def test_no_conversation_and_no_messages_is_a_clear_error():
    with pytest.raises(ValueError, match="needs 'conversation'.* or 'messages'"):
        create_report_graph(["turn_relevancy"], model=fake()).invoke({})


def test_stream_with_subgraphs_shows_each_metrics_nodes():
    report = create_report_graph(["turn_relevancy", "conversation_relevance"], model=fake())
    seen = set()
    for namespace, chunk in report.stream({"conversation": CONV}, subgraphs=True, stream_mode="updates"):
        for node in chunk:
            seen.add((namespace[0].split(":")[0] if namespace else "", node))
    assert ("", "prepare") in seen
    for metric in ("turn_relevancy", "conversation_relevance"):
        assert {(metric, "window_turns"), (metric, "judge_turn"), (metric, "reduce_score")} <= seen


def test_compiled_graphs_keep_their_own_judge():
    own, other = fake(), fake()
    a = create_turn_relevancy_metric(model=own)
    b = create_turn_relevancy_metric(model=other, name="strict_relevancy", strict_mode=True)
    report = create_report_graph([a, b])
    assert {"turn_relevancy", "strict_relevancy"} <= set(report.get_graph().nodes)
    results = report.invoke({"conversation": CONV})["results"]
    assert results["strict_relevancy"].score == 0.0 and own.call_count == 7


def test_two_metrics_with_one_name_are_an_error_naming_it():
    a = create_turn_relevancy_metric(model=fake())
    c = create_conversation_relevance_metric(model=fake(), name="turn_relevancy")  # would overwrite a's result
    with pytest.raises(ValueError, match="same name: turn_relevancy"):
        create_report_graph([a, c])
    with pytest.raises(ValueError, match="same name: turn_relevancy"):
        create_report_graph(["turn_relevancy", a], model=fake())


def test_unknown_options_are_errors_naming_them():
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'treshold' \(did you mean 'threshold'\?\)"):
        create_report_graph(["turn_relevancy"], model=fake(), options={"turn_relevancy": {"treshold": 0.9}})
    with pytest.raises(ValueError, match="options for metrics not in the report: role_adherence"):
        create_report_graph(["turn_relevancy"], model=fake(), options={"role_adherence": {"role": "x"}})
    with pytest.raises(TypeError, match="windowsize"):
        create_turn_relevancy_metric(windowsize=3)
    with pytest.raises(TypeError, match="create_report_graph.*'modle'"):
        create_report_graph(["turn_relevancy"], modle=fake())


def test_compile_options_reach_every_factory():
    from langgraph.checkpoint.memory import InMemorySaver

    from judgegraph.judges import NoModel
    from judgegraph.metrics import registry

    for spec in registry().values():
        extra = {"guidelines": ["Be kind."]} if "guidelines" in spec.options else {}
        graph = spec.factory(model=NoModel(), checkpointer=InMemorySaver(), interrupt_before=["reduce_score"], **extra)
        assert graph.checkpointer is not None and graph.interrupt_before_nodes == ["reduce_score"], spec.name


def test_no_metrics_is_an_error():
    with pytest.raises(ValueError, match="at least one metric"):
        create_report_graph([])


def test_xray_drawing_snapshot(mermaid):
    drawing = create_report_graph(["turn_relevancy", "conversation_relevance"], model=fake()).get_graph(xray=1).draw_mermaid(with_styles=False)
    assert drawing == mermaid


def test_reading_checkpoints_logs_no_unregistered_type_warning(caplog):
    import logging

    import langgraph.checkpoint.serde.jsonplus as jsonplus
    from langgraph.checkpoint.memory import InMemorySaver

    jsonplus._warned_unregistered_types.clear()  # LangGraph warns once per type and process
    report = create_report_graph(["turn_relevancy", "turn_contextual_relevancy"], model=fake(),
                                 checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "t"}}
    with caplog.at_level(logging.WARNING, logger="langgraph.checkpoint.serde.jsonplus"):
        report.invoke({"conversation": CONV}, cfg)
        state = report.get_state(cfg, subgraphs=True)
        history = list(report.get_state_history(cfg))
    assert state.values["results"]["turn_relevancy"].key == "turn_relevancy" and len(history) > 2
    assert not [r for r in caplog.records if "unregistered" in r.getMessage()]
