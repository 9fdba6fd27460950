"""Did the new version get better? :func:`diff_runs` compares two results files of ``judgegraph eval``.

Each metric result of a conversation in OLD is paired with the same metric's result of the same conversation in
NEW and classed (:data:`KINDS`; ``docs/diff.md`` has the table); an error is never a pass or a fail. Per pair: the
verdicts whose label changed; per metric: pass rates, McNemar's test and a paired bootstrap of the mean score
difference (:mod:`judgegraph.stats.paired`); the judging differences (:mod:`judgegraph.compare.settings`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from ..data.results import metric_key
from ..runs import ResultLine, RunFacts, RunFile, VerdictLine, read_run
from ..runs.record import number, pass_rate
from ..stats.paired import EXACT_BELOW, McNemar, MeanDifference, mcnemar, paired_bootstrap
from ..stats.raters import BOOTSTRAP_SAMPLES, BOOTSTRAP_SEED
from .settings import SettingsComparison, compare_settings

Kind = Literal["regressed", "fixed", "unchanged", "errored", "recovered", "still_error", "now_not_applicable",
               "was_not_applicable", "new", "missing"]
#: every kind of pair, in the order a report lists them (what needs a look first)
KINDS: tuple[Kind, ...] = ("regressed", "errored", "fixed", "recovered", "still_error", "now_not_applicable",
                           "was_not_applicable", "new", "missing", "unchanged")


@dataclass(frozen=True)
class Side:
    """One run's result of a pair."""

    status: str
    score: float | None
    threshold: float | None
    judge: str
    reason: str


@dataclass(frozen=True)
class VerdictSide:
    verdict: str | None
    score: float | None
    reason: str
    error: str | None


@dataclass(frozen=True)
class VerdictChange:
    """A verdict whose label differs between the runs (``old`` or ``new`` None: only on the other side)."""

    verdict_id: str
    turns: list[int]  # 1-based turn numbers it is about
    old: VerdictSide | None
    new: VerdictSide | None


@dataclass
class Pair:
    """A metric's result of one conversation in OLD and NEW (either None: ``new`` / ``missing``)."""

    metric: str
    conversation_id: str
    kind: Kind
    old: Side | None
    new: Side | None
    position: int  # the conversation's position in the input (NEW's, else OLD's)
    verdicts: list[VerdictChange] = field(default_factory=list)

    @property
    def delta(self) -> float | None:
        """NEW's score minus OLD's, when both are numbers."""
        if self.old is None or self.new is None or self.old.score is None or self.new.score is None:
            return None
        return self.new.score - self.old.score


@dataclass(frozen=True)
class PassRate:
    passed: int
    failed: int
    errors: int
    not_applicable: int

    @property
    def rate(self) -> float | None:
        """:func:`~judgegraph.runs.record.pass_rate`: passed / (passed + failed + errors); None: nothing judged."""
        return pass_rate({"passed": self.passed, "failed": self.failed, "error": self.errors})


@dataclass
class MetricDiff:
    metric: str
    old: PassRate
    new: PassRate
    counts: dict[str, int]  # kind -> pairs
    mcnemar: McNemar
    scores: MeanDifference


@dataclass
class RunDiff:
    """What :func:`diff_runs` returns. ``problems``: ``FILE:LINE: why`` for every line that could not be used."""

    old: str
    new: str
    pairs: list[Pair]
    metrics: dict[str, MetricDiff]
    settings: SettingsComparison
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    exact_below: int = EXACT_BELOW
    runs: dict[str, RunFacts] = field(default_factory=dict)  # "old"/"new" -> RunFile.facts()

    @property
    def regressions(self) -> list[Pair]:
        return [p for p in self.pairs if p.kind == "regressed"]

    @property
    def undecided(self) -> list[Pair]:
        """Pairs NEW could not judge (``errored``, ``still_error``): a regression may hide in them."""
        return [p for p in self.pairs if p.kind in ("errored", "still_error")]

    def changed(self) -> list[Pair]:
        """Every pair but the unchanged ones whose verdicts did not change, what needs a look first, then in input
        order."""
        rank = {k: i for i, k in enumerate(KINDS)}
        return sorted((p for p in self.pairs if p.kind != "unchanged" or p.verdicts),
                      key=lambda p: (rank[p.kind], p.position, p.conversation_id, p.metric))

    def to_json(self) -> dict[str, object]:
        return {
            "old": self.old, "new": self.new, "runs": {k: f.to_json() for k, f in self.runs.items()},
            "settings": self.settings.to_json(),
            "metrics": {k: {**asdict(m), "old": {**asdict(m.old), "pass_rate": m.old.rate},
                            "new": {**asdict(m.new), "pass_rate": m.new.rate}} for k, m in self.metrics.items()},
            "mcnemar_exact_below": self.exact_below,
            "regressions": len(self.regressions),
            "pairs": [{**asdict(p), "delta": p.delta}
                      for p in sorted(self.pairs, key=lambda p: (p.metric, p.position, p.conversation_id))],
            "problems": self.problems, "notes": self.notes,
        }


def change_text(pair: Pair) -> str:
    """A pair's kind, and the threshold change when the two runs used different ones (a flip it may explain)."""
    text = pair.kind.replace("_", " ")
    old, new = pair.old.threshold if pair.old else None, pair.new.threshold if pair.new else None
    if old is not None and new is not None and old != new:
        text += f" (threshold {old:g} → {new:g})"
    return text


def describe_run(facts: RunFacts) -> str:
    """One line about a run (:meth:`RunFile.facts`): its file, conversations and, from its header and summary
    (else its lines), judgegraph version, judges, duration and cost."""
    parts = [f"{facts.conversations} conversations", "" if facts.header else "no header",
             f"judgegraph {facts.version}" if facts.version else "",
             "judge " + ", ".join(facts.judge_names) if facts.judge_names else "",
             "" if facts.duration_s is None else f"{facts.duration_s:.1f} s",
             "" if facts.cost_usd is None else f"${facts.cost_usd:.4f}"]
    return f"{facts.path} ({', '.join(p for p in parts if p)})"


def _side(result: ResultLine) -> Side:
    return Side(result.outcome, result.number, number(result.threshold), result.judge or "", result.reason or "")


def _kind(old: Side | None, new: Side | None) -> Kind:
    if old is None:
        return "new"
    if new is None:
        return "missing"
    o, n = old.status, new.status
    if o == "error":
        return "still_error" if n == "error" else "recovered"
    if n == "error":
        return "errored"
    if o == n:
        return "unchanged"
    if n == "not_applicable":
        return "now_not_applicable"
    if o == "not_applicable":
        return "was_not_applicable"
    return "regressed" if o == "passed" else "fixed"


def _verdict_side(verdict: VerdictLine) -> VerdictSide:
    return VerdictSide(verdict.verdict, number(verdict.score), verdict.reason or "", verdict.error or None)


def verdict_changes(old: ResultLine, new: ResultLine) -> list[VerdictChange]:
    """The verdicts of two results of one metric whose label (or error) differs, matched by ``Verdict.id``."""
    before = {v.key: v for v in old.verdicts}
    after = {v.key: v for v in new.verdicts}
    out = []
    for vid in [*before, *(k for k in after if k not in before)]:
        o, n = before.get(vid), after.get(vid)
        os_, ns = (_verdict_side(o) if o is not None else None), (_verdict_side(n) if n is not None else None)
        if os_ is not None and ns is not None and (os_.verdict, bool(os_.error)) == (ns.verdict, bool(ns.error)):
            continue
        out.append(VerdictChange(vid, (n or o or VerdictLine()).turn_numbers, os_, ns))
    return out


def _results(run: RunFile, metrics: list[str]) -> dict[tuple[str, str], tuple[ResultLine, int]]:
    """(metric, conversation id) -> (result, position); a conversation whose run failed has an error result for
    each of ``metrics`` it lacks."""
    out: dict[tuple[str, str], tuple[ResultLine, int]] = {}
    for cid, conv in run.conversations.items():
        position = conv.order if conv.place is None else conv.place
        for key, result in conv.results.items():
            out[(key, cid)] = (result, position)
        if conv.run_error:
            for key in metrics:
                out.setdefault((key, cid), (ResultLine(status="error", reason="the run of this conversation "
                                                       f"failed: {conv.run_error}"), position))
    return out


def _pass_rate(results: Iterable[ResultLine]) -> PassRate:
    statuses = [_side(r).status for r in results]
    return PassRate(statuses.count("passed"), statuses.count("failed"), statuses.count("error"),
                    statuses.count("not_applicable"))


def compare(old: RunFile, new: RunFile, *, metrics: Iterable[str] | None = None,
            resamples: int = BOOTSTRAP_SAMPLES, seed: int = BOOTSTRAP_SEED, level: float = 0.95) -> RunDiff:
    """The diff of two runs already read (:func:`~judgegraph.runs.read_run`); see the module."""
    wanted = None if metrics is None else {metric_key(m) for m in metrics}
    names = [m for m in dict.fromkeys([*old.metrics, *new.metrics]) if wanted is None or metric_key(m) in wanted]
    a = _results(old, old.metrics or names)
    b = _results(new, new.metrics or names)
    pairs: list[Pair] = []
    for key in [*a, *(k for k in b if k not in a)]:
        metric, cid = key
        if metric not in names:
            continue
        o, n = a.get(key), b.get(key)
        so, sn = (_side(o[0]) if o else None), (_side(n[0]) if n else None)
        pair = Pair(metric, cid, _kind(so, sn), so, sn, (n or o or (None, 0))[1])
        if o and n and so is not None and sn is not None and "error" not in (so.status, sn.status):
            pair.verdicts = verdict_changes(o[0], n[0])
        pairs.append(pair)
    summaries = {}
    for metric in names:
        mine = [p for p in pairs if p.metric == metric]
        counts: dict[str, int] = {k: sum(p.kind == k for p in mine) for k in KINDS}
        scored = [(p.old.score, p.new.score) for p in mine if p.old is not None and p.new is not None
                  and p.old.score is not None and p.new.score is not None
                  and "error" not in (p.old.status, p.new.status)]
        summaries[metric] = MetricDiff(
            metric, _pass_rate(r for (m, _), (r, _) in a.items() if m == metric),
            _pass_rate(r for (m, _), (r, _) in b.items() if m == metric), counts,
            mcnemar(counts["regressed"], counts["fixed"]),
            paired_bootstrap([s[0] for s in scored], [s[1] for s in scored], resamples=resamples, seed=seed,
                             level=level))
    notes: list[str] = []
    for run, side in ((old, "OLD"), (new, "NEW")):
        if run.input_errors:
            notes.append(f"{side} ({run.path}) holds {len(run.input_errors)} input error(s): records it could not"
                         " judge")
        if run.rejudged:
            notes.append(f"{side} ({run.path}) judged {run.rejudged} conversation(s) again: the latest line of each "
                         "is compared")
    return RunDiff(old.path, new.path, pairs, summaries, compare_settings(old, new), [*old.problems, *new.problems],
                   notes, runs={"old": old.facts(), "new": new.facts()})


def diff_runs(old: str | Path, new: str | Path, *, metrics: Iterable[str] | None = None,
              resamples: int = BOOTSTRAP_SAMPLES, seed: int = BOOTSTRAP_SEED, level: float = 0.95) -> RunDiff:
    """Compare the results files ``old`` and ``new`` (``judgegraph eval --out``): see the module.

    ``metrics``: only these (names as ``-m`` takes them). ``resamples`` (B), ``seed``, ``level``: the paired
    bootstrap interval of the mean score difference. :class:`~judgegraph.runs.NotAResultsFile` when a file cannot
    be read or is not a results file; lines that cannot be used are named in :attr:`RunDiff.problems` and left out."""
    return compare(read_run(old, keep_transcripts=False), read_run(new, keep_transcripts=False),
                   metrics=[metrics] if isinstance(metrics, str) else metrics, resamples=resamples, seed=seed,
                   level=level)
