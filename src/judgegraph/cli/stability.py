"""``judgegraph stability``: flip rate and score spread across repeats (--repeat), a jury's Fleiss kappa

How stable the judges of RESULTS are: per metric, the share of verdicts whose repeats disagree (flip rate), the
spread of the metric's score across repeats, how many conversations are stable or flaky and how many failures hold
in every repeat; for a jury, Fleiss' kappa with a bootstrap interval and each juror's agreement with the majority
and failed votes. Results judged once say so. Re-scoring a repeat whose verdicts differ runs the metric's own graph
on the conversation: give the inputs with --input. (docs/stability.md)
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from . import common
from .common import EXIT_ERRORS, EXIT_OK, add_results_command, consoles, markup_safe, safe, score_text, usage_error

if TYPE_CHECKING:
    from collections.abc import Iterator

    from rich.console import Console

    from ..data.conversation import Conversation
    from ..trust.stability import StabilityReport
    from .common import Subparsers


def register(sub: Subparsers) -> None:
    p = add_results_command(sub, run, results="results JSONL (judgegraph eval --out)")
    p.set_defaults(checks=(common.check_numbers,))
    common.add_shared(p, "--metric", metavar="METRIC")
    common.add_shared(p, "--input", help="the conversations the results were judged from (repeatable): the score of "
                      "each repeat is then computed by the metric's own rule; without, only where every repeat answered alike")
    common.add_metric_options(p, scored=False, role="role-adherence: the role the results were judged with, if given",
                              guideline="conversational-guidelines: the guidelines the results were judged with"
                                        " (results do not record them), repeatable; @FILE reads one per line")
    common.add_report_options(p)


def _conversations(paths: list[str], err: Console) -> Iterator[Conversation]:
    from ..loaders import InputError
    from ..runs.runner import iter_inputs

    for item in iter_inputs(paths):
        if isinstance(item, InputError):
            err.print(f"[yellow]input error:[/] {markup_safe(item)}")
        else:
            yield item.conversation


def run(args: argparse.Namespace) -> int:
    from ..runs import NotAResultsFile
    from ..trust.stability import read_stability

    out, err = consoles()
    for path in args.inputs:
        if not Path(path).is_file():
            return common.fail(f"{path}: no such file", EXIT_ERRORS)
    try:
        options = common.metric_options(args)
    except (OSError, ValueError) as exc:
        return usage_error(err, exc)
    try:
        report = read_stability(args.results, _conversations(args.inputs, err), metrics=args.metrics,
                                options=options, resamples=args.bootstrap, seed=args.seed)
    except NotAResultsFile as exc:
        return common.fail(exc, EXIT_ERRORS)
    common.show_report(args, report, print_report, out)
    for line in report.unreadable:
        err.print(f"[yellow]unreadable results line:[/] {markup_safe(line)}")
    if args.metrics and not report.metrics:
        return usage_error(err, f"no result of {', '.join(args.metrics)} in {args.results}")
    return EXIT_ERRORS if report.unreadable else EXIT_OK


def print_report(report: StabilityReport, out: Console) -> None:
    """The report as terminal tables: stability per metric, the flaky conversations, then each jury."""
    from rich.text import Text

    if not report.metrics:
        out.print("no metric results in the file")
        return
    table = common.table("metric", "results", "repeated", "verdicts", "flipped", "flip rate", "mean spread",
                         "max spread", "stable", "flaky", "failures", "hold in every repeat", left=("metric",),
                         title="stability across repeats")
    for m in report.metrics.values():
        if not m.repeated:
            table.add_row(Text(safe(m.metric)), str(len(m.results)), "no repeats", *["—"] * 9)
            continue
        unknown = f" ({m.unscored} unknown)" if m.unscored else ""  # spreads of results not re-scored
        spreads = [score_text(spread, ".3f") + unknown for spread in (m.mean_spread, m.max_spread)]
        table.add_row(Text(safe(m.metric)), str(len(m.results)), str(len(m.repeated)), str(m.verdicts), str(m.flipped),
                      score_text(m.flip_rate, ".3f"), *spreads, str(m.count("stable")), str(m.count("flaky")),
                      str(len(m.failures)), str(len(m.holding)))
    out.print(table)
    if flaky := [r for r in report.results if r.label == "flaky"]:
        table = common.table("conversation", "metric", "status", "flipped", "score per repeat", "spread", "note",
                             fold=True, wide=("note",), width=50, title=f"{len(flaky)} flaky results")
        for r in flaky:
            scores = "unknown" if r.scores is None else " ".join(score_text(s) for s in r.scores)
            table.add_row(Text(safe(r.conversation_id)), Text(safe(r.metric)), r.status, f"{r.flipped}/{r.verdicts}",
                          scores, score_text(r.spread, ".3f"), Text(safe(r.note)))
        out.print(table)
    for m in report.metrics.values():
        if (jury := m.jury) is None:
            continue
        kappa = "undefined" if jury.kappa is None else f"{jury.kappa:.3f}"
        ci = jury.interval
        interval = f" [{ci.low:.3f}, {ci.high:.3f}] ({ci.level:.0%}, B={ci.resamples})" if ci else ""
        out.print(Text(f"{safe(m.metric)} jury: Fleiss' kappa {kappa}{interval} over {jury.items} verdicts"
                       + (f" ({jury.left_out} left out: a juror failed or was absent)" if jury.left_out else ""),
                       style="bold"), soft_wrap=True)
        table = common.table("juror", "votes", "failed", "agrees with the majority", left=("juror",))
        for j in jury.jurors:
            share = "—" if j.agreement is None else f"{j.agreement:.1%} ({j.with_majority}/{j.compared})"
            table.add_row(Text(safe(j.judge)), str(j.votes), str(j.failed), share)
        out.print(table)
    if not any(m.jury for m in report.metrics.values()):
        out.print("jury: no verdict was judged by several judges (no jury figures)")


def gate_exit(args: argparse.Namespace, status: int, sessions: list[Conversation], out: Console, err: Console) -> int:
    """``eval --gate stable``: the run's exit status, 1 only for failures that hold in every repeat (a failure
    that passed in some repeat, or whose repeats differ and cannot be re-scored, is not counted); said in one
    line. Another status (0, 3, 4, 130) is kept as it is."""
    from ..trust.stability import gate_for_run
    from .common import EXIT_FAILED

    def inputs() -> Iterator[Conversation]:
        yield from _conversations(args.files, err)
        yield from sessions

    try:
        options = common.metric_options(args)
    except (OSError, ValueError):
        options = {}
    gate = gate_for_run(args.out, inputs(), options=options)
    out.print(gate.summary(), markup=False, highlight=False, soft_wrap=True)
    if status != EXIT_FAILED:
        return status
    return EXIT_FAILED if gate.failed else EXIT_OK
