"""``judgegraph report``: write an HTML report (one offline file) from results files

Write one self-contained HTML page (no network, no server) from RESULTS, the JSONL file `judgegraph eval` writes.
Given several, the runs side by side: conversations matched by id, a column per run and metric, 'only differences',
failures first.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from .common import EXIT_ERRORS, EXIT_OK, EXIT_USAGE, add_results_command, add_shared, fail

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langgraph.graph.state import CompiledStateGraph

    from ..outputs.html import ReportFile
    from .common import Subparsers


def register(sub: Subparsers) -> None:
    p = add_results_command(sub, run, nargs="+", results="results JSONL (judgegraph eval --out); two or more: compared side by side")
    p.add_argument("-o", "--out", default="judgegraph-report.html", help="HTML file to write (default %(default)s)")
    add_shared(p, "--input", help="the judged input file(s), to show every turn (repeatable)")
    p.add_argument("--title", help="page title (default: from the results file name)")
    add_shared(p, "--labels", help="people's labels: add a section of agreement with them (see judgegraph agree; "
                                   "repeatable; with several RESULTS, with the first)")


def run(args: argparse.Namespace) -> int:
    from ..outputs.html import write_report
    from ..runs import NotAResultsFile

    try:
        made = write_report(args.results, args.out, inputs=args.inputs, title=args.title)
    except NotAResultsFile as exc:
        return fail(exc, EXIT_ERRORS)
    except OSError as exc:  # no filename: a write that failed (a full disk), the page could not be completed
        return fail(f"{exc.filename or args.out}: {exc.strerror or exc}", EXIT_USAGE if exc.filename else EXIT_ERRORS)
    for problem in made.input_problems:
        print(f"warning: {problem}", file=sys.stderr)
    status = report_written(made)
    if args.labels:
        from .agree import add_to_report

        status = max(status, add_to_report(args.results[0], args.labels, made.path))
    return status


def report_written(made: ReportFile) -> int:
    """Say what was written; unreadable results lines make exit status 3."""
    for problem in made.problems:
        print(f"warning: {problem}", file=sys.stderr)
    runs = f" of {made.runs} runs" if made.runs > 1 else ""
    print(f"report: {made.path} ({made.conversations} conversations{runs}, {made.bytes / 1024:.0f} KiB)", file=sys.stderr)
    return EXIT_ERRORS if made.problems else EXIT_OK


def html_after_eval(args: argparse.Namespace, graphs: Sequence[CompiledStateGraph]) -> int:
    """``judgegraph eval --html FILE``: the report of the results just written, with the
    report graphs as they ran (a graph given twice is drawn once)."""
    from ..outputs.html import write_report

    distinct = list({id(graph): graph for graph in graphs}.values())
    try:
        made = write_report(args.out, args.html, inputs=list(args.files), graphs=distinct or None)
    except OSError as exc:
        return fail(f"HTML report {args.html}: {exc.strerror or exc}", EXIT_ERRORS)
    return report_written(made)
