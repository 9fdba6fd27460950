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
print(json.dumps(sorted(m for m in sys.modules if m.startswith(("judgegraph", "langchain", "langgraph", "pydantic")))))
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
