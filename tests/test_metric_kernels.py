"""The compiled passes (rageval.evaluation.kernels), forced on for small runs: the same hashes, repeats
and values as the numpy path and as ir-measures (pytrec_eval), on runs the scan settles and on runs
it hands back (scores out of order, long IDs, long queries, a query in two blocks), ties and repeats
included."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from conftest import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

# The suites again, with the compiled passes on (the module fixture below): pytest collects them here too.
from test_metrics_properties import (  # noqa: F401
    reference_hash,
    test_grouped_and_shuffled_rows_give_identical_values,
    test_native_values_equal_ir_measures_pytrec_eval,
    test_repeated_ids_after_their_first_occurrence_change_nothing_but_the_count,
)
from test_metrics_trec_eval import (  # noqa: F401
    test_binary_suite_per_query_equals_out_test_aq,
    test_graded_suite_per_query_equals_trec_eval_code,
    test_relevance_level_two_per_query_equals_out_test_aql,
)
from test_ordering_fastpaths import (  # noqa: F401
    test_a_repeat_in_an_ordered_run_is_dropped_with_its_input_position,
    test_a_run_already_in_order_keeps_no_position_array_until_asked,
    test_grouped_and_shuffled_rows_give_the_same_values,
)

from rageval.errors import EvaluationError
from rageval.evaluation import ContractOptions, evaluate, kernels
from rageval.evaluation.ids import hash_strings

MEASURES = ["nDCG@10", "nDCG", "R@5", "R@100", "RR", "Success@3", "P@5", "AP", "Rprec", "Judged@10"]


@pytest.fixture(scope="module", autouse=True)
def compiled():
    """The compiled passes for runs of any size (module scope: Hypothesis tests reuse it)."""
    before = kernels.MIN_ROWS
    kernels.MIN_ROWS = 0
    assert kernels.available(1)
    yield
    kernels.MIN_ROWS = before


def numpy_path(*args, **kwargs):
    """``evaluate`` on the numpy path alone."""
    kernels.MIN_ROWS = 10**18
    try:
        return evaluate(*args, **kwargs)
    finally:
        kernels.MIN_ROWS = 0


def scan_status(run: pd.DataFrame, ordered: bool = True) -> int:
    queries, docs = (pa.array(run[c].astype(str).tolist(), type=pa.string()) for c in ("query_id", "doc_id"))
    return kernels.grouped_scan(queries, docs, run["score"].to_numpy(dtype=float) if ordered else None)[0]


def assert_same(run: pd.DataFrame, qrels: dict, **options) -> None:
    """The compiled path's values and diagnostics are the numpy path's and ir-measures'."""
    compiled_ = evaluate(run, qrels, MEASURES, ContractOptions(**options))
    numpy_ = numpy_path(run, qrels, MEASURES, ContractOptions(**options))
    reference = evaluate(run, qrels, MEASURES, ContractOptions(**options), provider="ir_measures")
    pd.testing.assert_frame_equal(compiled_.per_query, numpy_.per_query, check_exact=True)
    pd.testing.assert_frame_equal(compiled_.diagnostics, numpy_.diagnostics, check_exact=True)
    pd.testing.assert_frame_equal(compiled_.per_query, reference.per_query, rtol=0, atol=1e-9)
    assert compiled_.duplicates == numpy_.duplicates
    assert compiled_.skipped == numpy_.skipped and compiled_.missing == numpy_.missing


# Runs as a stage writes them: grouped by query, strictly descending scores, some documents repeated
# further down (with a lower score), some queries judged but not retrieved, some retrieved but unjudged.
ordered_runs = st.lists(
    st.tuples(
        st.sampled_from([f"q{i}" for i in range(6)]),
        st.lists(st.sampled_from([f"d{i}" for i in range(15)] + ["", "é" * 5, "long-" * 20]), min_size=1, max_size=25),
    ),
    min_size=1,
    max_size=6,
    unique_by=lambda pair: pair[0],
)
judgments = st.dictionaries(
    st.sampled_from([f"q{i}" for i in range(8)]),
    st.dictionaries(st.sampled_from([f"d{i}" for i in range(20)] + ["", "é" * 5]), st.integers(0, 3)),
)


def frame(queries: list[tuple[str, list[str]]], tied: bool = False) -> pd.DataFrame:
    """Rows grouped by query, scores descending (``tied``: every two neighbours tie)."""
    rows = [(q, d, float((len(docs) - i) // (2 if tied else 1))) for q, docs in queries for i, d in enumerate(docs)]
    return pd.DataFrame(rows, columns=["query_id", "doc_id", "score"]).astype({"query_id": "str", "doc_id": "str"})


@settings(max_examples=40, deadline=None, derandomize=True)
@given(ordered_runs, judgments, st.sampled_from(["docid-asc", "docid-desc", "input-order"]), st.booleans())
def test_ordered_runs_give_ir_measures_values_on_the_compiled_path(queries, qrels, ties, tied):
    run = frame(queries, tied)
    assert scan_status(run) == kernels.OK  # the scan settles these runs itself
    assert_same(run, qrels, ties=ties)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=40), min_size=1, max_size=30), st.booleans())
def test_the_scan_hashes_each_id_as_hash_strings_does(texts, large):
    # Sliced out of a larger array, so the offsets do not start at 0 and the last ID ends the buffer.
    kind = pa.large_string() if large else pa.string()
    docs = pa.array(["y" * 40, *texts], type=kind).slice(1, len(texts))
    queries = pa.array(["q"] * len(texts), type=pa.string())
    status, scan = kernels.grouped_scan(queries, docs, None)
    assert status == kernels.OK and scan is not None
    assert scan.hashes.tolist() == [reference_hash(t) for t in texts] == hash_strings(docs).tolist()
    assert scan.ranks.tolist() == list(range(1, len(texts) + 1)) and scan.codes.tolist() == [0] * len(texts)


def test_repeats_are_found_and_the_first_occurrence_stays():
    run = frame([("a", ["x", "y", "x", "z", "y", "x"]), ("b", ["x", "w"])])
    assert scan_status(run) == kernels.OK
    assert_same(run, {"a": {"x": 1, "y": 2, "z": 1}, "b": {"w": 1}})
    assert evaluate(run, {"a": {"x": 1}}, ["P@5"]).duplicates == 3
    with pytest.raises(EvaluationError, match=r"3 repeated document\(s\).*a/x"):
        evaluate(run, {"a": {"x": 1}}, ["P@5"], ContractOptions(duplicates="error"))


@pytest.mark.parametrize(
    ("rows", "status"),
    [
        ([("a", "y", 2.0), ("a", "x", 2.0), ("a", "y", 2.0), ("b", "z", 1.0)], kernels.OK),  # ties, reordered
        ([("a", "x", 1.0), ("a", "y", 2.0)], kernels.NOT_IN_ORDER),  # ascending scores
        ([("a", "x", 1.0), ("a", "y" * 300, 0.5)], kernels.LONG_ID),  # hashed another way
    ],
)
def test_runs_the_scan_settles_or_hands_back_get_the_same_values(rows, status):
    run = pd.DataFrame(rows, columns=["query_id", "doc_id", "score"])
    assert scan_status(run) == status
    assert_same(run, {"a": {"x": 1, "y": 2, "y" * 300: 3}, "b": {"z": 1}})


def test_a_query_in_two_blocks_and_a_shuffled_run_get_the_same_values():
    rng = np.random.default_rng(5)
    rows = [(f"q{q}", f"d{d}", float(-i)) for q in range(40) for i, d in enumerate(rng.integers(0, 30, size=20))]
    run = pd.DataFrame(rows, columns=["query_id", "doc_id", "score"])
    qrels = {f"q{q}": {f"d{d}": int(rng.integers(0, 4)) for d in rng.integers(0, 40, size=8)} for q in range(45)}
    split = pd.concat([run.iloc[:10], run.iloc[20:], run.iloc[10:20]], ignore_index=True)  # q0 in two blocks
    assert_same(split, qrels)
    shuffled = run.sample(frac=1.0, random_state=2).reset_index(drop=True)
    assert scan_status(shuffled) in (kernels.NOT_GROUPED, kernels.NOT_IN_ORDER)  # given up within its first rows
    assert_same(shuffled, qrels)


def test_a_query_longer_than_the_first_table_is_rescanned_with_a_larger_one():
    depth = 3 * kernels._WIDTH  # the first table holds queries up to half its slots
    docs = [f"d{i % (depth - 7)}" for i in range(depth)]  # 7 repeats at the end
    run = frame([("long", docs), ("short", ["d1", "d2"])])
    assert_same(run, {"long": {"d5": 1, f"d{depth - 10}": 2, "zz": 1}, "short": {"d2": 1}})
    assert evaluate(run, {"long": {"d5": 1}}, ["P@5"]).duplicates == 7


def test_a_missing_score_is_the_same_error():
    run = pd.DataFrame({"query_id": ["a", "a"], "doc_id": ["x", "y"], "score": [1.0, float("nan")]})
    with pytest.raises(EvaluationError, match="1 missing score"):
        evaluate(run, {"a": {"x": 1}}, ["P@5"])


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT)


def test_a_small_run_does_not_import_numba():
    # numba's import (≈0.2 s) and its compiled passes are for large runs: `rageval run` on a small
    # benchmark does not pay them.
    done = _python(
        "import sys, pandas as pd\n"
        "from rageval.evaluation import evaluate\n"
        "run = pd.DataFrame({'query_id': ['a', 'a'], 'doc_id': ['x', 'y'], 'score': [2.0, 1.0]})\n"
        "print(evaluate(run, {'a': {'y': 1}}, ['RR']).per_query.loc['a', 'RR'], 'numba' in sys.modules)"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0.5", "False"]


def test_without_a_writable_cache_directory_the_passes_compile_in_the_process():
    # numba refuses cache=True when no locator finds a writable directory (a read-only install and
    # home): the kernels then compile without a cache, and give the same values.
    done = _python(
        "import numba.core.caching as caching, pandas as pd\n"
        "caching.CacheImpl._locator_classes = []\n"
        "from rageval.evaluation import evaluate, kernels\n"
        "kernels.MIN_ROWS = 0\n"
        "run = pd.DataFrame({'query_id': ['a'] * 3, 'doc_id': ['x', 'y', 'x'], 'score': [3.0, 2.0, 1.0]})\n"
        "e = evaluate(run, {'a': {'y': 1}}, ['RR'])\n"
        "print(e.per_query.loc['a', 'RR'], e.duplicates, kernels._compiled().grouped_scan._cache.__class__.__name__)"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0.5", "1", "NullCache"]
