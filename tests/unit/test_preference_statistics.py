"""Pairwise preference statistics against independent references: Bradley–Terry by MM against scipy.optimize
maximising the same likelihood, the Wilson interval against scipy.stats.binomtest (both to 1e-9) and published
values, and the bootstrap's determinism and coverage."""

from __future__ import annotations

import numpy as np
import pytest

from judgegraph.trust.preference import bootstrap_strengths, bradley_terry, wilson, with_prior


def scipy_bradley_terry(wins: np.ndarray, prior: float) -> np.ndarray:
    """The reference: maximise sum_ij w_ij * log(sigmoid(theta_i - theta_j)) with theta_0 = 0, then centre."""
    from scipy.optimize import minimize

    w = with_prior(np.asarray(wins, dtype=float), prior)
    k = w.shape[0]

    def nll(free: np.ndarray) -> float:
        theta = np.concatenate([[0.0], free])
        diff = theta[:, None] - theta[None, :]
        return float((w * np.logaddexp(0.0, -diff)).sum())

    def grad(free: np.ndarray) -> np.ndarray:
        theta = np.concatenate([[0.0], free])
        p = 1.0 / (1.0 + np.exp(theta[None, :] - theta[:, None]))  # P(i beats j)
        g = -(w * (1 - p)).sum(axis=1) + (w.T * (1 - p.T)).sum(axis=1)
        return g[1:]

    fit = minimize(nll, np.zeros(k - 1), jac=grad, method="BFGS", options={"gtol": 1e-12, "maxiter": 10_000})
    theta = np.concatenate([[0.0], fit.x])
    return theta - theta.mean()


RNG = np.random.default_rng(11)
RANDOM_WINS = RNG.integers(0, 9, size=(5, 5)).astype(float) + 0.5 * RNG.integers(0, 3, size=(5, 5))
np.fill_diagonal(RANDOM_WINS, 0.0)


@pytest.mark.parametrize(("wins", "prior"), [
    (np.array([[0, 7, 9], [3, 0, 6], [1, 4, 0]], dtype=float), 0.0),  # strongly connected: the MLE exists unaided
    (np.array([[0, 7, 9], [3, 0, 6], [1, 4, 0]], dtype=float), 1.0),
    (np.array([[0, 10, 10], [0, 0, 10], [0, 0, 0]], dtype=float), 1.0),  # one version wins everything: the prior
    (np.array([[0, 2.5, 4], [2.5, 0, 1.5], [1, 3.5, 0]]), 0.0),  # half wins from ties
    (RANDOM_WINS, 0.5),
])
def test_bradley_terry_matches_scipy_optimize(wins, prior):
    assert bradley_terry(wins, prior=prior) == pytest.approx(scipy_bradley_terry(wins, prior), abs=1e-9)


def test_bradley_terry_fits_several_matrices_at_once_like_one_by_one():
    stack = np.stack([RANDOM_WINS, RANDOM_WINS.T, np.ones((5, 5)) - np.eye(5)])
    together = bradley_terry(stack)
    for i in range(3):
        assert together[i] == pytest.approx(bradley_terry(stack[i]), abs=1e-9)
    assert together[2] == pytest.approx(np.zeros(5), abs=1e-9)  # all even: equal strengths


def test_ties_count_half_a_win_and_the_win_probability_reads_the_strengths():
    all_ties = np.full((3, 3), 4.0) - 4.0 * np.eye(3)  # 8 ties per pair, half a win each side
    assert bradley_terry(all_ties, prior=0.0) == pytest.approx(np.zeros(3), abs=1e-9)
    theta = bradley_terry(np.array([[0, 3.0], [1.0, 0]]), prior=0.0)
    assert 1 / (1 + np.exp(theta[1] - theta[0])) == pytest.approx(0.75, abs=1e-9)  # 3 of 4: the MLE is the observed share


@pytest.mark.parametrize(("count", "n"), [(0, 1), (1, 1), (0, 10), (3, 10), (10, 10), (81, 263), (499, 1000)])
def test_wilson_interval_matches_scipy(count, n):
    from scipy.stats import binomtest

    ci = binomtest(count, n).proportion_ci(confidence_level=0.95, method="wilson")
    r = wilson(count, n)
    assert (r.low, r.high) == pytest.approx((ci.low, ci.high), abs=1e-9)


def test_wilson_interval_matches_its_formula_and_known_values():
    # Wilson (1927) / Newcombe (1998) table: 81 of 263 -> 0.2553 to 0.3662
    r = wilson(81, 263)
    assert (r.low, r.high) == pytest.approx((0.2553, 0.3662), abs=1e-4)
    assert r.rate == pytest.approx(81 / 263)
    zero = wilson(0, 10)
    assert zero.low == 0.0 and zero.high == pytest.approx(0.2775, abs=1e-4)
    full = wilson(10, 10)
    assert full.high == pytest.approx(1.0) and full.low == pytest.approx(0.7225, abs=1e-4)
    empty = wilson(0, 0)
    assert (empty.rate, empty.low, empty.high) == (None, None, None)


def test_bootstrap_intervals_are_seeded_and_hold_the_estimate():
    per = np.zeros((30, 3, 3))
    for c in range(30):  # version 0 beats 1 in 9 of 10 conversations, 1 beats 2 in 9 of 10
        per[c, 0, 1] = 1.0 if c % 10 else 0.0
        per[c, 1, 0] = 1.0 - per[c, 0, 1]
        per[c, 1, 2] = 1.0 if c % 10 else 0.0
        per[c, 2, 1] = 1.0 - per[c, 1, 2]
    theta = bradley_terry(per.sum(axis=0))
    a = bootstrap_strengths(per, resamples=200, seed=3)
    b = bootstrap_strengths(per, resamples=200, seed=3)
    assert a == b and a is not None
    for i in range(3):
        assert a.low[i] <= theta[i] <= a.high[i]
    assert a.low[0] > a.high[2]  # clearly separated
    assert bootstrap_strengths(per[:0], resamples=10) is None
