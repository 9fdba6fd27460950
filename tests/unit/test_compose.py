"""One composition path (judgegraph.report): every consumer builds metrics and
report graphs there, with one rule for result names and one way to pass the judge."""

import ast
import asyncio
import sys
import textwrap
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from judgegraph.apps import as_evaluator, assert_judged, judge_graph, judge_node
from judgegraph.apps.simulate import create_simulator
from judgegraph.cli import main
from judgegraph.judges import Judge, resolve_judge
from judgegraph.judges.scripted import ScriptedChatModel
from judgegraph.loaders import LoadedConversation
from judgegraph.metrics import create_metric, get_metric
from judgegraph.metrics.relevancy import create_conversation_relevance_metric, create_turn_relevancy_metric
from judgegraph.report import create_report_graph, metric_graphs
from judgegraph.runs.runner import MetricPlan, evaluate_async

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "judgegraph"
YES = {"reason": "on topic", "verdict": "yes"}
NO = {"reason": "off topic", "verdict": "no"}
CONV = {"id": "c", "turns": [
    {"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4."},
    {"role": "user", "content": "And 3+3?"}, {"role": "assistant", "content": "OFF: tulips"},
]}
MESSAGES = [HumanMessage("What is 2+2?"), AIMessage("4."), HumanMessage("And 3+3?"), AIMessage("OFF: tulips")]


def fake():
    return ScriptedChatModel(rules=[("OFF:", [NO])], default=YES, section="reply_to_judge")


def _calls(attr: str = "", name: str = "") -> dict[str, int]:
    """Modules of the package calling ``<x>.attr(...)`` (or ``name(...)``), with how often."""
    found: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Call):
                f = node.func
                if (attr and isinstance(f, ast.Attribute) and f.attr == attr) or (
                        name and isinstance(f, ast.Name) and f.id == name):
                    key = str(path.relative_to(PACKAGE))
                    found[key] = found.get(key, 0) + 1
    return found


def test_the_composition_module_is_the_only_place_that_calls_a_factory_or_builds_a_report():
    assert set(_calls(attr="factory")) == {"metrics/__init__.py"}  # build_metric: the one call of a metric factory
    assert set(_calls(name="report_builder")) == {"report.py"}  # everyone else: create_report_graph
    users_of_report_state = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        if any(isinstance(n, ast.Name) and n.id == "ReportState" for n in ast.walk(tree)):
            users_of_report_state.add(str(path.relative_to(PACKAGE)))
    assert users_of_report_state == {"report.py"}  # no second parallel-metrics graph anywhere


def test_no_module_probes_a_factory_for_judge_or_model_but_the_custom_factory_spec():
    probing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if "signature(" in text and ('"judge" in' in text or "'judge' in" in text):
            probing.append(str(path.relative_to(PACKAGE)))
    assert probing == ["metrics/__init__.py"]


# --- one rule for duplicate result names -----------------------------------------------------------

def duplicates():
    """Two metrics whose results would have one key: a name and a compiled graph of that name."""
    return ["turn_relevancy", create_turn_relevancy_metric(model=fake())]


@pytest.mark.parametrize("compose", [
    lambda ms: create_report_graph(ms, model=fake()),
    lambda ms: metric_graphs(ms, model=fake()),
    lambda ms: judge_graph(ms, model=fake()),
    lambda ms: judge_graph(ms, model=fake(), scope="latest"),
    lambda ms: judge_node(ms, model=fake()),
    lambda ms: as_evaluator(ms, model=fake()),
    lambda ms: assert_judged(MESSAGES, ms, model=fake()),
    lambda ms: create_simulator(lambda messages: AIMessage("hi"), user_model=fake(), metrics=ms, model=fake()),
], ids=["create_report_graph", "metric_graphs", "judge_graph", "latest", "judge_node", "as_evaluator",
        "assert_judged", "create_simulator"])
def test_two_metrics_with_one_name_are_one_error_everywhere(compose):
    # judge_node & co. used to run both as nodes turn_relevancy and turn_relevancy_2, writing one result key
    with pytest.raises(ValueError, match=r"same name: turn_relevancy \(give one another name="):
        compose(duplicates())
    with pytest.raises(ValueError, match="same name: turn_relevancy"):
        compose(["turn-relevancy", "turn_relevancy"])


def test_renamed_metrics_each_keep_their_result_in_a_judge_node():
    node = judge_node(["turn_relevancy", create_turn_relevancy_metric(model=fake(), name="strict", strict_mode=True)],
                      model=fake(), output="result")
    out = node.invoke({"messages": MESSAGES})["judgements"]
    assert set(out) == {"turn_relevancy", "strict"}
    assert out["turn_relevancy"].score == 0.5 and out["strict"].score == 0.0


def test_the_runs_plan_refuses_a_metric_twice_before_any_work():
    judge = resolve_judge(fake())
    with pytest.raises(ValueError, match="same name: turn_relevancy"):
        MetricPlan(["turn-relevancy", "turn_relevancy"], judge)


def test_the_runs_check_refuses_a_custom_metric_named_like_a_built_in(tmp_path, monkeypatch):
    (tmp_path / "jg_compose_clash.py").write_text(textwrap.dedent("""
        from judgegraph.metrics.relevancy import create_conversation_relevance_metric

        def clash(*, model=None):
            return create_conversation_relevance_metric(model=model, name="turn_relevancy")
    """), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    plan = MetricPlan(["turn_relevancy", "jg_compose_clash:clash"], resolve_judge(fake()))
    with pytest.raises(ValueError, match="same name: turn_relevancy"):
        plan.check()  # was: every conversation's run failed with this error
    sys.modules.pop("jg_compose_clash", None)


def test_the_cli_says_a_metric_given_twice_is_a_usage_error(tmp_path, capsys):
    data = tmp_path / "c.jsonl"
    data.write_text('{"id": "c", "turns": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": '
                    '"hello"}]}\n', encoding="utf-8")
    code = main(["eval", str(data), "-m", "turn-relevancy", "-m", "turn_relevancy", "--out", str(tmp_path / "r.jsonl")])
    assert code == 2 and "same name: turn_relevancy" in capsys.readouterr().err
    assert not (tmp_path / "r.jsonl").exists()


def test_distinct_names_that_make_one_node_name_both_run():
    a = create_turn_relevancy_metric(model=fake(), name="a.b")
    b = create_turn_relevancy_metric(model=fake(), name="a_b", strict_mode=True)
    report = create_report_graph([a, b])  # was: LangGraph's "Node `a_b` already present"
    assert {"a_b", "a_b_2"} <= set(report.get_graph().nodes)
    results = report.invoke({"conversation": CONV})["results"]
    assert results["a.b"].score == 0.5 and results["a_b"].score == 0.0


def test_a_metric_may_be_named_like_a_state_key():
    report = create_report_graph([create_turn_relevancy_metric(model=fake(), name="judge_calls")])
    assert "judge_calls_metric" in report.get_graph().nodes  # was: the state key itself, refused by LangGraph
    assert report.invoke({"conversation": CONV})["results"]["judge_calls"].score == 0.5


# --- one way to pass the judge ----------------------------------------------------------------------

def test_specs_are_metrics_too_and_share_the_one_judge():
    model = fake()
    node = judge_node([get_metric("turn_relevancy"), "conversation_relevance"], model=model, output="result")
    out = node.invoke({"messages": MESSAGES})["judgements"]
    assert set(out) == {"turn_relevancy", "conversation_relevance"}
    assert model.call_count == 2  # the same two windows under both window sizes: asked once, through one cache


def test_a_custom_factory_naming_only_judge_gets_the_one_judge(tmp_path, monkeypatch):
    (tmp_path / "jg_compose_old.py").write_text(textwrap.dedent("""
        from judgegraph.metrics.relevancy import create_turn_relevancy_metric

        SEEN = []

        def old(*, judge=None, threshold=0.5):
            SEEN.append(judge)
            return create_turn_relevancy_metric(model=judge, threshold=threshold, name="old")
    """), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    import jg_compose_old

    model = fake()
    graph = create_metric("jg_compose_old:old", model=model)  # was: the chat model itself, as judge=
    assert isinstance(jg_compose_old.SEEN[-1], Judge) and jg_compose_old.SEEN[-1].model is model
    assert graph.invoke({"conversation": CONV})["results"]["old"].score == 0.5
    graphs = metric_graphs(["turn_relevancy", "jg_compose_old:old"], model=fake())
    assert isinstance(jg_compose_old.SEEN[-1], Judge) and len(graphs) == 2
    sys.modules.pop("jg_compose_old", None)


def test_the_latest_scope_reaches_every_metric_of_a_composed_judge():
    model = fake()
    graph = judge_graph(["turn_relevancy", create_conversation_relevance_metric(model=model, name="cr")],
                        model=model, scope="latest")
    results = graph.invoke({"conversation": CONV})["results"]
    for key in ("turn_relevancy", "cr"):
        assert [v.turns for v in results[key].verdicts] == [[3]], key


def test_the_runner_caches_one_report_per_distinct_metric_set():
    judge = resolve_judge(fake())
    plan = MetricPlan(["turn_relevancy"], judge)
    from judgegraph.data.conversation import as_conversation

    items = [LoadedConversation(as_conversation({**CONV, "id": f"c{i}"}), f"mem:{i}", "judgegraph", {})
             for i in range(3)]
    summary = asyncio.run(evaluate_async(items, plan))
    assert summary.conversations == 3 and len(plan.graphs) == 1
    assert plan.graphs[0].name == "report" and "prepare" in plan.graphs[0].get_graph().nodes
