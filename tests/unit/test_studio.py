"""judgegraph.studio: run-time settings through the graph's context, one built graph per combination."""

import asyncio

import pytest

from judgegraph.judges.scripted import ScriptedChatModel
from judgegraph.metrics.relevancy import create_turn_relevancy_metric
from judgegraph.studio import JudgeSettings, configurable, options_for, resolved

YES = {"reason": "It answers.", "verdict": "yes"}
MATH = {"id": "math", "turns": [
    {"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "2+2 equals 4."},
    {"role": "user", "content": "What about 3+3?"}, {"role": "assistant", "content": "The capital of France is Paris."},
]}


def counting_graph():
    built = []
    model = ScriptedChatModel(rules=[("Paris", [{"reason": "Off topic.", "verdict": "no"}])], default=YES,
                              section="reply_to_judge")

    def build(s: JudgeSettings):
        built.append(s)
        return create_turn_relevancy_metric(model=model, **options_for("turn_relevancy", s))

    return configurable("turn_relevancy", build), built


def test_settings_come_from_each_run_s_context_and_each_combination_is_built_once():
    graph, built = counting_graph()
    res = graph.invoke({"conversation": MATH}, context={"threshold": 0.4})["results"]["turn_relevancy"]
    assert (res.threshold, res.status) == (0.4, "passed")
    res = graph.invoke({"conversation": MATH}, context=JudgeSettings(threshold=0.9))["results"]["turn_relevancy"]
    assert (res.threshold, res.status) == (0.9, "failed")
    graph.invoke({"conversation": MATH}, context={"threshold": 0.4})
    res = asyncio.run(graph.ainvoke({"messages": [{"type": "human", "content": "What is 2+2?"},
                                                  {"type": "ai", "content": "4."}]}, context={"threshold": 0.4}))
    assert res["results"]["turn_relevancy"].score == 1.0  # LangChain messages in, as the metric takes them
    assert [b.threshold for b in built] == [0.4, 0.9]  # the third and fourth runs reused the first graph
    res = graph.invoke({"conversation": MATH})["results"]["turn_relevancy"]  # no context: the metric's defaults
    assert res.threshold == 0.5 and res.details["window_size"] == 10


def test_the_context_schema_is_the_settings_form():
    graph, _ = counting_graph()
    props = graph.get_context_jsonschema()["properties"]
    assert {"model", "base_url", "threshold", "window_size", "strict_mode", "review", "max_tries"} <= set(props)
    assert set(graph.get_input_jsonschema()["properties"]) == {"conversation", "messages"}
    assert set(graph.get_output_jsonschema()["properties"]) == {"results"}


def test_empty_settings_fall_back_to_the_environment(monkeypatch):
    monkeypatch.setenv("JUDGEGRAPH_MODEL", "openai:gpt-4.1-mini")
    monkeypatch.setenv("JUDGEGRAPH_BASE_URL", "http://127.0.0.1:9/v1")
    s = resolved({"threshold": 0.7})
    assert (s.model, s.base_url, s.threshold) == ("openai:gpt-4.1-mini", "http://127.0.0.1:9/v1", 0.7)
    assert resolved({"model": "gpt-4o"}).model == "gpt-4o"
    with pytest.raises(ValueError, match="unknown judge settings.*'modle'"):
        resolved({"modle": "x"})


def test_only_the_options_a_metric_takes_are_passed():
    s = JudgeSettings(threshold=0.6, window_size=3, review=True)
    assert options_for("turn_relevancy", s) == {"threshold": 0.6, "window_size": 3, "review": True}
    assert "window_size" not in options_for("response_relevancy", s)
    assert options_for("turn_relevancy", JudgeSettings()) == {}


def test_graphs_files_build_nothing_at_import(monkeypatch):
    import runpy
    from pathlib import Path

    monkeypatch.delenv("JUDGEGRAPH_MODEL", raising=False)
    root = Path(__file__).resolve().parents[2]
    graphs = runpy.run_path(str(root / "graphs" / "metrics.py"))
    for name in ("turn_relevancy", "conversational_guidelines"):
        assert graphs[name].graph_for.__closure__ is not None
        cache = next(c.cell_contents for c in graphs[name].graph_for.__closure__ if isinstance(c.cell_contents, dict))
        assert cache == {}


def test_the_guidelines_setting_reaches_the_metric_that_needs_them():
    s = JudgeSettings(guidelines="Be brief.\n\n Answer in English. ")
    assert options_for("conversational_guidelines", s) == {"guidelines": ["Be brief.", "Answer in English."]}
    assert "guidelines" not in options_for("turn_relevancy", s)
