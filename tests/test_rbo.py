"""Rank-biased overlap (Webber, Moffat and Zobel 2010), Jaccard@k and the top-1 change: values worked
out by hand, the paper's bounds against brute-force completions of the rankings, golden values of
the ``rbo`` package, and the refusals."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.analysis.rbo import jaccard_at, overlaps, rank_biased_overlap, top1_changed
from rageval.errors import EvaluationError


def truncated(first: list[str], second: list[str], p: float) -> float:
    """(1 - p) * sum of p^(d-1) * A_d to the depth of the longer list, both lists read as given:
    the definition of RBO, on lists completed far enough that the rest is negligible."""
    depth = max(len(first), len(second))
    total, a, b = 0.0, set(), set()
    for d in range(1, depth + 1):
        if d <= len(first):
            a.add(first[d - 1])
        if d <= len(second):
            b.add(second[d - 1])
        total += (1 - p) * p ** (d - 1) * len(a & b) / d
    return total


def worst(first: list[str], second: list[str], depth: int) -> tuple[list[str], list[str]]:
    """Both lists continued with items nobody else has: the least agreement the prefixes allow."""
    return (
        first + [f"x{i}" for i in range(depth - len(first))],
        second + [f"y{i}" for i in range(depth - len(second))],
    )


def best(first: list[str], second: list[str], depth: int) -> tuple[list[str], list[str]]:
    """Each list continued with the other's items it lacks, in the other's order, then the same new
    items in the same order: every unseen item agrees as early as it can."""
    a = first + [x for x in second if x not in first]
    b = second + [x for x in first if x not in second]
    return a + [f"n{i}" for i in range(depth - len(a))], b + [f"n{i}" for i in range(depth - len(b))]


# --------------------------------------------------------------------------- by hand


def test_even_lists_by_hand():
    # S = a b c, L = a c d, p = 0.5. Overlaps X_1..3 = 1, 1, 2; agreements A_d = X_d / d = 1, 1/2, 2/3.
    # ext (eq. 32, s = l = 3): (1-p)/p * sum X_d/d p^d + X_3/3 p^3
    #   = 1 * (1*0.5 + 0.5*0.25 + (2/3)*0.125) + (2/3)*0.125 = 0.5 + 0.125 + 1/12 + 1/12 = 19/24
    # min (eq. 11): (1-p)/p * (sum (X_d - X_3) p^d/d + X_3 ln(1/(1-p))) = -0.5 - 0.125 + 2 ln 2
    # max: the seen part (1-p) * sum p^(d-1) A_d = 0.5 * (1 + 0.25 + 1/6) = 17/24, and from depth
    #   f = 3 + 3 - 2 = 4 on both lists can agree fully: + p^3 = 1/8, so max = 20/24 = 5/6
    found = rank_biased_overlap(list("abc"), list("acd"), p=0.5)
    assert found.ext == pytest.approx(19 / 24, abs=1e-15)
    assert found.min == pytest.approx(2 * math.log(2) - 0.625, abs=1e-15)
    assert found.max == pytest.approx(5 / 6, abs=1e-15)
    assert found.res == pytest.approx(5 / 6 - (2 * math.log(2) - 0.625), abs=1e-15)
    assert (found.p, found.short, found.long) == (0.5, 3, 3)


def test_uneven_lists_by_hand():
    # S = a b (s = 2), L = b c a d (l = 4), p = 0.5. X_d counts S's seen items in L's top d:
    # X_1..4 = 0, 1, 2, 2; X_s = X_2 = 1, X_l = 2.
    # ext (eq. 32): (1-p)/p * (sum_{d<=4} X_d/d p^d + sum_{d=3..4} X_s (d-s)/(s d) p^d) + ((X_l-X_s)/l + X_s/s) p^l
    #   first sum 0 + 1/8 + 1/12 + 1/32, second 1/48 + 1/64, last (1/4 + 1/2) / 16 = 3/64
    #   = (24 + 16 + 6 + 4 + 3 + 9) / 192 = 62/192 = 31/96
    # min (eq. 11 to depth l): (0-2)*0.5 + (1-2)*0.125 + 0 + 0 + 2 ln 2 = 2 ln 2 - 9/8
    # max: A_1 = 0, A_2 = 1/2; at d = 3, 4 S's unseen items can be L's c and d: (X_d + d - s)/d = 1;
    #   f = 4 + 2 - 2 = 4, so all agree after: 0.5 * (0 + 0.5*0.5) + p^2 = 1/8 + 1/4 = 3/8
    found = rank_biased_overlap(list("ab"), list("bcad"), p=0.5)
    assert found.ext == pytest.approx(31 / 96, abs=1e-15)
    assert found.min == pytest.approx(2 * math.log(2) - 9 / 8, abs=1e-15)
    assert found.max == pytest.approx(3 / 8, abs=1e-15)
    assert (found.short, found.long) == (2, 4)
    assert (
        rank_biased_overlap(list("bcad"), list("ab"), p=0.5) == found
    )  # symmetric: the shorter list is found either way
    assert overlaps(list("ab"), list("bcad")).tolist() == [0, 1, 2, 2]


def test_identical_and_disjoint():
    same = rank_biased_overlap(list("abcdefg"), list("abcdefg"), p=0.9)
    assert same.ext == pytest.approx(1.0, abs=1e-12) and same.max == pytest.approx(1.0, abs=1e-12)
    # identical lists of 7 at p = 0.9: min is the seen part, (1-p) * sum_{d<=7} p^(d-1) = 1 - p^7, and
    # X_7 = 7 for ever after: (1-p)/p * 7 * sum_{d>7} p^d/d = (1/9) * 7 * (ln 10 - sum_{d<=7} 0.9^d/d); 0.767
    tail = 7 / 9 * (math.log(10) - sum(0.9**d / d for d in range(1, 8)))
    assert same.min == pytest.approx(1 - 0.9**7 + tail, abs=1e-14) and round(same.min, 3) == 0.767
    assert isinstance(same.min, float) and isinstance(same.ext, float)
    apart = rank_biased_overlap(list("abc"), list("xyzw"), p=0.8)
    assert apart.min == 0 and apart.ext == 0 and 0 < apart.res <= 1


def test_jaccard_and_top1_by_hand():
    # top 2: {a, b} and {a, c} share a of {a, b, c}: 1/3; top 3: {a, b, c} and {a, c, d} share 2 of 4
    assert jaccard_at(list("abc"), list("acd"), 2) == pytest.approx(1 / 3)
    assert jaccard_at(list("abc"), list("acd"), 3) == 0.5
    assert jaccard_at(list("ab"), list("bcad"), 10) == 0.5  # all of both: {a, b} within {a, b, c, d}
    assert jaccard_at(list("abc"), list("xyz"), 3) == 0
    assert not top1_changed(list("abc"), list("acd")) and top1_changed(list("ab"), list("bcad"))


# --------------------------------------------------------------------------- the paper's bounds


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(0, 14), min_size=1, max_size=9, unique=True),
    st.lists(st.integers(0, 14), min_size=1, max_size=12, unique=True),
    st.sampled_from([0.5, 0.8, 0.9]),
)
def test_min_and_max_are_the_worst_and_best_completions_and_ext_lies_between(a, b, p):
    first, second = [f"d{i}" for i in a], [f"d{i}" for i in b]
    found = rank_biased_overlap(first, second, p)
    # p <= 0.9 to depth 400: what is left of the infinite sum is below 0.9^400 < 1e-18
    assert truncated(*worst(first, second, 400), p) == pytest.approx(found.min, abs=1e-12)
    assert truncated(*best(first, second, 400), p) == pytest.approx(found.max, abs=1e-12)
    assert found.min - 1e-12 <= found.ext <= found.max + 1e-12
    assert 0 <= found.min and found.max <= 1 + 1e-12


# --------------------------------------------------------------------------- the rbo package


@pytest.mark.parametrize(
    ("first", "second", "p", "expected"),
    [
        # RankingSimilarity(S, L).rbo_ext(p) of the PyPI package rbo 0.1.3 (eq. 32), run in its own venv
        (list("abcdefghij"), list("bacdefhgji"), 0.9, 0.8876250167142858),
        (list("abcde"), list("bcafghij"), 0.9, 0.574335),
        (
            [f"d{i}" for i in range(20)],
            [f"d{i}" for i in (1, 0, 3, 2, 25, 5, 4, 26, 8, 9, 7, 6)],
            0.98,
            0.8164806264674267,
        ),
    ],
)
def test_ext_agrees_with_the_rbo_package(first, second, p, expected):
    assert rank_biased_overlap(first, second, p).ext == pytest.approx(expected, abs=1e-14)


def test_a_longer_prefix_narrows_the_bounds():
    rng = random.Random(3)
    items = [f"d{i}" for i in range(40)]
    first, second = rng.sample(items, 30), rng.sample(items, 30)
    widths = [rank_biased_overlap(first[:k], second[:k], 0.9).res for k in (5, 10, 20, 30)]
    assert widths == sorted(widths, reverse=True) and widths[-1] < 0.05


# --------------------------------------------------------------------------- refusals


def test_duplicates_and_empty_rankings_are_refused():
    with pytest.raises(EvaluationError, match="the second ranking holds 'b' at ranks 1 and 3"):
        rank_biased_overlap(list("abc"), ["b", "c", "b"])
    with pytest.raises(EvaluationError, match="the first ranking is empty"):
        rank_biased_overlap([], list("abc"))
    with pytest.raises(EvaluationError, match="holds 'a' at ranks 1 and 2"):
        jaccard_at(["a", "a"], ["a"], 1)
    with pytest.raises(EvaluationError, match="empty"):
        top1_changed(["a"], [])
    with pytest.raises(ValueError, match=r"persistence p must lie in \(0, 1\)"):
        rank_biased_overlap(list("ab"), list("ab"), p=1.0)
    with pytest.raises(ValueError, match="k must be at least 1"):
        jaccard_at(list("ab"), list("ab"), 0)
