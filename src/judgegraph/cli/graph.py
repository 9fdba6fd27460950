"""``judgegraph graph``: draw a metric's graph (several: the report graph)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .common import EXIT_OK, EXIT_USAGE, read_guidelines


def register(sub: Any) -> None:
    p = sub.add_parser("graph", help="print a metric's graph (several: the report graph) as Mermaid")
    p.add_argument("metrics", nargs="+", metavar="METRIC")
    p.add_argument("--guideline", action="append", dest="guidelines", metavar="TEXT",
                   help="conversational-guidelines needs at least one to be built (repeatable)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..judges import NoModel
    from ..metrics import create_metric, get_metric
    from ..report import create_report_graph

    try:
        guidelines = read_guidelines(args.guidelines)
        options = {m: {"guidelines": guidelines} for m in args.metrics
                   if guidelines and "guidelines" in get_metric(m).options}
        if len(args.metrics) == 1:
            graph = create_metric(args.metrics[0], model=NoModel(), **options.get(args.metrics[0], {}))
        else:
            graph = create_report_graph(args.metrics, model=NoModel(), options=options)
    except (KeyError, ValueError, TypeError, OSError) as exc:
        print(f"error: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return EXIT_USAGE
    # a report is drawn with its metrics' subgraphs expanded
    print(graph.get_graph(xray=1 if len(args.metrics) > 1 else False).draw_mermaid())
    return EXIT_OK
