"""Graph pictures drawn here, offline: SVG structure, subgraph groups, optional nodes, PNG."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET

import pytest
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from judgegraph.cli import main
from judgegraph.judges import NoModel
from judgegraph.metrics import create_metric
from judgegraph.outputs.drawing import PngUnavailable, draw_png, draw_svg, graph_layout
from judgegraph.report import create_report_graph

NS = {"s": "http://www.w3.org/2000/svg"}


def _parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    return root


def _nodes(root: ET.Element) -> dict[str, str]:
    """node id -> the label drawn in its box (each node a rect and a text)."""
    out = {}
    for g in root.iterfind(".//s:g[@class='node']", NS):
        assert g.find("s:rect", NS) is not None
        out[g.get("data-id")] = g.find("s:text", NS).text
    return out


def _edges(root: ET.Element) -> list[tuple[str, str, bool]]:
    return [(g.get("data-source"), g.get("data-target"), "stroke-dasharray" in g.find("s:path", NS).attrib)
            for g in root.iterfind(".//s:g[@class='edge']", NS)]


def test_metric_svg_has_a_labelled_box_per_node_and_every_edge():
    graph = create_metric("turn_relevancy")
    drawable = graph.get_graph()
    root = _parse(draw_svg(graph))
    assert _nodes(root) == {"__start__": "START", "window_turns": "window_turns", "judge_turn": "judge_turn",
                            "reduce_score": "reduce_score", "__end__": "END"}
    expected = sorted((e.source, e.target, bool(e.conditional)) for e in drawable.edges)
    assert sorted(_edges(root)) == expected
    assert ("window_turns", "judge_turn", True) in expected  # the Send fan-out is dashed
    assert root.find("s:title", NS).text == "turn_relevancy"


def test_report_svg_draws_each_metric_as_a_labelled_group_around_its_nodes():
    report = create_report_graph(["turn_relevancy", "knowledge_retention"], model=NoModel())
    root = _parse(draw_svg(report.get_graph(xray=1)))
    clusters = {g.get("data-name"): g for g in root.iterfind(".//s:g[@class='cluster']", NS)}
    assert set(clusters) == {"turn_relevancy", "knowledge_retention"}
    assert clusters["turn_relevancy"].find("s:text", NS).text == "turn_relevancy"
    nodes = _nodes(root)
    assert nodes["prepare"] == "prepare" and nodes["knowledge_retention:extract_facts"] == "extract_facts"
    lay = graph_layout(report.get_graph(xray=1))
    groups = {g.name: g for g in lay.groups}
    for box in lay.boxes:
        for name, g in groups.items():
            inside = g.x0 <= box.x - box.w / 2 and box.x + box.w / 2 <= g.x1 and g.y0 <= box.y <= g.y1
            assert inside == box.id.startswith(name + ":"), (box.id, name)


def test_optional_nodes_are_drawn_when_configured(tmp_path):
    plain = _nodes(_parse(draw_svg(create_metric("turn_contextual_relevancy"))))
    verified = _nodes(_parse(draw_svg(create_metric("turn_contextual_relevancy", verify=True,
                                                    model=NoModel()))))
    assert "verify_verdict" not in plain and verified["verify_verdict"] == "verify_verdict"
    out = tmp_path / "g.svg"
    assert main(["graph", "turn-contextual-relevancy", "--verify", "-o", str(out)]) == 0
    assert "verify_verdict" in _nodes(_parse(out.read_text()))
    assert main(["graph", "turn-relevancy", "--reason", "llm", "--format", "svg", "-o", str(out)]) == 0
    assert "write_reason" in _nodes(_parse(out.read_text()))


def test_labels_are_escaped_and_cycles_drawn():
    class S(TypedDict, total=False):
        n: int

    b = StateGraph(S)
    b.add_node("a<b&\"c\"", lambda s: {"n": 1})
    b.add_node("check", lambda s: {"n": 2})
    b.add_edge(START, "a<b&\"c\"")
    b.add_edge("a<b&\"c\"", "check")
    b.add_conditional_edges("check", lambda s: "again" if s.get("n", 0) < 2 else "done",
                            {"again": "a<b&\"c\"", "done": END})
    svg = draw_svg(b.compile(name="loop <1>"))
    root = _parse(svg)
    assert _nodes(root)["a<b&\"c\""] == "a<b&\"c\""
    assert ("check", "a<b&\"c\"", True) in _edges(root)
    assert root.find("s:title", NS).text == "loop <1>"


def test_cli_svg_to_stdout_and_mermaid_by_default(capsys):
    assert main(["graph", "turn-relevancy", "--format", "svg"]) == 0
    assert "judge_turn" in _nodes(_parse(capsys.readouterr().out)).values()
    assert main(["graph", "turn-relevancy"]) == 0
    assert capsys.readouterr().out.startswith("---")  # Mermaid, as before


def test_png(tmp_path):
    pytest.importorskip("resvg_py", reason="PNG needs judgegraph[png]; resvg-py is in the test extra")
    png = draw_png(create_metric("turn_relevancy"))
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5_000
    out = tmp_path / "r.png"
    assert main(["graph", "turn-relevancy", "user-frustration", "-o", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_png_without_a_renderer_names_what_to_install(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "resvg_py", None)  # import fails as when it is not installed
    with pytest.raises(PngUnavailable, match=r"judgegraph\[png\]"):
        draw_png("<svg xmlns='http://www.w3.org/2000/svg'/>")
    assert main(["graph", "turn-relevancy", "--format", "png", "-o", str(tmp_path / "x.png")]) == 3
    assert "pip install 'judgegraph[png]'" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()
    assert main(["graph", "turn-relevancy", "--format", "png"]) == 2  # png needs a file
