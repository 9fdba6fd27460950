"""Runs side by side: the facts of each run (judge, thresholds, pass rate, cost,
duration) and its conversations matched by id across runs, for the HTML report.

Facts come from the run's header and last summary records when the results
file has them, else from its conversation lines, else are unknown (None); each
says where it came from. A conversation absent from a run is a ``None`` cell
and counts as a difference.

    comparison = compare_runs([read_results("old.jsonl"), read_results("new.jsonl")])
    [row.conversation_id for row in comparison.rows if row.differs]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .html import ResultsFile

__all__ = ["Comparison", "Row", "RunFacts", "compare_runs", "differs_in", "is_failing", "run_facts", "run_labels"]

#: statuses that put a conversation among the failures
FAILING = ("failed", "error")


@dataclass
class RunFacts:
    """What one results file says about its run; None where it is unknown."""

    label: str  # "A", "B", ... : the run's column in the matrix
    path: str
    conversations: int
    version: str | None = None
    started_at: str | None = None
    judges: list[str] = field(default_factory=list)
    thresholds: dict[str, float | None] = field(default_factory=dict)  # per metric; None: not one value
    pass_rate: dict[str, float | None] = field(default_factory=dict)
    cost_usd: float | None = None
    duration_s: float | None = None
    calls: int | None = None
    tokens: int | None = None
    source: dict[str, str] = field(default_factory=dict)  # fact -> "header" | "summary" | "lines"

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass
class Row:
    """One conversation across the runs: its line in each run (None when absent)."""

    conversation_id: str
    records: list[dict[str, Any] | None]
    position: int  # rank in input order: by the lines' recorded "position"; without one, after the line before it in its file
    differs: bool
    failing: bool


@dataclass
class Comparison:
    runs: list[RunFacts]
    metrics: list[str]
    rows: list[Row]  # failures first, then input order


def run_labels(n: int) -> list[str]:
    """Short column labels: A, B, ..., Z, AA, AB, ..."""
    out = []
    for i in range(n):
        label, k = "", i
        while True:
            label = chr(ord("A") + k % 26) + label
            k = k // 26 - 1
            if k < 0:
                break
        out.append(label)
    return out


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _results(record: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    return (record or {}).get("results") or {}


def run_facts(results: ResultsFile, label: str) -> RunFacts:
    """The facts of one run: header and last summary first, then what its lines show."""
    facts = RunFacts(label=label, path=results.path, conversations=len(results.conversations))
    header, summary = results.header or {}, results.summary or {}
    metrics = list(dict.fromkeys(m for c in results.conversations for m in _results(c)))

    def known(name: str, value: object, where: str) -> None:
        setattr(facts, name, value)
        facts.source[name] = where

    if isinstance(header.get("judgegraph"), str):
        known("version", header["judgegraph"], "header")
    if isinstance(header.get("started_at"), str):
        known("started_at", header["started_at"], "header")
    judges = [_judge(j) for j in header.get("judges") or [] if isinstance(j, dict) and isinstance(j.get("name"), str)]
    if judges:
        known("judges", judges, "header")
    else:
        seen = [r.get("judge") for c in results.conversations for r in _results(c).values()]
        if any(isinstance(j, str) for j in seen):
            known("judges", list(dict.fromkeys(j for j in seen if isinstance(j, str))), "lines")

    configured = {str(m.get("name")).replace("-", "_"): _number((m.get("options") or {}).get("threshold"))
                  for m in header.get("metrics") or [] if isinstance(m, dict) and isinstance(m.get("options") or {}, dict)}
    thresholds: dict[str, float | None] = {}
    for m in metrics:
        values = {_number(_results(c)[m].get("threshold")) for c in results.conversations if m in _results(c)}
        values.discard(None)
        thresholds[m] = values.pop() if len(values) == 1 else None
    if metrics and all(configured.get(m) is not None for m in metrics):
        known("thresholds", {m: configured[m] for m in metrics}, "header")
    elif thresholds:
        known("thresholds", thresholds, "lines")

    rates = summary.get("pass_rate")
    if isinstance(rates, dict) and rates:
        known("pass_rate", {str(m): _number(v) for m, v in rates.items()}, "summary")
    elif metrics:
        computed: dict[str, float | None] = {}
        for m in metrics:
            statuses = [_results(c)[m].get("status") for c in results.conversations if m in _results(c)]
            judged = [s for s in statuses if s in ("passed", "failed", "error")]  # as the summary record counts
            computed[m] = sum(s == "passed" for s in judged) / len(judged) if judged else None
        known("pass_rate", computed, "lines")

    if "cost_usd" in summary:
        known("cost_usd", _number(summary.get("cost_usd")), "summary")
    else:
        costs = [_number(c.get("cost_usd")) for c in results.conversations]
        if any(v is not None for v in costs):
            known("cost_usd", sum(v for v in costs if v is not None), "lines")
    if _number(summary.get("duration_s")) is not None:
        known("duration_s", _number(summary["duration_s"]), "summary")

    usage = summary.get("usage")
    if isinstance(usage, dict) and _number(usage.get("calls")) is not None:
        known("calls", int(usage["calls"]), "summary")
        known("tokens", int((_number(usage.get("input_tokens")) or 0) + (_number(usage.get("output_tokens")) or 0)),
              "summary")
    else:
        usages: list[dict[str, Any]] = [r["usage"] for c in results.conversations for r in _results(c).values()
                                        if isinstance(r.get("usage"), dict)]
        if usages:
            known("calls", int(sum(_number(u.get("calls")) or 0.0 for u in usages)), "lines")
            known("tokens", int(sum((_number(u.get("input_tokens")) or 0.0) + (_number(u.get("output_tokens")) or 0.0)
                                    for u in usages)), "lines")
    return facts


def _judge(entry: dict[str, Any]) -> str:
    """A header's judge as one line: name, settings, prompt hashes (a changed prompt changes the verdicts)."""
    settings = entry.get("settings")
    prompts = entry.get("prompts")
    settings = settings if isinstance(settings, dict) else {}
    prompts = prompts if isinstance(prompts, dict) else {}
    bits = [str(entry["name"])] + [f"{k}={v}" for k, v in settings.items()]
    if prompts:
        bits.append("prompts " + ", ".join(f"{k} {v}" for k, v in prompts.items()))
    return " · ".join(bits)


def is_failing(record: dict[str, Any] | None) -> bool:
    """A conversation line to look at first: its run failed, or a result failed, is an error or holds judge
    errors (an absent line is not: it is a difference)."""
    if record is None:
        return False
    return bool(record.get("error")) or any(r.get("status") in FAILING or r.get("errors")
                                            for r in _results(record).values())


def _outcome(record: dict[str, Any] | None, metric: str) -> tuple[object, ...]:
    """What a cell shows, for comparing runs: absent, the run's error, or the metric's status and score."""
    if record is None:
        return ("missing",)
    result = _results(record).get(metric)
    if result is None:
        return ("run error", bool(record.get("error"))) if record.get("error") else ("none",)
    score = _number(result.get("score"))
    return (result.get("status"), None if score is None else round(score, 6))


def differs_in(records: Sequence[dict[str, Any] | None], metric: str) -> bool:
    """The runs' lines for one conversation disagree on ``metric``: status, score, presence or a failed run."""
    return len({_outcome(r, metric) for r in records}) > 1


def _differs(records: Sequence[dict[str, Any] | None], metrics: Sequence[str]) -> bool:
    if len(records) < 2:
        return False
    return any(differs_in(records, m) for m in metrics) or len({r is None for r in records}) > 1


def compare_runs(runs: Sequence[ResultsFile]) -> Comparison:
    """The runs' conversations matched by id (a run holding an id twice, as a hand-edited file may: its last line)."""
    labels = run_labels(len(runs))
    facts = [run_facts(r, label) for r, label in zip(runs, labels)]
    by_id: dict[str, list[dict[str, Any] | None]] = {}
    order: dict[str, int] = {}
    positions: dict[str, int] = {}
    for i, run in enumerate(runs):
        for record in run.conversations:
            cid = record["conversation_id"]
            cells = by_id.setdefault(cid, [None] * len(runs))
            cells[i] = record
            order.setdefault(cid, len(order))
            position = record.get("position")
            if isinstance(position, int) and not isinstance(position, bool):
                positions[cid] = min(position, positions.get(cid, position))
    metrics = list(dict.fromkeys(m for run in runs for c in run.conversations for m in _results(c)))
    # input order: the recorded position; an id no run recorded one for goes right after the conversation before it
    # in its file (a file with no positions at all keeps its own order)
    estimate: dict[str, tuple[float, int]] = {cid: (float(p), 0) for cid, p in positions.items()}
    for run in runs:
        last = -1.0
        for record in run.conversations:
            cid = record["conversation_id"]
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
