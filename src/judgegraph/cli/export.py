"""``judgegraph export``: a results file as CSV or Parquet (a row per conversation x metric)

Write a results file as a table, in input order: one row per conversation x metric (--verdicts: one per verdict).
Parquet needs pip install 'judgegraph[export]'.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .common import EXIT_ERRORS, EXIT_OK, EXIT_USAGE, add_results_command, fail

if TYPE_CHECKING:
    from .common import Subparsers


def register(sub: Subparsers) -> None:
    p = add_results_command(sub, run, results="a results file (judgegraph eval --out)")
    p.add_argument("--format", choices=["csv", "parquet"], default="csv", help="the table format (default csv)")
    p.add_argument("--out", metavar="FILE", help="where to write it, - for stdout (default: RESULTS with .csv / .parquet)")
    p.add_argument("--verdicts", action="store_true", help="one row per verdict instead of per result")


def run(args: argparse.Namespace) -> int:
    from ..outputs.export import EXPORT_MISSING, ExportExtraMissing, load_results
    from ..runs import NotAResultsFile

    source = Path(args.results)
    suffix = "-verdicts" if args.verdicts else ""
    to_stdout = args.out == "-"
    out = Path(args.out) if args.out else source.with_name(f"{source.stem}{suffix}.{args.format}")
    if not to_stdout and out.resolve() == source.resolve():
        return fail(f"--out {out} is the results file itself; choose another path", EXIT_USAGE)
    if not to_stdout and out.is_dir():
        return fail(f"--out {out} is a directory; give a file path such as {out / ('results.' + args.format)}")
    try:
        results = load_results(source)
    except NotAResultsFile as exc:
        return fail(exc, EXIT_ERRORS)
    try:
        if args.format == "csv":
            count = results.to_csv(sys.stdout if to_stdout else out, verdicts=args.verdicts)
        else:
            count = results.to_parquet(sys.stdout.buffer if to_stdout else out, verdicts=args.verdicts)
    except ExportExtraMissing:
        return fail(f"--format {args.format} {EXPORT_MISSING}", EXIT_USAGE)
    except OSError as exc:
        return fail(f"cannot write {out}: {exc.strerror or exc}", EXIT_ERRORS)
    print(f"wrote {'stdout' if to_stdout else out}: {count} {'verdict' if args.verdicts else 'result'} rows from "
          f"{len(results.conversations)} conversations, in input order", file=sys.stderr if to_stdout else sys.stdout)
    for problem in results.run.problems:
        print(f"warning: {problem}", file=sys.stderr)
    return EXIT_ERRORS if results.run.problems else EXIT_OK
