"""Every graph listed in langgraph.json imports with no API key and is a compiled graph."""

import json
import runpy
from pathlib import Path

import pytest
from langgraph.graph.state import CompiledStateGraph

ROOT = Path(__file__).resolve().parents[2]
ENTRIES = json.loads((ROOT / "langgraph.json").read_text())["graphs"]


def test_every_graphs_file_is_listed():
    listed = {Path(p.split(":")[0]).name for p in ENTRIES.values()}
    assert listed == {p.name for p in (ROOT / "graphs").glob("*.py")}


def test_langgraph_json_serves_every_metric_of_the_registry_and_the_report():
    from judgegraph.metrics import built_ins

    missing = [f'"{name}": "./graphs/metrics.py:{name}"' for name in built_ins() if name not in ENTRIES]
    assert not missing, f"langgraph.json (the LangGraph server reads graph ids from it alone) lacks: {missing}"
    assert set(ENTRIES) == {*built_ins(), "report"}
    assert all(ENTRIES[name] == f"./graphs/metrics.py:{name}" for name in built_ins())


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_entry_point_builds_without_a_key(name, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("JUDGEGRAPH_MODEL", raising=False)
    path, attr = ENTRIES[name].split(":")
    graph = runpy.run_path(str(ROOT / path))[attr]
    assert isinstance(graph, CompiledStateGraph)
    assert graph.get_graph().nodes


def test_every_metric_publishes_its_input_and_output_json_schema():
    # pydantic builds these from the state TypedDicts (langgraph dev and LangGraph Studio read them)
    from judgegraph import create_report_graph, make_metric
    from judgegraph.judges import NoModel
    from judgegraph.metrics import registry

    graphs = [spec.factory(model=NoModel(), **({"guidelines": ["Be kind."]} if "guidelines" in spec.options else {}))
              for spec in registry().values()]
    graphs += [create_report_graph(["turn_relevancy", "response_relevancy"]),
               make_metric(name="j", instructions="Judge {{ conversation }}.", model=NoModel())]
    assert len(graphs) == len(registry()) + 2  # every metric, a report graph and a make_metric graph
    for graph in graphs:
        assert set(graph.get_input_jsonschema()["properties"]) == {"conversation", "messages"}, graph.name
        assert set(graph.get_output_jsonschema()["properties"]) == {"results"}, graph.name


def test_every_metric_takes_langchain_messages_as_its_input():
    from langchain_core.messages import AIMessage, HumanMessage

    from judgegraph.judges import NoModel
    from judgegraph.metrics import registry

    messages = [HumanMessage("Where is my order?"), AIMessage("It ships tomorrow.")]
    for spec in registry().values():
        extra = {"guidelines": ["Be kind."]} if "guidelines" in spec.options else {}
        graph = spec.factory(model=NoModel(), **extra)
        (result,) = graph.invoke({"messages": messages})["results"].values()
        assert result.conversation_id == "" and result.key == spec.name  # read, not "needs 'conversation'"
        assert result.status in ("error", "not_applicable"), (spec.name, result.status)  # NoModel makes no call
