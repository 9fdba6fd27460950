"""Preference statistics for pairwise judging, in plain numpy (``docs/pairwise.md``): the Wilson interval of a
rate (:class:`Rate`), Bradley–Terry log-strengths centred on 0 by Hunter's MM algorithm with ``prior`` virtual
ties per pair (:func:`bradley_terry`), and their bootstrap intervals over conversations
(:func:`bootstrap_strengths`). The tests check them against scipy to 1e-9.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..stats.raters import resample_chunks

FloatArray = npt.NDArray[np.float64]

#: the normal quantile of a two-sided 95 % interval
Z95 = 1.959963984540054
#: MM stops when no log-strength moves by more than this, or after MAX_ITERATIONS
TOLERANCE = 1e-12
MAX_ITERATIONS = 100_000


@dataclass(frozen=True)
class Rate:
    """``count`` successes in ``n`` trials with the Wilson score interval of the rate (``low``, ``high``; ``z``: the
    normal quantile, 1.96 for 95 %); rate, low and high are None when n is 0."""

    count: float
    n: int
    z: float = Z95

    @property
    def rate(self) -> float | None:
        return None if self.n <= 0 else self.count / self.n

    @property
    def low(self) -> float | None:
        return self._bounds()[0]

    @property
    def high(self) -> float | None:
        return self._bounds()[1]

    def _bounds(self) -> tuple[float | None, float | None]:
        if self.n <= 0:
            return None, None
        p, z, n = self.count / self.n, self.z, self.n
        denom = 1.0 + z * z / n
        centre = (p + z * z / (2 * n)) / denom
        half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
        return max(0.0, centre - half), min(1.0, centre + half)

    def to_json(self) -> dict[str, float | int | None]:
        return {"count": self.count, "n": self.n, "rate": self.rate, "low": self.low, "high": self.high}


#: the Wilson score interval of ``count`` successes in ``n`` trials: ``wilson(count, n, z=Z95)``
wilson = Rate


def with_prior(wins: FloatArray, prior: float) -> FloatArray:
    """``wins`` (``wins[..., i, j]``: i's wins over j) plus ``prior / 2`` to each side of every pair."""
    return wins + (prior / 2.0) * (1.0 - np.eye(wins.shape[-1]))


def bradley_terry(wins: FloatArray, *, prior: float = 1.0, tolerance: float = TOLERANCE,
                  max_iterations: int = MAX_ITERATIONS) -> FloatArray:
    """Centred log-strengths from ``wins`` (shape ``(..., k, k)``; ``wins[i, j]`` = i's wins over j, ties already
    halved to each side), with ``prior`` virtual tied comparisons per pair (:func:`with_prior`). Several matrices
    (a leading axis) are fitted at once. Hunter's MM update: ``p_i <- W_i / sum_j n_ij / (p_i + p_j)``."""
    w = with_prior(np.asarray(wins, dtype=np.float64), prior)
    n = w + np.swapaxes(w, -1, -2)  # comparisons of each pair
    total = w.sum(axis=-1)  # each version's wins
    p = np.ones(w.shape[:-1])
    theta = np.zeros_like(p)
    for _ in range(max_iterations):
        with np.errstate(divide="ignore", invalid="ignore"):
            denom = (n / (p[..., :, None] + p[..., None, :])).sum(axis=-1)
            p = np.where(denom > 0, total / np.where(denom > 0, denom, 1.0), p)
            logp = np.log(p)
        new = logp - logp.mean(axis=-1, keepdims=True)
        p = np.exp(new)
        moved = float(np.nanmax(np.abs(new - theta))) if new.size else 0.0
        theta = new
        if moved <= tolerance:
            break
    out: FloatArray = theta
    return out


@dataclass(frozen=True)
class StrengthIntervals:
    """Percentile bootstrap intervals of each version's log-strength (``low[i]``, ``high[i]``)."""

    low: list[float]
    high: list[float]
    level: float
    resamples: int
    seed: int


def bootstrap_strengths(per_conversation: FloatArray, *, prior: float = 1.0, resamples: int = 1000, seed: int = 0,
                        level: float = 0.95) -> StrengthIntervals | None:
    """Intervals of :func:`bradley_terry` strengths when the conversations are resampled with replacement:
    ``per_conversation[c]`` is conversation c's wins matrix; resample ``r`` draws
    ``numpy.random.default_rng(seed).integers(0, m, size=(resamples, m))`` conversations and sums their
    matrices. None with no conversation or no resample."""
    m = per_conversation.shape[0]
    if m == 0 or resamples <= 0:
        return None
    k = per_conversation.shape[-1]
    values = np.concatenate([bradley_terry(per_conversation[idx].sum(axis=1), prior=prior)
                             for idx in resample_chunks(m, resamples, seed, (1 << 20) // max(1, k * k))])
    tail = (1.0 - level) / 2.0 * 100.0
    low, high = np.percentile(values, [tail, 100.0 - tail], axis=0)
    return StrengthIntervals([float(x) for x in low], [float(x) for x in high], level, resamples, seed)
