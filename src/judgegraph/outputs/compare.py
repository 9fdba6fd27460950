"""Runs side by side: the facts of each run (judge, thresholds, pass rate, cost, duration:
:meth:`judgegraph.runs.RunFile.facts`, as ``judgegraph diff`` reads them) and its conversations matched by id across
runs, for the HTML report. A conversation absent from a run is a ``None`` cell and counts as a difference.

    comparison = compare_runs([read_run("old.jsonl"), read_run("new.jsonl")])
    [row.conversation_id for row in comparison.rows if row.differs]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from string import ascii_uppercase

from ..runs import ConversationLine, RunFacts, RunFile

__all__ = ["Comparison", "Row", "RunFacts", "compare_runs", "differs_in", "is_failing", "run_labels"]

@dataclass
class Row:
    """One conversation across the runs: its line in each run (None when absent)."""

    conversation_id: str
    records: list[ConversationLine | None]
    position: int  # rank in input order: by the lines' recorded "position"; without one, after the line before it in its file
    differs: bool
    failing: bool


@dataclass
class Comparison:
    """The runs' facts, their metrics, and a :class:`Row` per conversation."""

    runs: list[RunFacts]
    metrics: list[str]
    rows: list[Row]  # failures first, then input order


def run_labels(n: int) -> list[str]:
    """Short column labels: A, B, ..., Z, AA, AB, ..."""
    def label(i: int) -> str:
        return (label(i // 26 - 1) if i >= 26 else "") + ascii_uppercase[i % 26]

    return [label(i) for i in range(n)]


def is_failing(record: ConversationLine | None) -> bool:
    """A conversation line to look at first: its run failed, or a result failed, is an error or holds judge
    errors (an absent line is not: it is a difference)."""
    return record is not None and (bool(record.error) or any(r.failing for r in record.results.values()))


def _outcome(record: ConversationLine | None, metric: str) -> tuple[object, ...]:
    """What a cell shows, for comparing runs: absent, the run's error, or the metric's status and score."""
    if record is None:
        return ("missing",)
    result = record.results.get(metric)
    if result is None:
        return ("run error", True) if record.error else ("none",)
    score = result.number
    return (result.status, None if score is None else round(score, 6))


def differs_in(records: Sequence[ConversationLine | None], metric: str) -> bool:
    """The runs' lines for one conversation disagree on ``metric``: status, score, presence or a failed run."""
    return len({_outcome(r, metric) for r in records}) > 1


def _differs(records: Sequence[ConversationLine | None], metrics: Sequence[str]) -> bool:
    return len(records) > 1 and (any(differs_in(records, m) for m in metrics) or len({r is None for r in records}) > 1)


def compare_runs(runs: Sequence[RunFile]) -> Comparison:
    """The runs' conversations matched by id (:func:`judgegraph.runs.read_run` reads an id judged again as its
    latest line)."""
    labels = run_labels(len(runs))
    facts = [r.facts(label) for r, label in zip(runs, labels)]
    by_id: dict[str, list[ConversationLine | None]] = {}
    order: dict[str, int] = {}
    positions: dict[str, int] = {}
    for i, run in enumerate(runs):
        for cid, record in run.conversations.items():
            cells = by_id.setdefault(cid, [None] * len(runs))
            cells[i] = record
            order.setdefault(cid, len(order))
            if (position := record.place) is not None:
                positions[cid] = min(position, positions.get(cid, position))
    metrics = list(dict.fromkeys(m for run in runs for c in run.conversations.values() for m in c.results))
    # input order: the recorded position; an id no run recorded one for goes right after the conversation before it
    # in its file (a file with no positions at all keeps its own order)
    estimate: dict[str, tuple[float, int]] = {cid: (float(p), 0) for cid, p in positions.items()}
    for run in runs:
        last = -1.0
        for cid in run.conversations:
            if cid in positions:
                last = float(positions[cid])
            elif cid not in estimate:
                estimate[cid] = (last + 0.5, order[cid])
    rows = [Row(cid, cells, 0, _differs(cells, metrics), any(is_failing(r) for r in cells))
            for cid, cells in by_id.items()]
    for i, row in enumerate(sorted(rows, key=lambda r: (*estimate[r.conversation_id], order[r.conversation_id]))):
        row.position = i
    rows.sort(key=lambda r: (not r.failing, r.position))
    return Comparison(facts, metrics, rows)
