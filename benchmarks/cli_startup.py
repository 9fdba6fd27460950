"""How long the command line takes to answer before any work: ``judgegraph --version`` and ``judgegraph eval --help``
(neither imports a metric module: issue 28 keeps both under 0.5 s), and ``eval --option NAME=VALUE``'s resolution against
the metrics' declarations (the registry imported, the option typed and checked), each the median of N runs in a fresh
interpreter. Prints wall and CPU seconds.

    python benchmarks/cli_startup.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

RESOLVE = ("from judgegraph.cli import parser; from judgegraph.cli.common import metric_options; "
           "metric_options(parser().parse_args(['eval', '-m', 'topic-adherence', '-o', 'mode=recall']))")
CASES = {
    "judgegraph --version": [sys.executable, "-m", "judgegraph.cli", "--version"],
    "judgegraph eval --help": [sys.executable, "-m", "judgegraph.cli", "eval", "--help"],
    "eval --option mode=recall, resolved": [sys.executable, "-c", RESOLVE],
}


def measure(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child) of one run."""
    before, start = os.times(), time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall, after = time.perf_counter() - start, os.times()
    return wall, (after.children_user - before.children_user) + (after.children_system - before.children_system)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="runs of each command (default 5; the median is printed)")
    args = ap.parse_args()
    for name, argv in CASES.items():
        runs = [measure(argv) for _ in range(args.runs)]
        wall, cpu = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
        print(f"{name:34} wall {wall:.3f} s   cpu {cpu:.3f} s   (median of {args.runs})")


if __name__ == "__main__":
    main()
