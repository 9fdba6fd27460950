"""``judgegraph diff``: compare two results files: fixed, regressed, pass rates, McNemar, score deltas

Compare the results of OLD and NEW (two `judgegraph eval --out` files) per metric and conversation, matched by id:
regressed, fixed, unchanged, errors, new, missing, score deltas, each changed verdict with both judges' reasons; per
metric the pass rates, McNemar's test and a paired bootstrap interval of the mean score difference; and whether the
two runs were judged alike (run headers). Exit 1 with --fail-on-regression when a result regressed, 3 when a file or
line cannot be read (or, gating, NEW could not judge a result), 2 for a bad command line. (docs/diff.md)
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from . import common
from .common import EXIT_ERRORS, EXIT_FAILED, EXIT_OK, consoles, fail, markup_safe, safe, usage_error

if TYPE_CHECKING:
    from rich.console import Console

    from ..compare.diff import RunDiff
    from .common import Subparsers


def register(sub: Subparsers) -> None:
    p = common.add_results_command(sub, run, old="results of the old version (judgegraph eval --out)", new="results of the new version")
    p.set_defaults(checks=(_bad_numbers,))
    common.add_shared(p, "--metric")
    p.add_argument("--fail-on-regression", action="store_true", help="exit 1 when any result regressed (CI gate)")
    p.add_argument("--max-regressions", type=int, metavar="N",
                   help="exit 1 when more than N results regressed (implies the gate)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the diff as JSON on stdout")
    out.add_argument("--markdown", action="store_true", help="print the diff as Markdown (a pull-request comment)")
    p.add_argument("--max-rows", type=int, default=50, metavar="N",
                   help="changed results and verdicts listed per table (default %(default)s; --json lists all)")
    common.add_report_options(p, bootstrap="paired bootstrap resamples", json_flag=False)


def _bad_numbers(args: argparse.Namespace) -> str | None:
    if (bad := common.check_numbers(args)) is not None:
        return bad
    if args.max_rows < 1:
        return f"--max-rows must be 1 or more, got {args.max_rows}"
    return None


def run(args: argparse.Namespace) -> int:
    from ..compare.diff import compare
    from ..data.results import metric_key
    from ..runs import NotAResultsFile, read_run

    out, err = consoles()
    try:
        old, new = (read_run(path, keep_transcripts=False) for path in (args.old, args.new))
    except NotAResultsFile as exc:
        return fail(exc, EXIT_ERRORS)
    known = list(dict.fromkeys([*old.metrics, *new.metrics]))
    if unknown := [m for m in args.metrics or () if metric_key(m) not in {metric_key(k) for k in known}]:
        return usage_error(err, f"no {', '.join(unknown)} results in either file (metrics: {', '.join(known) or 'none'})")
    diff = compare(old, new, metrics=args.metrics, resamples=args.bootstrap, seed=args.seed)
    if args.json:
        print(common.json_text(diff.to_json()))
    elif args.markdown:
        from ..compare.markdown import to_markdown

        print(to_markdown(diff, max_rows=args.max_rows), end="")
    else:
        print_diff(diff, out, args.max_rows)
    return status_of(diff, args, err, conversations=(len(old.conversations), len(new.conversations)))


def status_of(diff: RunDiff, args: argparse.Namespace, err: Console, conversations: tuple[int, int]) -> int:
    """The exit status: 3 for lines that could not be read (each named), or, gating, for results NEW could not
    judge (a regression may hide there); else 1 when gating and more results regressed than allowed; else 0."""
    for note in diff.notes:
        err.print(f"[yellow]note:[/] {markup_safe(note)}")
    for problem in diff.problems:
        err.print(f"[red]unreadable results line:[/] {markup_safe(problem)}")
    status = EXIT_OK
    for side, count, path in (("OLD", conversations[0], diff.old), ("NEW", conversations[1], diff.new)):
        if count == 0:
            err.print(f"[red]error:[/] {side} {markup_safe(path)} holds no conversation results")
            status = EXIT_ERRORS
    if not diff.pairs and all(conversations):
        err.print(f"[red]error:[/] no metric result to compare: every conversation's run failed in both files "
                  f"(exit {EXIT_ERRORS})")
        status = EXIT_ERRORS
    if diff.problems:
        err.print(f"{len(diff.problems)} results lines could not be read: the diff leaves them out (exit {EXIT_ERRORS})")
        status = EXIT_ERRORS
    if not args.fail_on_regression and args.max_regressions is None:  # no gate
        return status
    if diff.undecided:
        err.print(f"[red]{len(diff.undecided)} results NEW could not judge[/] (a regression may hide there; exit "
                  f"{EXIT_ERRORS})")
        return EXIT_ERRORS
    if status != EXIT_OK:
        return status
    if (regressed := len(diff.regressions)) > (allowed := args.max_regressions or 0):
        err.print(f"[red]{regressed} results regressed[/] (at most {allowed} allowed): exit {EXIT_FAILED}")
        return EXIT_FAILED
    return EXIT_OK


def print_diff(diff: RunDiff, out: Console, max_rows: int = 50) -> None:
    """The diff as terminal tables: how the judging differs, a summary per metric, the changed results, and
    each changed verdict with both judges' reasons."""
    from rich.text import Text

    from ..compare.diff import change_text, describe_run
    from ..compare.markdown import mean_text, side_text

    for which in ("old", "new"):
        facts = diff.runs.get(which)
        out.print(Text(safe(f"{which.upper()}: {describe_run(facts) if facts else getattr(diff, which)}")))
    s = diff.settings
    if s.judging:
        out.print("[yellow]The judging differs[/] (a flip may be the judge's, not the bot's):"
                  if s.same_judging is False else "[yellow]The metric settings differ[/] (a flip may come from them, "
                  "not the bot):")
        for d in s.judging:
            out.print(Text("  " + safe(str(d)) + (" (from the results lines)" if d.source == "results" else "")))
    if s.unknown:
        out.print(Text(safe(f"judges, prompts and metric options: {s.unknown}")))
    elif not s.judging:
        out.print("same judges, prompts and metric options (run headers)")
    for d in s.speed:
        out.print(Text("  " + safe(str(d))))
    for note in s.notes:
        out.print(Text(safe(f"note: {note}")))
    scores = next(iter(diff.metrics.values())).scores if diff.metrics else None
    level = f"{scores.level:.0%}" if scores else "95%"
    table = common.table("metric", "pass rate OLD → NEW", "regressed", "fixed", "unchanged", "NEW errors", "other",
                         "McNemar p", "mean score Δ [CI]", left=("metric",), title="per metric",
                         caption=f"McNemar: exact binomial below {diff.exact_below} discordant pairs, else χ² with "
                         f"continuity correction; score Δ: NEW - OLD, paired bootstrap {level} interval"
                         + (f" (B={scores.resamples}, seed {scores.seed})" if scores else ""))
    for m in diff.metrics.values():
        c = m.counts
        other = sum(c[k] for k in ("recovered", "now_not_applicable", "was_not_applicable", "new", "missing"))
        test = "—" if m.mcnemar.method == "none" else f"{m.mcnemar.p_value:.3g} ({m.mcnemar.method})"
        rates = " → ".join(common.score_text(side.rate, ".1%") for side in (m.old, m.new))
        table.add_row(Text(safe(m.metric)), rates, str(c["regressed"]), str(c["fixed"]), str(c["unchanged"]),
                      str(c["errored"] + c["still_error"]), str(other), test, mean_text(m.scores))
    out.print(table)
    changed = [p for p in diff.changed() if p.kind != "unchanged"]
    if changed:
        listed = common.table("metric", "conversation", "change", "OLD", "NEW", "Δ score", fold=True,
                              title=f"changed results ({len(changed)}" + (f", first {max_rows})" if len(changed) >
                                                                          max_rows else ")"))
        for p in changed[:max_rows]:
            listed.add_row(Text(safe(p.metric)), Text(safe(p.conversation_id)), change_text(p),
                           side_text(p.old), side_text(p.new), "—" if p.delta is None else f"{p.delta:+.2f}")
        out.print(listed)
    flips = [(p, v) for p in diff.changed() for v in p.verdicts]
    if flips:
        verdicts = common.table("metric", "conversation", "verdict", "OLD", "OLD judge's reason", "NEW",
                                "NEW judge's reason", fold=True, wide=("OLD judge's reason", "NEW judge's reason"),
                                width=50, title=f"changed verdicts ({len(flips)}"
                                + (f", first {max_rows})" if len(flips) > max_rows else ")"))
        for p, v in flips[:max_rows]:
            cells = []
            for side in (v.old, v.new):
                if side is None:
                    cells += ["—", ""]
                else:
                    cells += ["error" if side.error else safe(side.verdict), safe(side.error or side.reason)]
            turns = ",".join(map(str, v.turns))
            verdicts.add_row(Text(safe(p.metric)), Text(safe(p.conversation_id)),
                             Text(safe(v.verdict_id + (f" (turn {turns})" if turns else ""))),
                             *(Text(c) for c in cells))
        out.print(verdicts)
    counts = {k: sum(p.kind == k for p in diff.pairs) for k in ("regressed", "fixed", "errored")}
    out.print(f"{counts['regressed']} regressed, {counts['fixed']} fixed, {counts['errored']} NEW could not judge, "
              f"{len(diff.pairs)} results compared")
