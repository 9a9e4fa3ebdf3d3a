"""The metric contract: tie and duplicate policies, skipped and missing queries, names, properties."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.errors import EvaluationError, MeasureError
from rageval.evaluation import ContractOptions, evaluate, measure_from_key, metric_key, parse_measure, parse_measures


def frame(rows):
    return pd.DataFrame(rows, columns=["query_id", "doc_id", "score"])


TIED = frame([("q", "a", 1.0), ("q", "b", 1.0)])  # a tie between a relevant and a non-relevant doc


def test_ties_are_broken_by_the_chosen_policy_not_by_doc_names():
    qrels = {"q": {"a": 1}}
    assert evaluate(TIED, qrels, ["RR"], ContractOptions(ties="docid-asc")).per_query.loc["q", "RR"] == 1.0
    assert evaluate(TIED, qrels, ["RR"], ContractOptions(ties="docid-desc")).per_query.loc["q", "RR"] == 0.5
    reordered = frame([("q", "b", 1.0), ("q", "a", 1.0)])
    assert evaluate(reordered, qrels, ["RR"], ContractOptions(ties="input-order")).per_query.loc["q", "RR"] == 0.5
    assert evaluate(TIED, qrels, ["RR"]).policy["ties"] == "docid-asc"


def test_input_order_follows_a_rank_column():
    run = pd.DataFrame({"query_id": ["q", "q"], "doc_id": ["a", "b"], "score": [0.0, 0.0], "rank": [2, 1]})
    assert evaluate(run, {"q": {"a": 1}}, ["RR"], ContractOptions(ties="input-order")).per_query.loc["q", "RR"] == 0.5


def test_duplicate_documents_keep_their_first_occurrence_by_default_or_are_an_error():
    run = frame([("q", "x", 3.0), ("q", "a", 2.0), ("q", "x", 1.0)])
    kept = evaluate(run, {"q": {"a": 1}}, ["RR", "P@3"])
    assert kept.per_query.loc["q", "RR"] == 0.5
    assert kept.per_query.loc["q", "P@3"] == pytest.approx(1 / 3)
    assert kept.duplicates == 1 and kept.policy["duplicates"] == "keep-first"
    with pytest.raises(EvaluationError, match="q/x"):
        evaluate(run, {"q": {"a": 1}}, ["RR"], ContractOptions(duplicates="error"))


def test_query_without_relevant_item_yields_no_value_and_is_counted():
    run = frame([("q1", "a", 1.0), ("q2", "a", 1.0), ("q3", "z", 1.0)])
    qrels = {"q1": {"a": 2}, "q2": {"a": 0}, "q4": {}}
    evaluation = evaluate(run, qrels, ["nDCG@10", "RR"])
    assert list(evaluation.per_query.index) == ["q1"]
    assert evaluation.skipped == ("q2", "q3", "q4")
    assert evaluation.aggregates["RR"] == 1.0


def test_judged_query_absent_from_run_scores_zero_or_is_left_out():
    run = frame([("q1", "a", 1.0)])
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}}
    zero = evaluate(run, qrels, ["RR"], ContractOptions(missing="zero"))
    assert zero.per_query["RR"].to_dict() == {"q1": 1.0, "q2": 0.0} and zero.missing == ("q2",)
    skip = evaluate(run, qrels, ["RR"], ContractOptions(missing="skip"))
    assert skip.per_query["RR"].to_dict() == {"q1": 1.0} and skip.missing == ("q2",)


def test_graded_ndcg_uses_grades_as_gains():
    run = frame([("q", "b", 2.0), ("q", "a", 1.0)])
    value = evaluate(run, {"q": {"a": 3, "b": 1}}, ["nDCG@2"]).per_query.loc["q", "nDCG@2"]
    ideal = 3 + 1 / math.log2(3)
    assert value == pytest.approx((1 + 3 / math.log2(3)) / ideal, abs=1e-4)


def test_always_returns_one_type_even_when_nothing_is_evaluable():
    evaluation = evaluate(frame([]), {"q": {}}, ["RR", "nDCG@10"])
    assert evaluation.per_query.empty and list(evaluation.per_query.columns) == ["RR", "nDCG@10"]
    assert evaluation.aggregates.isna().all() and evaluation.skipped == ("q",)


def test_measure_strings_parse_once_and_keep_user_text():
    assert parse_measure("Hit@5").definition == "Success@5"
    assert parse_measure("MRR").definition == "RR"
    assert parse_measure("MRR@10").definition == "RR@10"
    assert parse_measure("nDCG@10").text == "nDCG@10"
    assert parse_measure("R(rel=2)@10").definition == "R(rel=2)@10"
    with pytest.raises(MeasureError, match="nDCGx@3"):
        parse_measure("nDCGx@3")
    with pytest.raises(MeasureError, match="repeats"):
        parse_measures(["Hit@5", "Success@5"])


def test_metric_keys_are_mlflow_safe():
    assert metric_key("nDCG@10") == "nDCG_at_10"
    assert metric_key("R(rel=2)@10") == "R_of_rel_eq_2_end_at_10"
    assert measure_from_key("nDCG_at_10") == "nDCG@10"


@given(st.text(min_size=1, max_size=30))
def test_metric_key_round_trips_any_string(text):
    key = metric_key(text)
    assert all(c.isascii() and (c.isalnum() or c in "_-. :") for c in key)
    assert measure_from_key(key) == text


def test_metric_keys_read_well():
    # Only characters MLflow refuses are rewritten, as words; no hex escapes for the usual texts.
    assert metric_key("critical_slices.max_loss") == "critical_slices.max_loss"
    assert metric_key("demo/k1=1.2,b=0.75@dev") == "demo_per_k1_eq_1.2_and_b_eq_0.75_at_dev"
    assert metric_key("long tail") == "long tail"
    # A literal '_' that would read as a word is written as its code point, so reading back is exact.
    assert metric_key("x_at_y") == "x_u005f_at_y" and measure_from_key("x_u005f_at_y") == "x_at_y"


runs = st.dictionaries(
    st.sampled_from([f"q{i}" for i in range(6)]),
    st.dictionaries(st.sampled_from([f"d{i}" for i in range(12)]), st.floats(0, 10, allow_nan=False), min_size=1),
    min_size=1,
)
qrels_strategy = st.dictionaries(
    st.sampled_from([f"q{i}" for i in range(6)]),
    st.dictionaries(st.sampled_from([f"d{i}" for i in range(12)]), st.integers(0, 3), min_size=1),
    min_size=1,
)
MEASURES = ["nDCG@5", "R@10", "P@5", "RR", "AP", "Hit@3"]


def as_frame(run, order):
    rows = [(q, d, s) for q in order for d, s in run.get(q, {}).items()]
    return frame(rows)


@settings(max_examples=60, deadline=None)
@given(runs, qrels_strategy, st.randoms(use_true_random=False))
def test_values_stay_in_unit_interval_and_query_order_changes_nothing(run, qrels, rnd):
    queries = list(run)
    first = evaluate(as_frame(run, queries), qrels, MEASURES)
    rnd.shuffle(queries)
    second = evaluate(as_frame(run, queries), qrels, MEASURES)
    pd.testing.assert_frame_equal(first.per_query, second.per_query)
    assert ((first.per_query >= 0) & (first.per_query <= 1)).all().all()
    answerable = {q for q, docs in qrels.items() if any(g > 0 for g in docs.values())}
    assert set(first.per_query.index) == answerable


# --------------------------------------------------------------------------- the native engine's registry

GRADED_RUN = frame([("q", d, s) for d, s in zip("abcdef", (6.0, 5.0, 4.0, 3.0, 2.0, 1.0), strict=True)])
GRADED_QRELS = {"q": {"a": 0, "b": 2, "d": 1, "f": 3, "z": 2}}


def test_the_registry_holds_the_native_families():
    from rageval.evaluation.native import NATIVE_MEASURES

    assert set(NATIVE_MEASURES) == {"P", "R", "Success", "RR", "AP", "Rprec", "nDCG", "Judged"}
    assert {name for name, native in NATIVE_MEASURES.items() if native.needs_cutoff} == {"P", "R", "Success"}


@pytest.mark.parametrize(
    "text,native",
    [
        ("P@5", True),
        ("P", False),  # P, R and Success need a cutoff here
        ("Hit@3", True),
        ("RR", True),
        ("RR@10", True),
        ("AP(rel=2)@10", True),
        ("Rprec", True),
        ("nDCG", True),
        ("nDCG(dcg='log2')@10", True),  # a parameter at its default
        ("nDCG(dcg='exp-log2')@10", False),
        ("nDCG(gains={0:0,1:1,2:3,3:7})@10", False),
        ("P(judged_only=True)@5", False),
        ("Judged@10", True),
        ("Bpref", False),
    ],
)
def test_native_support_is_read_from_the_registry(text, native):
    from rageval.evaluation.native import supports

    assert supports(parse_measure(text).measure) is native


def test_registering_a_measure_is_one_entry(monkeypatch):
    from rageval.evaluation import native

    def set_precision(ctx, cutoff, threshold):  # relevant retrieved / retrieved
        return native.divide(ctx.count(ctx.grade >= threshold), ctx.lengths)

    measures = ["SetP", "SetP(rel=2)", "SetP(relative=True)"]
    bridged = evaluate(GRADED_RUN, GRADED_QRELS, measures)
    assert set(bridged.providers.values()) == {"ir_measures:pytrec_eval"}
    monkeypatch.setitem(native.NATIVE_MEASURES, "SetP", native.NativeMeasure(set_precision, frozenset({"rel"})))
    registered = evaluate(GRADED_RUN, GRADED_QRELS, measures)
    # relative= is not a parameter the entry takes: that form stays with ir-measures.
    assert registered.providers == {
        "SetP": "rageval",
        "SetP(rel=2)": "rageval",
        "SetP(relative=True)": "ir_measures:pytrec_eval",
    }
    assert registered.per_query.loc["q"].to_dict() == {"SetP": 3 / 6, "SetP(rel=2)": 2 / 6, "SetP(relative=True)": 0.75}
    pd.testing.assert_frame_equal(registered.per_query, bridged.per_query)
