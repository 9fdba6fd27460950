"""The cost benchmarks (the README quotes them) still run (issue 20's figures come from them): each on a tiny set, as
``python benchmarks/NAME.py`` is run, against its own loopback server, printing every mode's row. The figures
themselves are not asserted here: the benchmarks print them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.mark.parametrize(("program", "args", "rows"), [
    ("token_costs.py", ["--long", "1", "--short", "2"],
     ["per-window", "dense 10 ", "dense 10 + batch"]),
    ("batch_cost.py", ["--conversations", "2", "--exchanges", "2"], ["live ", "--batch "]),
    ("rejudge_cost.py", ["--conversations", "2", "--exchanges", "3"],
     ["eval again, new rubric", "judgegraph rejudge (1 window)", "steering.rejudge on a thread (1 window)"]),
])
def test_a_cost_benchmark_runs_and_prints_every_mode(program, args, rows):
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    proc = subprocess.run([sys.executable, program, *args], cwd=BENCHMARKS, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    for row in rows:
        assert any(row in line for line in lines), (row, proc.stdout)
