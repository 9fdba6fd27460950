"""``judgegraph show``: print the judge transcript behind a verdict in a results file

Print what the judge was sent (the exact prompt text, each attempt) and what it replied, for one conversation's
metric (and one window) of a results file.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from .common import EXIT_ERRORS, EXIT_OK, add_results_command, fail, safe

if TYPE_CHECKING:
    from .common import Subparsers


def register(sub: Subparsers) -> None:
    sh = add_results_command(sub, run, results="a results file written by 'judgegraph eval --out'")
    sh.add_argument("--conversation", metavar="ID", help="conversation id (default: the first in the file)")
    sh.add_argument("--metric", metavar="NAME", help="metric (default: the conversation's first)")
    sh.add_argument("--window", metavar="N", type=int, help="the verdict of window N (default: every verdict)")


def run(args: argparse.Namespace) -> int:
    from ..data.results import metric_key
    from ..outputs.transcripts import transcript_of
    from ..runs import NotAResultsFile, read_run

    try:
        run = read_run(args.results)
    except NotAResultsFile as exc:
        return fail(exc, EXIT_ERRORS)
    record = run.conversations.get(args.conversation) if args.conversation is not None else \
        next(iter(run.conversations.values()), None)
    if record is None:
        if args.conversation is None:
            return fail(f"{args.results} holds no conversation results")
        return fail(f"no conversation {args.conversation!r} in {args.results} "
                    f"(first ids: {', '.join(list(run.conversations)[:10]) or 'none'})")
    results = record.results
    if record.error and not results:
        print(safe(f"{record.conversation_id}: the run of this conversation failed: {record.error}"))
        return EXIT_OK
    if args.metric is None and not results:
        return fail(f"conversation {record.conversation_id!r} has no metric results")
    key = next((k for k in results if args.metric is None or metric_key(k) == metric_key(args.metric)), None)
    if key is None:
        return fail(f"conversation {record.conversation_id!r} has no {args.metric!r} result "
                    f"(metrics: {', '.join(results) or 'none'})")
    try:
        text = transcript_of(results[key].data(), args.window)
    except LookupError as exc:
        return fail(str(exc.args[0] if exc.args else exc))
    print(safe(text))
    return EXIT_OK
