"""The metric contract: its record and comparison, the docs page, and each edge case with hand-computed values."""

from __future__ import annotations

import math
from pathlib import Path
from typing import get_args

import numpy as np
import pandas as pd
import pytest

import rageval.evaluation.ordering as ordering
import rageval.evaluation.qrels as qrels_module
from rageval.errors import ComparisonError, EvaluationError
from rageval.evaluation import (
    CONTRACT,
    CONTRACT_DIGEST,
    DUPLICATE_POLICIES,
    GAINS,
    MISSING_POLICIES,
    NO_RELEVANT_POLICIES,
    RULES,
    TIE_POLICIES,
    ContractOptions,
    DuplicatePolicy,
    Gain,
    MissingPolicy,
    NoRelevantPolicy,
    TiePolicy,
    abstention,
    contract_differences,
    contract_record,
    evaluate,
    order_ranking,
    require_same_contract,
    rollup_to_parent,
    top_scores,
)

DOCS = Path(__file__).resolve().parents[1] / "docs" / "metric-contract.md"
# Every version's digest: changing a rule's text without a new version fails here.
PINNED = {
    "rageval-metrics/2": "f20f6f767f136c6b0b63e27af1928945e53f90b7ab0b0289393760d8fcee1c30",
    "rageval-metrics/3": "ecedb7ff96e65d8f772ad457442ac6eed862efdff1e03c3f7c15bec7176ba42c",  # + no_relevant choices
    # + passages graded on judged spans, evidence in the context
    "rageval-metrics/4": "f0e4477f52a5abcf7d1256ec1f70ff5777ef872f4bb6f19be4b855535483b795",
}


def frame(rows, query="q"):
    rows = [(query, *row) if len(row) == 2 else row for row in rows]
    return pd.DataFrame(rows, columns=["query_id", "doc_id", "score"])


def value(run, qrels, measure, **options):
    return evaluate(
        run, {"q": qrels} if "q" not in qrels else qrels, [measure], ContractOptions(**options)
    ).per_query.loc["q", measure]


# --------------------------------------------------------------------------- the contract itself


def test_rules_cannot_change_without_a_new_version():
    assert CONTRACT == "rageval-metrics/4"
    assert PINNED[CONTRACT] == CONTRACT_DIGEST


def test_each_choice_list_is_written_once_as_a_literal():
    # The Literal (pydantic models, signatures), the tuple (messages, CLI) and the rule's choices (docs, digest).
    for literal, choices, rule in [
        (TiePolicy, TIE_POLICIES, "ties"),
        (DuplicatePolicy, DUPLICATE_POLICIES, "duplicates"),
        (MissingPolicy, MISSING_POLICIES, "missing"),
        (NoRelevantPolicy, NO_RELEVANT_POLICIES, "no_relevant"),
        (Gain, GAINS, "gain"),
    ]:
        assert get_args(literal) == choices == tuple(RULES[rule]["choices"]), rule
    assert TIE_POLICIES == ("docid-asc", "docid-desc", "input-order") and GAINS == ("grade", "exp")


def test_a_rule_must_describe_exactly_the_options_of_its_literal():
    from rageval.evaluation.contract import _choices

    assert _choices(("zero", "skip"), {"zero": "z", "skip": "s"}) == {"zero": "z", "skip": "s"}
    with pytest.raises(ValueError, match=r"describes choices \('zero',\), but its options are \('zero', 'skip'\)"):
        _choices(("zero", "skip"), {"zero": "z"})


def test_docs_page_names_the_version_digest_every_rule_and_every_choice():
    page = DOCS.read_text()
    assert f"`{CONTRACT}`" in page and CONTRACT_DIGEST[:12] in page
    for name, rule in RULES.items():
        assert f"(`{name}`)" in page, name
        for choice in rule.get("choices", {}):
            assert f"`{choice}`" in page, (name, choice)
    for measure in RULES["measures"]["definitions"]:
        assert f"`{measure}`" in page, measure


def test_an_evaluation_records_its_contract_and_options():
    evaluation = evaluate(
        frame([("a", 1.0)]), {"q": {"a": 1}}, ["RR"], ContractOptions(relevance=1, gain="exp", depth=5)
    )
    record = evaluation.contract
    assert record["version"] == CONTRACT and record["digest"] == CONTRACT_DIGEST and record["rules"] == RULES
    assert record["options"] == {
        "depth": 5,
        "duplicates": "keep-first",
        "gain": "exp",
        "missing": "zero",
        "no_relevant": "skip",
        "relevance": 1,
        "ties": "docid-asc",
    }
    assert evaluation.policy["contract"] == CONTRACT and evaluation.policy["gain"] == "exp"


def test_comparisons_refuse_different_contracts_unless_told():
    a = contract_record(ties="docid-asc", relevance=1)
    assert contract_differences(a, contract_record(ties="docid-asc", relevance=1)) == []
    b = contract_record(ties="docid-asc", relevance=2)
    assert contract_differences(a, b) == ["option relevance: 1 != 2"]
    with pytest.raises(ComparisonError, match="option relevance: 1 != 2") as caught:
        require_same_contract(a, b)
    assert caught.value.differences == ["option relevance: 1 != 2"]
    assert require_same_contract(a, b, allow_different=True) == ["option relevance: 1 != 2"]
    older = {**a, "version": "rageval-metrics/1"}
    assert contract_differences(older, a) == ["contract version 'rageval-metrics/1' != 'rageval-metrics/4'"]
    edited = {**a, "rules": {**RULES, "ties": {"rule": "something else"}}}
    assert "rule texts differ" in contract_differences(a, edited)[0]


def test_each_measure_records_the_provider_that_computed_it():
    evaluation = evaluate(frame([("a", 2.0), ("b", 1.0)]), {"q": {"a": 1, "b": 0}}, ["nDCG@10", "Bpref"])
    assert evaluation.providers == {"nDCG@10": "rageval", "Bpref": "ir_measures:pytrec_eval"}
    assert evaluation.policy["provider"] == "ir_measures:pytrec_eval+rageval"
    assert evaluation.definitions()["Bpref"]["provider"] == "ir_measures:pytrec_eval"
    assert evaluation.definitions()["nDCG_at_10"]["provider"] == "rageval"
    assert evaluation.per_query.loc["q", "Bpref"] == 1.0


# --------------------------------------------------------------------------- ties

TIED = frame([("a", 3.0), ("d", 2.0), ("b", 2.0), ("c", 2.0), ("e", 1.0)])  # b, c, d tie


def test_ties_follow_the_policy():
    assert value(TIED, {"b": 1}, "RR", ties="docid-asc") == 1 / 2  # a, b, c, d, e
    assert value(TIED, {"b": 1}, "RR", ties="docid-desc") == 1 / 4  # a, d, c, b, e
    assert value(TIED, {"b": 1}, "RR", ties="input-order") == 1 / 3  # a, d, b, c, e
    assert order_ranking(TIED, "docid-desc")["doc_id"].tolist() == ["a", "d", "c", "b", "e"]


def test_tie_rate_counts_equal_adjacent_scores_within_the_depth():
    # Pairs (a,d) (d,b) (b,c) (c,e): two are equal. In the first 3: (a,d) (d,b), one equal. In the first 2: none.
    for depth, rate in [(10, 2 / 4), (3, 1 / 2), (2, 0.0)]:
        evaluation = evaluate(TIED, {"q": {"b": 1}}, ["RR"], ContractOptions(depth=depth))
        assert evaluation.diagnostics.loc["q", f"tie_rate@{depth}"] == rate
    single = evaluate(frame([("a", 1.0)]), {"q": {"a": 1}}, ["RR"])
    assert math.isnan(single.diagnostics.loc["q", "tie_rate@10"])  # no pair, no rate


# --------------------------------------------------------------------------- duplicates

REPEATED = frame([("x", 3.0), ("a", 2.0), ("x", 1.0), ("b", 0.5)])


def test_duplicates_first_occurrence_counts_later_ones_dropped_and_counted():
    evaluation = evaluate(REPEATED, {"q": {"a": 1, "b": 1}}, ["RR", "P@3", "R@3", "AP"])
    # x, a, b after the second x is dropped.
    assert evaluation.per_query.loc["q"].to_dict() == pytest.approx(
        {"RR": 1 / 2, "P@3": 2 / 3, "R@3": 1.0, "AP": (1 / 2 + 2 / 3) / 2}
    )
    assert evaluation.duplicates == 1 and evaluation.diagnostics.loc["q", "duplicates"] == 1
    with pytest.raises(EvaluationError, match=r"1 repeated document.*q/x"):
        evaluate(REPEATED, {"q": {"a": 1}}, ["RR"], ContractOptions(duplicates="error"))


def test_the_same_id_in_two_queries_is_no_duplicate():
    run = pd.concat([frame([("x", 1.0)]), frame([("x", 1.0)], query="r")])
    assert evaluate(run, {"q": {"x": 1}, "r": {"x": 1}}, ["RR"], ContractOptions(duplicates="error")).duplicates == 0


def test_hash_collisions_fall_back_to_exact_ids(monkeypatch):
    run = pd.concat([REPEATED, frame([("b", 5.0), ("x", 4.0), ("a", 3.0)], query="r")], ignore_index=True)
    qrels = {"q": {"a": 1, "b": 2}, "r": {"a": 3, "z": 1}}
    measures = ["RR", "P@3", "nDCG@3", "AP", "Judged@2"]
    honest = evaluate(run, qrels, measures)
    hashed = []

    def collide(array):
        hashed.append(len(array))
        return np.zeros(len(array), dtype=np.uint64)

    # Every document hashes to 0, both where the run's duplicates are found and where judgments are located.
    monkeypatch.setattr(ordering, "hash_strings", collide)
    monkeypatch.setattr(qrels_module, "hash_strings", collide)
    colliding = evaluate(run, qrels, measures)
    assert hashed == [len(run), 4]  # the run's IDs, then the judged IDs of queries in the run
    pd.testing.assert_frame_equal(honest.per_query, colliding.per_query)
    pd.testing.assert_frame_equal(honest.diagnostics, colliding.diagnostics)
    assert colliding.duplicates == honest.duplicates == 1


# --------------------------------------------------------------------------- fewer than k, unjudged, no relevant

SHORT = frame([("a", 2.0), ("b", 1.0)])


def test_fewer_than_k_results_p_divides_by_k():
    qrels = {"q": {"a": 1, "b": 2, "c": 1}}
    values = evaluate(SHORT, qrels, ["P@5", "R@5", "Success@5", "nDCG@5", "Judged@5", "P@1"]).per_query.loc["q"]
    ideal = 2 + 1 / math.log2(3) + 1 / math.log2(4)
    assert values.to_dict() == pytest.approx(
        {
            "P@5": 2 / 5,
            "R@5": 2 / 3,
            "Success@5": 1.0,
            "nDCG@5": (1 + 2 / math.log2(3)) / ideal,
            "Judged@5": 1.0,
            "P@1": 1.0,
        }
    )


def test_unjudged_items_count_as_not_relevant_and_judged_at_k_shows_them():
    run = frame([("u1", 4.0), ("a", 3.0), ("u2", 2.0), ("b", 1.0)])
    evaluation = evaluate(run, {"q": {"a": 1, "b": 0, "c": 2}}, ["R@4", "P@4", "Judged@4"], ContractOptions(depth=4))
    assert evaluation.per_query.loc["q"].to_dict() == {"R@4": 1 / 2, "P@4": 1 / 4, "Judged@4": 2 / 4}
    assert evaluation.diagnostics.loc["q"].to_dict() == {
        "Judged@4": 0.5,
        "unjudged@4": 2.0,
        "tie_rate@4": 0.0,
        "duplicates": 0.0,
    }
    assert evaluation.diagnostic_means["unjudged@4"] == 2.0


def test_query_without_relevant_item_at_the_threshold_is_skipped():
    run = pd.concat([frame([("a", 1.0)]), frame([("a", 1.0)], query="r")])
    qrels = {"q": {"a": 2}, "r": {"a": 1}}
    assert evaluate(run, qrels, ["RR"]).skipped == ()
    strict = evaluate(run, qrels, ["RR"], ContractOptions(relevance=2))
    assert strict.skipped == ("r",) and list(strict.per_query.index) == ["q"]


def test_no_relevant_score_is_trec_evals_rule_judged_queries_count_unjudged_ones_never():
    # q: only grade 0 (judged, nothing relevant); r: answerable; u: no judgment at all; s: judged, absent from the run.
    run = pd.concat([frame([("a", 2.0), ("b", 1.0)]), frame([("a", 1.0)], query="r"), frame([("a", 1.0)], query="u")])
    qrels = {"q": {"a": 0, "b": 0}, "r": {"a": 1}, "u": {}, "s": {"a": 0}}
    measures = ["RR", "P@2", "R@2", "AP", "Rprec", "nDCG@2", "Judged@2"]
    contract = evaluate(run, qrels, measures)
    assert list(contract.per_query.index) == ["r"] and contract.skipped == ("q", "s", "u") and contract.missing == ()
    scored = evaluate(run, qrels, measures, ContractOptions(no_relevant="score"))
    assert list(scored.per_query.index) == ["q", "r", "s"] and scored.skipped == ("u",) and scored.missing == ("s",)
    assert scored.per_query.loc["q"].to_dict() == {m: 0.0 for m in measures[:-1]} | {"Judged@2": 1.0}
    assert scored.per_query.loc["s"].to_dict() == {m: 0.0 for m in measures}  # missing="zero": trec_eval -c
    assert scored.aggregates["RR"] == 1 / 3 and contract.aggregates["RR"] == 1.0
    assert scored.contract["options"]["no_relevant"] == "score"
    # Absent and missing="skip" (trec_eval without -c): no value, listed as missing.
    plain = evaluate(run, qrels, ["RR"], ContractOptions(no_relevant="score", missing="skip"))
    assert list(plain.per_query.index) == ["q", "r"] and plain.missing == ("s",)
    # nDCG's gains ignore the threshold under score too: a grade-1 item still gains at relevance=2.
    graded = evaluate(
        frame([("a", 1.0)]), {"q": {"a": 1}}, ["nDCG@1", "P@1"], ContractOptions(relevance=2, no_relevant="score")
    )
    assert graded.per_query.loc["q"].to_dict() == {"nDCG@1": 1.0, "P@1": 0.0}


# --------------------------------------------------------------------------- threshold, gain, R-Prec, AP


def test_relevance_threshold_applies_to_binary_measures_not_to_ndcg_gains():
    qrels = {"q": {"a": 1, "b": 2}}
    loose = evaluate(SHORT, qrels, ["RR", "P@2", "R@2", "AP", "nDCG@2"]).per_query.loc["q"]
    strict = evaluate(SHORT, qrels, ["RR", "P@2", "R@2", "AP", "nDCG@2"], ContractOptions(relevance=2)).per_query.loc[
        "q"
    ]
    ndcg = (1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3))
    assert loose.to_dict() == pytest.approx({"RR": 1.0, "P@2": 1.0, "R@2": 1.0, "AP": 1.0, "nDCG@2": ndcg})
    assert strict.to_dict() == pytest.approx({"RR": 1 / 2, "P@2": 1 / 2, "R@2": 1.0, "AP": 1 / 2, "nDCG@2": ndcg})
    # A measure's own rel= wins over the threshold.
    assert value(SHORT, {"a": 1, "b": 2}, "P(rel=1)@2", relevance=2) == 1.0


def test_exp_gain_is_two_to_the_grade_minus_one():
    qrels = {"a": 1, "b": 3}
    assert value(SHORT, qrels, "nDCG@2", gain="exp") == pytest.approx((1 + 7 / math.log2(3)) / (7 + 1 / math.log2(3)))
    assert value(SHORT, qrels, "nDCG@2") == pytest.approx((1 + 3 / math.log2(3)) / (3 + 1 / math.log2(3)))


def test_rprec_and_ap_by_hand():
    run = frame([("a", 4.0), ("n", 3.0), ("b", 2.0), ("c", 1.0)])
    qrels = {"a": 1, "b": 1, "c": 1}
    assert value(run, qrels, "Rprec") == pytest.approx(2 / 3)  # R = 3: a, n, b
    assert value(run, qrels, "AP") == pytest.approx((1 + 2 / 3 + 3 / 4) / 3)
    assert value(run, qrels, "AP@3") == pytest.approx((1 + 2 / 3) / 3)


# --------------------------------------------------------------------------- input handling


def test_input_order_follows_the_rank_column_and_ids_need_not_be_strings():
    run = pd.DataFrame({"query_id": [7, 7], "doc_id": [1, 2], "score": [0.0, 0.0], "rank": [2, 1]})
    assert evaluate(run, {"7": {"1": 1}}, ["RR"], ContractOptions(ties="input-order")).per_query.loc["7", "RR"] == 1 / 2


def test_interleaved_queries_are_grouped():
    run = pd.DataFrame(
        {"query_id": ["q", "r", "q", "r"], "doc_id": ["a", "b", "b", "a"], "score": [1.0, 2.0, 2.0, 1.0]}
    )
    evaluation = evaluate(run, {"q": {"a": 1}, "r": {"a": 1}}, ["RR"])
    assert evaluation.per_query["RR"].to_dict() == {"q": 1 / 2, "r": 1 / 2}


@pytest.mark.parametrize(
    "options,message",
    [
        ({"ties": "random"}, "valid choices are docid-asc, docid-desc, input-order"),
        ({"duplicates": "last"}, "valid choices are keep-first, error"),
        ({"gain": "linear"}, "valid choices are grade, exp"),
        ({"no_relevant": "zero"}, "valid choices are skip, score"),
        ({"relevance": 0}, "integer grade >= 1"),
        ({"depth": 0}, "positive integer"),
    ],
)
def test_bad_options_name_the_valid_choices(options, message):
    with pytest.raises(EvaluationError, match=message):
        evaluate(SHORT, {"q": {"a": 1}}, ["RR"], ContractOptions(**options))


def test_a_bad_provider_and_options_not_given_as_contract_options_are_refused_with_the_fix():
    with pytest.raises(EvaluationError, match="valid choices are auto, ir_measures"):
        evaluate(SHORT, {"q": {"a": 1}}, ["RR"], provider="ranx")
    with pytest.raises(
        EvaluationError, match=r"options must be a rageval.ContractOptions, got dict.*ContractOptions\(ties="
    ):
        evaluate(SHORT, {"q": {"a": 1}}, ["RR"], {"ties": "docid-desc"})


def test_missing_scores_or_columns_are_errors_with_the_fix():
    with pytest.raises(EvaluationError, match="input-order"):
        evaluate(frame([("a", float("nan"))]), {"q": {"a": 1}}, ["RR"])
    with pytest.raises(EvaluationError, match="lacks column"):
        evaluate(SHORT.drop(columns="score"), {"q": {"a": 1}}, ["RR"])


# --------------------------------------------------------------------------- unanswerable queries


def test_abstention_on_the_unanswerable_slice_by_hand():
    result = abstention({"u1": 0.2, "u2": 0.9, "u3": float("nan")}, 0.5, {"a1": 0.8, "a2": 0.1})
    # u1 (below) and u3 (nothing retrieved) abstain; u2 is confidently wrong; a2 abstains wrongly.
    assert result.abstention_rate == pytest.approx(2 / 3)
    assert result.false_confidence_rate == pytest.approx(1 / 3)
    assert result.wrongful_abstention_rate == 1 / 2
    assert (result.unanswerable, result.answerable) == (3, 2)
    assert result.per_query["abstained"].to_dict() == {"a1": False, "a2": True, "u1": True, "u2": False, "u3": True}
    assert abstention({"u": 0.5}, 0.5).abstention_rate == 0.0  # at the threshold is confident
    assert math.isnan(abstention({"u": 0.1}, 0.5).wrongful_abstention_rate)


def test_top_scores_feed_abstention():
    run = pd.concat([frame([("a", 0.9), ("b", 0.3)], query="u1"), frame([("a", 0.2)], query="u2")])
    top = top_scores(run, ["u1", "u2", "u3"])
    assert top.to_dict() == pytest.approx({"u1": 0.9, "u2": 0.2, "u3": float("nan")}, nan_ok=True)
    assert abstention(top, 0.5).abstention_rate == pytest.approx(2 / 3)
    with pytest.raises(EvaluationError, match="both"):
        abstention({"x": 1.0}, 0.5, {"x": 1.0})


# --------------------------------------------------------------------------- chunk → parent


def test_rollup_keeps_each_parent_once_at_its_best_chunk():
    chunks = pd.DataFrame(
        [
            ("q2", 2, "B#0", "B", 0.4),
            ("q1", 3, "A#2", "A", 0.7),
            ("q1", 1, "A#1", "A", 0.9),
            ("q1", 4, "C#0", "C", 0.6),
            ("q2", 1, "B#1", "B", 0.5),
            ("q1", 2, "B#0", "B", 0.8),
        ],
        columns=["query_id", "rank", "chunk_id", "parent_id", "score"],
    )
    parents = rollup_to_parent(chunks)
    assert parents.values.tolist() == [
        ["q2", "B", 0.5, 1],
        ["q1", "A", 0.9, 1],
        ["q1", "B", 0.8, 2],
        ["q1", "C", 0.6, 3],
    ]
    assert list(parents.columns) == ["query_id", "doc_id", "score", "rank"]
    # Document-level qrels then measure the parent ranking.
    evaluation = evaluate(parents, {"q1": {"C": 1}, "q2": {"B": 1}}, ["RR"])
    assert evaluation.per_query["RR"].to_dict() == {"q1": 1 / 3, "q2": 1.0}
