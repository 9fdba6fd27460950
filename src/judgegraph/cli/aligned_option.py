"""``--aligned FILE`` of ``eval`` and ``rejudge``: judge with an aligned LLM judge (``judgegraph align --model M``,
docs/alignment.md). The file is read and checked before any work; the judge itself is built by
``resolve_judge(..., aligned=FILE)`` (:func:`judgegraph.cli.common.judge_settings` passes it on, worker
processes included)."""

from __future__ import annotations

import argparse


def add_aligned_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--aligned", metavar="FILE", help="judge with this aligned judge (judgegraph align --model M; "
                   "docs/alignment.md): its guidelines and examples go before every prompt of its metric")


def aligned_error(args: argparse.Namespace) -> str | None:
    """What is wrong with ``--aligned``, or None: a file that is not an aligned judge or was edited, no
    ``--model``, or metrics other than the one it aligns. ``eval`` with no ``-m`` runs that metric."""
    path = getattr(args, "aligned", None)
    if not path:
        return None
    from ..judges.aligned import read_alignment
    from ..metrics import canonical_name

    try:
        alignment = read_alignment(path)
    except ValueError as exc:
        return f"--aligned {exc}"
    if not args.model:
        return f"--aligned needs --model: the model it was made for ({alignment.model})"
    asked = getattr(args, "metrics", None) if hasattr(args, "metrics") else [args.metric]
    if asked is None:
        args.metrics = [alignment.metric]
    elif [canonical_name(m) for m in asked] != [canonical_name(alignment.metric)]:
        return (f"--aligned {path} aligns the judge of {alignment.metric}: judge that metric alone "
                f"(-m {alignment.metric}), not {', '.join(asked)}")
    return None
