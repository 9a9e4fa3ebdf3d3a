"""Agreement coefficients against hand arithmetic and published worked examples."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from rageval.evaluation.agreement import agreement, cohen_kappa, fleiss_kappa, krippendorff_alpha_ordinal

# Two assessors, ten items, grades 0-3. They agree on items 1, 3, 4, 5, 7, 8, 10.
ALICE = [3, 2, 0, 1, 0, 3, 2, 1, 0, 0]
BOB = [3, 1, 0, 1, 0, 2, 2, 1, 1, 0]

# Cohen's kappa, by hand:
#   p_o = 7/10 = 0.7
#   alice's grades: 0 x4, 1 x2, 2 x2, 3 x2;  bob's: 0 x3, 1 x4, 2 x2, 3 x1
#   p_e = (4*3 + 2*4 + 2*2 + 2*1) / 10^2 = 26/100 = 0.26
#   kappa = (0.7 - 0.26) / (1 - 0.26) = 0.44 / 0.74 = 22/37
COHEN = 22 / 37  # 0.594595

# Fleiss' kappa (2 labels per item), by hand:
#   P_i = (sum_j n_ij^2 - 2) / (2*1): 1 on the 7 agreed items, (1+1-2)/2 = 0 on the 3 others
#   P_bar = 7/10 = 0.7
#   pooled shares over 20 labels: grade 0: 7/20, 1: 6/20, 2: 4/20, 3: 3/20
#   P_e = 0.35^2 + 0.3^2 + 0.2^2 + 0.15^2 = 0.1225 + 0.09 + 0.04 + 0.0225 = 0.275
#   kappa = (0.7 - 0.275) / (1 - 0.275) = 0.425 / 0.725 = 17/29
FLEISS = 17 / 29  # 0.586207

# Krippendorff's alpha, ordinal, by hand:
#   coincidences (each item adds both ordered pairs): o00 = 6, o11 = 4, o22 = 2, o33 = 2,
#   o01 = o10 = 1 (item 9), o12 = o21 = 1 (item 2), o23 = o32 = 1 (item 6)
#   n_0 = 7, n_1 = 6, n_2 = 4, n_3 = 3, n = 20
#   delta_ck = (sum_{g=c..k} n_g - (n_c + n_k)/2)^2:
#     d01 = (13 - 6.5)^2 = 42.25   d02 = (17 - 5.5)^2 = 132.25   d03 = (20 - 5)^2 = 225
#     d12 = (10 - 5)^2 = 25        d13 = (13 - 4.5)^2 = 72.25    d23 = (7 - 3.5)^2 = 12.25
#   observed: sum o_ck d_ck = 2 * (42.25 + 25 + 12.25) = 159
#   expected: sum n_c n_k d_ck = 2 * (42*42.25 + 28*132.25 + 21*225 + 24*25 + 18*72.25 + 12*12.25)
#           = 2 * (1774.5 + 3703 + 4725 + 600 + 1300.5 + 147) = 2 * 12250 = 24500
#   alpha = 1 - (n - 1) * 159 / 24500 = 1 - 19 * 159 / 24500 = 1 - 3021/24500 = 21479/24500
ALPHA = 21479 / 24500  # 0.876694


def test_hand_computed_small_sheet():
    assert cohen_kappa(ALICE, BOB, [0, 1, 2, 3]) == pytest.approx(COHEN, abs=1e-12)
    counts = [np.bincount([a, b], minlength=4) for a, b in zip(ALICE, BOB, strict=True)]
    assert fleiss_kappa(counts) == pytest.approx(FLEISS, abs=1e-12)
    assert krippendorff_alpha_ordinal(list(zip(ALICE, BOB, strict=True)), [0, 1, 2, 3]) == pytest.approx(
        ALPHA, abs=1e-12
    )


def test_krippendorff_published_example():
    # Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: 4 observers,
    # 12 units, values 1-5, missing data; published ordinal alpha 0.815.
    observers = [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
        [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
    ]
    units = [[row[u] for row in observers if row[u] is not None] for u in range(12)]
    assert round(krippendorff_alpha_ordinal(units), 3) == 0.815


def test_fleiss_and_cohen_published_examples():
    # Fleiss' kappa, Wikipedia's worked example: 10 subjects, 14 raters, 5 categories -> 0.210.
    table = [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
    assert round(fleiss_kappa(table), 3) == 0.210
    # Cohen's kappa, Wikipedia's example: yes/yes 20, yes/no 5, no/yes 10, no/no 15:
    # p_o = 35/50 = 0.7, p_e = 0.5*0.6 + 0.5*0.4 = 0.5, kappa = 0.2 / 0.5 = 0.4.
    a = [1] * 25 + [0] * 25
    b = [1] * 20 + [0] * 5 + [1] * 10 + [0] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)


def test_undefined_coefficients_are_nan_and_bad_input_fails():
    assert math.isnan(cohen_kappa([2, 2], [2, 2]))  # p_e = 1
    assert math.isnan(krippendorff_alpha_ordinal([[1], [2]]))  # nothing pairable
    # one grade among the pairable labels (a lone label does not count): no disagreement is expected
    assert math.isnan(krippendorff_alpha_ordinal([[2, 2], [2, 2, 2], [3]], [0, 1, 2, 3]))
    assert math.isnan(krippendorff_alpha_ordinal([[2, 2], [2, 2, 2], [3]]))
    assert math.isnan(fleiss_kappa([[2, 0], [2, 0]]))
    with pytest.raises(ValueError, match="same number"):
        fleiss_kappa([[2, 0], [1, 0]])
    with pytest.raises(ValueError, match="not among the categories"):
        cohen_kappa([4], [1], [0, 1, 2, 3])


def test_report_overall_per_slice_and_disagreements():
    items = [f"i{n}" for n in range(10)]
    rows = [
        (item, f"q{n // 2}", who, grade)
        for who, grades in (("alice", ALICE), ("bob", BOB))
        for n, (item, grade) in enumerate(zip(items, grades, strict=True))
    ]
    # carol labels only i0 and i1: alpha uses every item labelled twice; Fleiss only items all three labelled.
    rows += [("i0", "q0", "carol", 3), ("i1", "q0", "carol", 2)]
    labels = pd.DataFrame(rows, columns=["item_id", "query_id", "assessor", "grade"])
    slices = {item: (["short"] if n < 4 else []) for n, item in enumerate(items)}
    report = agreement(labels, slices, [0, 1, 2, 3])

    pairs = report.pairs.set_index(["scope", "assessor_a", "assessor_b"])
    assert pairs.loc[("all", "alice", "bob"), "items"] == 10
    assert pairs.loc[("all", "alice", "bob"), "cohen_kappa"] == pytest.approx(COHEN)
    assert pairs.loc[("all", "alice", "carol"), "items"] == 2
    overall = report.summary.loc["all"]
    assert (overall["items"], overall["assessors"], overall["labels"], overall["fleiss_items"]) == (10, 3, 22, 2)
    # Fleiss over i0 (3,3,3) and i1 (2,1,2): P_i = 1 and (4+1+4-3)/6 = 1/3, P_bar = 2/3;
    # shares: grade 3: 3/6, 2: 2/6, 1: 1/6 -> P_e = (9+4+1)/36 = 14/36; kappa = (24/36 - 14/36) / (22/36) = 10/22
    assert overall["fleiss_kappa"] == pytest.approx(10 / 22)
    # Slice "short" = items i0-i3: alice 3,2,0,1 / bob 3,1,0,1 (+ carol on i0, i1).
    # Cohen alice~bob: p_o = 3/4; alice 0,1,2,3 x1 each, bob 0 x1, 1 x2, 3 x1: p_e = (1+2+0+1)/16 = 1/4;
    # kappa = (3/4 - 1/4) / (3/4) = 2/3
    assert pairs.loc[("short", "alice", "bob"), "cohen_kappa"] == pytest.approx(2 / 3)
    assert report.summary.loc["short", "items"] == 4

    disagreements = report.disagreements
    assert sorted(disagreements.index) == ["i1", "i5", "i8"]
    assert disagreements.loc["i1", "carol"] == 2 and disagreements.loc["i1", "spread"] == 1
    assert disagreements.loc["i5", "query_id"] == "q2" and disagreements.loc["i1", "slice"] == "short"
