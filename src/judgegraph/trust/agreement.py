"""How often a judge says what people say: :func:`agreement` (``docs/agreement.md``).

Each :class:`~judgegraph.trust.labels.Label` is matched to the verdict it is about in a results file and each
metric's (person, judge) pairs are summarised. The judge's side of a reviewed verdict is what the judge had said;
a label on a verdict the judge could not make is a judge error, never an agreement or a disagreement.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from ..data.results import metric_key
from ..runs import ConversationLine, ResultLine, RunFile, read_run
from ..runs.record import wrong_field
from ..stats.raters import BOOTSTRAP_SAMPLES, BOOTSTRAP_SEED, Interval, Statistic, bootstrap_ci, confusion, estimate
from .labels import Label, LabelError, LabelSet, LabelValue, polarity, review_labels, yes_no_error

Kind = Literal["categorical", "ordinal", "numeric"]
#: the figures of each kind of label
FIGURES: dict[Kind, tuple[Statistic, ...]] = {"categorical": ("agreement", "kappa"),
                                              "ordinal": ("agreement", "kappa", "weighted_kappa", "spearman"),
                                              "numeric": ("agreement", "spearman")}
#: an ordinal scale has integer labels and at most this many distinct values; more, or fractions: numeric
MAX_ORDINAL_VALUES = 11


@dataclass(frozen=True)
class Pair:
    """One label beside the judge's verdict on the same thing."""

    conversation_id: str
    metric: str
    verdict_id: str  # Verdict.id, or "result" for a label on the whole result
    turns: list[int]  # 1-based turn numbers the verdict is about
    human: LabelValue
    judge: LabelValue | None  # None: the judge could not judge it
    reason: str  # the judge's reason
    source: str  # where the label was read
    by: str = ""
    note: str = ""


@dataclass(frozen=True)
class Unmatched:
    label: Label
    why: str

    def __str__(self) -> str:
        return (f"{self.label.source}: conversation {self.label.conversation_id!r}, {self.label.metric}, "
                f"{self.label.target}: {self.why}")


@dataclass
class MetricAgreement:
    """The agreement of one metric's judge with people."""

    metric: str
    kind: Kind
    n: int  # labelled verdicts the judge judged
    agreement: float | None  # share of exact matches, 0..1
    kappa: float | None = None  # Cohen's kappa (categorical and ordinal)
    weighted_kappa: float | None = None  # quadratic-weighted (ordinal)
    spearman: float | None = None  # ordinal and numeric
    scale: list[LabelValue] = field(default_factory=list)  # the confusion matrix's labels, in order
    confusion: list[list[int]] = field(default_factory=list)  # rows: the person's label, columns: the judge's
    intervals: dict[str, Interval] = field(default_factory=dict)  # figure -> bootstrap interval
    disagreements: list[Pair] = field(default_factory=list)
    judge_errors: list[Pair] = field(default_factory=list)  # labelled verdicts the judge could not make

    @property
    def figures(self) -> tuple[Statistic, ...]:
        """The figures this kind of label has (the others are not computed, which is not "undefined")."""
        return FIGURES[self.kind]

    @property
    def gate(self) -> tuple[str, float | None]:
        """The figure ``--min-kappa`` checks: kappa (categorical), weighted kappa (ordinal), Spearman (numeric)."""
        if self.kind == "categorical":
            return "kappa", self.kappa
        return ("weighted_kappa", self.weighted_kappa) if self.kind == "ordinal" else ("spearman", self.spearman)


@dataclass
class AgreementReport:
    metrics: dict[str, MetricAgreement] = field(default_factory=dict)
    unmatched: list[Unmatched] = field(default_factory=list)
    label_errors: list[LabelError] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # results lines that could not be read: FILE:LINE: why
    labels: int = 0  # labels read (every source)
    sources: dict[str, str] = field(default_factory=dict)  # file -> shape; "reviews" -> the results file
    resamples: int = BOOTSTRAP_SAMPLES
    seed: int = BOOTSTRAP_SEED
    level: float = 0.95

    def below(self, min_kappa: float) -> list[str]:
        """The metrics whose gate figure is below ``min_kappa`` or undefined, each with why."""
        out = []
        for m in self.metrics.values():
            name, value = m.gate
            if m.n == 0:
                out.append(f"{m.metric}: no labelled verdict the judge judged")
            elif value is None:
                out.append(f"{m.metric}: {name} undefined (one label only: agreement beyond chance cannot be shown)")
            elif value < min_kappa:
                out.append(f"{m.metric}: {name} {value:.3f} < {min_kappa:g}")
        return out

    def to_json(self) -> dict[str, object]:
        return {
            "labels": self.labels,
            "sources": self.sources,
            "bootstrap": {"resamples": self.resamples, "seed": self.seed, "level": self.level},
            "metrics": {k: asdict(m) for k, m in self.metrics.items()},
            "unmatched": [{**asdict(u.label), "why": u.why} for u in self.unmatched],
            "label_errors": [{**asdict(e), "error": str(e)} for e in self.label_errors],
            "unreadable_results": self.unreadable,
        }


ResultsLike = str | Path | RunFile | Iterable[Mapping[str, Any]] | Iterable[Any]


def conversation_lines(results: ResultsLike) -> tuple[list[ConversationLine], list[str]]:
    """The conversation lines of a path, a run read, records, or ConversationOutcome objects, with the lines of a
    file (or the records) that could not be read."""
    if isinstance(results, (str, Path, RunFile)):
        run = results if isinstance(results, RunFile) else read_run(results)
        return list(run.conversations.values()), run.problems
    out, problems = [], []
    for i, item in enumerate(getattr(results, "outcomes", results)):
        if isinstance(item, Mapping):
            record = dict(item)
        elif hasattr(item, "to_json"):
            record = {"type": "conversation", **item.to_json()}
        else:
            raise TypeError(f"agreement: cannot read results from {type(item).__name__}")
        if record.get("type", "conversation") == "conversation":
            try:
                out.append(ConversationLine.model_validate({**record, "type": "conversation"}))
            except ValidationError as exc:
                problems.append(f"record {i + 1}: {wrong_field(exc)}")
    return out, problems


def _judge_label(value: object) -> LabelValue | None:
    """What the judge said, as labels are compared (a bool is yes/no, a number a float); None: it could not judge."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    return str(value)


def _match(label: Label, key: str, result: ResultLine) -> tuple[Pair | None, str]:
    verdicts = result.verdicts

    def pair(verdict_id: str, turns: list[int], judge: object, reason: str) -> Pair:
        return Pair(label.conversation_id, key, verdict_id, turns, label.value, _judge_label(judge),
                    reason, label.source, label.person, label.note)

    if label.verdict_id is None and label.turn is None:  # the whole result
        if isinstance(label.value, float):
            judge: object = result.score
        else:
            judge = result.value
            if judge is None and result.passed is not None:
                judge = "yes" if result.passed else "no"
        return pair("result", [], judge, result.reason or ""), ""
    listed = f"(verdicts: {', '.join(str(v.id) for v in verdicts[:8]) or 'none'}{', ...' if len(verdicts) > 8 else ''})"
    if label.verdict_id is not None:
        found = [v for v in verdicts if str(v.id) == label.verdict_id]
        if not found:
            return None, f"no verdict {label.verdict_id!r} {listed}"
    else:
        index = (label.turn or 0) - 1
        about = [v for v in verdicts if index in (v.turns or [])]
        found = [v for v in about if max(v.turns or []) == index] or about
        if not found:
            return None, f"no verdict is about turn {label.turn} {listed}"
        if len(found) > 1:
            return None, (f"{len(found)} verdicts are about turn {label.turn} "
                          f"({', '.join(str(v.id) for v in found[:8])}): give its verdict_id")
    verdict, review = found[0], found[0].review  # a reviewed verdict: what the judge had said
    if review is not None:
        return pair(str(verdict.id), verdict.turn_numbers, review.judge_verdict, review.judge_reason or ""), ""
    return pair(str(verdict.id), verdict.turn_numbers, verdict.verdict, verdict.reason or ""), ""


def _yes_no(metric: str, pairs: list[Pair], errors: list[LabelError]) -> list[Pair]:
    """A yes/no metric's pairs (every verdict a word of the yes/no vocabulary) in that vocabulary, as ``align``
    reads them: a person's ``relevant`` or ``pass`` is the judge's ``yes``; a label outside it is an error."""
    judged = [p.judge for p in pairs if p.judge is not None]
    if not judged or not all(isinstance(j, str) and polarity(j) for j in judged):
        return pairs
    out = []
    for p in pairs:
        human = polarity(p.human)
        if human is None:
            errors.append(yes_no_error(p.source, p.human, metric))
        else:
            out.append(replace(p, human=human, judge=None if p.judge is None else polarity(p.judge)))
    return out


def _number(value: LabelValue | None) -> float | None:
    try:
        number = float(value)  # type: ignore[arg-type]  # None: a TypeError
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _categorical(value: LabelValue) -> str:
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return value.strip().lower()


def summarise(metric: str, pairs: list[Pair], *, resamples: int = BOOTSTRAP_SAMPLES, seed: int = BOOTSTRAP_SEED,
              level: float = 0.95) -> MetricAgreement:
    """The agreement figures of one metric's pairs (see the module)."""
    judged = [p for p in pairs if p.judge is not None]
    errors = [p for p in pairs if p.judge is None]
    numbers = [(_number(p.human), _number(p.judge)) for p in judged]
    numeric = bool(judged) and all(h is not None and j is not None for h, j in numbers)
    human: list[Any]
    judge: list[Any]
    if numeric:
        human = [h for h, _ in numbers]
        judge = [j for _, j in numbers]
        whole = all(float(x).is_integer() for x in human + judge)
        kind: Kind = "ordinal" if whole and len(set(human + judge)) <= MAX_ORDINAL_VALUES else "numeric"
    else:
        human = [_categorical(p.human) for p in judged]
        judge = [_categorical(p.judge) for p in judged if p.judge is not None]
        kind = "categorical"
    scale: list[Any] = [] if kind == "numeric" else sorted(set(human) | set(judge))
    out = MetricAgreement(metric=metric, kind=kind, n=len(judged), agreement=None, judge_errors=errors,
                          disagreements=[p for p, h, j in zip(judged, human, judge) if h != j])
    for stat in FIGURES[kind]:
        setattr(out, stat, estimate(stat, human, judge, scale) if judged else None)
        interval = bootstrap_ci(stat, human, judge, scale, resamples=resamples, seed=seed, level=level)
        if interval is not None:
            out.intervals[stat] = interval
    if kind != "numeric":
        out.scale = [int(v) if isinstance(v, float) else v for v in scale]
        out.confusion = confusion(human, judge, scale) if judged else []
    return out


def agreement(results: ResultsLike, labels: str | Path | Iterable[Label] | Iterable[str | Path] | LabelSet = (), *,
              reviews: bool = True, metrics: Iterable[str] | None = None, resamples: int = BOOTSTRAP_SAMPLES,
              seed: int = BOOTSTRAP_SEED, level: float = 0.95) -> AgreementReport:
    """How often the judges of ``results`` say what people said.

    ``results``: a results file (``judgegraph eval --out``) or its :class:`~judgegraph.runs.RunFile`, its records, or
    ``ConversationOutcome`` objects.
    ``labels``: label files (any shape :func:`~judgegraph.trust.labels.read_labels` reads), :class:`Label`
    objects, or a :class:`LabelSet`. With ``reviews``, the review decisions stored in ``results`` are
    labels too; a label from ``labels`` on the same verdict replaces a review's. ``metrics``: only these.
    ``resamples`` (B), ``seed``, ``level``: the bootstrap intervals (see
    :func:`judgegraph.stats.raters.bootstrap_ci`)."""
    if isinstance(metrics, str):
        metrics = [metrics]
    records, unreadable = conversation_lines(results)
    read = LabelSet.of(labels)
    given = (review_labels(records) if reviews else []) + read.labels
    report = AgreementReport(label_errors=read.errors, labels=len(given), sources=dict(read.formats),
                             unreadable=unreadable, resamples=resamples, seed=seed, level=level)
    if reviews:
        report.sources["reviews"] = str(results) if isinstance(results, (str, Path)) else "results"
    wanted = None if metrics is None else {metric_key(m) for m in metrics}
    index = {(r.conversation_id, metric_key(key)): (key, result) for r in records for key, result in r.results.items()}
    conversations = {r.conversation_id for r in records}
    pairs: dict[tuple[str, str, str], Pair] = {}  # a later label on the same verdict replaces an earlier one
    for label in given:
        if wanted is not None and metric_key(label.metric) not in wanted:
            continue
        found = index.get((label.conversation_id, metric_key(label.metric)))
        if found is None:
            why = (f"no {label.metric} result for this conversation" if label.conversation_id in conversations
                   else "no such conversation in the results")
            report.unmatched.append(Unmatched(label, why))
            continue
        matched, why = _match(label, *found)
        if matched is None:
            report.unmatched.append(Unmatched(label, why))
        else:
            pairs[(matched.conversation_id, matched.metric, matched.verdict_id)] = matched
    by_metric: dict[str, list[Pair]] = {}
    for p in pairs.values():
        by_metric.setdefault(p.metric, []).append(p)
    for metric, items in sorted(by_metric.items()):
        items = _yes_no(metric, items, report.label_errors)
        report.metrics[metric] = summarise(metric, items, resamples=resamples, seed=seed, level=level)
    return report
