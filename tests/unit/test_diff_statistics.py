"""The diff's paired tests against scipy, to 1e-9: McNemar (exact binomial below 25 discordant pairs,
continuity-corrected chi-square from 25) and the paired bootstrap interval of the mean score difference."""

import numpy as np
import pytest

from judgegraph.stats.paired import EXACT_BELOW, mcnemar, paired_bootstrap


@pytest.mark.parametrize(("b", "c"), [(1, 0), (0, 1), (3, 3), (5, 1), (0, 7), (12, 12), (20, 4), (13, 11), (1, 23)])
def test_mcnemar_below_25_discordant_pairs_is_the_exact_binomial_test(b, c):
    from scipy.stats import binomtest

    assert b + c < EXACT_BELOW == 25
    result = mcnemar(b, c)
    assert result.method == "exact"
    assert result.p_value == pytest.approx(binomtest(b, b + c, 0.5).pvalue, abs=1e-9)


@pytest.mark.parametrize(("b", "c"), [(13, 12), (20, 5), (5, 20), (40, 10), (100, 100), (101, 100), (3, 60),
                                      (400, 350)])
def test_mcnemar_from_25_discordant_pairs_is_the_continuity_corrected_chi_square(b, c):
    from scipy.stats import chi2

    result = mcnemar(b, c)
    statistic = max(abs(b - c) - 1, 0) ** 2 / (b + c)
    assert result.method == "chi2-cc"
    assert result.statistic == pytest.approx(statistic, abs=1e-12)
    assert result.p_value == pytest.approx(chi2.sf(statistic, df=1), abs=1e-9)


def test_mcnemar_rule_switches_at_25_and_nothing_discordant_is_p_one():
    assert mcnemar(12, 12).method == "exact" and mcnemar(13, 12).method == "chi2-cc"
    none = mcnemar(0, 0)
    assert (none.method, none.statistic, none.p_value) == ("none", None, 1.0)
    assert mcnemar(9, 0).p_value == pytest.approx(2 / 2**9, abs=1e-12)  # every discordant pair one way


def _reference(old, new, resamples, seed, level):
    """The paired bootstrap written plainly: one resample at a time from the same generator."""
    rng = np.random.default_rng(seed)
    d = np.asarray(new, dtype=float) - np.asarray(old, dtype=float)
    n = len(d)
    means = [float(np.mean(d[rng.integers(0, n, size=n)])) for _ in range(resamples)]
    tail = (1 - level) / 2 * 100
    return np.percentile(means, [tail, 100 - tail])


@pytest.mark.parametrize(("n", "seed", "resamples", "level"), [(8, 0, 1000, 0.95), (30, 7, 500, 0.9), (3, 1, 200, 0.99)])
def test_paired_bootstrap_matches_scipy_and_a_plain_reference(n, seed, resamples, level):
    from scipy.stats import bootstrap

    rng = np.random.default_rng(100 + n)
    old = rng.uniform(0, 1, n).round(3).tolist()
    new = (np.clip(np.asarray(old) + rng.normal(0.05, 0.2, n), 0, 1)).round(3).tolist()
    result = paired_bootstrap(old, new, resamples=resamples, seed=seed, level=level)
    assert result.mean == pytest.approx(float(np.mean(np.subtract(new, old))), abs=1e-12)
    assert (result.old_mean, result.new_mean) == (pytest.approx(np.mean(old)), pytest.approx(np.mean(new)))
    ref = bootstrap((np.asarray(old), np.asarray(new)), lambda a, b, axis: np.mean(b - a, axis=axis), paired=True,
                    vectorized=True, n_resamples=resamples, method="percentile", confidence_level=level,
                    rng=np.random.default_rng(seed))
    assert result.low == pytest.approx(ref.confidence_interval.low, abs=1e-9)
    assert result.high == pytest.approx(ref.confidence_interval.high, abs=1e-9)
    low, high = _reference(old, new, resamples, seed, level)
    assert (result.low, result.high) == (pytest.approx(low, abs=1e-9), pytest.approx(high, abs=1e-9))
    assert result.low < result.high


def test_paired_bootstrap_is_seeded_and_needs_two_pairs():
    a, b = [0.2, 0.5, 0.9, 0.4], [0.3, 0.5, 0.7, 0.8]
    assert paired_bootstrap(a, b, seed=3) == paired_bootstrap(a, b, seed=3)
    three, four = paired_bootstrap(a, b, seed=3), paired_bootstrap(a, b, seed=4)
    assert (three.low, three.high) != (four.low, four.high)
    one = paired_bootstrap([0.5], [0.75])
    assert (one.n, one.mean, one.low, one.high) == (1, 0.25, None, None)
    assert paired_bootstrap([], []).mean is None
    with pytest.raises(ValueError):
        paired_bootstrap([0.1], [0.1, 0.2])
