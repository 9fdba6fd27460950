"""A metric is declared once (:class:`judgegraph.metric.MetricSpec` with its settings class): its factory, its
signature and docstring, its option checks, the command line's view of its options and its registry entry all come
from that declaration, and adding a built-in metric is one new module in ``judgegraph/metrics/`` (plus its prompt
files), with no other edit."""

from __future__ import annotations

import dataclasses
import inspect
import json
import sys
import textwrap

import pytest

import judgegraph
import judgegraph.metrics as metrics
from judgegraph.cli import main
from judgegraph.metric import MetricSpec, WindowOptions, option
from judgegraph.metrics import built_ins, get_metric, registry

#: A new built-in metric, in one module: a relevancy variant with an option of its own and a default of its own.
NEW_METRIC = '''
from dataclasses import dataclass

from judgegraph.metric import MetricSpec, option
from judgegraph.metrics.relevancy import TURN_RELEVANCY, RelevancySettings, build_relevancy_graph


@dataclass(frozen=True, kw_only=True)
class NewSettings(RelevancySettings):
    label: str = option("plain", help="a label the test reads back")

    def check(self) -> None:
        super().check()
        if not self.label.strip():
            raise ValueError("label must be a non-empty text")


def build(settings: NewSettings):
    assert settings.label != "never"
    return build_relevancy_graph(settings)


SPEC = MetricSpec("brand_new", summary="A metric added as one module (test)", settings=NewSettings,
                  build=build, defaults={"window_size": 2}, prompt_values={"brand_new/judge": {"label"}})
_DRAFT = MetricSpec("draft_metric", settings=NewSettings, build=build)  # a private name: not registered

'''


def _forget() -> None:
    for cached in (built_ins, registry, metrics._plugins):
        cached.cache_clear()


@pytest.fixture
def new_metric(tmp_path, monkeypatch):
    """``brand_new.py`` put where the registry looks for built-in metrics (a folder of the package's path)."""
    (tmp_path / "brand_new.py").write_text(textwrap.dedent(NEW_METRIC), encoding="utf-8")
    monkeypatch.setattr(metrics, "__path__", [*metrics.__path__, str(tmp_path)])
    _forget()
    yield get_metric("brand-new")
    sys.modules.pop("judgegraph.metrics.brand_new", None)
    monkeypatch.undo()
    _forget()


def test_a_new_module_is_a_whole_built_in_metric(new_metric, tmp_path, monkeypatch, capsys):
    spec = new_metric
    # the registry takes the specs the module defines under public names: not one it imports (TURN_RELEVANCY, still
    # the relevancy module's, in its place), not one bound to a private name; the module lists none of them by hand
    names = list(built_ins())
    assert names[-1] == "brand_new" and names.count("turn_relevancy") == 1 and "draft_metric" not in names
    assert names.index("turn_relevancy") < names.index("conversation_relevance") < names.index("brand_new")
    assert not hasattr(sys.modules["judgegraph.metrics.brand_new"], "METRIC_SPECS")
    assert spec.prompt_values == {"brand_new/judge": {"label"}}
    assert spec.name in built_ins() and spec.options >= {"label", "window_size", "threshold", "rubric"}
    # its factory, public and generated, with its options as keywords and its own default
    factory = judgegraph.create_brand_new_metric
    assert factory is spec.factory and "create_brand_new_metric" in judgegraph.__all__
    params = inspect.signature(factory).parameters
    assert params["label"].default == "plain" and params["window_size"].default == 2 and params["name"].default == "brand_new"
    assert "a label the test reads back" in factory.__doc__
    # the command line lists it and shows its options
    assert main(["metrics"]) == 0 and "brand-new" in capsys.readouterr().out
    assert main(["metrics", "brand-new"]) == 0
    assert "label" in (shown := capsys.readouterr().out) and "a label the test reads back" in shown
    # a config file's metrics: entry gives it its own option; a wrong option is refused naming what it takes
    monkeypatch.chdir(tmp_path)
    turns = [{"role": "user", "content": "Hi, when do you open?"}, {"role": "assistant", "content": "At 9 am."}]
    (tmp_path / "chats.jsonl").write_text(json.dumps({"id": "c1", "turns": turns}) + "\n", encoding="utf-8")
    config = "inputs: [chats.jsonl]\nmetrics:\n  - brand-new: {label: shiny, threshold: 0.2}\n"
    (tmp_path / "run.yaml").write_text(config, encoding="utf-8")
    assert main(["eval", "--config", "run.yaml", "-q", "--no-progress", "--out", "out.jsonl"]) in (0, 1)
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    (result,) = [line["results"]["brand_new"] for line in lines if line.get("type") == "conversation"]
    assert result["threshold"] == 0.2 and result["details"]["window_size"] == 2
    (tmp_path / "run.yaml").write_text(config.replace("label:", "lable:"), encoding="utf-8")
    assert main(["eval", "--config", "run.yaml", "-q", "--no-progress", "--out", "out2.jsonl"]) == 2
    assert "did you mean label?" in capsys.readouterr().err


def test_the_factory_checks_what_the_declaration_says(new_metric):
    factory = new_metric.factory
    with pytest.raises(TypeError, match=r"create_brand_new_metric\(\) got an unexpected keyword argument 'lable' "
                                        r"\(did you mean 'label'\?\)"):
        factory(lable="x")
    with pytest.raises(ValueError, match="label must be a non-empty text"):
        factory(label=" ")
    with pytest.raises(ValueError, match="threshold must be between 0 and 1"):
        factory(threshold=2)
    graph = factory(label="x", window_size=3, name="mine", interrupt_before=["reduce_score"])
    assert graph.name == "mine"


def test_every_built_in_factory_shows_exactly_its_declared_options():
    for spec in [*built_ins().values()]:
        assert spec.settings is not None, f"{spec.name} is not declared by its settings"
        params = inspect.signature(spec.factory).parameters
        declared = {f.name for f in dataclasses.fields(spec.settings) if f.init} - {"name", "judge"}
        assert set(params) == declared | {"model", "name", "compile"}, spec.name
        assert spec.options <= declared and "review" not in spec.options, spec.name
        for option_name in declared:
            assert option_name in (spec.factory.__doc__ or ""), (spec.name, option_name)


def test_a_per_metric_default_overrides_the_settings_default():
    assert get_metric("conversation-relevance").default("window_size") == 5
    assert get_metric("turn-relevancy").default("window_size") == 10
    assert inspect.signature(judgegraph.create_conversational_safety_metric).parameters["threshold"].default == 1.0


def test_a_declaration_is_checked_when_made():
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Settings(WindowOptions):
        size: int = option(3, help="a size")

    with pytest.raises(TypeError, match="defaults for no option: windw_size"):
        MetricSpec("x", summary="x", settings=Settings, build=lambda s: None, defaults={"windw_size": 2})
    with pytest.raises(TypeError, match="give settings and build"):
        MetricSpec("x", summary="x")


def test_the_metrics_command_shows_a_metric_s_declared_options(capsys):
    assert main(["metrics", "conversation-relevance", "role-adherence"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ") and "scope:" not in line}
    assert set(rows) == set(get_metric("conversation-relevance").options) | set(get_metric("role-adherence").options)
    assert "default 5" in out.split("role-adherence:")[0]  # conversation_relevance's own window default
    assert "assistant turns judged per call" in rows["batch_size"]
    assert main(["metrics"]) == 0 and "[offline-rule]" in capsys.readouterr().out
    assert main(["metrics", "turn-relevancyy"]) == 2
    assert "did you mean 'turn-relevancy'" in capsys.readouterr().err
