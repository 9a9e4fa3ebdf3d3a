"""rageval's values equal trec_eval's own test-suite outputs (../shared/datasets/trec_eval), to 4 decimals.

``quicktest_commands.txt`` there says which flags made each ``out.*`` file:

- ``out.test.aq``: ``-m all_trec -q qrels.test results.test`` (binary, per query);
- ``out.test.aql``: ``-m all_trec -q -l2 qrels.rel_level results.test`` (grades -1..4, relevant from 2);
- ``out.test.aqc``: ``-m all_trec -q -c qrels.test results.trunc`` (truncated run, missing queries 0);
- ``out.comment.test``: ``qrels.comment.test results.comment.test`` (grades 0..3; default measures,
  means only: trec_eval printed no per-query values and no ndcg_cut/recall for it, so per query the
  graded file is checked against pytrec_eval, which is trec_eval's own code, to 1e-9).

``qrels.comment.test`` judges 31 queries; one (2024-36302) has grade-0 judgments only. trec_eval
scores it 0 and averages it in (num_q 31, map 0.2689): ``no_relevant="score"``, the default of
``rageval metrics``. The contract's default for runs, ``"skip"``, leaves it out (30 queries, AP 0.2779).
"""

from __future__ import annotations

import pytest
import pytrec_eval
from conftest import shared
from typer.testing import CliRunner

from rageval.benchmark.trec import read_qrels, read_run
from rageval.cli import app
from rageval.evaluation import ContractOptions, evaluate

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
        ContractOptions(ties="docid-desc", missing="skip"),
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
        ContractOptions(ties="docid-desc", missing="skip", relevance=2),
    )
    assert list(evaluation.per_query.index) == ["301", "302", "303"]
    assert assert_per_query_equal(golden, evaluation, SHARED_MEASURES) == 90
    # The threshold is what made these differ from the grade >= 1 values.
    loose = evaluate(
        read_run(folder / "results.test"),
        read_qrels(folder / "qrels.rel_level"),
        ["RR"],
        ContractOptions(ties="docid-desc"),
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
        ContractOptions(ties="docid-desc", missing="zero"),
    )
    assert evaluation.missing == ("302",) and list(evaluation.per_query.index) == ["301", "302", "303"]
    assert assert_per_query_equal(expected(folder / "out.test.aqc"), evaluation, SHARED_MEASURES) == 90


GRADED_MEANS = ["RR", "AP", "Rprec", "Bpref", *(f"P@{k}" for k in CUTOFFS)]  # what out.comment.test prints
ALL_ZERO = "2024-36302"  # judged in qrels.comment.test, every judgment grade 0


def graded_suite():
    folder = shared("trec_eval")
    return read_run(folder / "results.comment.test"), read_qrels(folder / "qrels.comment.test"), folder


def test_graded_suite_means_equal_out_comment_test_with_the_all_zero_query():
    run, qrels, folder = graded_suite()
    golden = expected(folder / "out.comment.test")
    assert [q for q, judged in qrels.items() if max(judged.values()) < 1] == [ALL_ZERO]
    evaluation = evaluate(
        run, qrels, GRADED_MEANS, ContractOptions(ties="docid-desc", missing="skip", no_relevant="score")
    )
    assert evaluation.providers["Bpref"] == "ir_measures:pytrec_eval" and evaluation.providers["RR"] == "rageval"
    assert str(evaluation.evaluated) == golden[("num_q", "all")] == "31"
    assert ALL_ZERO in evaluation.per_query.index and (evaluation.per_query.loc[ALL_ZERO] == 0).all()
    for measure in GRADED_MEANS:
        assert f"{evaluation.aggregates[measure]:.4f}" == golden[(TREC_NAMES[measure], "all")], measure


def test_graded_suite_under_the_contracts_skip_rule_leaves_the_all_zero_query_out():
    run, qrels, folder = graded_suite()
    golden = expected(folder / "out.comment.test")
    evaluation = evaluate(
        run, qrels, GRADED_MEANS, ContractOptions(ties="docid-desc", missing="skip", no_relevant="skip")
    )
    assert evaluation.evaluated == 30 and ALL_ZERO in evaluation.skipped
    assert f"{evaluation.aggregates['AP']:.4f}" == "0.2779" != golden[("map", "all")] == "0.2689"
    for measure in GRADED_MEANS:  # the same values, one query fewer: trec_eval's sum over its 31 queries
        assert f"{evaluation.per_query[measure].sum() / 31:.4f}" == golden[(TREC_NAMES[measure], "all")], measure


# rageval measure → the name trec_eval's code (pytrec_eval) gives it; graded, cut and uncut.
TREC_CODE = {
    "AP": "map",
    "AP@100": "map_cut_100",
    "RR": "recip_rank",
    "Rprec": "Rprec",
    "Bpref": "bpref",
    "nDCG": "ndcg",
    "Success@1": "success_1",
    **{f"nDCG@{k}": f"ndcg_cut_{k}" for k in CUTOFFS},
    **{f"R@{k}": f"recall_{k}" for k in CUTOFFS},
    **{f"P@{k}": f"P_{k}" for k in CUTOFFS},
}


def trec_eval_per_query(run, qrels, relevance: int) -> dict[str, dict[str, float]]:
    """Per-query values from trec_eval's own C code (pytrec_eval), at trec_eval -l<relevance>."""
    scores: dict[str, dict[str, float]] = {}
    for query, doc, score in zip(run["query_id"], run["doc_id"], run["score"], strict=True):
        scores.setdefault(query, {})[doc] = float(score)
    measures = {name.rsplit("_", 1)[0] if name[-1].isdigit() else name for name in TREC_CODE.values()}
    return pytrec_eval.RelevanceEvaluator(qrels, measures, relevance_level=relevance).evaluate(scores)


@pytest.mark.parametrize("relevance,without_relevant", [(1, 1), (2, 3), (3, 11)])
def test_graded_suite_per_query_equals_trec_eval_code_queries_without_relevant_included(relevance, without_relevant):
    run, qrels, _ = graded_suite()
    reference = trec_eval_per_query(run, qrels, relevance)
    evaluation = evaluate(
        run,
        qrels,
        list(TREC_CODE),
        ContractOptions(ties="docid-desc", missing="skip", no_relevant="score", relevance=relevance),
    )
    assert list(evaluation.per_query.index) == sorted(reference) and len(reference) == 31
    # At -l3 eleven queries have nothing relevant: trec_eval scores every one (nDCG still gains from grades 1-2).
    assert sum(max(qrels[q].values()) < relevance for q in reference) == without_relevant
    compared = 0
    for query, values in reference.items():
        for measure, name in TREC_CODE.items():
            ours = evaluation.per_query.loc[query, measure]
            assert f"{ours:.4f}" == f"{values[name]:.4f}" and abs(ours - values[name]) <= 1e-9, (query, measure)
            compared += 1
    assert compared == 31 * len(TREC_CODE)


def cli_lines(*args) -> dict[tuple[str, str], str]:
    result = CliRunner().invoke(app, ["metrics", *map(str, args)])
    assert result.exit_code == 0, result.output
    return {(m.strip(), q): v for m, q, v in (line.split("\t") for line in result.stdout.splitlines())}


def test_rageval_metrics_equals_trec_eval_on_the_graded_files_per_query_and_in_the_mean():
    run, qrels, folder = graded_suite()
    golden = expected(folder / "out.comment.test")
    options = [arg for m in GRADED_MEANS for arg in ("-m", m)]
    printed = cli_lines(folder / "qrels.comment.test", folder / "results.comment.test", *options, "-q")
    reference = trec_eval_per_query(run, qrels, 1)
    for measure in GRADED_MEANS:
        assert printed[(measure, "all")] == golden[(TREC_NAMES[measure], "all")], measure
        for query, values in reference.items():
            assert printed[(measure, query)] == f"{values[TREC_CODE[measure]]:.4f}", (measure, query)
    assert printed[("AP", ALL_ZERO)] == "0.0000"
    assert len(printed) == len(GRADED_MEANS) * 32  # 31 queries and the mean


def test_rageval_metrics_gives_the_contracts_skip_rule_one_flag_away():
    _, _, folder = graded_suite()
    result = CliRunner().invoke(
        app,
        ["metrics", str(folder / "qrels.comment.test"), str(folder / "results.comment.test"), "-m", "AP", "-q"]
        + ["--no-relevant", "skip"],
    )
    assert result.exit_code == 0, result.output
    printed = {
        tuple(p.strip() for p in line.split("\t")[:2]): line.split("\t")[2] for line in result.stdout.splitlines()
    }
    assert printed[("AP", "all")] == "0.2779" and ("AP", ALL_ZERO) not in printed and len(printed) == 31
    assert "271 queries skipped (no judgment or no relevant item); num_q 30" in result.stderr


@pytest.mark.parametrize("gain", ["grade", "exp"])
@pytest.mark.parametrize("relevance", [1, 2, 3])
def test_graded_suite_per_query_equals_trec_eval_code(relevance, gain):
    # Per query, graded: the native engine against pytrec_eval (trec_eval's C code) through ir-measures.
    folder = shared("trec_eval")
    run, qrels = read_run(folder / "results.comment.test"), read_qrels(folder / "qrels.comment.test")
    measures = [*SHARED_MEASURES, "RR@10", "AP@100", "nDCG", "Success@1", "Judged@10", "R(rel=3)@100"]
    native = evaluate(run, qrels, measures, ContractOptions(relevance=relevance, gain=gain))
    reference = evaluate(run, qrels, measures, ContractOptions(relevance=relevance, gain=gain), provider="ir_measures")
    assert set(native.providers.values()) == {"rageval"}
    assert not set(reference.providers.values()) & {"rageval"}
    assert native.evaluated == reference.evaluated >= 20
    difference = (native.per_query - reference.per_query).abs().to_numpy().max()
    assert difference <= 1e-9


@pytest.mark.parametrize("alias,canonical", [("Hit@5", "Success@5"), ("MRR", "RR"), ("MRR@10", "RR@10")])
def test_aliases_compute_the_same_values(alias, canonical):
    folder = shared("trec_eval")
    run, qrels = read_run(folder / "results.test"), read_qrels(folder / "qrels.test")
    a = evaluate(run, qrels, [alias], ContractOptions(ties="docid-desc")).per_query[alias]
    b = evaluate(run, qrels, [canonical], ContractOptions(ties="docid-desc")).per_query[canonical]
    assert a.tolist() == b.tolist()
