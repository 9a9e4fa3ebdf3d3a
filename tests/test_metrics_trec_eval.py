"""rageval's values equal trec_eval's own test-suite outputs, to 4 decimals, query by query."""

from __future__ import annotations

import pytest
from conftest import shared

from rageval.metrics import evaluate
from rageval.trec import read_qrels, read_run

CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
# rageval measure string → trec_eval measure name
TREC_NAMES = {"RR": "recip_rank", "AP": "map", "Rprec": "Rprec", "Bpref": "bpref"}
TREC_NAMES.update({f"nDCG@{k}": f"ndcg_cut_{k}" for k in CUTOFFS})
TREC_NAMES.update({f"R@{k}": f"recall_{k}" for k in CUTOFFS})
TREC_NAMES.update({f"P@{k}": f"P_{k}" for k in CUTOFFS})


def expected(path) -> dict[tuple[str, str], str]:
    out = {}
    for line in path.read_text().splitlines():
        name, query, value = (part.strip() for part in line.split("\t"))
        out[(name, query)] = value
    return out


def test_binary_suite_per_query_equals_out_test_aq():
    folder = shared("trec_eval")
    golden = expected(folder / "out.test.aq")
    measures = ["RR", *(f"{m}@{k}" for m in ("nDCG", "R", "P") for k in CUTOFFS), "AP"]
    # trec_eval orders equal scores by document ID descending: reproduce it with that tie policy.
    evaluation = evaluate(
        read_run(folder / "results.test"), read_qrels(folder / "qrels.test"), measures, ties="docid-desc", missing="skip"
    )
    assert list(evaluation.per_query.index) == ["301", "302", "303"]
    compared = 0
    for measure in measures:
        for query, value in evaluation.per_query[measure].items():
            assert f"{value:.4f}" == golden[(TREC_NAMES[measure], query)], (measure, query)
            compared += 1
        assert f"{evaluation.aggregates[measure]:.4f}" == golden[(TREC_NAMES[measure], "all")], measure
    assert compared == len(measures) * 3 == 87


def test_graded_suite_equals_out_comment_test_where_measures_overlap():
    folder = shared("trec_eval")
    golden = expected(folder / "out.comment.test")
    qrels = read_qrels(folder / "qrels.comment.test")
    measures = ["RR", "AP", "Rprec", "Bpref", *(f"P@{k}" for k in CUTOFFS)]
    evaluation = evaluate(read_run(folder / "results.comment.test"), qrels, measures, ties="docid-desc", missing="skip")
    # trec_eval counts a judged query with no relevant document (num_q 31) and averages in its 0;
    # rageval's contract gives that query no value and reports it as skipped instead.
    judged_without_relevant = [q for q in evaluation.skipped if q in qrels]
    assert evaluation.evaluated == 30 and len(judged_without_relevant) == 1
    assert golden[("num_q", "all")] == str(evaluation.evaluated + len(judged_without_relevant))
    for measure in measures:
        trec_eval_mean = evaluation.per_query[measure].sum() / 31
        assert f"{trec_eval_mean:.4f}" == golden[(TREC_NAMES[measure], "all")], measure


def test_truncated_run_with_complete_flag_equals_out_test_aqc():
    # trec_eval -c: judged queries missing from the run count as 0 (rageval: missing="zero").
    folder = shared("trec_eval")
    golden = expected(folder / "out.test.aqc")
    measures = ["RR", "P@10", "R@100", "nDCG@10", "AP"]
    evaluation = evaluate(read_run(folder / "results.trunc"), read_qrels(folder / "qrels.test"), measures, ties="docid-desc", missing="zero")
    for measure in measures:
        for query, value in evaluation.per_query[measure].items():
            assert f"{value:.4f}" == golden[(TREC_NAMES[measure], query)], (measure, query)
        assert f"{evaluation.aggregates[measure]:.4f}" == golden[(TREC_NAMES[measure], "all")], measure


@pytest.mark.parametrize("alias,canonical", [("Hit@5", "Success@5"), ("MRR", "RR"), ("MRR@10", "RR@10")])
def test_aliases_compute_the_same_values(alias, canonical):
    folder = shared("trec_eval")
    run, qrels = read_run(folder / "results.test"), read_qrels(folder / "qrels.test")
    a = evaluate(run, qrels, [alias], ties="docid-desc").per_query[alias]
    b = evaluate(run, qrels, [canonical], ties="docid-desc").per_query[canonical]
    assert a.tolist() == b.tolist()
