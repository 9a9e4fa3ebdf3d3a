"""The Python API takes the field's shapes: ir-measures' dict-of-dicts runs and qrels, its measure
objects and namedtuples, ranx's Run and Qrels, DataFrames with ir-measures', ranx's or PyTerrier's
column names — and the values are those libraries' own.

``evaluate()`` is called here the way the hook at its top will call it: the converters first."""

from __future__ import annotations

import ir_measures
import numpy as np
import pandas as pd
import pytest
import ranx

from rageval import EvaluationError, as_measures, as_qrels, as_run_frame, evaluate
from rageval.evaluation.measures import Measure, parse_measure


def _data(seed: int = 7, queries: int = 12, docs: int = 25) -> tuple[dict, dict]:
    """A run with distinct scores (no tie to decide) and graded qrels, every query with a relevant document."""
    rng = np.random.default_rng(seed)
    run: dict[str, dict[str, float]] = {}
    qrels: dict[str, dict[str, int]] = {}
    for q in range(queries):
        scores = rng.permutation(docs * 4)[:docs] / 7.0
        run[f"q{q}"] = {f"d{d}": float(s) for d, s in enumerate(scores)}
        judged = rng.choice(docs + 5, size=8, replace=False)  # some judged documents are not retrieved
        qrels[f"q{q}"] = {f"d{d}": int(rng.integers(0, 3)) for d in judged}
        qrels[f"q{q}"][f"d{int(judged[0])}"] = 2
    return run, qrels


def _evaluate(run, qrels, measures, **options):
    """``evaluate()`` with the converters applied first (the hook the lead adds to its top)."""
    return evaluate(as_run_frame(run), as_qrels(qrels), as_measures(measures), **options)


# ---------------------------------------------------------------------------- values equal to the peers'


def test_an_ir_measures_dict_run_and_measure_objects_give_ir_measures_values():
    run, qrels = _data()
    measures = [ir_measures.nDCG @ 10, ir_measures.AP, ir_measures.RR, ir_measures.P @ 5, ir_measures.R @ 10]
    expected = ir_measures.calc_aggregate(measures, qrels, run)
    result = _evaluate(run, qrels, measures).aggregates
    assert list(result.index) == ["nDCG@10", "AP", "RR", "P@5", "R@10"]
    for m in measures:
        assert result[repr(m)] == pytest.approx(expected[m], abs=1e-12), repr(m)
    # And per query, not only the means.
    per_query = _evaluate(run, qrels, [ir_measures.nDCG @ 10]).per_query["nDCG@10"]
    theirs = {r.query_id: r.value for r in ir_measures.iter_calc([ir_measures.nDCG @ 10], qrels, run)}
    assert per_query.to_dict() == pytest.approx(theirs, abs=1e-12)


def test_ir_measures_namedtuples_and_dataframes_with_its_column_names_give_the_same_values():
    run, qrels = _data(seed=3)
    scored = [ir_measures.ScoredDoc(q, d, s) for q, docs in run.items() for d, s in docs.items()]
    judged = [ir_measures.Qrel(q, d, g) for q, docs in qrels.items() for d, g in docs.items()]
    run_frame = pd.DataFrame(scored)  # ir-measures' names: query_id, doc_id, score
    qrels_frame = pd.DataFrame(judged)  # query_id, doc_id, relevance, iteration
    measures = ["nDCG@10", "AP", "P(rel=2)@5"]
    expected = _evaluate(run, qrels, measures).aggregates
    assert expected["nDCG@10"] == pytest.approx(
        ir_measures.calc_aggregate([ir_measures.nDCG @ 10], qrels, run)[ir_measures.nDCG @ 10]
    )
    for shape_run, shape_qrels in [(scored, judged), (run_frame, qrels_frame), (iter(scored), iter(judged))]:
        pd.testing.assert_series_equal(_evaluate(shape_run, shape_qrels, measures).aggregates, expected)


# ranx's numba kernels warn about their own casts while they compile; that is ranx's, not rageval's.
@pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaTypeSafetyWarning")
def test_a_ranx_run_and_qrels_give_ranx_values():
    run, qrels = _data(seed=11)
    ranx_run, ranx_qrels = ranx.Run(run), ranx.Qrels(qrels)
    theirs = ranx.evaluate(ranx_qrels, ranx_run, ["ndcg@10", "map", "mrr", "precision@5", "recall@10"])
    ours = _evaluate(ranx_run, ranx_qrels, ["nDCG@10", "AP", "RR", "P@5", "R@10"]).aggregates
    pairs = {"nDCG@10": "ndcg@10", "AP": "map", "RR": "mrr", "P@5": "precision@5", "R@10": "recall@10"}
    for mine, name in pairs.items():
        assert ours[mine] == pytest.approx(theirs[name], abs=1e-9), mine
    # ranx's own DataFrame form (q_id, doc_id, score) is read too.
    pd.testing.assert_series_equal(
        _evaluate(ranx_run.to_dataframe(), ranx_qrels.to_dataframe(), list(pairs)).aggregates, ours
    )


def test_pyterrier_column_names_are_read():
    run, qrels = _data(seed=5)
    frame = pd.DataFrame([(q, d, s) for q, docs in run.items() for d, s in docs.items()], columns=["qid", "docno", "score"])
    labels = pd.DataFrame(
        [(q, d, g) for q, docs in qrels.items() for d, g in docs.items()], columns=["qid", "docno", "label"]
    )
    pd.testing.assert_series_equal(
        _evaluate(frame, labels, ["nDCG@10"]).aggregates, _evaluate(run, qrels, ["nDCG@10"]).aggregates
    )


# ---------------------------------------------------------------------------- the converters themselves


def test_as_run_frame_turns_a_dict_of_dicts_into_rows_with_string_ids_and_float_scores():
    frame = as_run_frame({1: {"a": 2, 7: 0.5}, "q2": {}})
    assert frame.to_dict("records") == [
        {"query_id": "1", "doc_id": "a", "score": 2.0},
        {"query_id": "1", "doc_id": "7", "score": 0.5},
    ]
    assert frame["score"].dtype == np.float64


def test_a_dataframe_in_rageval_s_own_shape_passes_unchanged():
    frame = pd.DataFrame({"query_id": ["q"], "doc_id": ["d"], "score": [1.0], "rank": [1]})
    assert as_run_frame(frame) is frame


def test_as_qrels_keeps_grades_and_reads_every_shape_alike():
    nested = {"q1": {"d1": 2, "d2": 0}, "q2": {"d3": 1}}
    rows = [ir_measures.Qrel("q1", "d1", 2, "0"), ir_measures.Qrel("q1", "d2", 0, "0"), ir_measures.Qrel("q2", "d3", 1, "0")]
    frame = pd.DataFrame({"query_id": ["q1", "q1", "q2"], "doc_id": ["d1", "d2", "d3"], "relevance": [2.0, 0.0, 1.0]})
    for shape in (nested, rows, frame, ranx.Qrels(nested), [("q1", "d1", 2), ("q1", "d2", 0), ("q2", "d3", 1)]):
        assert as_qrels(shape) == nested


def test_as_measures_takes_strings_rageval_measures_and_ir_measures_objects():
    parsed = parse_measure("Hit@5")
    out = as_measures(["nDCG@10", parsed, ir_measures.P(rel=2) @ 5, ir_measures.RR])
    assert out[:2] == ["nDCG@10", parsed]
    assert [m.text for m in out[2:]] == ["P(rel=2)@5", "RR"]
    assert all(isinstance(m, Measure) for m in out[2:])
    assert as_measures(ir_measures.AP)[0].text == "AP"  # type: ignore[union-attr]
    assert as_measures("R@100") == ["R@100"]


# ---------------------------------------------------------------------------- clear errors, not AttributeErrors


def test_a_fractional_grade_is_refused_naming_the_query_and_document():
    with pytest.raises(EvaluationError, match=r"query 'q1', document 'd2' is 0\.5; grades are whole numbers"):
        as_qrels({"q1": {"d1": 1, "d2": 0.5}})


def test_a_query_entry_that_is_not_a_dict_is_refused_with_the_shape():
    with pytest.raises(EvaluationError, match=r"entry for query 'q1' is a list, not a dict.*\{query_id: \{doc_id: score\}\}"):
        as_run_frame({"q1": ["d1", "d2"]})


def test_an_unreadable_run_names_the_shapes_it_takes():
    with pytest.raises(EvaluationError, match=r"cannot read a run from a int; give a DataFrame .* ranx\.Run"):
        as_run_frame(3)
    with pytest.raises(EvaluationError, match=r"run row 0 is str 'q1 d1 1\.0'"):
        as_run_frame(["q1 d1 1.0"])


def test_two_columns_for_one_field_are_refused():
    frame = pd.DataFrame({"q_id": ["a"], "qid": ["a"], "doc_id": ["d"], "score": [1.0]})
    with pytest.raises(EvaluationError, match=r"more than one column for query_id \(q_id, qid\); keep one"):
        as_run_frame(frame)


def test_qrels_without_a_grade_column_are_refused_naming_the_columns_it_has():
    with pytest.raises(EvaluationError, match=r"lacks column\(s\) relevance \(it has query_id, doc_id\)"):
        as_qrels(pd.DataFrame({"query_id": ["q"], "doc_id": ["d"]}))


def test_a_measure_of_another_type_is_refused():
    with pytest.raises(EvaluationError, match=r"a measure is int 10; give measure strings"):
        as_measures(["nDCG@10", 10])
