"""Metrics from other packages (issue 26, item 2): ``examples/plugin`` and a broken plugin package are
``pip install``ed into a fresh venv, then that venv's judgegraph lists, runs, re-judges and estimates the
plugin's metric, and names each broken entry point in one warning while everything else still works."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import PASSED_TO_SUBPROCESSES
from tests.kit import cli
from tests.kit.openai_server import FakeOpenAIServer, ScriptedResponder, structured

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CHATS = ROOT / "examples" / "support_chats.jsonl"
EXCHANGES = sum(sum(t["role"] == "assistant" for t in json.loads(line)["turns"])  # reply_tone judges each reply
                for line in CHATS.read_text(encoding="utf-8").splitlines() if line.strip())
YES = structured({"reason": "Friendly and clear.", "verdict": "yes"})
NO = structured({"reason": "Not formal.", "verdict": "no"})

#: A package whose three entry points are broken three ways: a module that cannot be imported, an object that is
#: not a MetricSpec, and a metric named as a built-in one.
BROKEN = {
    "pyproject.toml": """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "judgegraph-broken"
version = "0.1.0"

[project.entry-points."judgegraph.metrics"]
needs_libfoo = "judgegraph_broken.needs_libfoo:SPEC"
not_a_spec = "judgegraph_broken:NOT_A_SPEC"
clash = "judgegraph_broken:CLASH"

[tool.setuptools]
packages = ["judgegraph_broken"]
""",
    "judgegraph_broken/__init__.py": """\
from judgegraph.metric import MetricSpec, create_metric

NOT_A_SPEC = "reply_tone"
CLASH = MetricSpec("turn_relevancy", lambda **kw: create_metric("turn_relevancy", **kw), "a second turn_relevancy",
                   frozenset())
""",
    "judgegraph_broken/needs_libfoo.py": 'raise ImportError("judgegraph-broken needs libfoo")\n',
}
BROKEN_POINTS = ("needs_libfoo", "not_a_spec", "clash")


def _env(**extra: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", **{k: os.environ[k] for k in PASSED_TO_SUBPROCESSES if os.environ.get(k)},
            **extra}


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A fresh venv with the example plugin and the broken one installed: its Python."""
    root = tmp_path_factory.mktemp("plugins")
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(root / "venv")],
                   check=True, timeout=120)
    python = root / "venv" / "bin" / "python"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True, timeout=60).stdout.strip()
    # This interpreter's packages (judgegraph, its dependencies, pip, setuptools) under the venv's own: when this
    # interpreter is itself a venv, --system-site-packages reaches only the base Python's.
    parents = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    Path(site, "judgegraph_under_test.pth").write_text(
        "import site; " + "; ".join(f"site.addsitedir({p!r})" for p in parents) + "\n", encoding="utf-8")
    subprocess.run([python, "-c", "import setuptools.build_meta"], check=True, timeout=60)  # the plugins' backend
    plugin = shutil.copytree(ROOT / "examples" / "plugin", root / "plugin",
                             ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    broken = root / "broken"
    for name, text in BROKEN.items():
        (broken / name).parent.mkdir(parents=True, exist_ok=True)
        (broken / name).write_text(text, encoding="utf-8")
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                    "--no-cache-dir", "--disable-pip-version-check", str(plugin), str(broken)],
                   check=True, timeout=300, env=_env(HOME=str(root)))
    return python


def judgegraph(python: Path, *args: str | Path, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    """The venv's judgegraph (its console script's entry, ``judgegraph.cli:main``): ``python -m judgegraph.cli``
    forked from a zygote of the venv's own interpreter (tests/kit/cli.py), which has imported the CLI but read no
    entry point, so each run finds the plugins as a fresh start does, without paying the imports again."""
    return cli.run(list(map(str, args)), python=python, env=_env(**env), cwd=cwd, timeout=300)


def warned(stderr: str) -> dict[str, int]:
    """How many warnings name each broken entry point."""
    return {p: sum(line.startswith(f"warning: metric plugin {p} = ") for line in stderr.splitlines())
            for p in BROKEN_POINTS}


def results(path: Path) -> dict[str, dict]:
    return {r["conversation_id"]: r["results"] for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())
            if r["type"] == "conversation"}


def test_the_plugin_is_listed_and_each_broken_entry_point_is_one_warning(venv):
    run = judgegraph(venv, "metrics")
    assert run.returncode == 0, run.stderr
    listed = {line.split()[0]: line for line in run.stdout.splitlines()}
    assert "Does each reply keep the tone asked for?" in listed["reply-tone"]
    assert "turn-relevancy" in listed and "a second turn_relevancy" not in run.stdout  # the built-in is kept
    assert warned(run.stderr) == dict.fromkeys(BROKEN_POINTS, 1)
    assert "ImportError: judgegraph-broken needs libfoo" in run.stderr
    assert "is str, not a judgegraph.metric.MetricSpec" in run.stderr
    assert "'turn_relevancy', the name of a built-in metric" in run.stderr
    assert "(package judgegraph-broken)" in run.stderr


def test_the_plugin_metric_runs_with_m_is_rejudged_and_reported(venv, tmp_path):
    out, new, html = tmp_path / "results.jsonl", tmp_path / "new.jsonl", tmp_path / "report.html"
    with FakeOpenAIServer(ScriptedResponder([], default=YES)) as server:
        run = judgegraph(venv, "eval", CHATS, "-m", "reply-tone", "--model", "openai:x", "--base-url", server.base_url,
                         "--no-cache", "--out", out, "-q", "--no-progress")
        assert server.calls["/v1/chat/completions"] == EXCHANGES
    assert run.returncode == 0, run.stderr
    assert warned(run.stderr) == dict.fromkeys(BROKEN_POINTS, 1)  # a name not built in loads the plugins
    judged = results(out)
    first = sorted(judged)[0]
    old = judged[first]["reply_tone"]
    assert old["status"] == "passed" and {v["verdict"] for v in old["verdicts"]} == {"yes"}
    assert old["verdicts"][0]["transcript"]  # the request it was judged from is kept
    chosen = old["verdicts"][0]["id"]
    with FakeOpenAIServer(ScriptedResponder([], default=NO)) as server:
        rejudge = judgegraph(venv, "rejudge", out, "--input", CHATS, "-m", "reply-tone", "--conversation", first,
                             "--verdict", chosen, "--model", "openai:x", "--base-url", server.base_url, "--out", new)
        assert server.calls["/v1/chat/completions"] == 1  # the chosen verdict only
    assert rejudge.returncode == 1, rejudge.stderr  # one reply judged not in the tone: below the threshold 1
    again = results(new)[first]["reply_tone"]
    assert [v["verdict"] for v in again["verdicts"]] == ["no"] + [v["verdict"] for v in old["verdicts"][1:]]
    assert chosen in again["details"]["rejudged"]["verdicts"]
    report = judgegraph(venv, "report", new, "-o", html, "--input", CHATS)
    assert report.returncode == 0, report.stderr
    assert "reply_tone" in html.read_text(encoding="utf-8")


def test_a_config_file_s_option_the_plugin_does_not_take_is_a_usage_error(venv, tmp_path):
    """(The plugin's own option from a config file: test_the_docs_section_runs_as_written.)"""
    config = tmp_path / "judgegraph.yaml"
    config.write_text("metrics:\n  - reply-tone: {tones: formal}\n", encoding="utf-8")
    bad = judgegraph(venv, "eval", CHATS, "--config", config)
    assert bad.returncode == 2 and "reply-tone.tones: unknown key (did you mean tone? reply-tone takes: " in bad.stderr


def test_a_config_file_s_bad_value_of_the_plugin_s_option_names_file_line_and_field(venv, tmp_path):
    """Checked by the plugin's own declaration before any work (no call, nothing written)."""
    config = tmp_path / "judgegraph.yaml"
    config.write_text(f"outputs: {{out: {tmp_path / 'r.jsonl'}}}\nmetrics:\n  - reply-tone: {{tone: ' '}}\n",
                      encoding="utf-8")
    bad = judgegraph(venv, "eval", CHATS, "--config", config)
    assert bad.returncode == 2, bad.stderr
    assert (f"{config}:3: metrics[0].reply-tone.tone: reply_tone: tone is a text such as 'formal', got ' '"
            in " ".join(bad.stderr.split())), bad.stderr
    assert not (tmp_path / "r.jsonl").exists()


def test_the_dry_run_counts_the_plugin_metric(venv):
    run = judgegraph(venv, "eval", CHATS, "-m", "reply-tone", "--model", "openai:gpt-4.1-mini", "--dry-run")
    assert run.returncode == 0, run.stderr
    (row,) = [line.split("│") for line in run.stdout.splitlines() if "reply_tone" in line]
    assert int(row[2]) == EXCHANGES and "No call was made." in run.stdout  # one call per reply, counted


def test_a_broken_plugin_leaves_the_built_ins_running(venv, tmp_path):
    with FakeOpenAIServer(ScriptedResponder([], default=YES)) as server:
        run = judgegraph(venv, "eval", CHATS, "-m", "turn-relevancy", "--model", "openai:x", "--base-url",
                         server.base_url, "--out", tmp_path / "results.jsonl", "-q", "--no-progress")
        assert server.calls["/v1/chat/completions"] > 0
    assert run.returncode == 0, run.stderr
    assert all("turn_relevancy" in r for r in results(tmp_path / "results.jsonl").values())
    assert warned(run.stderr) == dict.fromkeys(BROKEN_POINTS, 0)  # a built-in's name loads no plugin


def test_the_docs_section_runs_as_written(venv, tmp_path):
    """docs/guide/custom.md's "Metrics from other packages": its entry point is the example's, and its commands
    (the config file as written) run in the venv the example is installed in."""
    page = (ROOT / "docs" / "guide" / "custom.md").read_text(encoding="utf-8")
    section = page.split("\n# Metrics from other packages\n", 1)[1].split("\n# ", 1)[0]
    blocks = dict(re.findall(r"```(toml|bash|yaml)\n(.*?)```", section, re.S))
    assert blocks["toml"].strip() in (ROOT / "examples" / "plugin" / "pyproject.toml").read_text(encoding="utf-8")
    lines = [line.split("  # ")[0] for line in blocks["bash"].splitlines()]
    assert lines[0] == "pip install ./examples/plugin"  # what the fixture installed
    (tmp_path / "examples").mkdir()
    shutil.copy(CHATS, tmp_path / "examples" / CHATS.name)
    (tmp_path / "tone.yaml").write_text(blocks["yaml"], encoding="utf-8")
    formal = ScriptedResponder([(lambda req: "keeps this tone: formal." in req.text, NO)], default=YES)
    with FakeOpenAIServer(formal) as server:
        runs = [judgegraph(venv, *shlex.split(line)[1:], cwd=tmp_path, OPENAI_BASE_URL=server.base_url,
                           OPENAI_API_KEY="sk-test") for line in lines[1:]]
        calls = server.calls["/v1/chat/completions"]
    assert [r.returncode for r in runs] == [0, 0, 1], [r.stderr for r in runs]
    assert calls == 2 * EXCHANGES, [r.stderr for r in runs]  # formal: not the example's tone
    assert "reply-tone" in runs[0].stdout


def test_the_plugin_s_own_option_is_given_with_o_typed_and_checked_by_its_declaration(venv, tmp_path):
    """``--option tone=formal`` reaches the plugin's settings (its prompt asks for that tone); a name it does not declare and
    a value its check refuses are usage errors with the messages its config file entry gets, before any work."""
    formal = ScriptedResponder([(lambda req: "keeps this tone: formal." in req.text, NO)], default=YES)
    out = tmp_path / "results.jsonl"
    with FakeOpenAIServer(formal) as server:
        run = judgegraph(venv, "eval", CHATS, "-m", "reply-tone", "--option", "tone=formal", "--model", "openai:x",
                         "--base-url", server.base_url, "--no-cache", "--out", out, "-q", "--no-progress")
        assert server.calls["/v1/chat/completions"] == EXCHANGES
    assert run.returncode == 1, run.stderr  # every reply judged not formal: every conversation fails
    assert {r["reply_tone"]["status"] for r in results(out).values()} == {"failed"}
    unknown = judgegraph(venv, "eval", CHATS, "-m", "reply-tone", "--option", "tones=formal", "--out", tmp_path / "u.jsonl")
    assert unknown.returncode == 2 and "--option tones: unknown key (did you mean tone? reply-tone takes: " in unknown.stderr
    blank = judgegraph(venv, "eval", CHATS, "-m", "reply-tone", "--option", "tone= ", "--out", tmp_path / "b.jsonl")
    assert blank.returncode == 2
    assert "reply_tone: tone is a text such as 'formal', got ' '" in " ".join(blank.stderr.split()), blank.stderr
    assert not (tmp_path / "u.jsonl").exists() and not (tmp_path / "b.jsonl").exists()
