"""Properties of the metric contract, checked by Hypothesis on small random runs and graded qrels."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rageval.evaluation import ContractOptions, evaluate

QUERIES = [f"q{i}" for i in range(5)]
DOCS = [f"d{i}" for i in range(12)]
K = 3  # every generated ranking has at least K results
MEASURES = [
    "nDCG@3",
    "nDCG",
    "R@3",
    "R@10",
    "P@3",
    "P@10",
    "RR",
    "RR@3",
    "AP",
    "AP@3",
    "Rprec",
    "Success@1",
    "Judged@3",
]
AT_K = ["nDCG@3", "R@3", "P@3", "RR@3", "AP@3", "Success@1", "Judged@3"]
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Scores from a small set, so ties are common.
rankings = st.dictionaries(
    st.sampled_from(QUERIES),
    st.dictionaries(st.sampled_from(DOCS), st.sampled_from([0.5, 1.0, 1.5, 2.0, 3.0]), min_size=K),
    min_size=1,
)
qrels_strategy = st.dictionaries(
    st.sampled_from(QUERIES),
    st.dictionaries(st.sampled_from(DOCS + ["x1", "x2"]), st.integers(-1, 3), min_size=1),
    min_size=1,
)
options = st.fixed_dictionaries(
    {
        "ties": st.sampled_from(["docid-asc", "docid-desc"]),
        "relevance": st.integers(1, 2),
        "gain": st.sampled_from(["grade", "exp"]),
    }
)


def as_frame(run: dict, order=None) -> pd.DataFrame:
    rows = [(q, d, s) for q in (order or list(run)) for d, s in run[q].items()]
    return pd.DataFrame(rows, columns=["query_id", "doc_id", "score"])


@SETTINGS
@given(rankings, qrels_strategy, options)
def test_every_measure_stays_in_the_unit_interval(run, qrels, chosen):
    evaluation = evaluate(as_frame(run), qrels, MEASURES, ContractOptions(**chosen))
    values = evaluation.per_query.to_numpy()
    assert ((values >= 0) & (values <= 1)).all()
    judged = evaluation.diagnostics.drop(columns=["unjudged@10", "duplicates"]).to_numpy()
    assert ((judged >= 0) & (judged <= 1) | np.isnan(judged)).all()


@SETTINGS
@given(rankings, qrels_strategy, options, st.randoms(use_true_random=False))
def test_row_and_query_order_change_nothing(run, qrels, chosen, rnd):
    first = evaluate(as_frame(run), qrels, MEASURES, ContractOptions(**chosen))
    rows = as_frame(run)
    shuffled = rows.iloc[rnd.sample(range(len(rows)), len(rows))].reset_index(drop=True)
    second = evaluate(shuffled, qrels, MEASURES, ContractOptions(**chosen))
    pd.testing.assert_frame_equal(first.per_query, second.per_query)
    pd.testing.assert_frame_equal(first.diagnostics, second.diagnostics)


@SETTINGS
@given(rankings, qrels_strategy, options, st.integers(1, 4))
def test_appending_irrelevant_results_after_rank_k_changes_no_at_k_measure(run, qrels, chosen, extra):
    before = evaluate(as_frame(run), qrels, MEASURES, ContractOptions(**chosen))
    # Below every score, so after rank K: unjudged documents, and judged ones graded 0 or less.
    longer = {q: dict(docs) for q, docs in run.items()}
    for q, docs in longer.items():
        for i in range(extra):
            docs[f"new{i}"] = -1.0 - i
        for d, g in qrels.get(q, {}).items():
            if g < chosen["relevance"] and g <= 0 and d not in docs:
                docs[d] = -10.0
    after = evaluate(as_frame(longer), qrels, MEASURES, ContractOptions(**chosen))
    pd.testing.assert_frame_equal(before.per_query[AT_K], after.per_query[AT_K])
    # Nothing relevant was added, so the measures without a cutoff stay too.
    pd.testing.assert_frame_equal(before.per_query[["RR", "AP", "Rprec"]], after.per_query[["RR", "AP", "Rprec"]])


@SETTINGS
@given(qrels_strategy, st.sampled_from(["grade", "exp"]), st.integers(1, 5), st.booleans())
def test_a_perfect_ranking_has_ndcg_one(qrels, gain, k, pad):
    # Judged items by grade, best first (equal grades in any order), then unjudged padding.
    rows = []
    for q, docs in qrels.items():
        ordered = sorted(docs.items(), key=lambda item: -item[1])
        rows += [(q, d, float(100 - rank)) for rank, (d, _) in enumerate(ordered)]
        rows += [(q, f"pad{i}", float(-i)) for i in range(3 if pad else 0)]
    evaluation = evaluate(
        pd.DataFrame(rows, columns=["query_id", "doc_id", "score"]),
        qrels,
        [f"nDCG@{k}", "nDCG"],
        ContractOptions(gain=gain),
    )
    assert np.allclose(evaluation.per_query.to_numpy(), 1.0, rtol=0, atol=1e-12)


def rename(run: dict, qrels: dict, mapping: dict) -> tuple[dict, dict]:
    name = lambda d: mapping.get(d, d)  # noqa: E731
    return (
        {q: {name(d): s for d, s in docs.items()} for q, docs in run.items()},
        {q: {name(d): g for d, g in docs.items()} for q, docs in qrels.items()},
    )


@SETTINGS
@given(rankings, qrels_strategy, st.permutations(DOCS), st.sampled_from(["docid-asc", "docid-desc"]))
def test_tie_policies_make_results_independent_of_doc_id_naming(run, qrels, permutation, ties):
    """What naming may change, by policy.

    - input-order: nothing; any renaming leaves every value as it was.
    - docid-asc / docid-desc: names matter only through their order inside groups of equal
      scores. A renaming that keeps their order changes nothing; one that reverses it turns
      docid-asc into docid-desc exactly; any renaming changes nothing on a run without ties.
    """
    base = evaluate(as_frame(run), qrels, MEASURES, ContractOptions(ties=ties))
    # Any renaming, input-order: nothing changes.
    shuffled = dict(zip(DOCS, permutation, strict=True))
    renamed_run, renamed_qrels = rename(run, qrels, shuffled)
    pd.testing.assert_frame_equal(
        evaluate(as_frame(run), qrels, MEASURES, ContractOptions(ties="input-order")).per_query,
        evaluate(as_frame(renamed_run), renamed_qrels, MEASURES, ContractOptions(ties="input-order")).per_query,
    )
    # An order-preserving renaming (the i-th name in byte order → m00i): nothing changes.
    by_name = sorted(DOCS)
    kept_run, kept_qrels = rename(run, qrels, {d: f"m{i:03d}" for i, d in enumerate(by_name)})
    pd.testing.assert_frame_equal(
        base.per_query, evaluate(as_frame(kept_run), kept_qrels, MEASURES, ContractOptions(ties=ties)).per_query
    )
    # An order-reversing renaming: docid-asc becomes docid-desc.
    flipped_run, flipped_qrels = rename(run, qrels, {d: f"m{99 - i:03d}" for i, d in enumerate(by_name)})
    other = "docid-desc" if ties == "docid-asc" else "docid-asc"
    pd.testing.assert_frame_equal(
        base.per_query, evaluate(as_frame(flipped_run), flipped_qrels, MEASURES, ContractOptions(ties=other)).per_query
    )
    # Without ties, any renaming changes nothing.
    untied = {q: {d: float(i) for i, d in enumerate(docs)} for q, docs in run.items()}
    untied_renamed, _ = rename(untied, qrels, shuffled)
    pd.testing.assert_frame_equal(
        evaluate(as_frame(untied), qrels, MEASURES, ContractOptions(ties=ties)).per_query,
        evaluate(as_frame(untied_renamed), renamed_qrels, MEASURES, ContractOptions(ties=ties)).per_query,
    )


@SETTINGS
@given(rankings, qrels_strategy, st.integers(1, 3))
def test_repeated_ids_after_their_first_occurrence_change_nothing_but_the_count(run, qrels, copies):
    clean = evaluate(as_frame(run), qrels, MEASURES)
    rows = as_frame(run)
    repeats = pd.concat([rows.assign(score=rows["score"] - 10.0 * (i + 1)) for i in range(copies)])
    repeated = evaluate(pd.concat([rows, repeats], ignore_index=True), qrels, MEASURES)
    pd.testing.assert_frame_equal(clean.per_query, repeated.per_query)
    assert repeated.duplicates == copies * len(rows) and clean.duplicates == 0


@settings(max_examples=25, deadline=None, derandomize=True)  # a random draw once left pytrec_eval running for 14 min
@given(rankings, qrels_strategy, options, st.sampled_from(["zero", "skip"]), st.sampled_from(["skip", "score"]))
def test_native_values_equal_ir_measures_pytrec_eval(run, qrels, chosen, missing, no_relevant):
    both = {"missing": missing, "no_relevant": no_relevant, **chosen}
    native = evaluate(as_frame(run), qrels, MEASURES, ContractOptions(**both))
    reference = evaluate(as_frame(run), qrels, MEASURES, ContractOptions(**both), provider="ir_measures")
    assert set(native.providers.values()) == {"rageval"}
    pd.testing.assert_frame_equal(native.per_query, reference.per_query, rtol=0, atol=1e-9)
    assert native.skipped == reference.skipped and native.missing == reference.missing


@SETTINGS
@given(rankings, qrels_strategy, options, st.sampled_from(["zero", "skip"]))
def test_scoring_queries_without_relevant_items_only_adds_those_queries(run, qrels, chosen, missing):
    skip = evaluate(as_frame(run), qrels, MEASURES, ContractOptions(missing=missing, no_relevant="skip", **chosen))
    score = evaluate(as_frame(run), qrels, MEASURES, ContractOptions(missing=missing, no_relevant="score", **chosen))
    added = score.per_query.index.difference(skip.per_query.index)
    assert skip.per_query.index.isin(score.per_query.index).all()
    kept = score.per_query.loc[skip.per_query.index]
    pd.testing.assert_frame_equal(kept, skip.per_query, check_index_type=not skip.per_query.empty)
    # What is added: judged queries with nothing at the threshold, in the run (or absent, scored 0 by missing=zero).
    expected = {
        q
        for q, judged in qrels.items()
        if max(judged.values()) < chosen["relevance"] and (q in run or missing == "zero")
    }
    assert set(added) == expected
    binary = [m for m in MEASURES if not m.startswith(("nDCG", "Judged"))]
    assert (score.per_query.loc[added, binary] == 0).all().all()
    assert set(score.skipped) == set(skip.skipped) - set(qrels)  # left: queries the qrels do not name


@pytest.mark.parametrize("policy", ["docid-asc", "docid-desc", "input-order"])
def test_query_without_results_and_empty_run_still_give_one_type(policy):
    empty = pd.DataFrame({"query_id": [], "doc_id": [], "score": []})
    evaluation = evaluate(empty, {"q": {"a": 1}, "r": {}}, MEASURES, ContractOptions(ties=policy))
    assert evaluation.missing == ("q",) and evaluation.skipped == ("r",)
    assert (evaluation.per_query.loc["q"] == 0).all() and evaluation.diagnostics.loc["q", "Judged@10"] == 0


def reference_hash(text: str) -> int:
    """The document hash, one string at a time, in plain Python."""
    data, value = text.encode(), 0
    value = len(data) * 0x9E3779B97F4A7C15 % 2**64
    for chunk in range(0, len(data), 8):
        word = int.from_bytes(data[chunk : chunk + 8].ljust(8, b"\0"), "little")
        value = (value ^ word) * 0x9E3779B97F4A7C15 % 2**64
    return value


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=30), min_size=1, max_size=30), st.booleans(), st.integers(0, 3))
def test_document_hash_is_a_function_of_the_string_alone(texts, large, cut):
    # Whatever the batch (offsets, slicing, the longest neighbour), a string hashes the same: a judged
    # document is never missed because the run and the qrels were hashed in different batches.
    import pyarrow as pa

    from rageval.evaluation.ids import hash_strings

    array = pa.array(["y" * 40, *texts, "z"], type=pa.large_string() if large else pa.string()).slice(1, len(texts))
    assert hash_strings(array).tolist() == [reference_hash(t) for t in texts]
    with pytest.MonkeyPatch.context() as patch:  # hashed in blocks of three rows
        patch.setattr("rageval.evaluation.ids._BLOCK", 3)
        assert hash_strings(array).tolist() == [reference_hash(t) for t in texts]
    assert hash_strings(pa.array(texts[cut:] or [""])).tolist() == [reference_hash(t) for t in texts[cut:] or [""]]


@pytest.mark.parametrize("ties", ["docid-asc", "docid-desc"])
@pytest.mark.parametrize("uniform", [True, False])
def test_grouped_and_shuffled_rows_give_identical_values(ties, uniform):
    # A run as a stage writes it (grouped by query, in score order) and the same rows shuffled take
    # different paths (run-length query groups and a check, or a sort): the values must not differ.
    # Scores from a few values (ties), documents repeated within a query (duplicates), judged
    # documents not retrieved and retrieved documents not judged.
    rng = np.random.default_rng(7)
    rows, qrels, repeated = [], {}, 0
    for q in range(300):
        depth = 60 if uniform else int(rng.integers(1, 120))
        docs = rng.integers(0, 150, size=depth)  # ~20% repeats at depth 60
        repeated += depth - len(np.unique(docs))
        scores = rng.integers(0, 8, size=depth) / 2.0
        rows += [(f"q{q}", f"d{d}", s) for d, s in zip(docs, scores, strict=True)]
        judged = rng.choice(200, size=int(rng.integers(0, 25)), replace=False)
        qrels[f"q{q}"] = {f"d{d}": int(rng.integers(0, 4)) for d in judged}
    run = pd.DataFrame(rows, columns=["query_id", "doc_id", "score"]).astype({"query_id": "str", "doc_id": "str"})
    grouped = run.sort_values(["query_id", "score"], ascending=[True, False], kind="stable").reset_index(drop=True)
    shuffled = run.sample(frac=1.0, random_state=3).reset_index(drop=True)
    measures = ["nDCG@10", "nDCG", "R@100", "RR", "Success@10", "P@5", "AP", "Rprec", "Judged@10"]
    results = [evaluate(frame, qrels, measures, ContractOptions(ties=ties)) for frame in (grouped, shuffled)]
    first, second = results
    assert first.duplicates == second.duplicates == repeated > 0
    pd.testing.assert_frame_equal(first.per_query, second.per_query, check_exact=True)
    pd.testing.assert_frame_equal(first.diagnostics, second.diagnostics, check_exact=True)
    assert first.evaluated > 250 and 0 < first.aggregates["nDCG@10"] < 1
    assert (first.diagnostics["tie_rate@10"].dropna() > 0).any()  # the ties were there
