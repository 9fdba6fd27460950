"""``judgegraph align --model M``: align an LLM judge to people's labels (:mod:`judgegraph.trust.alignment`).

Writes ``aligned-<metric>-<hash12>.json`` in ``--out`` and prints the agreement of the
plain and the aligned judge with the held-out labels (a table, or ``--json``) and what
alignment cost. Exit 2: a bad command line (an unknown metric, a bad number); exit 3:
labels that cannot be read or match nothing, conversations that cannot be read, a
distilling call that failed, or judge errors (the file is still written then).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from . import common
from .common import EXIT_ERRORS, EXIT_OK, markup_safe, usage_error

if TYPE_CHECKING:
    from rich.console import Console

    from ..data.conversation import Conversation
    from ..trust.alignment import AlignmentReport
    from ..trust.labels import Label


def _bad_numbers(args: argparse.Namespace) -> str | None:
    if args.positive:
        return "--positive is for --model offline (an LLM judge is compared with the labels as they are)"
    if args.max_example_chars < 80:
        return f"--max-example-chars must be >= 80, got {args.max_example_chars}"
    return common.check_numbers(args)


def _options(args: argparse.Namespace) -> dict[str, Any]:
    """The metric's options given on the command line (ValueError: a bad metric or option, a usage error)."""
    from ..judges import NoModel
    from ..metrics import get_metric
    from ..report import build_metric

    spec = get_metric(args.metric)
    given = {**common.metric_options(args), "embeddings_base_url": args.base_url if args.embeddings else None}
    options = {k: v for k, v in given.items() if v is not None and k in spec.options}
    build_metric(spec, NoModel(), **options)  # a missing guideline, a bad option: before any call
    return options


def _labels(args: argparse.Namespace, conversations: list[Conversation]) -> list[Label] | str:
    """The labels file (any shape :func:`judgegraph.trust.labels.read_labels` reads; the offline fit's
    ``{"id", "turn", "label"}`` lines are about ``-m``'s metric, no turn: the last reply); a string says why it
    cannot be used."""
    from dataclasses import replace

    from ..trust.labels import LabelsError, read_labels, usable

    try:
        read = read_labels(args.labels, field=args.label_field, metric=args.metric)
        labels = usable(read)
    except OSError as exc:
        return f"cannot read --labels {args.labels}: {exc.strerror or exc}"
    except LabelsError as exc:
        return str(exc)
    if read.formats.get(str(args.labels)) != "ids":
        return labels
    last = {c.id: max((i + 1 for i, t in enumerate(c.turns) if t.role == "assistant"), default=None)
            for c in conversations}
    return [replace(label, turn=last.get(label.conversation_id)) if label.turn is None else label for label in labels]


def run_llm(args: argparse.Namespace, out: Console, err: Console) -> int:
    from ..loaders import load_files
    from ..metrics import MetricNotFound
    from ..trust.alignment import AlignmentError, align

    if (bad := _bad_numbers(args)) is not None:
        return usage_error(err, bad)
    try:
        options = _options(args)
    except (MetricNotFound, ValueError, TypeError) as exc:
        return usage_error(err, exc)
    loaded = load_files(args.files)
    if loaded.errors:
        for e in loaded.errors[:20]:
            err.print(f"[red]input error:[/] {markup_safe(e)}")
        err.print(f"[red]error:[/] {len(loaded.errors)} input errors: nothing was judged (exit {EXIT_ERRORS})")
        return EXIT_ERRORS
    conversations = [c.conversation for c in loaded.conversations]
    labels = _labels(args, conversations)
    if isinstance(labels, str):
        err.print(f"[red]error:[/] {markup_safe(labels)} (exit {EXIT_ERRORS})")
        return EXIT_ERRORS
    settings: dict[str, Any] = {"cache": not args.no_cache}
    if url := common.base_url(args.base_url, args.model):
        settings["base_url"] = url
    try:
        report = align(args.metric, labels, model=args.model, conversations=conversations, options=options,
                       seed=args.seed, test_fraction=args.test_fraction, group=args.group,
                       max_examples=args.max_examples, max_example_chars=args.max_example_chars,
                       max_guidelines=args.max_guidelines, concurrency=args.concurrency, out=args.out, **settings)
    except AlignmentError as exc:
        err.print(f"[red]error:[/] {markup_safe(exc)} (exit {EXIT_ERRORS})")
        return EXIT_ERRORS
    except (ValueError, TypeError) as exc:  # a model that cannot be built (no key, no base URL)
        return usage_error(err, exc)
    common.show_report(args, report, _print, out)
    if report.worse:
        err.print(f"[yellow]warning:[/] {markup_safe(report.worse)}")
    for problem in report.judge_errors[:20]:
        err.print(f"[red]judge error:[/] {markup_safe(problem)}")
    for label in report.unmatched[:10]:
        err.print(f"[yellow]unmatched label:[/] {markup_safe(label)}")
    if report.judge_errors:
        err.print(f"[red]error:[/] {len(report.judge_errors)} judge errors: the figures leave those verdicts out "
                  f"(exit {EXIT_ERRORS})")
        return EXIT_ERRORS
    return EXIT_OK


def _fmt(value: object) -> str:
    return "—" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def _print(report: AlignmentReport, out: Console) -> None:

    held = report.held_out
    table = common.table("judge", "n", "% agreement", "kappa", "judge errors", left=("judge",),
                         title=f"{report.metric}: agreement with {held['labels']} held-out labels "
                               f"({held['conversations']} conversations)")
    for name, fig in (("plain " + report.judge.inner.name, held["before"]), ("aligned " + report.judge.name, held["after"])):
        pct = None if fig["agreement"] is None else f"{100 * fig['agreement']:.1f}%"
        table.add_row(markup_safe(name), str(fig["n"]), pct or "—", _fmt(fig["kappa"]), str(fig["judge_errors"]))
    out.print(table)
    train = report.train
    out.print(f"train: {train['labels']} labels on {train['conversations']} conversations, "
              f"{train['disagreements']} disagreements; {len(report.alignment.guidelines)} guidelines, "
              f"{len(report.alignment.examples)} examples", highlight=False)
    for i, g in enumerate(report.alignment.guidelines, 1):
        out.print(f"  {i}. {markup_safe(g)}", highlight=False)
    c = report.cost
    held_cost = report.usage["held_out_plain"] + report.usage["held_out_aligned"]
    out.print(f"alignment cost: {c.calls} calls, {c.input_tokens} tokens in / {c.output_tokens} out"
              f"{' (estimated)' if c.estimated else ''}; the held-out measurement: {held_cost.calls} calls, "
              f"{held_cost.input_tokens} in / {held_cost.output_tokens} out", highlight=False)
    out.print(f"wrote {markup_safe(report.path)}; use it with: judgegraph eval -m {markup_safe(report.metric)} "
              f"--model {markup_safe(report.alignment.model)} --aligned {markup_safe(report.path)} ...", highlight=False)
