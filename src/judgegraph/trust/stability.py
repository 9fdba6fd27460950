"""Stability across repeats (``--repeat N``) and a jury's agreement, computed from the votes behind verdicts:
flips, per-repeat scores re-scored by the metric's own graph, failures that hold in every repeat, Fleiss' kappa
(``docs/stability.md`` says what each figure means and when a repeat cannot be re-scored)."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..data.results import MetricResult, Review, Verdict, Vote, metric_key
from ..judges.base import Judge, JudgeOutcome, JudgeRequest
from ..runs import RunFile
from ..stats.raters import BOOTSTRAP_SAMPLES, BOOTSTRAP_SEED, Interval, fleiss_bootstrap_ci, fleiss_kappa, rating_table
from .agreement import ResultsLike, conversation_lines

if TYPE_CHECKING:
    from ..data.conversation import Conversation

Label = Literal["stable", "flaky"]
#: How a result's per-repeat scores were found: every repeat answered alike ("identical"), or the metric's own
#: graph re-scored each repeat ("rescored"); None: they are unknown (see ``ResultStability.note``).
Rescored = Literal["identical", "rescored"]


class RescoreError(ValueError):
    """A repeat's verdicts could not be scored with the metric's own rule (the reason says why)."""


#: ``rescore(result, verdicts)``: the metric's result had its verdicts been ``verdicts``; raises RescoreError.
Rescorer = Callable[[MetricResult, list[Verdict]], MetricResult]


# -- one verdict's votes ---------------------------------------------------------------------------


def repeat_indices(verdict: Verdict) -> list[int]:
    """The repeats behind ``verdict`` (``[0]`` for a verdict judged once by each juror, ``[]`` with no votes)."""
    return sorted({v.repeat for v in verdict.votes})


def juror_names(verdict: Verdict) -> list[str]:
    """The judges behind ``verdict``, in the order they voted."""
    return list(dict.fromkeys(v.judge for v in verdict.votes))


def flipped(verdict: Verdict) -> bool:
    """Whether one judge's repeats gave ``verdict`` different labels (failed repeats, which gave none, left out)."""
    labels: dict[str, set[str]] = {}
    for vote in verdict.votes:
        if vote.verdict is not None:
            labels.setdefault(vote.judge, set()).add(vote.verdict)
    return any(len(seen) > 1 for seen in labels.values())


def _alike(verdict: Verdict) -> bool:
    """Every repeat of every juror answered ``verdict`` the same (label and score), none failed."""
    per_juror: dict[str, set[tuple[str | None, float | None]]] = {}
    for vote in verdict.votes:
        per_juror.setdefault(vote.judge, set()).add((vote.verdict, vote.score))
    return all(len(answers) == 1 and None not in {a for a, _ in answers} for answers in per_juror.values())


def plurality(labels: Sequence[str], prefer: str | None = None) -> str | None:
    """The most frequent of ``labels``; on a tie ``prefer`` when it is among the tied, else None (no majority)."""
    counts = Counter(labels).most_common()
    if not counts:
        return None
    tied = [label for label, n in counts if n == counts[0][1]]
    return tied[0] if len(tied) == 1 else prefer if prefer in tied else None


def as_repeated(verdict: Verdict, repeat: int) -> Verdict:
    """``verdict`` as repeat ``repeat`` answered it: that repeat's vote (a jury's: its jurors' plurality, a tie
    a judge error); unchanged when it has no vote of that repeat. A vote records the label, score and reason
    only, so a label that differs from the aggregate's is marked as a review decision (``by="repeat N"``): a
    metric's reduce node makes a reviewed verdict's other fields follow its label."""
    votes = [v for v in verdict.votes if v.repeat == repeat]
    if not votes:
        return verdict
    if len(votes) == 1:
        (vote,) = votes
        label, score, reason, error = vote.verdict, vote.score, vote.reason, vote.error
    else:
        answered = [v for v in votes if v.verdict is not None]
        label = plurality([v.verdict for v in answered if v.verdict is not None], prefer=verdict.verdict)
        with_label = [v for v in answered if v.verdict == label]
        scores = [v.score for v in with_label if v.score is not None]
        score = sum(scores) / len(scores) if scores else None
        reason = with_label[0].reason if with_label else ""
        error = None if label is not None else ("the jurors tied" if answered else "every juror failed")
    update: dict[str, Any] = {"verdict": label, "score": score, "reason": reason, "error": error, "votes": []}
    if label is not None and label != verdict.verdict:  # its other fields (a custom judge's value) are the aggregate's:
        # the label overrides them as a person's decision does, by the metric's own review rule
        update["review"] = Review(by=f"repeat {repeat}", judge_verdict=verdict.verdict, judge_reason=verdict.reason)
    return verdict.model_copy(update=update)


# -- re-scoring with the metric's own rule ---------------------------------------------------------


class _NoCalls(Judge):
    """The judge of a re-scoring run: every answer is already known, so any request is a failure to re-score."""

    kind = "llm"

    def __init__(self, name: str) -> None:
        self.name = name
        self.asked: list[str] = []

    def judge(self, request: JudgeRequest) -> JudgeOutcome:
        self.asked.append(request.step)
        return JudgeOutcome(None, error="re-scoring sends no request")


def graph_rescorer(conversations: Mapping[str, Conversation], *, metric: Any = None,
                   options: Mapping[str, Any] | None = None) -> Rescorer:
    """A :data:`Rescorer` running the metric's own graph on the conversation (found in ``conversations`` by
    id): every verdict kept as given, every other request answered from the result's transcript, no call
    made (a step that would need one is a :class:`RescoreError`). ``metric``/``options`` as for
    :func:`judgegraph.steering.rejudge_result` (default: the result's key and its recorded options)."""
    from ..steering import RejudgeError, rejudge_result

    def rescore(result: MetricResult, verdicts: list[Verdict]) -> MetricResult:
        if result.judge.startswith("offline"):
            raise RescoreError("the offline judge's graph would compute its embeddings again (its repeats are"
                               " deterministic)")
        conversation = conversations.get(result.conversation_id)
        if conversation is None:
            raise RescoreError(f"conversation {result.conversation_id!r} is not among the inputs")
        judge = _NoCalls(result.judge)
        try:
            new = rejudge_result(result.model_copy(update={"verdicts": verdicts}), conversation, model=judge,
                                 verdict_ids=(), metric=metric, options=options)
        except RejudgeError as exc:
            raise RescoreError(str(exc)) from exc
        except Exception as exc:  # re-scoring is optional: any failure leaves the verdict-level figures
            raise RescoreError(f"the metric's graph, run with every verdict kept, gave no result"
                               f" ({type(exc).__name__}: {exc})") from exc
        if judge.asked:
            raise RescoreError(f"step {judge.asked[0]} had no recorded answer to replay (a results file written"
                               " with --transcripts none or errors keeps none)")
        given = {v.id: (v.verdict, v.score) for v in verdicts}
        remade = [v.id for v in new.verdicts if v.id in given and (v.verdict, v.score) != given[v.id]]
        if remade:  # a node after the judge step made the verdict again from the aggregate's recorded answer
            raise RescoreError(f"the metric makes its verdicts again after the judge's answer (verdict {remade[0]}),"
                               " so a repeat's vote cannot be scored alone")
        return new

    return rescore


# -- one metric result -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ResultStability:
    """The stability of one metric on one conversation across its repeats."""

    metric: str
    conversation_id: str
    status: str  # the result's own (aggregate) status
    repeats: int  # repeats behind its verdicts (0: none recorded; 1: judged once, e.g. a jury)
    verdicts: int  # verdicts judged more than once
    flipped: int  # of those, the verdicts whose repeats disagree
    failed_votes: int  # votes that gave no verdict (a repeat's or juror's judge error)
    scores: list[float | None] | None = None  # the metric's score in each repeat (None: unknown)
    passed: list[bool | None] | None = None  # whether each repeat passed (None: unknown)
    rescored: Rescored | None = None
    note: str = ""  # why the per-repeat scores are unknown

    @property
    def has_repeats(self) -> bool:
        return self.repeats > 1

    @property
    def flip_rate(self) -> float | None:
        return self.flipped / self.verdicts if self.verdicts else None

    @property
    def spread(self) -> float | None:
        """The largest minus the smallest per-repeat score (None: unknown or no score)."""
        known = [s for s in self.scores or [] if s is not None]
        return max(known) - min(known) if known else None

    @property
    def label(self) -> Label | None:
        """``flaky`` when a verdict flipped, the repeats' scores differ or their pass/fail does; else ``stable``.
        None without repeats."""
        if not self.has_repeats:
            return None
        outcomes = {p for p in self.passed or []}
        return "flaky" if self.flipped or (self.spread or 0.0) > 0.0 or len(outcomes) > 1 else "stable"

    @property
    def failure_holds(self) -> bool | None:
        """For a failed result: whether it failed in every repeat (None: unknown, or not a failure). A result
        judged once holds its failure as it is."""
        if self.status != "failed":
            return None
        if not self.has_repeats:
            return True
        if self.passed is None:
            return None
        return all(p is False for p in self.passed)

    def to_json(self) -> dict[str, object]:
        return {**asdict(self), "flip_rate": self.flip_rate, "spread": self.spread, "label": self.label,
                "failure_holds": self.failure_holds}


def result_stability(result: MetricResult, rescore: Rescorer | None = None) -> ResultStability:
    """How stable ``result`` is across the repeats recorded in its verdicts' votes; ``rescore`` (e.g.
    :func:`graph_rescorer`) scores each repeat's verdicts when the repeats did not all answer alike."""
    verdicts = list(result.verdicts)
    repeats = sorted({r for v in verdicts for r in repeat_indices(v)})
    repeated = [v for v in verdicts if len(repeat_indices(v)) > 1]
    base = ResultStability(metric=result.key, conversation_id=result.conversation_id, status=result.status,
                           repeats=len(repeats), verdicts=len(repeated), flipped=sum(flipped(v) for v in repeated),
                           failed_votes=sum(vote.verdict is None for v in verdicts for vote in v.votes))
    if len(repeats) < 2:
        return base
    if all(_alike(v) for v in verdicts):
        return replace(base, scores=[result.score] * len(repeats), passed=[result.passed] * len(repeats),
                       rescored="identical")
    if rescore is None:
        return replace(base, note="the repeats differ and re-scoring them needs the conversation (the inputs:"
                                  " --input FILE)")
    try:
        scored = [rescore(result, [as_repeated(v, r) for v in verdicts]) for r in repeats]
    except RescoreError as exc:
        return replace(base, note=f"not re-scored: {exc}")
    return replace(base, scores=[s.score for s in scored], passed=[s.passed for s in scored], rescored="rescored")


def merge_runs(runs: Sequence[MetricResult], rescore: Rescorer | None = None) -> MetricResult:
    """One result from the same metric judged on the same conversation in several runs (run ``i`` is repeat
    ``i``): each verdict's votes are the runs' answers, its label their plurality (a tie: the first run's);
    ``rescore`` scores the plurality verdicts by the metric's own rule (None: the first run's score is kept).
    What ``--repeat`` records, for runs made separately (e.g. ``judgegraph eval`` run N times)."""
    if not runs:
        raise ValueError("merge_runs: no run to merge")
    first = runs[0]
    if any(r.key != first.key or r.conversation_id != first.conversation_id for r in runs):
        raise ValueError("merge_runs: the runs are not of one metric on one conversation")
    by_run = [{v.id: v for v in r.verdicts} for r in runs]
    merged: list[Verdict] = []
    for v in first.verdicts:
        answers = [run.get(v.id) for run in by_run]
        votes = [Vote(judge=first.judge, repeat=i, verdict=a.verdict, score=a.score, reason=a.reason, error=a.error)
                 if a is not None else Vote(judge=first.judge, repeat=i, error="no such verdict in this run")
                 for i, a in enumerate(answers)]
        label = plurality([x.verdict for x in votes if x.verdict is not None], prefer=v.verdict)
        chosen = next((a for a in answers if a is not None and a.verdict == label), v)
        merged.append(chosen.model_copy(update={"votes": votes}))
    return (first if rescore is None else rescore(first, merged)).model_copy(update={"verdicts": merged})


# -- a jury ------------------------------------------------------------------------------------------


def juror_label(votes: Sequence[Vote]) -> str | None:
    """One juror's label for a verdict: the plurality of its repeats (a tie: its earliest repeat's label among
    the tied); None when every repeat failed."""
    labels = [v.verdict for v in sorted(votes, key=lambda v: v.repeat) if v.verdict is not None]
    return plurality(labels, prefer=labels[0]) if labels else None


@dataclass(frozen=True)
class JurorFigures:
    """One juror of a metric's jury: its votes, those that failed, and how often it said what the majority said."""

    judge: str
    votes: int = 0
    failed: int = 0
    compared: int = 0  # verdicts with a majority among the jurors and a label of this juror
    with_majority: int = 0

    @property
    def agreement(self) -> float | None:
        return self.with_majority / self.compared if self.compared else None

    def to_json(self) -> dict[str, object]:
        return {**asdict(self), "agreement": self.agreement}


@dataclass(frozen=True)
class JuryAgreement:
    """Agreement among the judges of one metric's jury, over the verdicts every juror labelled."""

    metric: str
    jurors: list[JurorFigures]
    items: int  # verdicts every juror labelled (the kappa's items)
    left_out: int  # verdicts judged by the jury where a juror failed or was absent (not in the kappa)
    labels: list[str]
    kappa: float | None
    interval: Interval | None

    def to_json(self) -> dict[str, object]:
        ci = self.interval
        return {"metric": self.metric, "jurors": [j.to_json() for j in self.jurors], "items": self.items,
                "left_out": self.left_out, "labels": self.labels, "fleiss_kappa": self.kappa,
                "interval": None if ci is None else asdict(ci)}


def jury_agreement(metric: str, verdicts: Iterable[Verdict], *, resamples: int = BOOTSTRAP_SAMPLES,
                   seed: int = BOOTSTRAP_SEED) -> JuryAgreement | None:
    """Fleiss' kappa among the jurors of ``metric`` over ``verdicts`` (those voted on by 2+ judges), its bootstrap
    interval, and each juror's agreement with the majority; None when no verdict had 2+ judges."""
    judged = [v for v in verdicts if len(juror_names(v)) > 1]
    if not judged:
        return None
    names = list(dict.fromkeys(n for v in judged for n in juror_names(v)))
    figures = {n: {"votes": 0, "failed": 0, "compared": 0, "with_majority": 0} for n in names}
    rows: list[list[str]] = []
    for v in judged:
        by_juror: dict[str, list[Vote]] = {}
        for vote in v.votes:
            by_juror.setdefault(vote.judge, []).append(vote)
            figures[vote.judge]["votes"] += 1
            figures[vote.judge]["failed"] += vote.verdict is None
        said = {n: juror_label(votes) for n, votes in by_juror.items()}
        labels = [label for label in said.values() if label is not None]
        majority = plurality(labels)
        for n, label in said.items():
            if majority is not None and label is not None:
                figures[n]["compared"] += 1
                figures[n]["with_majority"] += label == majority
        if len(labels) == len(names):
            rows.append(labels)
    scale = sorted({label for row in rows for label in row})
    table = rating_table(rows, scale)
    return JuryAgreement(
        metric, [JurorFigures(n, **f) for n, f in figures.items()], len(rows), len(judged) - len(rows), scale,
        fleiss_kappa(table) if rows else None,
        fleiss_bootstrap_ci(table, resamples=resamples, seed=seed) if rows else None)


# -- per metric, and a whole results file ---------------------------------------------------------------


@dataclass(frozen=True)
class MetricStability:
    """One metric's stability over every conversation, and its jury's agreement."""

    metric: str
    results: list[ResultStability]
    jury: JuryAgreement | None = None

    @property
    def repeated(self) -> list[ResultStability]:
        return [r for r in self.results if r.has_repeats]

    @property
    def verdicts(self) -> int:
        return sum(r.verdicts for r in self.repeated)

    @property
    def flipped(self) -> int:
        return sum(r.flipped for r in self.repeated)

    @property
    def flip_rate(self) -> float | None:
        """The share of verdicts judged more than once whose repeats disagree, pooled over conversations."""
        return self.flipped / self.verdicts if self.verdicts else None

    def count(self, label: Label) -> int:
        return sum(r.label == label for r in self.repeated)

    @property
    def spreads(self) -> list[float]:
        return [s for r in self.repeated if (s := r.spread) is not None]

    @property
    def mean_spread(self) -> float | None:
        return statistics.fmean(self.spreads) if self.spreads else None

    @property
    def max_spread(self) -> float | None:
        return max(self.spreads) if self.spreads else None

    @property
    def unscored(self) -> int:
        """Results with repeats whose per-repeat scores are unknown."""
        return sum(r.scores is None for r in self.repeated)

    @property
    def failures(self) -> list[ResultStability]:
        return [r for r in self.results if r.status == "failed"]

    @property
    def holding(self) -> list[ResultStability]:
        """Failures that hold in every repeat (a failure judged once holds)."""
        return [r for r in self.failures if r.failure_holds]

    def to_json(self) -> dict[str, object]:
        return {"metric": self.metric, "results": len(self.results), "with_repeats": len(self.repeated),
                "verdicts": self.verdicts, "flipped": self.flipped, "flip_rate": self.flip_rate,
                "stable": self.count("stable"), "flaky": self.count("flaky"), "mean_spread": self.mean_spread,
                "max_spread": self.max_spread, "unscored": self.unscored, "failures": len(self.failures),
                "failures_holding": len(self.holding), "jury": None if self.jury is None else self.jury.to_json()}


@dataclass
class StabilityReport:
    """Every metric's :class:`MetricStability`, and the results lines that could not be read."""

    metrics: dict[str, MetricStability] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)

    @property
    def results(self) -> list[ResultStability]:
        return [r for m in self.metrics.values() for r in m.results]

    def to_json(self) -> dict[str, object]:
        return {"metrics": {k: m.to_json() for k, m in self.metrics.items()},
                "results": [r.to_json() for r in self.results if r.has_repeats], "unreadable": self.unreadable}


def _metric_results(results: ResultsLike | Iterable[MetricResult]) -> tuple[list[MetricResult], list[str]]:
    """Every metric result of ``results`` (a results file, its records, or MetricResult objects), and the
    lines or results that could not be read."""
    if not isinstance(results, (str, Path, RunFile)):
        results = list(results)
        if results and isinstance(results[0], MetricResult):
            return results, []
    lines, problems = conversation_lines(results)
    read: list[MetricResult] = []
    for line in lines:
        for key, raw in line.results.items():
            try:
                read.append(MetricResult.model_validate(raw.data()))
            except ValueError as exc:
                problems.append(f"conversation {line.conversation_id!r}, {key}: not a metric result ({exc})")
    return read, problems


def stability(results: ResultsLike | Iterable[MetricResult], *, rescore: Rescorer | None = None,
              metrics: Iterable[str] | None = None, resamples: int = BOOTSTRAP_SAMPLES,
              seed: int = BOOTSTRAP_SEED) -> StabilityReport:
    """The stability report of ``results`` (a results file, its records, or MetricResult objects): per metric
    and conversation, and each metric's jury agreement. ``rescore``: see :func:`result_stability`."""
    every, problems = _metric_results(results)
    wanted = None if metrics is None else {metric_key(m) for m in metrics}
    by_metric: dict[str, list[MetricResult]] = {}
    for r in every:
        if wanted is None or metric_key(r.key) in wanted:
            by_metric.setdefault(r.key, []).append(r)
    report = StabilityReport(unreadable=problems)
    for key, group in by_metric.items():
        report.metrics[key] = MetricStability(
            key, [result_stability(r, rescore) for r in group],
            jury_agreement(key, (v for r in group for v in r.verdicts), resamples=resamples, seed=seed))
    return report


# -- the CI gate ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GateOutcome:
    """``--gate stable``: the failures that hold in every repeat, and those not counted."""

    holding: list[ResultStability]
    flipped: list[ResultStability]  # failures that passed in some repeat
    unknown: list[ResultStability]  # failures whose repeats differ but could not be re-scored

    @property
    def failed(self) -> bool:
        return bool(self.holding)

    def summary(self) -> str:
        text = (f"--gate stable: {len(self.holding)} failure(s) hold in every repeat; "
                f"{len(self.flipped) + len(self.unknown)} not counted because they flipped")
        if self.unknown:
            text += f" ({len(self.unknown)} of them could not be re-scored: {self.unknown[0].note})"
        return text + "."


def stable_gate(results: ResultsLike | Iterable[MetricResult], *, rescore: Rescorer | None = None) -> GateOutcome:
    """Which failures of ``results`` hold in every repeat (they fail CI) and which flipped or are unknown (not
    counted): a failure passed in some repeat flipped; one whose repeats differ and cannot be re-scored is
    unknown, and not counted either, since it is not known to hold."""
    report = stability(results, rescore=rescore, resamples=0)
    failures = [r for r in report.results if r.status == "failed"]
    return GateOutcome([r for r in failures if r.failure_holds is True],
                       [r for r in failures if r.failure_holds is False],
                       [r for r in failures if r.failure_holds is None])


def gate_for_run(results_path: str | Path, inputs: Iterable[Conversation] = (), *,
                 options: Mapping[str, Any] | None = None) -> GateOutcome:
    """:func:`stable_gate` of a results file, re-scoring with the conversations of ``inputs`` (streamed; only
    those of failures whose repeats differ are kept) and the metric ``options`` results do not record."""
    return stable_gate(results_path, rescore=_rescorer_for(results_path, inputs, options, failed_only=True))


def _rescorer_for(results: str | Path, inputs: Iterable[Conversation], options: Mapping[str, Any] | None, *,
                  failed_only: bool) -> Rescorer | None:
    """A :func:`graph_rescorer` holding only the conversations whose results need it (their repeats differ)."""
    report = stability(results, resamples=0)
    needed = {r.conversation_id for r in report.results
              if r.has_repeats and r.scores is None and (r.status == "failed" or not failed_only)}
    conversations = {c.id: c for c in inputs if c.id in needed} if needed else {}
    return graph_rescorer(conversations, options=options) if conversations else None


def read_stability(results: str | Path, inputs: Iterable[Conversation] = (), *, metrics: Iterable[str] | None = None,
                   options: Mapping[str, Any] | None = None, resamples: int = BOOTSTRAP_SAMPLES,
                   seed: int = BOOTSTRAP_SEED) -> StabilityReport:
    """:func:`stability` of a results file, the repeats that differ re-scored with the conversations of
    ``inputs`` (streamed; only those needed are kept) and the metric ``options`` results do not record."""
    rescore = _rescorer_for(results, inputs, options, failed_only=False)
    return stability(results, rescore=rescore, metrics=metrics, resamples=resamples, seed=seed)
