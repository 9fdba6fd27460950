"""Agreement statistics between raters (a judge and a person, or a jury's judges), in plain numpy: Cohen's
kappa (plain and quadratic-weighted), Spearman's rho, the confusion matrix, Fleiss' kappa, Krippendorff's alpha
and seeded percentile bootstrap intervals, each as scikit-learn / scipy / statsmodels compute it (the tests check
them to 1e-9). A figure that is not defined is ``None``, never a number that means nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Literal

import numpy as np
import numpy.typing as npt

Weights = Literal["none", "quadratic"]
#: bootstrap resamples (``B``) and seed, unless asked otherwise
BOOTSTRAP_SAMPLES = 1000
BOOTSTRAP_SEED = 0

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def _codes(values: Sequence[object], labels: Sequence[object]) -> IntArray:
    index = {label: i for i, label in enumerate(labels)}
    return np.array([index[v] for v in values], dtype=np.int64)


def confusion(human: Sequence[object], judge: Sequence[object], labels: Sequence[object]) -> list[list[int]]:
    """Counts of (person's label, judge's label): row ``i`` is ``labels[i]`` said by the person."""
    k = len(labels)
    counts = np.bincount(_codes(human, labels) * k + _codes(judge, labels), minlength=k * k)
    out: list[list[int]] = counts.reshape(k, k).astype(int).tolist()
    return out


def _kappa_from_counts(counts: FloatArray, weights: Weights) -> FloatArray:
    """Kappa of each confusion matrix of ``counts`` (shape ``(..., k, k)``); NaN where undefined."""
    k = counts.shape[-1]
    rows = counts.sum(axis=-1)  # the person's marginals
    cols = counts.sum(axis=-2)  # the judge's marginals
    total = rows.sum(axis=-1)
    expected = rows[..., :, None] * cols[..., None, :] / total[..., None, None]
    i, j = np.indices((k, k))
    w = (i - j).astype(np.float64) ** 2 if weights == "quadratic" else (i != j).astype(np.float64)
    observed_dis = (w * counts).sum(axis=(-2, -1))
    expected_dis = (w * expected).sum(axis=(-2, -1))
    with np.errstate(divide="ignore", invalid="ignore"):
        out: FloatArray = np.where(expected_dis > 0, 1.0 - observed_dis / np.where(expected_dis > 0, expected_dis, 1.0),
                                   np.nan)
    return out


def cohen_kappa(human: Sequence[object], judge: Sequence[object], labels: Sequence[object],
                weights: Weights = "none") -> float | None:
    """Cohen's kappa between the two raters over ``labels`` (in scale order for ``quadratic``); None if undefined."""
    return estimate("weighted_kappa" if weights == "quadratic" else "kappa", human, judge, labels)


def ranks(x: FloatArray) -> FloatArray:
    """Average ranks (1-based) along the last axis of ``x``, ties sharing the mean of their ranks: the values
    become dense codes offset per row, so one sort and two searches rank every row at once."""
    n = x.shape[-1]
    _, codes = np.unique(x, return_inverse=True)
    rows = x.reshape(-1, n).shape[0]
    offset = (np.arange(rows) * (int(codes.max()) + 1 if codes.size else 1))[:, None]
    keyed = codes.reshape(rows, n) + offset
    ordered = np.sort(keyed, axis=None)
    base = (np.arange(rows) * n)[:, None]
    left = np.searchsorted(ordered, keyed, side="left") - base
    right = np.searchsorted(ordered, keyed, side="right") - base
    out: FloatArray = ((left + right + 1) / 2.0).reshape(x.shape)
    return out


def _pearson_rows(a: FloatArray, b: FloatArray) -> FloatArray:
    a = a - a.mean(axis=-1, keepdims=True)
    b = b - b.mean(axis=-1, keepdims=True)
    den = np.sqrt((a * a).sum(axis=-1) * (b * b).sum(axis=-1))
    with np.errstate(divide="ignore", invalid="ignore"):
        out: FloatArray = np.where(den > 0, (a * b).sum(axis=-1) / np.where(den > 0, den, 1.0), np.nan)
    return out


def spearman(human: Sequence[float], judge: Sequence[float]) -> float | None:
    """Spearman's rho between the two raters' numbers; None when fewer than 2 pairs or one side is constant."""
    return estimate("spearman", human, judge)


def percent_agreement(human: Sequence[object], judge: Sequence[object]) -> float | None:
    """The share (0..1) of pairs where the judge said what the person said."""
    return sum(h == j for h, j in zip(human, judge)) / len(human) if human else None


@dataclass(frozen=True)
class Interval:
    """A bootstrap confidence interval: ``low`` and ``high`` bound ``level`` of the resampled figures."""

    low: float
    high: float
    level: float
    samples: int  # resamples in which the figure was defined (of ``resamples`` drawn)
    resamples: int
    seed: int


def resample_indices(n: int, resamples: int = BOOTSTRAP_SAMPLES, seed: int = BOOTSTRAP_SEED) -> IntArray:
    """The bootstrap's resamples: ``resamples`` rows of ``n`` pair indices drawn with replacement,
    ``numpy.random.default_rng(seed).integers(0, n, size=(resamples, n))``."""
    return np.random.default_rng(seed).integers(0, n, size=(resamples, n))


Statistic = Literal["agreement", "kappa", "weighted_kappa", "spearman"]
#: pair indices held at once by the bootstrap (rows of resamples are drawn and scored a chunk at a time)
CHUNK_ELEMENTS = 1 << 19


def bootstrap(figures: Callable[[IntArray], FloatArray], n: int, *, resamples: int = BOOTSTRAP_SAMPLES,
              seed: int = BOOTSTRAP_SEED, level: float = 0.95, chunk_elements: int = CHUNK_ELEMENTS) -> Interval | None:
    """The percentile interval of ``figures(idx)`` (one figure per row of resampled indices, NaN where undefined)
    over ``resamples`` seeded resamples of ``n`` items (:func:`resample_chunks`); None with no item, no resample or
    no defined figure."""
    if n == 0 or resamples <= 0:
        return None
    values = np.concatenate([figures(idx) for idx in resample_chunks(n, resamples, seed, chunk_elements)])
    defined = values[~np.isnan(values)]
    if defined.size == 0:
        return None
    tail = (1.0 - level) / 2.0 * 100.0
    low, high = np.percentile(defined, [tail, 100.0 - tail])
    return Interval(float(low), float(high), level, int(defined.size), resamples, seed)


def resample_chunks(n: int, resamples: int, seed: int, chunk_elements: int = CHUNK_ELEMENTS) -> Iterator[IntArray]:
    """:func:`resample_indices`, drawn a few rows at a time from the same generator (the same rows, in order),
    so memory stays bounded however many labels there are."""
    rng = np.random.default_rng(seed)
    step = max(1, chunk_elements // max(n, 1))
    for start in range(0, resamples, step):
        yield rng.integers(0, n, size=(min(step, resamples - start), n))


def _figures(statistic: Statistic, human: Sequence[object], judge: Sequence[object], labels: Sequence[object],
             idx: IntArray) -> FloatArray:
    """``statistic`` on each row of resampled pair indices ``idx``; NaN where undefined."""
    rows = idx.shape[0]
    if statistic == "spearman":
        a = np.asarray(human, dtype=np.float64)[idx]
        b = np.asarray(judge, dtype=np.float64)[idx]
        return _pearson_rows(ranks(a), ranks(b))
    k = len(labels)
    h, j = _codes(human, labels)[idx], _codes(judge, labels)[idx]
    if statistic == "agreement":
        agree: FloatArray = (h == j).mean(axis=1).astype(np.float64)
        return agree
    flat = (np.arange(rows)[:, None] * k * k + h * k + j).ravel()
    counts = np.bincount(flat, minlength=rows * k * k).reshape(rows, k, k).astype(np.float64)
    return _kappa_from_counts(counts, "quadratic" if statistic == "weighted_kappa" else "none")


def bootstrap_ci(statistic: Statistic, human: Sequence[object], judge: Sequence[object],
                 labels: Sequence[object] = (), *, resamples: int = BOOTSTRAP_SAMPLES, seed: int = BOOTSTRAP_SEED,
                 level: float = 0.95, chunk_elements: int = CHUNK_ELEMENTS) -> Interval | None:
    """Percentile bootstrap interval of ``statistic`` over the pairs: the pairs are resampled with
    replacement (:func:`resample_indices`), the figure is computed on each resample where it is defined,
    and the interval is the ``(1-level)/2`` and ``1-(1-level)/2`` percentiles (numpy's linear
    interpolation) of those figures. None when there are no pairs or the figure is never defined."""
    return bootstrap(partial(_figures, statistic, human, judge, labels), len(human), resamples=resamples, seed=seed,
                     level=level, chunk_elements=chunk_elements)


def estimate(statistic: Statistic, human: Sequence[object], judge: Sequence[object],
             labels: Sequence[object] = ()) -> float | None:
    """The point estimate of ``statistic`` over the pairs (the bootstrap's figure on the pairs as they are); None
    where undefined (no pair; Spearman: fewer than 2)."""
    if statistic == "agreement":
        return percent_agreement(human, judge)
    if len(human) < (2 if statistic == "spearman" else 1):
        return None
    value = float(_figures(statistic, human, judge, labels, np.arange(len(human))[None, :])[0])
    return None if np.isnan(value) else value


# -- agreement among several raters (a jury) ------------------------------------------------------


def rating_table(ratings: Sequence[Sequence[object]], labels: Sequence[object]) -> IntArray:
    """Fleiss' table: row ``i`` counts, per label of ``labels``, the raters who gave item ``i`` that label
    (``ratings[i]`` holds every rater's label for item ``i``)."""
    index = {label: i for i, label in enumerate(labels)}
    table = np.zeros((len(ratings), len(labels)), dtype=np.int64)
    for row, item in enumerate(ratings):
        for label in item:
            table[row, index[label]] += 1
    return table


def _fleiss_rows(tables: FloatArray) -> FloatArray:
    """Fleiss' kappa of each table of ``tables`` (shape ``(..., items, labels)``, every item rated by the
    same number of raters); NaN where undefined (every rating the same label, or fewer than 2 raters)."""
    raters = tables.sum(axis=-1)[..., :1]  # (..., 1): the same for every item
    items = tables.shape[-2]
    with np.errstate(divide="ignore", invalid="ignore"):
        per_item = ((tables * tables).sum(axis=-1) - raters) / (raters * (raters - 1))
        observed = per_item.mean(axis=-1)
        shares = tables.sum(axis=-2) / (items * raters)
        chance = (shares * shares).sum(axis=-1)
        out: FloatArray = np.where((chance < 1.0) & (raters[..., 0] > 1),
                                   (observed - chance) / np.where(chance < 1.0, 1.0 - chance, 1.0), np.nan)
    return out


def fleiss_kappa(table: Sequence[Sequence[int]] | IntArray) -> float | None:
    """Fleiss' kappa (Fleiss 1971) of a rating table (:func:`rating_table`): the agreement among raters
    beyond chance, as ``statsmodels.stats.inter_rater.fleiss_kappa`` (``method="fleiss"``). Every item must
    have the same number of raters (a ``ValueError`` otherwise); None when there are no items, fewer than
    2 raters, or every rating is the same label (chance agreement is then 1 and kappa means nothing)."""
    counts = np.asarray(table, dtype=np.float64)
    if counts.ndim != 2 or counts.shape[0] == 0:
        return None
    per_item = counts.sum(axis=1)
    if not np.all(per_item == per_item[0]):
        raise ValueError(f"Fleiss' kappa needs the same number of raters for every item, got {sorted(set(per_item))}")
    value = float(_fleiss_rows(counts))
    return None if np.isnan(value) else value


def fleiss_bootstrap_ci(table: Sequence[Sequence[int]] | IntArray, *, resamples: int = BOOTSTRAP_SAMPLES,
                        seed: int = BOOTSTRAP_SEED, level: float = 0.95,
                        chunk_elements: int = CHUNK_ELEMENTS) -> Interval | None:
    """Percentile bootstrap interval of :func:`fleiss_kappa`, items (rows) resampled with replacement
    exactly as :func:`bootstrap_ci` resamples pairs (the same seeded draws); None when undefined."""
    counts = np.asarray(table, dtype=np.float64)

    def figures(idx: IntArray) -> FloatArray:
        return _fleiss_rows(counts[idx])

    return bootstrap(figures, counts.shape[0] if counts.ndim == 2 else 0, resamples=resamples, seed=seed, level=level,
                     chunk_elements=max(1, chunk_elements // max(1, counts.shape[-1])))


def krippendorff_alpha(units: Sequence[Sequence[object]]) -> float | None:
    """Krippendorff's alpha, nominal (Krippendorff 2011, "Computing Krippendorff's alpha-reliability"):
    ``units[u]`` holds the labels the raters gave unit ``u`` (any number of raters; a missing rating is
    simply absent). Units with fewer than 2 labels are not pairable and are left out. None when fewer than
    2 pairable labels, or every pairable label is the same value (the expected disagreement is then 0)."""
    rated = [list(u) for u in units if len(u) >= 2]
    values = sorted({v for u in rated for v in u}, key=repr)
    if not rated or len(values) < 2:
        return None
    table = rating_table(rated, values).astype(np.float64)  # units x values: how many raters gave each value
    m = table.sum(axis=1, keepdims=True)
    coincidence = (table[:, :, None] * table[:, None, :] - np.eye(len(values)) * table[:, :, None]) / (m[:, :, None] - 1)
    o = coincidence.sum(axis=0)  # the coincidence matrix
    n_c = o.sum(axis=1)
    n = n_c.sum()
    observed = o.sum() - np.trace(o)
    expected = (n_c.sum() ** 2 - (n_c * n_c).sum()) / (n - 1)
    return float(1.0 - observed / expected) if expected > 0 else None
