"""rageval's values equal trec_eval's own test-suite outputs (../shared/datasets/trec_eval), to 4 decimals.

``quicktest_commands.txt`` there says which flags made each ``out.*`` file:

- ``out.test.aq``: ``-m all_trec -q qrels.test results.test`` (binary, per query);
- ``out.test.aql``: ``-m all_trec -q -l2 qrels.rel_level results.test`` (grades -1..4, relevant from 2);
- ``out.test.aqc``: ``-m all_trec -q -c qrels.test results.trunc`` (truncated run, missing queries 0);
- ``out.comment.test``: ``qrels.comment.test results.comment.test`` (grades 0..3; default measures,
  means only: trec_eval printed no per-query values and no ndcg_cut/recall for it, so per query the
  graded file is checked against pytrec_eval, which is trec_eval's own code, to 1e-9).
"""

from __future__ import annotations

import pytest
from conftest import shared

from rageval.benchmark.trec import read_qrels, read_run
from rageval.evaluation import evaluate

pytestmark = pytest.mark.realdata

CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
# rageval measure string → trec_eval measure name
TREC_NAMES = {"RR": "recip_rank", "AP": "map", "Rprec": "Rprec", "Bpref": "bpref"}
TREC_NAMES.update({f"nDCG@{k}": f"ndcg_cut_{k}" for k in CUTOFFS})
TREC_NAMES.update({f"R@{k}": f"recall_{k}" for k in CUTOFFS})
TREC_NAMES.update({f"P@{k}": f"P_{k}" for k in CUTOFFS})
SHARED_MEASURES = ["RR", "AP", "Rprec", *(f"{m}@{k}" for m in ("nDCG", "R", "P") for k in CUTOFFS)]


def expected(path) -> dict[tuple[str, str], str]:
    out = {}
    for line in path.read_text().splitlines():
        name, query, value = (part.strip() for part in line.split("\t"))
        out[(name, query)] = value
    return out


def assert_per_query_equal(golden: dict, evaluation, measures: list[str]) -> int:
    """Every per-query value and every mean equals trec_eval's printed value; returns how many were compared."""
    compared = 0
    for measure in measures:
        for query, value in evaluation.per_query[measure].items():
            assert f"{value:.4f}" == golden[(TREC_NAMES[measure], query)], (measure, query)
            compared += 1
        assert f"{evaluation.aggregates[measure]:.4f}" == golden[(TREC_NAMES[measure], "all")], measure
    return compared


def test_every_measure_is_computed_natively_here():
    folder = shared("trec_eval")
    evaluation = evaluate(read_run(folder / "results.test"), read_qrels(folder / "qrels.test"), SHARED_MEASURES)
    assert set(evaluation.providers.values()) == {"rageval"}


def test_binary_suite_per_query_equals_out_test_aq():
    folder = shared("trec_eval")
    # trec_eval orders equal scores by document ID descending: reproduce it with that tie policy.
    evaluation = evaluate(
        read_run(folder / "results.test"),
        read_qrels(folder / "qrels.test"),
        SHARED_MEASURES,
        ties="docid-desc",
        missing="skip",
    )
    assert list(evaluation.per_query.index) == ["301", "302", "303"]
    compared = assert_per_query_equal(expected(folder / "out.test.aq"), evaluation, SHARED_MEASURES)
    assert compared == len(SHARED_MEASURES) * 3 == 90


def test_relevance_level_two_per_query_equals_out_test_aql():
    # trec_eval -l2: grade >= 2 is relevant for the binary measures; ndcg_cut keeps every positive grade as gain.
    folder = shared("trec_eval")
    golden = expected(folder / "out.test.aql")
    evaluation = evaluate(
        read_run(folder / "results.test"),
        read_qrels(folder / "qrels.rel_level"),
        SHARED_MEASURES,
        ties="docid-desc",
        missing="skip",
        relevance=2,
    )
    assert list(evaluation.per_query.index) == ["301", "302", "303"]
    assert assert_per_query_equal(golden, evaluation, SHARED_MEASURES) == 90
    # The threshold is what made these differ from the grade >= 1 values.
    loose = evaluate(
        read_run(folder / "results.test"), read_qrels(folder / "qrels.rel_level"), ["RR"], ties="docid-desc"
    )
    assert loose.per_query.loc["301", "RR"] == pytest.approx(1 / 6)
    assert evaluation.per_query.loc["301", "RR"] == pytest.approx(1 / 307)


def test_truncated_run_with_complete_flag_per_query_equals_out_test_aqc():
    # trec_eval -c: judged queries missing from the run count as 0 (rageval: missing="zero").
    folder = shared("trec_eval")
    evaluation = evaluate(
        read_run(folder / "results.trunc"),
        read_qrels(folder / "qrels.test"),
        SHARED_MEASURES,
        ties="docid-desc",
        missing="zero",
    )
    assert evaluation.missing == ("302",) and list(evaluation.per_query.index) == ["301", "302", "303"]
    assert assert_per_query_equal(expected(folder / "out.test.aqc"), evaluation, SHARED_MEASURES) == 90


def test_graded_suite_means_equal_out_comment_test():
    folder = shared("trec_eval")
    golden = expected(folder / "out.comment.test")
    qrels = read_qrels(folder / "qrels.comment.test")
    measures = ["RR", "AP", "Rprec", "Bpref", *(f"P@{k}" for k in CUTOFFS)]
    evaluation = evaluate(read_run(folder / "results.comment.test"), qrels, measures, ties="docid-desc", missing="skip")
    assert evaluation.providers["Bpref"] == "ir_measures:pytrec_eval" and evaluation.providers["RR"] == "rageval"
    # trec_eval counts a judged query with no relevant document (num_q 31) and averages in its 0;
    # rageval's contract gives that query no value and reports it as skipped instead.
    judged_without_relevant = [q for q in evaluation.skipped if q in qrels]
    assert evaluation.evaluated == 30 and len(judged_without_relevant) == 1
    assert golden[("num_q", "all")] == str(evaluation.evaluated + len(judged_without_relevant))
    for measure in measures:
        trec_eval_mean = evaluation.per_query[measure].sum() / 31
        assert f"{trec_eval_mean:.4f}" == golden[(TREC_NAMES[measure], "all")], measure


@pytest.mark.parametrize("gain", ["grade", "exp"])
@pytest.mark.parametrize("relevance", [1, 2, 3])
def test_graded_suite_per_query_equals_trec_eval_code(relevance, gain):
    # Per query, graded: the native engine against pytrec_eval (trec_eval's C code) through ir-measures.
    folder = shared("trec_eval")
    run, qrels = read_run(folder / "results.comment.test"), read_qrels(folder / "qrels.comment.test")
    measures = [*SHARED_MEASURES, "RR@10", "AP@100", "nDCG", "Success@1", "Judged@10", "R(rel=3)@100"]
    native = evaluate(run, qrels, measures, relevance=relevance, gain=gain)
    reference = evaluate(run, qrels, measures, relevance=relevance, gain=gain, provider="ir_measures")
    assert set(native.providers.values()) == {"rageval"}
    assert not set(reference.providers.values()) & {"rageval"}
    assert native.evaluated == reference.evaluated >= 20
    difference = (native.per_query - reference.per_query).abs().to_numpy().max()
    assert difference <= 1e-9


@pytest.mark.parametrize("alias,canonical", [("Hit@5", "Success@5"), ("MRR", "RR"), ("MRR@10", "RR@10")])
def test_aliases_compute_the_same_values(alias, canonical):
    folder = shared("trec_eval")
    run, qrels = read_run(folder / "results.test"), read_qrels(folder / "qrels.test")
    a = evaluate(run, qrels, [alias], ties="docid-desc").per_query[alias]
    b = evaluate(run, qrels, [canonical], ties="docid-desc").per_query[canonical]
    assert a.tolist() == b.tolist()
