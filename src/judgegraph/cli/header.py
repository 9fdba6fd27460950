"""``judgegraph eval``'s run header: built from the command line (and ``--config``), and checked
against the header of the results file a ``--resume`` continues (docs/runs.md)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from ..runs.header import HeaderRecord
    from ..runs.runner import MetricPlan


def eval_header(args: argparse.Namespace, plan: MetricPlan, judge_settings: dict[str, Any]) -> HeaderRecord:
    """The header record of this ``eval`` run (argv, config and settings redacted)."""
    from ..runs.header import run_header

    sources = ([{"path": args.mlflow_uri, "experiment": args.experiment, "sha256": None}]
               if getattr(args, "mlflow_uri", None) else [])
    return run_header(plan, inputs=list(args.files), argv=getattr(args, "argv", None),
                      config=getattr(args, "config_data", None), judge_settings=judge_settings, sources=sources)


def resume_refused(args: argparse.Namespace, header: HeaderRecord, err: Console) -> str | None:
    """With ``--resume`` of a non-empty ``--out``: why it is refused (the settings differ from its
    header, each difference named), or None; a file without a header resumes, with a warning."""
    from ..runs import read_header
    from ..runs.header import differences
    from ..runs.resultsfile import is_nonempty

    if not args.resume or not is_nonempty(args.out):
        return None
    line = read_header(args.out)
    if line is None:
        warn_headerless(err, args.out, "resumed without checking that its metrics, judge and inputs are this run's")
        return None
    changed = differences(line.data(), header)
    if not changed:
        return None
    return settings_refused("--resume", args.out, changed,
                            "run with the settings of that file, or write the new run to another --out (or --overwrite it)")


def settings_refused(command: str, out: str, changed: list[str], advice: str) -> str:
    """Why ``command`` will not add to ``out``: the file was made with other settings, each difference named."""
    return (f"{command} refused: {out} was made with other settings, and one results file must hold one run:\n"
            + "\n".join(f"  - {c}" for c in changed) + f"\n{advice}")


def warn_headerless(err: Console, out: str, done: str) -> None:
    """Say that ``out`` has no run header to check this run's settings against, and what is ``done`` anyway."""
    from .common import markup_safe

    err.print(f"[yellow]warning:[/] {markup_safe(out)} has no run header (an older judgegraph wrote it): {done}")
