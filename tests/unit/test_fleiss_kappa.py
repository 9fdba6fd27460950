"""Fleiss' kappa (a jury's agreement) is the figure statsmodels computes (test-only reference), to 1e-9."""

from __future__ import annotations

import numpy as np
import pytest

from judgegraph.stats.raters import fleiss_bootstrap_ci, fleiss_kappa, rating_table, resample_indices

#: The worked example of Wikipedia's "Fleiss' kappa" article: 10 items, 14 raters, 5 categories;
#: by hand P̄ = 0.378, P̄e = 0.213, kappa = (0.378 - 0.213) / (1 - 0.213) = 0.210.
WORKED = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
          [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]


def test_the_worked_example_by_hand():
    table = np.array(WORKED, dtype=float)
    p_items = ((table**2).sum(axis=1) - 14) / (14 * 13)
    shares = table.sum(axis=0) / table.sum()
    assert p_items.mean() == pytest.approx(0.378, abs=5e-4) and (shares**2).sum() == pytest.approx(0.213, abs=5e-4)
    assert fleiss_kappa(WORKED) == pytest.approx(0.2099, abs=5e-4)


RNG = np.random.default_rng(11)


def _jury(items: int, raters: int, labels: list[str], agree: float) -> list[list[str]]:
    """Each item has a true label; each rater gives it with probability ``agree``, else a random label."""
    out = []
    for _ in range(items):
        truth = RNG.choice(labels)
        out.append([truth if RNG.random() < agree else RNG.choice(labels) for _ in range(raters)])
    return out


@pytest.mark.parametrize("ratings", [_jury(50, 3, ["no", "yes"], 0.8), _jury(40, 5, ["a", "b", "c"], 0.5),
                                     _jury(30, 2, ["no", "yes"], 0.3), WORKED], ids=["3-yes-no", "5-of-3", "2-low", "wiki"])
def test_matches_statsmodels(ratings):
    from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

    table = ratings if isinstance(ratings[0][0], int) else rating_table(ratings, sorted({x for r in ratings for x in r}))
    assert fleiss_kappa(table) == pytest.approx(sm_fleiss_kappa(np.asarray(table), method="fleiss"), abs=1e-9)


def test_rating_table_counts_each_rater_once_per_item():
    assert rating_table([["yes", "yes", "no"], ["no", "no", "no"]], ["no", "yes"]).tolist() == [[1, 2], [3, 0]]


def test_perfect_agreement_is_one_and_undefined_figures_are_none():
    assert fleiss_kappa([[3, 0], [0, 3], [3, 0]]) == pytest.approx(1.0)
    assert fleiss_kappa([[3, 0], [3, 0]]) is None  # every rating the same label: chance agreement is 1
    assert fleiss_kappa([[1, 0], [0, 1]]) is None  # one rater: no agreement to measure
    assert fleiss_kappa([]) is None
    with pytest.raises(ValueError, match="same number of raters"):
        fleiss_kappa([[2, 1], [1, 1]])


def test_bootstrap_interval_resamples_items_with_the_shared_seeded_draws():
    table = rating_table(_jury(25, 3, ["no", "yes"], 0.7), ["no", "yes"])
    ci = fleiss_bootstrap_ci(table, resamples=200, seed=3)
    assert ci is not None and ci.resamples == 200
    by_hand = [fleiss_kappa(table[idx]) for idx in resample_indices(25, 200, 3)]
    defined = np.array([k for k in by_hand if k is not None])
    assert (ci.low, ci.high) == pytest.approx(tuple(np.percentile(defined, [2.5, 97.5])), abs=1e-12)
    assert ci.samples == defined.size and ci.low <= fleiss_kappa(table) <= ci.high
    assert fleiss_bootstrap_ci(table, resamples=200, seed=3, chunk_elements=10) == ci  # chunking changes nothing
    assert fleiss_bootstrap_ci([[3, 0], [3, 0]], resamples=50) is None
