"""``--option NAME=VALUE``: every metric's options on the command line, from their declarations (issue 26, item 1).

Each option a metric declares for the command line can be given with ``--option`` and reaches the metric's settings;
an option no metric of the run declares, and a value the declaration refuses, are usage errors (exit 2) with the
message a config file's ``metrics:`` entry gets. The plugin's own option: tests/integration/test_plugins.py."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

import pytest

from judgegraph import ScriptedChatModel
from judgegraph.cli import main, parser
from judgegraph.cli.common import metric_options
from judgegraph.metrics import MetricSpec, registry
from judgegraph.runs.runner import MetricPlan

pytestmark = pytest.mark.integration


#: Options another goes with: ``--option`` given with them.
WITH = {"extract_per": ["judge_per=node"], "embeddings": ["embeddings_base_url=http://127.0.0.1:9/v1"]}


@pytest.fixture(autouse=True)
def _in_an_empty_folder(tmp_path, monkeypatch):
    """Every run here starts in an empty folder: a results file left in the checkout (the README's first command
    writes one) would be refused before the option is."""
    monkeypatch.chdir(tmp_path)


def _value(spec: MetricSpec, option: str) -> tuple[str, Any]:
    """A text for ``--option option=TEXT`` that the declaration accepts, not the option's default, and what it reads as."""
    kinds, default = spec.kinds(option), spec.default(option)
    if choices := spec.choices(option):
        chosen = next(c for c in choices if c != default)
        return chosen, chosen
    if bool in kinds:
        return ("false", False) if default else ("true", True)
    if int in kinds:
        return "2", 2
    if float in kinds:
        return "0.25", 0.25
    if option == "embeddings_base_url":
        return "http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1"
    if option == "embeddings":  # an embeddings model by name: the settings hold the model it names
        return "openai:text-embedding-3-small", "text-embedding-3-small"
    if any(typing.get_origin(k) in (list, tuple, typing.Sequence) or "Sequence" in str(k) for k in kinds):
        return "Be polite.", ("Be polite.",)
    return "a text", "a text"


CASES = [pytest.param(name, option, id=f"{name}.{option}")
         for name, spec in registry().items() if spec.settings is not None for option in sorted(spec.options)]


@pytest.mark.parametrize(("metric", "option"), CASES)
def test_each_declared_option_given_with_o_reaches_the_metric_s_settings(metric, option, monkeypatch):
    spec = registry()[metric]
    text, expected = _value(spec, option)
    with_ = [a for o in WITH.get(option, []) for a in ("--option", o)]
    args = parser().parse_args(["eval", "-m", metric, "--option", f"{option.replace('_', '-')}={text}", *with_])
    given = metric_options(args)
    made: list[Any] = []
    settings = spec.settings
    assert settings is not None
    monkeypatch.setattr(settings, "__post_init__", lambda self: (made.append(self), settings.check(self)))
    if metric == "conversational_guidelines" and option != "guidelines":
        given["guidelines"] = ["Be polite."]  # it needs one to be built
    plan = MetricPlan([metric], ScriptedChatModel(reply=lambda request: {}), given)
    plan.check()
    (built,) = [s for s in made if s.name == metric]
    value = getattr(built, option)
    value = getattr(value, "model", value)  # embeddings: the model made from the name
    assert (tuple(value) if isinstance(value, (list, tuple)) else value) == expected
    assert value != spec.default(option) or option == "guidelines"


def test_a_name_no_metric_of_the_run_declares_is_refused_naming_the_metrics(capsys, tmp_path):
    assert main(["eval", "x.jsonl", "-m", "turn-relevancy", "-m", "tool-correctness", "--option", "trajectry=strict",
                 "--out", str(tmp_path / "r.jsonl")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert ("--option trajectry: unknown key (did you mean trajectory? turn-relevancy, tool-correctness take: arguments, "
            "dense, judge_unreferenced") in err
    assert not (tmp_path / "r.jsonl").exists()


def test_an_option_of_another_metric_is_refused_as_a_config_file_s_is(capsys, tmp_path):
    """The same option, in a config file's ``metrics:`` entry and with ``--option``: the same message."""
    config = tmp_path / "judgegraph.yaml"
    config.write_text("metrics:\n  - turn-relevancy: {guidelines: [x]}\n", encoding="utf-8")
    assert main(["eval", "x.jsonl", "--config", str(config)]) == 2
    from_file = " ".join(capsys.readouterr().err.split())
    assert main(["eval", "x.jsonl", "-m", "turn-relevancy", "--option", "guidelines=x"]) == 2
    from_o = " ".join(capsys.readouterr().err.split())
    why = "turn-relevancy takes no guidelines (it takes: dense, min_judged, reason, rubric, strict, threshold, window"
    assert f"turn-relevancy.guidelines: {why}" in from_file and f"--option guidelines: {why}" in from_o


def test_an_option_is_refused_before_the_out_file_as_a_config_file_s_is(capsys, tmp_path):
    """Both routes are checked before ``--out``: a results file already there is not what is reported first."""
    out = tmp_path / "r.jsonl"
    out.write_text('{"kind": "header", "judgegraph": "1"}\n', encoding="utf-8")
    config = tmp_path / "judgegraph.yaml"
    config.write_text("metrics:\n  - turn-relevancy: {guidelines: [x]}\n", encoding="utf-8")
    firsts = []
    for given in (["--config", str(config)], ["-m", "turn-relevancy", "--option", "guidelines=x"]):
        assert main(["eval", "x.jsonl", *given, "--out", str(out)]) == 2
        firsts.append(" ".join(capsys.readouterr().err.split()))
    assert all("takes no guidelines" in first and "already" not in first for first in firsts), firsts


@pytest.mark.parametrize(("given", "message"), [
    (["-m", "tool-correctness", "--option", "trajectory=bogus"],
     "trajectory must be one of strict, unordered, subset, superset, got 'bogus'"),
    (["-m", "tool-correctness", "--trajectory", "bogus"],  # the flag is --option trajectory=
     "trajectory must be one of strict, unordered, subset, superset, got 'bogus'"),
    (["--option", "threshold=abc"], "threshold must be a number between 0 and 1, got 'abc'"),  # no -m: checked all the same
    (["-m", "topic-adherence", "--option", "mode=most"], "mode must be one of precision, recall, f1, got 'most'"),
    (["-m", "turn-relevancy", "--option", "window-size=0"], "window_size must be a whole number >= 1, got 0"),
    (["--option", "nosuch=1"], "--option nosuch: unknown key (known here: arguments, "),
    (["--option", "threshold"], "--option threshold: expected NAME=VALUE, e.g. --option threshold=0.8"),
    (["-m", "turn-relevancy", "--option", "strict=maybe"], "strict_mode must be True or False, got 'maybe'"),
])
def test_a_bad_value_or_name_is_a_usage_error_with_the_declaration_s_message(given, message, capsys, tmp_path):
    assert main(["eval", "x.jsonl", *given, "--out", str(tmp_path / "r.jsonl")]) == 2
    assert message in " ".join(capsys.readouterr().err.split())
    assert not (tmp_path / "r.jsonl").exists()


def test_a_list_option_is_repeated_or_read_from_a_file_one_item_a_line(tmp_path):
    topics = tmp_path / "topics.txt"
    topics.write_text("shipping\n\nreturns\n", encoding="utf-8")
    args = parser().parse_args(["eval", "-m", "topic-adherence", "--option", "topics=opening hours",
                                "--option", f"topics=@{topics}", "--topic", "books", "--option", "mode=recall"])
    assert metric_options(args) == {"topics": ["books", "opening hours", "shipping", "returns"], "mode": "recall"}


def test_o_over_a_config_file_s_own_option_of_a_metric(tmp_path, capsys):
    """As a flag does: the command line wins over the file, for a metric's own option too."""
    from judgegraph.cli.configfile import apply_config

    config = tmp_path / "judgegraph.yaml"
    config.write_text("metrics:\n  - turn-relevancy: {threshold: 0.9, window_size: 2}\n", encoding="utf-8")
    argv = ["eval", "x.jsonl", "--config", str(config), "--option", "threshold=0.3"]
    args = parser().parse_args(argv)
    args.argv = argv
    apply_config(args, args.parser)
    assert args.per_metric == {"turn-relevancy": {"window_size": 2}}
    assert metric_options(args) == {"threshold": 0.3}


def test_help_says_how_to_list_a_metric_s_options(capsys):
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--option NAME=VALUE a metric's option, repeatable" in out and "`judgegraph metrics METRIC` lists them" in out


def test_every_option_flag_names_an_option_a_metric_declares():
    """A flag kept beside ``--option`` (``--threshold``, ``--topic``...) is ``--option`` with its destination: a declared name."""
    declared = {o for spec in registry().values() for o in spec.options}
    eval_parser = parser().parse_args(["eval"]).parser
    flags = {a.dest for a in eval_parser._actions
             if any(s in ("--threshold", "--window-size", "--min-judged", "--guideline", "--role", "--trajectory",
                          "--tool-arguments", "--topic", "--strict", "--reason", "--rubric", "--dense", "--verify",
                          "--n-questions") for s in a.option_strings)}
    assert len(flags) == 14 and flags <= declared, flags - declared
    assert dataclasses.is_dataclass(registry()["turn_relevancy"].settings)


def test_metrics_name_shows_an_option_s_choices_from_its_literal(capsys):
    """What ``--option trajectory=`` takes, read from the declaration's type (the flag's help no longer copies it)."""
    assert main(["metrics", "tool-correctness"]) == 0
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.split()[0] == "trajectory"]
    assert line.endswith("(strict | unordered | subset | superset)")
