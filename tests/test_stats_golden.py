"""rageval's significance and agreement statistics against the reference libraries, on inputs of
the sizes rageval sees: 2-300 paired per-query scores in [0, 1] with many ties and zeros, 2-6
assessors grading 0-3, labels missing for Krippendorff.

Deterministic results must agree to 1e-12. Monte-Carlo ones agree exactly where the library
enumerates every sign pattern or can be handed the same random draws; elsewhere within four
standard errors of the Monte-Carlo proportions involved, derived beside each test.
"""

from __future__ import annotations

import gc
import itertools
import math
from fractions import Fraction

import krippendorff
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.stats import bootstrap, permutation_test
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import fleiss_kappa as statsmodels_fleiss_kappa
from statsmodels.stats.multitest import multipletests

from rageval.evaluation.agreement import cohen_kappa, fleiss_kappa, krippendorff_alpha_ordinal
from rageval.evaluation.stats import bootstrap_ci, holm, paired_randomization

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GRADES = [0, 1, 2, 3]
# Per-query scores are fractions: Hit/Success (1), R@k over a few relevant documents (2, 3, 4),
# P@5 and P@10 (5, 10), P@20 (20), and a common multiple of 1..8 for mixed recall depths.
DENOMINATORS = (1, 2, 3, 4, 5, 10, 20, 840)


def mean_difference(x: np.ndarray, y: np.ndarray, axis: int) -> np.ndarray:
    return np.mean(y - x, axis=axis)


def absolute_mean_difference(x: np.ndarray, y: np.ndarray, axis: int) -> np.ndarray:
    return np.abs(np.mean(y - x, axis=axis))


@st.composite
def paired_numerators(draw, min_n: int, max_n: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Integer numerators of a baseline's and a candidate's per-query scores over one denominator:
    many queries score 0 for both, many score the same for both."""
    n = draw(st.integers(min_n, max_n))
    denominator = draw(st.sampled_from(DENOMINATORS))
    zeros, same = draw(st.floats(0, 0.6)), draw(st.floats(0, 0.8))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    base = np.where(rng.random(n) < zeros, 0, rng.integers(0, denominator + 1, n))
    cand = np.where(rng.random(n) < same, base, rng.integers(0, denominator + 1, n))
    return base, cand, denominator


def scores_with_ties(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Continuous per-query scores in [0, 1], a third of them 0, the candidate unchanged on 40%."""
    base = np.where(rng.random(n) < 1 / 3, 0.0, rng.random(n))
    cand = np.where(rng.random(n) < 0.4, base, np.where(rng.random(n) < 1 / 3, 0.0, rng.random(n)))
    return base, cand


# --------------------------------------------------------------------------- randomization test


@SETTINGS
@given(paired_numerators(2, 13))
def test_exact_randomization_equals_scipy_enumeration(case):
    base, cand, denominator = case
    n = base.size
    ours = paired_randomization(base / denominator, cand / denominator)  # 2**13 <= 10,000 samples: exact
    # The p-value does not depend on the scale; on the integer numerators every sum is exact in floating
    # point, so scipy's ties are the true ties, which ours must find on the rounded fractions.
    numerators = (base.astype(float), cand.astype(float))
    two_sided = permutation_test(
        numerators, mean_difference, permutation_type="samples", vectorized=True, n_resamples=2**n
    )
    absolute = permutation_test(
        numerators,
        absolute_mean_difference,
        permutation_type="samples",
        vectorized=True,
        n_resamples=2**n,
        alternative="greater",
    )
    assert ours == two_sided.pvalue == absolute.pvalue
    # Both enumerate exactly when the sample budget covers every pattern (scipy: n_resamples >= 2**n).
    assert two_sided.null_distribution.size == 2**n
    assert paired_randomization(base / denominator, cand / denominator, samples=2**n) == ours


@pytest.mark.parametrize("seed", range(20))
def test_exact_randomization_equals_scipy_on_continuous_scores(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 14))
    base, cand = scores_with_ties(rng, n)
    result = permutation_test(
        (base, cand), mean_difference, permutation_type="samples", vectorized=True, n_resamples=2**n
    )
    assert paired_randomization(base, cand) == result.pvalue


def test_a_zero_mean_difference_has_p_one_where_scipy_rounding_finds_less():
    # P@5 of five queries. The differences -2, -1, +2, +3, -2 fifths sum to zero, so every sign pattern
    # is at least as extreme as the observed one: p = 1. Summed in floating point the observed mean is
    # about 1e-17, not 0; scipy's tie tolerance is relative to it (100 eps |t|) and counts fewer
    # patterns; ours is absolute (1e-12 on the mean) and finds them all. One reason ours is kept.
    base, cand = np.array([3, 5, 0, 1, 5]), np.array([1, 4, 2, 4, 3])
    differences = [Fraction(int(y), 5) - Fraction(int(x), 5) for x, y in zip(base, cand, strict=True)]
    exact = sum(
        abs(sum(s * d for s, d in zip(signs, differences, strict=True))) >= abs(sum(differences))
        for signs in itertools.product((1, -1), repeat=len(differences))
    ) / 2 ** len(differences)
    on_floats = permutation_test(
        (base / 5, cand / 5), mean_difference, permutation_type="samples", vectorized=True, n_resamples=32
    )
    assert exact == 1.0
    assert paired_randomization(base / 5, cand / 5) == exact
    assert on_floats.pvalue < exact


@pytest.mark.parametrize(("n", "seed"), [(14, 0), (14, 1), (15, 2), (16, 3), (16, 4)])
def test_monte_carlo_randomization_within_four_standard_errors_of_scipy_exact(n, seed):
    # Just past the exact range (2**n > 10,000 samples). Ours estimates p by (count + 1) / (B + 1):
    # count ~ Binomial(B, p), so its standard error is sqrt(p (1 - p) / B) and the +1 biases it by at
    # most 1 / (B + 1). scipy enumerates all 2**n patterns of the integer numerators: the exact p.
    rng = np.random.default_rng(100 + seed)
    base, cand = rng.integers(0, 6, n), rng.integers(0, 6, n)
    same = rng.random(n) < 0.3
    cand[same] = base[same]
    samples = 10_000
    exact = permutation_test(
        (base.astype(float), cand.astype(float)),
        mean_difference,
        permutation_type="samples",
        vectorized=True,
        n_resamples=2**n,
    ).pvalue
    ours = paired_randomization(base / 5, cand / 5, samples=samples, seed=seed)
    tolerance = 4 * math.sqrt(exact * (1 - exact) / samples) + 1 / (samples + 1)
    assert abs(ours - exact) <= tolerance


@pytest.mark.parametrize(
    ("n", "seed", "shift"),
    [(31, 0, 0.02), (31, 1, 0.02), (100, 2, 0.02), (300, 3, 0.02), (300, 4, 0.02), (100, 5, 0.12), (300, 5, 0.06)],
)
def test_monte_carlo_randomization_within_four_standard_errors_of_scipy_monte_carlo(n, seed, shift):
    # Too many patterns to enumerate. scipy's |mean difference| with alternative="greater" is the
    # same estimator as ours, (count + 1) / (B + 1), from draws of its own; the two counts are
    # independent Binomial(B, p), so their difference has standard error sqrt(2 p (1 - p) / B),
    # estimated with the pooled p. The candidate's changed queries are shifted by about `shift`:
    # p from about 0.9 down to 0.006, where a decision at 0.05 is made.
    rng = np.random.default_rng(200 + seed)
    base, cand = scores_with_ties(rng, n)
    cand = np.clip(cand + rng.normal(shift, 0.1, n) * (cand != base), 0, 1)
    samples = 10_000
    ours = paired_randomization(base, cand, samples=samples, seed=seed)
    lib = permutation_test(
        (base, cand),
        absolute_mean_difference,
        permutation_type="samples",
        vectorized=True,
        n_resamples=samples,
        alternative="greater",
        rng=np.random.default_rng(10_000 + seed),
    ).pvalue
    pooled = (ours + lib) / 2
    assert abs(ours - lib) <= 4 * math.sqrt(2 * pooled * (1 - pooled) / samples)


# --------------------------------------------------------------------------- bootstrap


@pytest.mark.parametrize(("n", "seed", "confidence"), [(5, 0, 0.95), (31, 1, 0.95), (31, 2, 0.9), (300, 3, 0.99)])
def test_bootstrap_equals_scipy_given_the_same_draws(n, seed, confidence):
    # scipy.stats.bootstrap draws its resamples as ours does (Generator.integers(0, n, (B, n)) from
    # the generator it is given; ours draws the same stream in batches of 1,024 rows), so its
    # bootstrap distribution is ours to the bit and the percentile interval is the same quantiles.
    # Its quantile function (scipy.stats.quantile) interpolates with another formula than
    # numpy.quantile, which ours uses: the endpoints differ in the last bits (at most 8e-16 measured),
    # so they agree to 1e-12 and not to the bit. That difference (and speed) is why ours is kept: the
    # intervals rageval records must not change.
    rng = np.random.default_rng(300 + seed)
    values, _ = scores_with_ties(rng, n)
    resamples = 10_000
    ours = bootstrap_ci(values, confidence=confidence, resamples=resamples, seed=seed)
    lib = bootstrap(
        (values,),
        np.mean,
        n_resamples=resamples,
        method="percentile",
        confidence_level=confidence,
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    tail = (1 - confidence) / 2
    assert ours == tuple(np.quantile(lib.bootstrap_distribution, [tail, 1 - tail]))
    low, high = lib.confidence_interval
    assert ours == pytest.approx((low, high), abs=1e-12, rel=0)


@pytest.mark.parametrize(("n", "seed"), [(5, 0), (31, 1), (100, 2), (300, 3)])
def test_bootstrap_within_four_standard_errors_of_scipy_with_other_draws(n, seed):
    # Independent of how scipy draws: with draws of its own, the share of scipy's bootstrap means
    # below our lower endpoint estimates F(low), which is tail (0.025) up to Monte-Carlo error. Our
    # endpoint is a sample quantile of B draws (F(low) has standard error sqrt(tail (1 - tail) / B)),
    # scipy's share another proportion of B draws: together sqrt(2 tail (1 - tail) / B). The
    # bootstrap means of tied data have atoms, so the share strictly below must not exceed tail + 4 SE
    # and the share at or below must reach tail - 4 SE; the same for the upper endpoint.
    rng = np.random.default_rng(400 + seed)
    values, _ = scores_with_ties(rng, n)
    resamples, tail = 10_000, 0.025
    low, high = bootstrap_ci(values, confidence=0.95, resamples=resamples, seed=seed)
    means = bootstrap(
        (values,),
        np.mean,
        n_resamples=resamples,
        method="percentile",
        vectorized=True,
        rng=np.random.default_rng(seed + 1),
    ).bootstrap_distribution
    bound = 4 * math.sqrt(2 * tail * (1 - tail) / resamples)
    assert np.mean(means < low) <= tail + bound and np.mean(means <= low) >= tail - bound
    assert np.mean(means > high) <= tail + bound and np.mean(means >= high) >= tail - bound


# --------------------------------------------------------------------------- Holm


@st.composite
def p_values(draw) -> list[float]:
    """Up to 60 p-values as a comparison produces them: ties, exact ones, the Monte-Carlo floor
    1 / 10,001, and NaN where a measure had no paired queries."""
    special = st.sampled_from([1.0, 1 / 10_001, 0.05, 0.5, math.nan])
    return draw(st.lists(st.one_of(st.floats(0, 1), special), min_size=0, max_size=60))


@SETTINGS
@given(p_values())
def test_holm_equals_statsmodels(pvalues):
    ours = holm(pvalues)
    p = np.asarray(pvalues, dtype=float)
    present = ~np.isnan(p)
    assert np.array_equal(np.isnan(ours), ~present)
    if present.any():  # statsmodels has no notion of a missing test: it gets the present ones
        np.testing.assert_allclose(ours[present], statsmodels_holm(p[present]), rtol=0, atol=1e-12)


def statsmodels_holm(pvalues: np.ndarray) -> np.ndarray:
    """statsmodels' Holm-adjusted p-values. Its ``multipletests`` runs ``gc.collect()`` on every call
    for Holm, a full collection of the test process's heap (seconds per test in a worker that has
    run many test files); with the heap frozen meanwhile, the collection skips it."""
    gc.freeze()
    try:
        return multipletests(pvalues, method="holm")[1]
    finally:
        gc.unfreeze()


# --------------------------------------------------------------------------- agreement


@st.composite
def grade_sheets(draw, max_assessors: int = 6) -> np.ndarray:
    """Items x assessors grades 0-3 (5-300 items, 2-6 assessors), skewed toward some grades, zeros
    common, as graded relevance usually is."""
    items, assessors = draw(st.integers(5, 300)), draw(st.integers(2, max_assessors))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    shares = rng.dirichlet(np.full(len(GRADES), draw(st.sampled_from([0.3, 1.0, 5.0]))))
    truth = rng.choice(GRADES, size=items, p=shares)
    # Each assessor keeps the item's grade or gives another one, as often as the draw says.
    noise = draw(st.floats(0, 1))
    other = rng.choice(GRADES, size=(items, assessors), p=shares)
    return np.where(rng.random((items, assessors)) < noise, other, truth[:, None])


@SETTINGS
@given(grade_sheets(max_assessors=2), st.booleans())
def test_cohen_kappa_equals_scikit_learn(sheet, given_categories):
    a, b = sheet[:, 0].tolist(), sheet[:, 1].tolist()
    categories = GRADES if given_categories else None
    ours = cohen_kappa(a, b, categories)
    if len(set(a) | set(b)) == 1:  # one grade for everything: p_e = 1
        assert math.isnan(ours)
        return
    lib = cohen_kappa_score(a, b, labels=categories)
    assert ours == pytest.approx(lib, abs=1e-12, rel=0)


def test_cohen_kappa_undefined_where_scikit_learn_says_so():
    from sklearn.exceptions import UndefinedMetricWarning

    with pytest.warns(UndefinedMetricWarning):
        assert math.isnan(cohen_kappa_score([2, 2, 2], [2, 2, 2], labels=GRADES))
    assert math.isnan(cohen_kappa([2, 2, 2], [2, 2, 2], GRADES))


@SETTINGS
@given(grade_sheets())
def test_fleiss_kappa_equals_statsmodels(sheet):
    counts = np.stack([np.bincount(row, minlength=len(GRADES)) for row in sheet])
    ours = fleiss_kappa(counts)
    if np.count_nonzero(counts.sum(axis=0)) == 1:  # every label the same grade: p_e = 1
        assert math.isnan(ours)
        return
    assert ours == pytest.approx(statsmodels_fleiss_kappa(counts, method="fleiss"), abs=1e-12, rel=0)


@SETTINGS
@given(grade_sheets(), st.floats(0, 0.7), st.integers(0, 2**32 - 1), st.booleans())
def test_krippendorff_alpha_equals_krippendorff(sheet, missing, seed, given_categories):
    # Missing labels: each one dropped with the drawn probability; items left with fewer than two
    # labels are not pairable (ours leaves them out, the library counts no pairs for them).
    absent = np.random.default_rng(seed).random(sheet.shape) < missing
    units = [
        [int(g) for g, gone in zip(row, gaps, strict=True) if not gone] for row, gaps in zip(sheet, absent, strict=True)
    ]
    categories = GRADES if given_categories else None
    ours = krippendorff_alpha_ordinal(units, categories)
    pairable = [u for u in units if len(u) >= 2]
    if not pairable or len({g for u in pairable for g in u}) < 2:  # nothing to pair, or one grade: undefined
        assert math.isnan(ours)
        return
    reliability = np.where(absent, np.nan, sheet).T  # assessors x items, NaN = missing
    # Only pairable labels enter alpha: drop the lone labels before the library sees its value domain.
    reliability[:, (~np.isnan(reliability)).sum(axis=0) < 2] = np.nan
    lib = krippendorff.alpha(reliability_data=reliability, value_domain=categories, level_of_measurement="ordinal")
    assert ours == pytest.approx(lib, abs=1e-12, rel=0)
