
import pytest

import judgegraph.report as report_mod
from judgegraph.metrics.relevancy import create_conversation_relevance_judge, create_turn_relevancy_judge
from judgegraph.report import create_report_graph
from judgegraph.testing.fake_chat import ScriptedChatModel

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


def test_conversation_is_validated_and_split_into_exchanges_once(monkeypatch):
    calls = []
    real = report_mod.exchanges
    monkeypatch.setattr(report_mod, "exchanges", lambda c: calls.append(c) or real(c))
    import judgegraph.metrics.relevancy as rel

    monkeypatch.setattr(rel, "exchanges", lambda c: pytest.fail("metric recomputed the exchanges"))
    create_report_graph(["turn_relevancy", "conversation_relevance"], model=fake()).invoke({"conversation": CONV})
    assert len(calls) == 1


def test_stream_with_subgraphs_shows_each_metrics_nodes():
    report = create_report_graph(["turn_relevancy", "conversation_relevance"], model=fake())
    seen = set()
    for namespace, chunk in report.stream({"conversation": CONV}, subgraphs=True, stream_mode="updates"):
        for node in chunk:
            seen.add((namespace[0].split(":")[0] if namespace else "", node))
    assert ("", "prepare") in seen
    for metric in ("turn_relevancy", "conversation_relevance"):
        assert {(metric, "window_turns"), (metric, "judge_turn"), (metric, "reduce_score")} <= seen


def test_compiled_graphs_keep_their_own_judge_and_names_stay_unique():
    own, other = fake(), fake()
    a = create_turn_relevancy_judge(model=own)
    b = create_turn_relevancy_judge(model=other, name="strict_relevancy", strict_mode=True)
    c = create_conversation_relevance_judge(model=other, name="turn_relevancy")  # same name as a
    report = create_report_graph([a, b, c])
    nodes = set(report.get_graph().nodes)
    assert {"turn_relevancy", "strict_relevancy", "turn_relevancy_2"} <= nodes
    results = report.invoke({"conversation": CONV})["results"]
    assert results["strict_relevancy"].score == 0.0 and own.call_count == 7


def test_no_metrics_is_an_error():
    with pytest.raises(ValueError, match="at least one metric"):
        create_report_graph([])


def test_xray_drawing_snapshot(mermaid):
    drawing = create_report_graph(["turn_relevancy", "conversation_relevance"], model=fake()).get_graph(xray=1).draw_mermaid(with_styles=False)
    assert drawing == mermaid
