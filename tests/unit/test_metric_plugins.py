"""The registry's entry points (group ``judgegraph.metrics``), in process: read once and only when needed, a
broken one is one warning naming it and why. tests/integration/test_plugins.py installs real packages."""

from __future__ import annotations

import sys
import warnings
from importlib.metadata import EntryPoint

import pytest

import judgegraph.metrics as metrics
from judgegraph.metric import ENTRY_POINT_GROUP, MetricSpec, create_metric


def _tone(**options):
    return create_metric("turn_relevancy", **options)


GOOD = MetricSpec("polite_tone", _tone, "a plugin's metric", frozenset({"threshold"}))
CLASH = MetricSpec("turn_relevancy", _tone, "a second turn_relevancy", frozenset())
SHOUTED = MetricSpec("Polite-Tone", _tone, "a name -m cannot find", frozenset())
NOT_A_SPEC = "polite_tone"
HERE = __name__


@pytest.fixture
def points(monkeypatch):
    """The entry points the registry sees (set by the test), and how many times it asked for them."""
    state = {"points": [], "asked": 0}

    def entry_points(*, group):
        assert group == ENTRY_POINT_GROUP == "judgegraph.metrics"
        state["asked"] += 1
        return [EntryPoint(name, value, group) for name, value in state["points"]]

    monkeypatch.setattr(metrics, "entry_points", entry_points)
    for cached in (metrics.registry, metrics._plugins):
        cached.cache_clear()
    yield state
    for cached in (metrics.registry, metrics._plugins):
        cached.cache_clear()


def test_a_plugin_metric_is_registered_and_found_by_name(points):
    points["points"] = [("polite_tone", f"{HERE}:GOOD")]
    assert metrics.get_metric("polite-tone") is GOOD
    assert list(metrics.registry())[-1] == "polite_tone" and "turn_relevancy" in metrics.registry()
    assert points["asked"] == 1
    graph = create_metric("polite_tone", threshold=0.5)  # built like any metric
    assert graph.name == "turn_relevancy"


def test_entry_points_are_read_once_and_not_for_a_built_in_name(points):
    points["points"] = [("polite_tone", f"{HERE}:GOOD")]
    metrics.get_metric("turn-relevancy")
    assert points["asked"] == 0  # a built-in's name loads no plugin
    metrics.get_metric("polite_tone"), metrics.registry(), metrics.get_metric("polite_tone")
    assert points["asked"] == 1


def test_each_broken_entry_point_is_one_warning_and_the_rest_works(points):
    points["points"] = [
        ("missing", "judgegraph_no_such_plugin.metrics:SPEC"),
        ("not_a_spec", f"{HERE}:NOT_A_SPEC"),
        ("clash", f"{HERE}:CLASH"),
        ("shouted", f"{HERE}:SHOUTED"),
        ("polite_tone", f"{HERE}:GOOD"),
        ("again", f"{HERE}:GOOD"),
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        specs = metrics.registry()
        metrics.registry(), metrics.get_metric("polite-tone")
    messages = [str(w.message) for w in caught]
    assert len(messages) == 5 and all(issubclass(w.category, UserWarning) for w in caught)
    assert messages[0].startswith("metric plugin missing = judgegraph_no_such_plugin.metrics:SPEC could not be loaded:"
                                  " ModuleNotFoundError")
    assert "not_a_spec" in messages[1] and "is str, not a judgegraph.metric.MetricSpec" in messages[1]
    assert "clash" in messages[2] and "the name of a built-in metric" in messages[2]
    assert "shouted" in messages[3] and "lower case with underscores" in messages[3]
    assert "again" in messages[4] and "the name of another plugin's metric" in messages[4]
    assert all(m.endswith("; it is left out") for m in messages)
    assert specs["polite_tone"] is GOOD and specs["turn_relevancy"] is not CLASH
    assert "judgegraph_no_such_plugin" not in sys.modules


def test_an_unknown_name_still_names_the_nearest_known_one_with_plugins(points):
    points["points"] = [("polite_tone", f"{HERE}:GOOD")]
    with pytest.raises(metrics.MetricNotFound, match="did you mean 'polite-tone'"):
        metrics.get_metric("polite-tones")
