"""``judgegraph pairwise A.jsonl B.jsonl [C.jsonl ...]``: which version of a chatbot is better, judged pairwise
(docs/pairwise.md)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from . import common
from .common import EXIT_ERRORS, EXIT_OK, markup_safe, safe, usage_error

if TYPE_CHECKING:
    from rich.console import Console

    from ..apps.pairwise import PairwiseReport
    from ..judges import Judge
    from ..metrics.pairwise import Criterion
    from ..trust.preference import Rate
    from .common import Subparsers

#: problems listed one by one at most (the rest counted; --json and --out hold them all)
MAX_LISTED = 20


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "pairwise", help="compare versions: judge their conversations against each other, in both orders",
        description="Judge two or more versions' conversations for the same inputs (matched by conversation id) "
                    "against each other, per criterion, each pair shown to the judge in both orders: a verdict that "
                    "changes with the order is a tie (counted: position bias). Prints win/tie/loss rates with 95% "
                    "Wilson intervals per pair of versions and, for 3 or more, a Bradley-Terry ranking with "
                    "bootstrap intervals. Exit 3 on unreadable input or judge errors, 2 on a usage error.")
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="one file per version, 2 or more: conversations (.jsonl/.json/.yaml, as eval reads them) "
                        "or a results file that carries them (simulate --out)")
    p.add_argument("-m", "--metric", action="append", dest="criteria_names", metavar="NAME",
                   help="a built-in criterion, repeatable (helpfulness: overall helpfulness; the default when no "
                        "--criterion is given)")
    p.add_argument("--criterion", action="append", dest="criteria_texts", metavar="TEXT",
                   help="a criterion of your own in plain words, repeatable; @FILE reads one per line")
    common.add_judge_options(p, model="LLM judge, e.g. openai:gpt-4.1-mini (required: the offline judge cannot compare)",
                             base_url="OpenAI-compatible server for --model (vLLM, Ollama, llama.cpp)",
                             concurrency="judge calls in flight at once")
    common.add_shared(p, "--cache", "--no-cache")
    p.add_argument("--dry-run", action="store_true",
                   help="print the judge calls (2 per pair per criterion), tokens and cost; make no call")
    common.add_shared(p, "--price-in", "--price-out", "--prices")
    common.add_out_options(p, metavar="FILE", help="also write every comparison (both orders' verdicts, reasons and "
                                                  "transcripts) as JSONL")
    common.add_report_options(p, bootstrap="bootstrap resamples of the ranking")
    p.set_defaults(run=run, checks=(common.check_numbers, _bad_flags))


def _criteria(args: argparse.Namespace) -> list[Criterion]:
    from ..metrics.pairwise import as_criteria, criterion_named, own_criterion

    chosen = [criterion_named(n) for n in args.criteria_names or ()]
    chosen += [own_criterion(text) for text in common.read_guidelines(args.criteria_texts, "--criterion")]
    return as_criteria(chosen or ["helpfulness"])


def _bad_flags(args: argparse.Namespace) -> str | None:
    if len(args.files) < 2:
        return f"pairwise needs two or more files (one per version), got {len(args.files)}"
    if len(set(args.files)) != len(args.files):
        return "the same file is given twice: each version needs its own file"
    if not args.model:
        return "pairwise needs an LLM judge: pass --model (e.g. openai:gpt-4.1-mini); the offline judge cannot compare"
    if args.out and not args.dry_run:
        from ..runs.resultsfile import ResultsFileError, check_out_path

        try:
            check_out_path(args.out, list(args.files))
        except ResultsFileError as exc:
            return str(exc)
        return common.out_refused(args)
    return None


def run(args: argparse.Namespace) -> int:
    from ..apps.pairwise import compare_pairwise
    from ..runs.resultsfile import ResultsWriter

    out, err = common.consoles()
    try:
        criteria = _criteria(args)
        judge = common.make_judge(args, common.judge_settings(args, args.model, args.concurrency))
    except (KeyError, ValueError, TypeError) as exc:
        return usage_error(err, exc)
    err.print(f"judge: [bold]{markup_safe(judge.name)}[/]; criteria: "
              + ", ".join(markup_safe(c.name) for c in criteria), highlight=False)
    writer = ResultsWriter(args.out) if args.out and not args.dry_run else None
    try:
        report = compare_pairwise(args.files, model=judge, criteria=criteria, concurrency=args.concurrency,
                                  resamples=0 if args.dry_run else args.bootstrap, seed=args.seed,
                                  on_comparison=None if writer is None else lambda c: writer.write(c.to_json()))
    except (ValueError, TypeError) as exc:
        return usage_error(err, exc)
    finally:
        if writer is not None:
            writer.close()
    _problems(report, err)
    if args.dry_run:
        return _dry_run(args, judge, report, out)
    common.show_report(args, report, print_report, out)
    if args.out:
        err.print(f"comparisons: {markup_safe(args.out)}")
    return _status(report, err)


def _problems(report: PairwiseReport, err: Console) -> None:
    """Input errors, conversations not in every version, and judge errors: each named (up to MAX_LISTED)."""
    lines = [f"[red]input error:[/] {markup_safe(e)}" for e in report.input_errors]
    lines += [f"[yellow]not judged:[/] conversation {markup_safe(repr(cid))} is missing from "
              f"{markup_safe(', '.join(names))}" for cid, names in report.missing.items()]
    for c in report.comparisons:
        where = f"conversation {markup_safe(repr(c.conversation_id))}, {markup_safe(c.a)} vs {markup_safe(c.b)}"
        if c.error:
            lines.append(f"[red]judge error:[/] {where}: {markup_safe(c.error)}")
        for e in c.result.errors if c.result is not None else ():
            lines.append(f"[red]judge error:[/] {where}, {markup_safe(e.where)}: {markup_safe(e.message)}")
    for line in lines[:MAX_LISTED]:
        err.print(line, highlight=False)
    if len(lines) > MAX_LISTED:
        err.print(f"... and {len(lines) - MAX_LISTED} more (all in --json / --out)")


def _status(report: PairwiseReport, err: Console) -> int:
    decided = sum(p.n for p in report.pairs)
    if report.input_errors or report.judge_errors or not decided:
        nothing = ("no conversation id is in two of the versions: nothing to compare" if not report.comparisons
                   else "no comparison could be decided")
        why = [f"{len(report.input_errors)} input errors" if report.input_errors else "",
               f"{report.judge_errors} judge errors (never counted as a win)" if report.judge_errors else "",
               nothing if not decided else ""]
        err.print(f"{'; '.join(w for w in why if w)} (exit {EXIT_ERRORS})")
        return EXIT_ERRORS
    return EXIT_OK


def _rate(r: Rate) -> str:
    if r.rate is None or r.low is None or r.high is None:
        return "—"
    return f"{r.rate:.0%} [{r.low:.0%}, {r.high:.0%}]"


def print_report(report: PairwiseReport, out: Console) -> None:
    """The win/tie/loss table per pair and criterion, then the rankings (3 or more versions)."""
    from rich.table import Table
    from rich.text import Text

    bias = report.position_bias
    table = Table(title=f"pairwise: {len(report.comparisons)} comparisons, judge {safe(report.judge)}, "
                        f"each in both orders (95% Wilson intervals)")
    for col in ("A vs B", "criterion", "n", "B wins", "ties", "A wins", "order-dependent (ties)", "undecided"):
        table.add_column(col, justify="left" if col in ("A vs B", "criterion") else "right",
                         overflow="fold", max_width=40 if col == "criterion" else None)
    for p in report.pairs:
        table.add_row(Text(f"{safe(p.a)} vs {safe(p.b)}"), Text(safe(p.criterion)), str(p.n), _rate(p.b_wins),
                      _rate(p.ties), _rate(p.a_wins), _rate(p.order_dependent), str(p.undecided))
    out.print(table)
    for criterion, ranked in report.rankings.items():
        ranking = common.table("rank", "version", "strength", "interval", left=("version",),
                               title=f"ranking on {markup_safe(criterion)} (Bradley-Terry)",
                               caption=f"log-strength, ties half a win; 95% bootstrap over conversations, "
                                       f"B={report.resamples}, seed {report.seed}")
        for i, r in enumerate(ranked, start=1):
            interval = "—" if r.low is None or r.high is None else f"[{r.low:+.2f}, {r.high:+.2f}]"
            ranking.add_row(str(i), Text(safe(r.version)), f"{r.strength:+.2f}", interval)
        out.print(ranking)
    if bias.n:
        out.print(f"position bias: {_rate(bias)} of the decided comparisons changed verdict with the order shown "
                  "(each counted as a tie)", highlight=False)


def _dry_run(args: argparse.Namespace, judge: Judge, report: PairwiseReport, out: Console) -> int:
    from typing import cast

    from ..cost.dryrun import DryRunJudge
    from ..cost.pricing import prices_for, user_prices

    est = cast(DryRunJudge, judge).estimate(prices_for(judge.name, args.price_in, args.price_out, user_prices(args.prices)))
    n, total = len(report.comparisons), est.total
    out.print(f"dry run: {n} comparisons (conversation × pair of versions) × {len(report.criteria)} criteria × 2 "
              f"orders = {2 * n * len(report.criteria)} judge calls; counted {total.calls} calls (identical requests "
              f"are made once), {total.input_tokens} input tokens ({est.cached_words}), ~{total.output_tokens} output "
              f"tokens, {common.cost_text(est.cost_usd(), '.4f')}. No call was made.", highlight=False)
    return EXIT_ERRORS if report.input_errors or not n else EXIT_OK
