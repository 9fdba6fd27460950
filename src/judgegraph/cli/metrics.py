"""``judgegraph metrics``: list the metrics, or show the options of those named (read from their declarations)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from .common import EXIT_OK, consoles, usage_error

if TYPE_CHECKING:
    from .common import Subparsers


def register(sub: Subparsers) -> None:
    p = sub.add_parser("metrics", help="list the metrics, or show a metric's options",
                       description="List the metrics (built-in and plugins'); with METRIC names, each one's options "
                                   "(default, help, choices) as a config file's metrics: entry and --option NAME=VALUE take them.")
    p.add_argument("names", nargs="*", metavar="METRIC", help="show these metrics' options")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..metrics import MetricNotFound, get_metric, registry

    if not args.names:
        for spec in registry().values():
            marks = "".join(f" [{c.replace('_', '-')}]" for c in sorted(spec.capabilities))
            print(f"{spec.name.replace('_', '-'):28} {spec.summary}{marks}")
        return EXIT_OK
    try:
        specs = [get_metric(name) for name in args.names]
    except MetricNotFound as exc:
        return usage_error(consoles()[1], exc)
    for spec in specs:
        print(f"{spec.name.replace('_', '-')}: {spec.summary}")
        print(f"  scope: {spec.scope}; needs: {', '.join(sorted(spec.needs)) or 'nothing'}")
        for name, default, help_text in spec.option_table():
            print(f"  {name:26} {default:18} {help_text}")
    return EXIT_OK
