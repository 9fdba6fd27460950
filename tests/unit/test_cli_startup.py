"""Start-up imports only what the command uses (issue 28 §4): measured figures are in
benchmarks/judge_call_cpu.py; here, what a fresh interpreter has loaded after parsing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PROBE = """
import json, sys
from judgegraph.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.startswith(("judgegraph", "langchain", "langgraph", "pydantic", "openai", "anthropic")))))
"""


def loaded(*argv: str) -> set[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, env=env, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("argv", [("--version",), ("eval", "--help"), ("graph", "--help")])
def test_version_and_help_load_no_judge_no_langchain_and_no_other_subcommand(argv):
    mods = loaded(*argv)
    assert not {m for m in mods if m.startswith(("judgegraph.judges", "langchain", "langgraph", "pydantic"))}
    others = {m for m in mods if m.startswith("judgegraph.cli.") and m.rsplit(".", 1)[1] in
              {"watch", "pairwise", "align", "rejudge"}}
    assert not others


def test_the_top_level_help_still_lists_every_subcommand(capsys):
    from judgegraph.cli import SUBCOMMANDS, main

    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert all(name in out for name in SUBCOMMANDS)


def test_an_offline_eval_loads_no_provider_sdk_and_no_batch_package(tmp_path):
    """An offline run needs neither the openai SDK (about a second of CPU to import, paid by every command that
    imported the batch package for its exception class) nor the Anthropic one."""
    convs = tmp_path / "one.jsonl"
    convs.write_text(json.dumps({"id": "c1", "turns": [{"role": "user", "content": "Where is my parcel?"},
                                                       {"role": "assistant", "content": "It ships today."}]}) + "\n")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        mods = loaded("eval", str(convs), "--out", str(tmp_path / "r.jsonl"), "--quiet")
    finally:
        os.chdir(cwd)
    assert "judgegraph.runs.runner" in mods  # the run happened
    assert (tmp_path / "r.jsonl").read_text().count('"type": "conversation"') == 1
    assert not {m for m in mods if m.startswith(("judgegraph.batch", "openai", "anthropic", "langchain_openai", "langchain_anthropic"))}
