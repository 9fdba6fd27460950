"""``judgegraph agree``: agreement of the judges with people's labels (kappa, confusion, disagreements)

Compare the verdicts of RESULTS with people's labels: a labels JSONL file, an MLflow assessments export, a LangSmith
feedback export (--labels), and the review decisions stored in RESULTS. Per metric: n, % agreement, Cohen's kappa,
weighted kappa / Spearman, a confusion matrix, bootstrap intervals and every disagreement. Exit 1 below --min-kappa,
3 when a label matches no verdict or a label record is unusable. (docs/agreement.md)
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from . import common
from .common import EXIT_ERRORS, EXIT_FAILED, EXIT_OK, add_results_command, consoles, markup_safe, safe, usage_error

if TYPE_CHECKING:
    from pathlib import Path

    from rich.console import Console

    from ..trust.agreement import AgreementReport
    from .common import Subparsers


def register(sub: Subparsers) -> None:
    p = add_results_command(sub, run, results="results JSONL (judgegraph eval --out)")
    p.set_defaults(checks=(common.check_numbers,))
    common.add_shared(p, "--labels")
    p.add_argument("--no-reviews", dest="reviews", action="store_false",
                   help="ignore the review decisions stored in RESULTS")
    common.add_shared(p, "--metric")
    p.add_argument("--min-kappa", type=float, metavar="X",
                   help="exit 1 when a metric's kappa (weighted kappa for ordinal labels, Spearman for numbers) is "
                        "below X or undefined")
    common.add_report_options(p)
    p.add_argument("--html", metavar="OUT", help="also write the report as one HTML page")


def run(args: argparse.Namespace) -> int:
    from ..runs import NotAResultsFile
    from ..trust.agreement import agreement

    out, err = consoles()
    if args.min_kappa is not None and not -1.0 <= args.min_kappa <= 1.0:  # NaN too: it would pass every gate
        return usage_error(err, f"--min-kappa must be between -1 and 1, got {args.min_kappa}")
    try:
        report = agreement(args.results, args.labels, reviews=args.reviews, metrics=args.metrics,
                           resamples=args.bootstrap, seed=args.seed)
    except NotAResultsFile as exc:
        return common.fail(exc, EXIT_ERRORS)
    except OSError as exc:  # a labels file that cannot be read: an input, as a results file (exit 3)
        return usage_error(err, f"{exc.filename or ''}: {exc.strerror or exc}", EXIT_ERRORS)
    if report.labels == 0 and not report.label_errors:
        return usage_error(err, "no labels: give --labels FILE, or review verdicts first (docs/agreement.md)")
    common.show_report(args, report, print_report, out)
    if args.html:
        from ..outputs.agreement import write_agreement_page

        try:
            write_agreement_page(report, args.html, title=f"Agreement: {args.results}")
        except OSError as exc:
            return usage_error(err, f"HTML report {args.html}: {exc.strerror or exc}", EXIT_ERRORS)
        err.print(f"agreement report: {markup_safe(args.html)}")
    return verdict_of(report, args.min_kappa, err)


def add_to_report(results: str, labels: list[str], page: Path) -> int:
    """``judgegraph report RESULTS --labels FILE``: the agreement section in the page just written; exit 3 for
    labels that match no verdict or cannot be used (named), or a labels file that cannot be read."""
    from ..outputs.agreement import add_agreement_section
    from ..trust.agreement import agreement

    _, err = consoles()
    try:
        report = agreement(results, labels)
    except OSError as exc:
        return usage_error(err, f"{exc.filename or ''}: {exc.strerror or exc} (the report has no agreement section)",
                           EXIT_ERRORS)
    add_agreement_section(page, report)
    return verdict_of(report, None, err)


def verdict_of(report: AgreementReport, min_kappa: float | None, err: Console) -> int:
    """The exit status: 3 for unusable or unmatched labels or unreadable results lines (each named), else 1 below
    ``min_kappa``, else 0."""
    for line in report.unreadable:
        err.print(f"[yellow]unreadable results line:[/] {markup_safe(line)}")
    for problem in report.label_errors:
        err.print(f"[yellow]label error:[/] {markup_safe(problem)}")
    for unmatched in report.unmatched:
        err.print(f"[yellow]unmatched label:[/] {markup_safe(unmatched)}")
    below = report.below(min_kappa) if min_kappa is not None else []
    if min_kappa is not None and not report.metrics:
        below = ["no metric has a labelled verdict: nothing reaches --min-kappa"]
    for line in below:
        err.print(f"[red]below --min-kappa:[/] {markup_safe(line)}")
    if report.label_errors or report.unmatched or report.unreadable:
        err.print(f"{len(report.unmatched)} labels match no verdict, {len(report.label_errors)} label records unusable"
                  f", {len(report.unreadable)} results lines unreadable (exit {EXIT_ERRORS})")
        return EXIT_ERRORS
    return EXIT_FAILED if below else EXIT_OK


def _fig(value: float | None, interval: object = None, computed: bool = True) -> str:
    if not computed:
        return "—"
    if value is None:
        return "undefined"
    low, high = getattr(interval, "low", None), getattr(interval, "high", None)
    return f"{value:.3f}" + (f" [{low:.3f}, {high:.3f}]" if low is not None and high is not None else "")


def print_report(report: AgreementReport, out: Console) -> None:
    """The report as terminal tables: the figures per metric, then each metric's confusion matrix and disagreements."""
    from rich.table import Table
    from rich.text import Text

    table = common.table("metric", "kind", "n", "agreement", "kappa", "weighted kappa", "spearman", "judge errors",
                         left=("metric", "kind"), title=f"agreement with people ({report.labels} labels; "
                         f"{report.level:.0%} bootstrap intervals, B={report.resamples}, seed {report.seed})")
    for m in report.metrics.values():
        table.add_row(Text(safe(m.metric)), m.kind, str(m.n),
                      *(_fig(getattr(m, k), m.intervals.get(k), k in m.figures)
                        for k in ("agreement", "kappa", "weighted_kappa", "spearman")),
                      str(len(m.judge_errors)))
    out.print(table)
    for m in report.metrics.values():
        if m.confusion:
            matrix = Table(title=f"{markup_safe(m.metric)}: person (rows) × judge (columns)")
            matrix.add_column("person \\ judge")
            for label in m.scale:
                matrix.add_column(Text(safe(label)), justify="right")
            for label, row in zip(m.scale, m.confusion):
                matrix.add_row(Text(safe(label)), *(str(c) for c in row))
            out.print(matrix)
        if m.disagreements or m.judge_errors:
            listed = common.table("conversation", "turn", "verdict", "person", "judge", "judge's reason", "label from",
                                  fold=True, wide=("judge's reason",), title=f"{markup_safe(m.metric)}: "
                                  f"{len(m.disagreements)} disagreements")
            for p in [*m.disagreements, *m.judge_errors]:
                listed.add_row(Text(safe(p.conversation_id)), ",".join(map(str, p.turns)) or "—",
                               Text(safe(p.verdict_id)), Text(safe(p.human)),
                               Text(safe("(judge error)" if p.judge is None else p.judge)), Text(safe(p.reason)),
                               Text(safe(p.source)))
            out.print(listed)
