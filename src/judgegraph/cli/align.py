"""``judgegraph align``: fit a judge's decision to human labels (docs/alignment.md).

``--model offline`` fits the offline judge's rule (:mod:`judgegraph.trust.offline_fit`,
docs/offline_alignment.md) and writes ``offline-rule-<hash12>.json`` in ``--out``, used by
``judgegraph eval --offline-rule FILE``. Any other ``--model`` aligns that LLM judge
(:mod:`judgegraph.trust.alignment`), writes ``aligned-<metric>-<hash12>.json``, used by
``judgegraph eval --aligned FILE``, and prints the agreement of the plain and the aligned judge with
the held-out labels (a table, or ``--json``) and what alignment cost. Exit 2: a bad command line;
exit 3: a bad labels or conversations file (the message names the file, line and field), labels
that match nothing or cannot be fitted, a distilling call that failed, judge errors (an aligned
judge's file is still written then).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from . import common
from .common import EXIT_ERRORS, EXIT_OK, consoles, markup_safe, usage_error

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.console import Console

    from ..data.conversation import Conversation
    from ..judges.offline_rule import OfflineRule
    from ..trust.alignment import AlignmentReport
    from ..trust.labels import Label
    from ..trust.offline_fit import LabelValue
    from .common import Subparsers


def register(sub: Subparsers) -> None:
    p = sub.add_parser("align", help="align a judge to human labels (an LLM judge: guidelines and examples; "
                       "the offline judge: a fitted rule)",
                       description="Align the judge of METRIC to human labels and write it to --out: an LLM judge "
                                   "(--model M) gets guidelines and examples, the offline judge a fitted rule.")
    p.add_argument("files", nargs="+", metavar="FILE", help="the labelled conversations (any format eval reads)")
    p.add_argument("-m", "--metric", default="turn-relevancy", metavar="METRIC",
                   help="metric whose verdicts the labels rate (default %(default)s; the offline judge: "
                        "a metric `judgegraph metrics` marks offline-rule; an LLM judge: any metric,"
                        " mypkg.module:attr included)")
    p.add_argument("--labels", required=True, metavar="FILE", help='JSONL: {"conversation_id", "metric", "turn" | '
                   '"verdict_id", "label"} per line (docs/agreement.md), or {"id", "turn", "label"}')
    p.add_argument("--label-field", default="label", metavar="NAME", help="the label's field (default %(default)s)")
    p.add_argument("--positive", metavar="RULE", help="which labels count as relevant, e.g. '>=2' or '==good' "
                   "(default: true/false, yes/no, relevant/irrelevant, 1/0)")
    p.add_argument("--model", default="offline", help="the judge to align: offline (default) or an LLM, e.g. "
                   "openai:gpt-4.1-mini")
    p.add_argument("--base-url", help="OpenAI-compatible server for --model (vLLM, Ollama, llama.cpp)")
    p.add_argument("--out", required=True, metavar="DIR", help="folder the rule or aligned-judge file is written to")
    p.add_argument("--window-size", type=int, metavar="N", help="the metric's window (default: the metric's own)")
    p.add_argument("--group", metavar="REGEX", help="dialogue of a conversation id (first group) for the split, "
                   "when one dialogue spans several records (default: the id)")
    p.add_argument("--seed", type=int, default=0, help="seed of the train/held-out dialogue split (default 0)")
    p.add_argument("--test-fraction", type=float, default=0.3, help="held-out share of dialogues (default 0.3)")
    llm = p.add_argument_group("LLM judge", "aligning an LLM judge (--model M; docs/alignment.md)")
    llm.add_argument("--max-examples", type=int, default=6, metavar="N", help="labelled examples in every prompt (default 6)")
    llm.add_argument("--max-example-chars", type=int, default=800, metavar="N",
                     help="characters of one example's conversation text at most (default 800)")
    llm.add_argument("--max-guidelines", type=int, default=8, metavar="N", help="guidelines at most (default 8)")
    common.add_shared(llm, "--concurrency")
    common.add_shared(llm, "--json")
    llm.add_argument("--no-cache", action="store_true", help="no judge cache: every judgement is asked "
                     "(default: answers at temperature 0 are kept on disk, so aligning again is cheaper)")
    common.add_metric_options(llm, scored=False, role="role-adherence: the chatbot's role")
    common.add_shared(llm, "--embeddings")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..metrics import canonical_name, registry
    from ..trust.offline_fit import parse_positive

    out, err = consoles()
    if not 0 <= args.test_fraction < 1:
        return usage_error(err, f"--test-fraction must be >= 0 and < 1, got {args.test_fraction}")
    if args.model != "offline":
        return _run_llm(args, out, err)
    # the metrics whose verdicts the offline rule is fitted to (their spec's capability), with their default window
    alignable = {name.replace("_", "-"): spec.default("window_size") for name, spec in registry().items()
                 if "offline_rule" in spec.capabilities}
    if (metric := canonical_name(args.metric).replace("_", "-")) not in alignable:
        return usage_error(err, f"the offline judge aligns {', '.join(sorted(alignable))}, not {args.metric} "
                                "(an LLM judge aligns any metric: --model M)")
    args.metric = metric
    try:
        positive = parse_positive(args.positive)
    except ValueError as exc:
        return usage_error(err, exc)
    window = args.window_size or alignable[args.metric]
    if window < 1:
        return usage_error(err, f"--window-size must be >= 1, got {window}")
    try:
        rule = _fit(args, positive, window)
    except ValueError as exc:  # LabelsError, InputFormatError, one-class labels: bad input, exit 3
        return usage_error(err, f"{exc} (exit {EXIT_ERRORS})", EXIT_ERRORS)
    path = rule.save(args.out)
    out.print(f"rule {rule.short}: {markup_safe(rule.describe())}", highlight=False)
    for name, fig in rule.fit.get("held_out", {}).items():
        out.print(f"  held-out {name}: " + ", ".join(f"{k} {v}" for k, v in fig.items()), highlight=False)
    out.print(f"wrote {markup_safe(path)}; use it with: judgegraph eval --offline-rule {markup_safe(path)} ...", highlight=False)
    return EXIT_OK


def _fit(args: argparse.Namespace, positive: Callable[[LabelValue], bool], window: int) -> OfflineRule:
    import numpy as np

    from ..judges.offline import EmbeddingJudge
    from ..loaders.files import load_conversations
    from ..trust.labels import read_labels
    from ..trust.offline_fit import feature_matrix, file_sha256, fit_rule, group_of, label_cases

    labels = read_labels(args.labels, field=args.label_field, metric=args.metric)
    conversations = load_conversations(args.files)
    cases = label_cases(conversations, labels, labels_path=args.labels, positive=positive,
                        inputs_of=lambda w: w.offline_inputs(), window_size=window, metric=args.metric,
                        label_field=args.label_field)
    encoder = EmbeddingJudge().encoder
    x = feature_matrix(cases, encoder.encode)
    truth = np.array([c.relevant for c in cases])
    provenance = {"metric": args.metric, "window_size": window, "embeddings": "all-MiniLM-L6-v2",
                  "labels": str(args.labels), "labels_sha256": file_sha256(args.labels),
                  "label_field": args.label_field, "positive": args.positive or "true/yes", "n_labels": len(cases)}
    return fit_rule(x, truth, [group_of(c.conversation, args.group) for c in cases], seed=args.seed,
                    test_fraction=args.test_fraction, provenance=provenance)


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


def _run_llm(args: argparse.Namespace, out: Console, err: Console) -> int:
    """``judgegraph align --model M``: align an LLM judge to people's labels (:mod:`judgegraph.trust.alignment`)."""
    from ..loaders import load_files
    from ..metrics import MetricNotFound
    from ..providers import server_url
    from ..trust.alignment import AlignmentError, align

    if args.positive:
        return usage_error(err, "--positive is for --model offline (an LLM judge is compared with the labels as they are)")
    if args.max_example_chars < 80:
        return usage_error(err, f"--max-example-chars must be >= 80, got {args.max_example_chars}")
    if (bad := common.check_numbers(args)) is not None:
        return usage_error(err, bad)
    try:
        options = _options(args)
    except (MetricNotFound, ValueError, TypeError) as exc:
        return usage_error(err, exc)
    loaded = load_files(args.files)
    if loaded.errors:
        for e in loaded.errors[:20]:
            err.print(f"[red]input error:[/] {markup_safe(e)}")
        return usage_error(err, f"{len(loaded.errors)} input errors: nothing was judged (exit {EXIT_ERRORS})", EXIT_ERRORS)
    conversations = [c.conversation for c in loaded.conversations]
    labels = _labels(args, conversations)
    if isinstance(labels, str):
        return usage_error(err, f"{labels} (exit {EXIT_ERRORS})", EXIT_ERRORS)
    settings: dict[str, Any] = {"cache": not args.no_cache}
    if url := server_url(args.model, args.base_url):
        settings["base_url"] = url
    try:
        report = align(args.metric, labels, model=args.model, conversations=conversations, options=options,
                       seed=args.seed, test_fraction=args.test_fraction, group=args.group,
                       max_examples=args.max_examples, max_example_chars=args.max_example_chars,
                       max_guidelines=args.max_guidelines, concurrency=args.concurrency, out=args.out, **settings)
    except AlignmentError as exc:
        return usage_error(err, f"{exc} (exit {EXIT_ERRORS})", EXIT_ERRORS)
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
        return usage_error(err, f"{len(report.judge_errors)} judge errors: the figures leave those verdicts out "
                                f"(exit {EXIT_ERRORS})", EXIT_ERRORS)
    return EXIT_OK


def _print(report: AlignmentReport, out: Console) -> None:
    held = report.held_out
    table = common.table("judge", "n", "% agreement", "kappa", "judge errors", left=("judge",),
                         title=f"{report.metric}: agreement with {held['labels']} held-out labels "
                               f"({held['conversations']} conversations)")
    for name, fig in (("plain " + report.judge.inner.name, held["before"]), ("aligned " + report.judge.name, held["after"])):
        table.add_row(markup_safe(name), str(fig["n"]), common.score_text(fig["agreement"], ".1%"),
                      common.score_text(fig["kappa"], ".3f"), str(fig["judge_errors"]))
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
