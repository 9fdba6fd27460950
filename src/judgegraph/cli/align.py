"""``judgegraph align``: fit a judge's decision to human labels (docs/alignment.md).

``--model offline`` fits the offline judge's rule (:mod:`judgegraph.trust.offline_fit`,
docs/offline_alignment.md) and writes ``offline-rule-<hash12>.json`` in ``--out``, used by
``judgegraph eval --offline-rule FILE``. Any other ``--model`` aligns that LLM judge
(:mod:`judgegraph.trust.alignment`) and writes ``aligned-<metric>-<hash12>.json``, used by
``judgegraph eval --aligned FILE``. Exit 2: a bad command line; exit 3: a bad labels or
conversations file (the message names the file, line and field), labels that match
nothing or cannot be fitted, a distilling call that failed, judge errors.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from . import common
from .common import EXIT_ERRORS, EXIT_OK, consoles, markup_safe, usage_error

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..judges.offline_rule import OfflineRule
    from ..trust.offline_fit import LabelValue
    from .common import Subparsers

def offline_alignable() -> dict[str, int]:
    """The metrics whose verdicts the offline judge's rule is fitted to (their spec's ``offline_rule`` capability),
    with their default window size: read from the registry."""
    from ..metrics import registry

    return {name.replace("_", "-"): spec.default("window_size") for name, spec in registry().items()
            if "offline_rule" in spec.capabilities}


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
    llm.add_argument("--concurrency", type=int, default=16, help="judge calls in flight at once (default 16)")
    llm.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    llm.add_argument("--no-cache", action="store_true", help="no judge cache: every judgement is asked "
                     "(default: answers at temperature 0 are kept on disk, so aligning again is cheaper)")
    llm.add_argument("--option", action="append", dest="option_pairs", metavar="NAME=VALUE",
                     help=common.OPTION_HELP)
    llm.add_argument("--guideline", action="append", dest="guidelines", metavar="TEXT",
                     help="conversational-guidelines: a guideline, repeatable; @FILE reads one per line")
    llm.add_argument("--role", help="role-adherence: the chatbot's role")
    llm.add_argument("--topic", action="append", dest="topics", metavar="TEXT",
                     help="topic-adherence: an allowed topic, repeatable; @FILE reads one per line")
    llm.add_argument("--embeddings", help="response-relevancy: embeddings model, e.g. openai:text-embedding-3-small "
                     "(default: the offline all-MiniLM-L6-v2); served at --base-url when given")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    out, err = consoles()
    if not 0 <= args.test_fraction < 1:
        return usage_error(err, f"--test-fraction must be >= 0 and < 1, got {args.test_fraction}")
    if args.model != "offline":
        from .align_llm import run_llm

        return run_llm(args, out, err)
    from ..metrics import canonical_name

    alignable = offline_alignable()
    if canonical_name(args.metric).replace("_", "-") not in alignable:
        return usage_error(err, f"the offline judge aligns {', '.join(sorted(alignable))}, not {args.metric} "
                                "(an LLM judge aligns any metric: --model M)")
    args.metric = canonical_name(args.metric).replace("_", "-")
    from ..trust.offline_fit import parse_positive

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
        err.print(f"[red]error:[/] {markup_safe(exc)} (exit {EXIT_ERRORS})")
        return EXIT_ERRORS
    path = rule.save(args.out)
    held = rule.fit.get("held_out", {})
    out.print(f"rule {rule.short}: {markup_safe(rule.describe())}", highlight=False)
    for name, fig in held.items():
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
