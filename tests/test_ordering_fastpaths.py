"""The decided order's fast paths (rows already grouped, k rows per query) give the general path's answer."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rageval.errors import EvaluationError
from rageval.evaluation import evaluate
from rageval.evaluation.ordering import rank_run, ranks


def _run(rows: list[tuple[str, str, float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["query_id", "doc_id", "score"])


def test_a_run_already_in_order_keeps_no_position_array_until_asked():
    ranked = rank_run(
        _run([("q1", "a", 3.0), ("q1", "b", 2.0), ("q2", "c", 5.0), ("q2", "d", 1.0)]), "docid-asc", "keep-first"
    )
    assert ranked.order is None
    assert ranked.row.tolist() == [0, 1, 2, 3]
    assert ranked.rows(np.array([3, 1])).tolist() == [3, 1]
    assert ranked.doc_ids(np.array([2])).tolist() == ["c"]
    assert ranked.rank.tolist() == [1, 2, 1, 2]


def test_a_repeat_in_an_ordered_run_is_dropped_with_its_input_position():
    run = _run([("q1", "a", 3.0), ("q1", "b", 2.0), ("q1", "a", 1.0), ("q2", "c", 5.0), ("q2", "d", 1.0)])
    ranked = rank_run(run, "docid-asc", "keep-first")
    assert ranked.row.tolist() == [0, 1, 3, 4]
    assert ranked.doc_ids().tolist() == ["a", "b", "c", "d"]
    assert ranked.rank.tolist() == [1, 2, 1, 2] and ranked.dropped.tolist() == [1, 0]
    with pytest.raises(EvaluationError, match=r"1 repeated document\(s\) .*\(e\.g\. q1/a\)"):
        rank_run(run, "docid-asc", "error")


def test_ranks_of_equal_and_unequal_query_lengths():
    assert ranks(np.array([0, 0, 0, 1, 1, 1]), np.array([3, 3])).tolist() == [1, 2, 3, 1, 2, 3]
    assert ranks(np.array([0, 0, 1, 2, 2, 2]), np.array([2, 1, 3])).tolist() == [1, 2, 1, 1, 2, 3]
    assert ranks(np.array([0, 0, 2, 2]), np.array([2, 0, 2])).tolist() == [1, 2, 1, 2]


def test_grouped_and_shuffled_rows_give_the_same_values():
    rng = np.random.default_rng(7)
    rows = [(f"q{q}", f"d{rng.integers(0, 40)}", float(rng.integers(0, 5))) for q in range(30) for _ in range(25)]
    grouped = _run(rows)
    shuffled = grouped.sample(frac=1.0, random_state=3).reset_index(drop=True)
    qrels = {f"q{q}": {f"d{d}": int(rng.integers(0, 3)) for d in rng.choice(40, 6, replace=False)} for q in range(30)}
    measures = ["nDCG@10", "R@100", "RR", "P@5", "AP"]
    a, b = evaluate(grouped, qrels, measures), evaluate(shuffled, qrels, measures)
    pd.testing.assert_frame_equal(a.per_query, b.per_query)
    assert a.duplicates == b.duplicates > 0  # repeats are dropped the same way on both paths
    assert a.per_query["nDCG@10"].between(0, 1).all() and a.per_query["nDCG@10"].gt(0).any()
