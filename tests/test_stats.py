"""Significance functions against values worked out by hand."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from rageval.evaluation.stats import bootstrap_ci, holm, paired_randomization, win_tie_loss


def test_holm_on_four_p_values_by_hand():
    # sorted: 0.005 (x4 = 0.02), 0.01 (x3 = 0.03), 0.03 (x2 = 0.06), 0.04 (x1 = 0.04 → raised to 0.06)
    adjusted = holm([0.01, 0.04, 0.03, 0.005])
    assert adjusted == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_holm_caps_at_one_and_skips_nan():
    adjusted = holm([0.5, np.nan, 0.4])
    # two tests: 0.4 x 2 = 0.8, 0.5 x 1 = 0.5 → raised to 0.8
    assert adjusted[0] == pytest.approx(0.8) and np.isnan(adjusted[1]) and adjusted[2] == pytest.approx(0.8)
    assert holm([0.9, 0.8]) == pytest.approx([1.0, 1.0])
    assert holm([]).size == 0


def test_exact_randomization_on_four_pairs_by_enumeration():
    # differences 1, .5, .25, -.5: sum 1.25. Of the 16 sign patterns, |sum| >= 1.25 for
    # +1 with (+.5, +.5) and either sign of .25 (2.25, 1.75), +1 with one of the .5s flipped and +.25 (1.25, two ways),
    # and the mirror images: 8 of 16.
    baseline = [0.0, 0.0, 0.0, 0.5]
    candidate = [1.0, 0.5, 0.25, 0.0]
    assert paired_randomization(baseline, candidate) == pytest.approx(0.5)
    # all four differences equal: only all-plus and all-minus reach |sum| = 4: 2 of 16
    assert paired_randomization([0, 0, 0, 0], [1, 1, 1, 1]) == pytest.approx(0.125)


def test_exact_randomization_matches_brute_force():
    rng = np.random.default_rng(3)
    a, b = rng.random(7), rng.random(7)
    diff = b - a
    patterns = np.array(list(itertools.product((1, -1), repeat=7)))
    expected = np.mean(np.abs(patterns @ diff) >= abs(diff.sum()) - 1e-12)
    assert paired_randomization(a, b) == pytest.approx(expected)


def test_monte_carlo_randomization_is_seeded_and_never_zero():
    a, b = np.zeros(20), np.ones(20)  # exact p = 2 / 2**20, far below what 10,000 samples resolve
    p = paired_randomization(a, b, samples=10_000, seed=1)
    assert 1 / 10_001 <= p <= 3 / 10_001
    rng = np.random.default_rng(0)
    x, y = rng.random(40), rng.random(40)
    assert paired_randomization(x, y, seed=5) == paired_randomization(x, y, seed=5)


def test_randomization_of_identical_scores_is_one():
    assert paired_randomization([0.2, 0.4], [0.2, 0.4]) == 1.0
    assert paired_randomization([], []) == 1.0


def test_randomization_refuses_unpaired_or_nan():
    with pytest.raises(ValueError, match="equal lengths"):
        paired_randomization([1, 2], [1])
    with pytest.raises(ValueError, match="NaN"):
        paired_randomization([1, np.nan], [1, 2])


def test_bootstrap_of_two_values():
    # means of resamples of [0, 1] are 0, .5, 1 with probabilities 1/4, 1/2, 1/4: the 2.5% and 97.5% quantiles are 0 and 1
    assert bootstrap_ci([0.0, 1.0], resamples=4000, seed=0) == (0.0, 1.0)


def test_bootstrap_degenerate_cases_and_seed():
    assert bootstrap_ci([0.7, 0.7, 0.7]) == (0.7, 0.7)
    assert bootstrap_ci([0.3]) == (0.3, 0.3)
    low, high = bootstrap_ci([])
    assert np.isnan(low) and np.isnan(high)
    values = np.linspace(0, 1, 50)
    first = bootstrap_ci(values, seed=2)
    assert first == bootstrap_ci(values, seed=2)
    assert first[0] < values.mean() < first[1]


def test_win_tie_loss():
    assert win_tie_loss([0.1, 0.5, 0.5, 0.9], [0.2, 0.5, 0.4, 0.9]) == (1, 2, 1)
    assert win_tie_loss([0.1, 0.5], [0.15, 0.5], tolerance=0.1) == (0, 2, 0)
