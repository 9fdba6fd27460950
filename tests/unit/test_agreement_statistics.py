"""The agreement figures are the ones scikit-learn and scipy compute (test-only references), to 1e-9."""

from __future__ import annotations

import numpy as np
import pytest

from judgegraph.stats.raters import (
    bootstrap_ci,
    cohen_kappa,
    confusion,
    percent_agreement,
    resample_chunks,
    resample_indices,
    spearman,
)

RNG = np.random.default_rng(7)
YES_NO = (list(RNG.choice(["yes", "no"], 40, p=[0.7, 0.3])), list(RNG.choice(["yes", "no"], 40, p=[0.6, 0.4])))
CATEGORIES = (list(RNG.choice(["none", "resolved", "unresolved"], 60)), list(RNG.choice(["none", "resolved", "unresolved"], 60)))
ORDINAL = ([int(x) for x in RNG.integers(1, 6, 80)], [int(x) for x in RNG.integers(1, 6, 80)])


@pytest.mark.parametrize("pair", [YES_NO, CATEGORIES, ORDINAL], ids=["yes-no", "categorical", "ordinal"])
def test_kappa_and_confusion_match_scikit_learn(pair):
    from sklearn.metrics import cohen_kappa_score, confusion_matrix

    human, judge = pair
    scale = sorted(set(human) | set(judge))
    assert cohen_kappa(human, judge, scale) == pytest.approx(cohen_kappa_score(human, judge), abs=1e-9)
    assert cohen_kappa(human, judge, scale, "quadratic") == pytest.approx(
        cohen_kappa_score(human, judge, weights="quadratic"), abs=1e-9)
    assert confusion(human, judge, scale) == confusion_matrix(human, judge, labels=scale).tolist()
    assert percent_agreement(human, judge) == pytest.approx(np.mean(np.array(human) == np.array(judge)), abs=1e-12)


def test_kappa_of_a_judge_that_agrees_beyond_chance_is_high_and_one_that_inverts_is_negative():
    from sklearn.metrics import cohen_kappa_score

    human = ["yes"] * 10 + ["no"] * 10
    assert cohen_kappa(human, human, ["no", "yes"]) == 1.0
    inverted = ["no" if h == "yes" else "yes" for h in human]
    assert cohen_kappa(human, inverted, ["no", "yes"]) == pytest.approx(cohen_kappa_score(human, inverted)) == -1.0


@pytest.mark.parametrize("pair", [ORDINAL, ([1, 2, 2, 3, 3, 3, 0.5], [2, 2, 3, 3, 1, 1, 0.25])], ids=["ordinal", "ties"])
def test_spearman_matches_scipy_with_ties(pair):
    from scipy.stats import spearmanr

    assert spearman(*pair) == pytest.approx(spearmanr(*pair).statistic, abs=1e-9)


def test_undefined_figures_are_none_not_numbers():
    assert cohen_kappa(["yes"] * 5, ["yes"] * 5, ["yes"]) is None  # sklearn: nan
    assert spearman([1, 1, 1], [1, 2, 3]) is None
    assert cohen_kappa([], [], []) is None and percent_agreement([], []) is None


@pytest.mark.parametrize("statistic", ["agreement", "kappa", "weighted_kappa", "spearman"])
def test_bootstrap_interval_is_the_documented_percentiles_of_the_reference_figure_over_seeded_resamples(statistic):
    from scipy.stats import spearmanr
    from sklearn.metrics import cohen_kappa_score

    human, judge = ORDINAL
    scale = sorted(set(human) | set(judge))
    got = bootstrap_ci(statistic, human, judge, scale, resamples=200, seed=3)
    h, j = np.array(human), np.array(judge)
    figures = []
    for row in np.random.default_rng(3).integers(0, len(human), size=(200, len(human))):  # the documented draw
        if statistic == "agreement":
            figures.append(float(np.mean(h[row] == j[row])))
        elif statistic == "spearman":
            figures.append(spearmanr(h[row], j[row]).statistic)
        else:
            figures.append(cohen_kappa_score(h[row], j[row], labels=scale,
                                             weights="quadratic" if statistic == "weighted_kappa" else None))
    low, high = np.percentile(figures, [2.5, 97.5])
    assert got is not None and (got.resamples, got.seed, got.samples) == (200, 3, 200)
    assert got.low == pytest.approx(low, abs=1e-9) and got.high == pytest.approx(high, abs=1e-9)
    assert (resample_indices(len(human), 200, 3) == np.random.default_rng(3).integers(0, 80, (200, 80))).all()
    assert bootstrap_ci(statistic, human, judge, scale, resamples=200, seed=3) == got  # seeded: the same every time


def test_bootstrap_drops_resamples_where_kappa_is_undefined():
    human, judge = ["yes", "yes", "no"], ["yes", "yes", "no"]
    got = bootstrap_ci("kappa", human, judge, ["no", "yes"], resamples=100, seed=0)
    assert got is not None and got.samples < 100 and got.low == got.high == 1.0


@pytest.mark.parametrize("statistic", ["kappa", "spearman"])
def test_the_bootstrap_drawn_a_chunk_at_a_time_is_the_same_as_drawn_at_once(statistic):
    human, judge = ORDINAL
    scale = sorted(set(human) | set(judge))
    chunks = list(resample_chunks(80, 50, 4, chunk_elements=7 * 80))  # 7 rows at a time, a last chunk of 1
    assert [len(c) for c in chunks] == [7] * 7 + [1]
    assert (np.concatenate(chunks) == resample_indices(80, 50, 4)).all()
    at_once = bootstrap_ci(statistic, human, judge, scale, resamples=50, seed=4, chunk_elements=10**9)
    assert bootstrap_ci(statistic, human, judge, scale, resamples=50, seed=4, chunk_elements=7 * 80) == at_once
