"""``judgegraph show``: print one verdict's judge transcript from a results file."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from .common import EXIT_OK, add_results_command, fail, safe

if TYPE_CHECKING:
    from .common import Subparsers


def register(sub: Subparsers) -> None:
    sh = add_results_command(sub, "show", run, help="print the judge transcript behind a verdict in a results file",
                             description="Print what the judge was sent (the exact prompt text, each attempt) and "
                                         "what it replied, for one conversation's metric (and one window) of a "
                                         "results file.",
                             results="a results file written by 'judgegraph eval --out'")
    sh.add_argument("--conversation", metavar="ID", help="conversation id (default: the first in the file)")
    sh.add_argument("--metric", metavar="NAME", help="metric (default: the conversation's first)")
    sh.add_argument("--window", metavar="N", type=int, help="the verdict of window N (default: every verdict)")


def _norm(name: str) -> str:
    return name.strip().lower().replace("-", "_")


def run(args: argparse.Namespace) -> int:
    from ..resultsfile import iter_records
    from ..transcripts import transcript_of

    record = None
    ids: list[str] = []  # the first ones, named when the one asked for is not there
    try:
        for _, rec in iter_records(args.results):
            cid = str(rec.get("conversation_id"))
            if rec.get("type") == "conversation" and args.conversation in (None, cid):
                record = rec
                break
            if rec.get("type") == "conversation" and len(ids) < 10:
                ids.append(cid)
    except OSError as exc:
        return fail(f"cannot read {args.results}: {exc.strerror or exc}")
    if record is None:
        if args.conversation is None:
            return fail(f"{args.results} holds no conversation results")
        return fail(f"no conversation {args.conversation!r} in {args.results} (first ids: {', '.join(ids) or 'none'})")
    results = record.get("results") or {}
    if record.get("error") and not results:
        print(safe(f"{record.get('conversation_id')}: the run of this conversation failed: {record['error']}"))
        return EXIT_OK
    if args.metric is None:
        if not results:
            return fail(f"conversation {record.get('conversation_id')!r} has no metric results")
        key = next(iter(results))
    else:
        key = next((k for k in results if _norm(k) == _norm(args.metric)), None)
        if key is None:
            return fail(f"conversation {record.get('conversation_id')!r} has no {args.metric!r} result "
                        f"(metrics: {', '.join(results) or 'none'})")
    try:
        text = transcript_of(results[key], args.window)
    except LookupError as exc:
        return fail(str(exc.args[0] if exc.args else exc))
    print(safe(text))
    return EXIT_OK
