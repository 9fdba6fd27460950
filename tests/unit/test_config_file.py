"""A config file's metric options (``options:``, a metric's own in ``metrics:``, ``thresholds:``) are checked by the
metrics' declarations (their settings classes), built-in or a plugin's: an unknown option names the nearest known
one, a bad value names FILE:LINE: field and why, as the metric's own check says it (issue 26, item 1)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import judgegraph.metrics as metrics
from judgegraph.cli import main
from judgegraph.runs.config import ConfigError, load_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def plugin(monkeypatch):
    """The example plugin's metric (examples/plugin), registered as its entry point registers it."""
    monkeypatch.syspath_prepend(str(ROOT / "examples" / "plugin"))
    from judgegraph_reply_tone import SPEC

    for cached in (metrics.registry, metrics._plugins):
        cached.cache_clear()
    monkeypatch.setattr(metrics, "_plugins", lambda: {SPEC.name: SPEC})
    yield SPEC
    metrics.registry.cache_clear()
    sys.modules.pop("judgegraph_reply_tone", None)


def refused(tmp_path: Path, text: str) -> str:
    (tmp_path / "judgegraph.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as exc:
        load_config(tmp_path / "judgegraph.yaml")
    return str(exc.value).replace(str(tmp_path / ""), "").lstrip("/\\")


def test_a_bad_value_of_a_plugin_s_own_option_names_file_line_and_field(plugin, tmp_path):
    text = "inputs: [chats.jsonl]\nmetrics:\n  - turn-relevancy\n  - reply-tone: {tone: '  '}\n"
    assert refused(tmp_path, text) == ("judgegraph.yaml:4: metrics[1].reply-tone.tone: reply_tone: tone is a text "
                                       "such as 'formal', got '  '")
    # in options:, for every metric that takes it: the plugin's check too
    assert refused(tmp_path, "metrics: [reply-tone]\noptions:\n  threshold: 0.5\n  tone: ''\n") == \
        "judgegraph.yaml:4: options.tone: reply_tone: tone is a text such as 'formal', got ''"


def test_a_plugin_s_own_option_in_options_reaches_it(plugin, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    turns = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]
    (tmp_path / "chats.jsonl").write_text(json.dumps({"id": "c1", "turns": turns}) + "\n", encoding="utf-8")
    (tmp_path / "judgegraph.yaml").write_text("inputs: [chats.jsonl]\nmetrics: [reply-tone, turn-relevancy]\n"
                                              "options:\n  tone: formal\n  window_size: 2\n", encoding="utf-8")
    assert main(["eval", "--config", "judgegraph.yaml", "-q", "--no-progress"]) in (0, 1, 3)
    head = json.loads((tmp_path / "judgegraph-results.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert {m["name"]: m["options"] for m in head["metrics"]} == {"reply_tone": {"tone": "formal"},
                                                                  "turn_relevancy": {"window_size": 2}}


@pytest.mark.parametrize("text, message", [
    # a built-in's option the config file knew nothing of: its value checked by the metric's declaration
    ("metrics:\n  - topic-adherence: {mode: average}\n",
     "judgegraph.yaml:2: metrics[0].topic-adherence.mode: mode must be 'precision', 'recall' or 'f1', got 'average'"),
    ("metrics:\n  - tool-correctness:\n      threshold: 0.5\n      trajectory: loose\n",
     "judgegraph.yaml:4: metrics[0].tool-correctness.trajectory: trajectory must be one of strict, unordered, "
     "subset, superset, got 'loose'"),
    ("options:\n  penalize_ambiguous_claims: 'yes'\n",
     "judgegraph.yaml:2: options.penalize_ambiguous_claims: penalize_ambiguous_claims must be True or False, got 'yes'"),
    ("options:\n  n_questions: 0\n", "judgegraph.yaml:2: options.n_questions: n_questions must be a whole number >= 1"),
    ("metrics:\n  - conversational-guidelines:\n      guidelines: [Be kind., '']\n",
     "judgegraph.yaml:3: metrics[0].conversational-guidelines.guidelines: guideline 2 must be a non-empty string"),
    # the file's spelling of strict_mode
    ("metrics:\n  - turn-relevancy: {strict: maybe}\n",
     "judgegraph.yaml:2: metrics[0].turn-relevancy.strict: strict_mode must be True or False, got 'maybe'"),
    ("thresholds:\n  goal-completion: high\n",
     "judgegraph.yaml:2: thresholds.goal-completion.threshold: threshold must be a number between 0 and 1, got 'high'"),
])
def test_a_bad_value_of_a_built_in_option_names_file_line_field_and_why(tmp_path, text, message):
    assert refused(tmp_path, text).startswith(message)


@pytest.mark.parametrize("text, message", [
    ("options:\n  threshold: 0.5\n  windw_size: 2\n",
     "judgegraph.yaml:3: options.windw_size: unknown key (did you mean window_size? known here: "),
    ("options:\n  topic: [billing]\n", "judgegraph.yaml:2: options.topic: unknown key (did you mean topics? known"),
    ("metrics:\n  - topic-adherence: {mdoe: f1}\n",
     "judgegraph.yaml:2: metrics[0].topic-adherence.mdoe: unknown key (did you mean mode? topic-adherence takes: "),
])
def test_a_misspelt_option_names_the_nearest_known_one(tmp_path, text, message):
    assert refused(tmp_path, text).startswith(message)


def test_accepted_options_need_what_only_the_run_gives(tmp_path):
    """A check needing the run's judge or the command line (reason llm, guidelines from --guideline) is the run's."""
    text = "metrics: [conversational-guidelines, turn-relevancy]\noptions:\n  reason: llm\n  threshold: 0.4\n"
    (tmp_path / "judgegraph.yaml").write_text(text, encoding="utf-8")
    config, _ = load_config(tmp_path / "judgegraph.yaml")
    assert config.options == {"reason": "llm", "threshold": 0.4}


def test_a_bad_option_value_is_a_usage_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "chats.jsonl").write_text("", encoding="utf-8")
    (tmp_path / "judgegraph.yaml").write_text("inputs: [chats.jsonl]\noptions:\n  mode: average\n", encoding="utf-8")
    assert main(["eval", "--config", "judgegraph.yaml", "-q", "--no-progress"]) == 2
    assert "judgegraph.yaml:3: options.mode: mode must be 'precision', 'recall' or 'f1'" in capsys.readouterr().err
    assert not (tmp_path / "judgegraph-results.jsonl").exists()


@pytest.mark.parametrize("config, flags, expected", [
    ("options:\n  arguments: ignore\n  mode: recall\n", [], {"arguments": "ignore"}),  # options: no flag gives
    ("options:\n  arguments: ignore\n", ["--tool-arguments", "exact"], {"arguments": "exact"}),  # the flag wins
    ("metrics:\n  - tool-correctness: {arguments: ignore}\n", ["--tool-arguments", "exact"], {"arguments": "exact"}),
])
def test_a_flag_and_the_config_file_meet_on_the_declared_option(tmp_path, monkeypatch, config, flags, expected):
    """--tool-arguments forwards the declared option ``arguments``: the file's ``arguments:`` is that option too."""
    monkeypatch.chdir(tmp_path)
    turns = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]
    (tmp_path / "chats.jsonl").write_text(json.dumps({"id": "c1", "turns": turns}) + "\n", encoding="utf-8")
    (tmp_path / "judgegraph.yaml").write_text(config, encoding="utf-8")
    argv = ["eval", "chats.jsonl", "--config", "judgegraph.yaml", "-q", "--no-progress", *flags]
    assert main([*argv, "-m", "tool-correctness", "-m", "topic-adherence"]) in (0, 1, 3)
    head = json.loads((tmp_path / "judgegraph-results.jsonl").read_text(encoding="utf-8").splitlines()[0])
    options = {m["name"]: m["options"] for m in head["metrics"]}
    assert options["tool_correctness"] == expected
    assert options["topic_adherence"] == ({"mode": "recall"} if "mode" in config else {})
