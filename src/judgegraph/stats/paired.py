"""Paired tests for two runs over the same conversations (``docs/diff.md``), in numpy and the standard library:
McNemar's test of pass/fail (:func:`mcnemar`) and a paired bootstrap interval of the mean score difference
(:func:`paired_bootstrap`); the tests check both against scipy to 1e-9.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from .raters import BOOTSTRAP_SAMPLES, BOOTSTRAP_SEED, FloatArray, IntArray, bootstrap

#: discordant pairs below which McNemar's p-value is the exact binomial one
EXACT_BELOW = 25

McNemarMethod = Literal["exact", "chi2-cc", "none"]


@dataclass(frozen=True)
class McNemar:
    """McNemar's test: ``regressed`` (b) and ``fixed`` (c) discordant pairs, the method used, the statistic
    (the chi-square value, or ``b`` for the exact test; None without discordant pairs) and the p-value."""

    regressed: int
    fixed: int
    method: McNemarMethod
    statistic: float | None
    p_value: float


def mcnemar(regressed: int, fixed: int, *, exact_below: int = EXACT_BELOW) -> McNemar:
    """McNemar's test on ``regressed`` (b: passed→failed) and ``fixed`` (c: failed→passed) pairs: below
    ``exact_below`` discordant pairs the exact two-sided binomial test of b in b + c at p = 1/2 (as
    ``scipy.stats.binomtest``), else the chi-square test with Edwards' continuity correction on 1 degree of freedom;
    no discordant pair: p = 1."""
    n = regressed + fixed
    if n == 0:
        return McNemar(regressed, fixed, "none", None, 1.0)
    if n < exact_below:  # twice the smaller tail, at most 1 (the distribution is symmetric: scipy's rule)
        tail = sum(math.comb(n, i) for i in range(min(regressed, fixed) + 1))
        return McNemar(regressed, fixed, "exact", float(regressed), min(1.0, 2 * tail / 2**n))
    statistic = max(abs(regressed - fixed) - 1, 0) ** 2 / n
    # P(X > x) of a chi-square variable with one degree of freedom is erfc(sqrt(x / 2))
    return McNemar(regressed, fixed, "chi2-cc", float(statistic), math.erfc(math.sqrt(statistic / 2.0)))


@dataclass(frozen=True)
class MeanDifference:
    """The mean of ``new - old`` over ``n`` paired scores, and its bootstrap interval (``low``..``high`` at
    ``level``; None with fewer than 2 pairs or no resamples)."""

    n: int
    old_mean: float | None
    new_mean: float | None
    mean: float | None
    low: float | None
    high: float | None
    level: float
    resamples: int
    seed: int


def paired_bootstrap(old: Sequence[float], new: Sequence[float], *, resamples: int = BOOTSTRAP_SAMPLES,
                     seed: int = BOOTSTRAP_SEED, level: float = 0.95) -> MeanDifference:
    """The mean score difference ``new - old`` and its percentile bootstrap interval over the pairs
    (:func:`judgegraph.stats.raters.bootstrap`: row ``r`` of ``numpy.random.default_rng(seed).integers(0, n,
    size=(resamples, n))`` picks the pairs of resample ``r``; the ``(1 - level) / 2`` and ``1 - (1 - level) / 2``
    percentiles, linear interpolation, of the resampled means)."""
    if len(old) != len(new):
        raise ValueError(f"paired scores: {len(old)} old and {len(new)} new")
    n = len(old)
    if n == 0:
        return MeanDifference(0, None, None, None, None, None, level, resamples, seed)
    a = np.asarray(old, dtype=np.float64)
    b = np.asarray(new, dtype=np.float64)
    d = b - a

    def means(idx: IntArray) -> FloatArray:
        return d[idx].mean(axis=1)

    ci = bootstrap(means, n if n >= 2 else 0, resamples=resamples, seed=seed, level=level)
    return MeanDifference(n, float(a.mean()), float(b.mean()), float(d.mean()), None if ci is None else ci.low,
                          None if ci is None else ci.high, level, resamples, seed)
