"""The ``judgegraph`` command: one module per subcommand.

Each subcommand module has ``register(subparsers)``, which adds its parser and
sets ``run`` (a function ``(args) -> exit status``) as its default.

Exit statuses (documented in the README):
  0  every metric passed (or was not applicable)
  1  at least one conversation failed a metric's threshold
  2  the command line was wrong (unknown metric, bad option)
  3  something could not be judged: bad input records, judge errors, a failed run
     (results for everything else are still printed and written)
"""

from __future__ import annotations

import argparse
import sys
from importlib import import_module

from .common import EXIT_ERRORS, EXIT_FAILED, EXIT_OK, EXIT_USAGE

__all__ = ["EXIT_ERRORS", "EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "main"]

#: Subcommand modules, in the order ``judgegraph --help`` lists them.
SUBCOMMANDS = ("eval", "rejudge", "report", "graph", "simulate", "cache", "metrics")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="judgegraph", description="Judge chatbot conversations with LangGraph metric graphs.")
    sub = p.add_subparsers(dest="command", required=True)
    for name in SUBCOMMANDS:
        import_module(f"{__name__}.{name}").register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.run(args))
    except BrokenPipeError:  # e.g. `judgegraph graph ... | head`
        sys.stderr.close()
        return EXIT_OK
