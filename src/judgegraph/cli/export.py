"""``judgegraph export``: a results file as CSV or Parquet, one row per conversation × metric."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from .common import EXIT_ERRORS, EXIT_OK, EXIT_USAGE, fail

if TYPE_CHECKING:
    from .common import Subparsers


def register(sub: Subparsers) -> None:
    p = sub.add_parser("export", help="a results file as CSV or Parquet (a row per conversation x metric)",
                       description="Write a results file as a table, in input order: one row per conversation x "
                                   "metric (--verdicts: one per verdict). Parquet needs pip install "
                                   "'judgegraph[export]'.")
    p.add_argument("results", metavar="RESULTS", help="a results file (judgegraph eval --out)")
    p.add_argument("--format", choices=["csv", "parquet"], default="csv", help="the table format (default csv)")
    p.add_argument("--out", metavar="FILE", help="where to write it (default: RESULTS with .csv / .parquet)")
    p.add_argument("--verdicts", action="store_true", help="one row per verdict instead of per result")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..export import EXPORT_MISSING, ExportExtraMissing, load_results

    source = Path(args.results)
    if not source.is_file():
        return fail(f"{source}: no such results file", EXIT_USAGE)
    suffix = "-verdicts" if args.verdicts else ""
    out = Path(args.out) if args.out else source.with_name(f"{source.stem}{suffix}.{args.format}")
    if out.resolve() == source.resolve():
        return fail(f"--out {out} is the results file itself; choose another path", EXIT_USAGE)
    if out.is_dir():
        return fail(f"--out {out} is a directory; give a file path such as {out / ('results.' + args.format)}")
    results = load_results(source)
    try:
        if args.format == "csv":
            count = results.to_csv(out, verdicts=args.verdicts)
        else:
            count = results.to_parquet(out, verdicts=args.verdicts)
    except ExportExtraMissing:
        return fail(f"--format {args.format} {EXPORT_MISSING}", EXIT_USAGE)
    except OSError as exc:
        return fail(f"cannot write {out}: {exc.strerror or exc}", EXIT_ERRORS)
    kind = "verdict" if args.verdicts else "result"
    print(f"wrote {out}: {count} {kind} rows from {len(results.conversations)} conversations, in input order")
    return EXIT_OK
