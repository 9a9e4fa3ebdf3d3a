"""Both levels in one run: a passage-level run is also measured rolled up to its parent documents,
recorded side by side, and comparisons line the two levels up."""

from __future__ import annotations

import dataclasses
import io
import json

import pandas as pd
import pytest
import yaml
from conftest import ROOT
from test_compare import record_run

from rageval import analysis as cmp
from rageval.config.load import load_config
from rageval.evaluation import evaluate
from rageval.experiment.run import run_experiment
from rageval.tracking.records import all_metrics, evaluation_record, metric_names
from rageval.tracking.store import Tracker
from rageval.workflows.readback import load_inputs


def tiny_run(tiny, tmp_path, overrides=()):
    data = yaml.safe_load((ROOT / "params" / "bm25.yaml").read_text())
    data.update(benchmark=str(tiny), split="dev")
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(data))
    return run_experiment(load_config(path, list(overrides)), cache=False)


def by_hand_rollup(rankings):
    """Each query's parents in the order of their first (best-ranked) chunk."""
    out: dict[str, list[str]] = {}
    for row in rankings.sort_values(["query_id", "rank"], kind="stable").itertuples():
        parents = out.setdefault(row.query_id, [])
        if row.parent_id not in parents:
            parents.append(row.parent_id)
    return out


def test_a_passage_run_has_both_levels_and_the_parent_level_matches_a_rollup_by_hand(tiny, tmp_path):
    result = tiny_run(tiny, tmp_path)
    assert result.level == "passage" and result.parent is not None
    assert list(result.levels) == ["passage", "document"]
    # Document qrels from the passage judgments: a document takes its best judged span's grade.
    assert result.benchmark.qrels("dev") == {"q1": {"alpha": 3}, "q2": {"beta": 2, "gamma": 0}}
    parents = by_hand_rollup(result.rankings)
    relevant = {"q1": {"alpha"}, "q2": {"beta"}}
    for query, wanted in relevant.items():
        ranked = parents[query]
        first = next(i for i, doc in enumerate(ranked, 1) if doc in wanted)
        row = result.parent.per_query.loc[query]
        assert row["MRR"] == pytest.approx(1 / first)
        assert row["Hit@5"] == float(first <= 5)
        assert row["R@5"] == pytest.approx(len(wanted & set(ranked[:5])) / len(wanted))
        assert row["P@5"] == pytest.approx(len(wanted & set(ranked[:5])) / 5)
    # Every measure agrees with evaluating the hand roll-up against the document qrels.
    rows = [(q, doc, -rank, rank) for q, docs in parents.items() for rank, doc in enumerate(docs, 1)]
    hand = evaluate(
        pd.DataFrame(rows, columns=["query_id", "doc_id", "score", "rank"]),
        result.benchmark.qrels("dev"),
        result.config.evaluation.measures,
    )
    pd.testing.assert_frame_equal(result.parent.per_query, hand.per_query)
    # The passage level is measured exactly as before: chunk IDs against chunk qrels.
    assert set(result.evaluation.per_query.columns) == set(result.parent.per_query.columns)

    table = result.level_aggregates()
    assert list(table["level"].unique()) == ["passage", "document"]
    parent_mean = table.set_index(["level", "measure"]).loc[("document", "MRR"), "mean"]
    assert parent_mean == pytest.approx(result.parent.per_query["MRR"].mean())

    side_by_side = result.level_table()
    assert list(side_by_side.columns) == ["passage", "document"]
    assert side_by_side.loc["MRR", "document"] == parent_mean
    assert side_by_side.loc["MRR", "passage"] == result.evaluation.aggregates["MRR"]

    metrics = metric_names(result)
    assert metrics["parent/MRR"] == pytest.approx(parent_mean)
    keys = list(metrics)
    # Parent measures come after every passage-level headline, so they never push one out.
    assert keys.index("parent/nDCG_at_10") > keys.index("time_s/experiment") > keys.index("nDCG_at_10")

    record = evaluation_record(result)
    long = pd.read_parquet(io.BytesIO(record.files["per_query_metrics.parquet"]))
    assert list(long.columns) == ["query_id", "measure", "value", "level"]
    assert set(long["level"]) == {"passage", "document"}
    pd.testing.assert_frame_equal(record.tables["levels"], table)
    summary = json.loads(record.files["metrics.json"])
    assert summary["levels"]["document"]["MRR"] == pytest.approx(parent_mean)
    assert summary["aggregates"] == summary["levels"]["passage"]
    wide = cmp.wide_scores(long)
    assert wide.loc["q1", "parent/MRR"] == result.parent.per_query.loc["q1", "MRR"]
    assert wide.loc["q1", "MRR"] == result.evaluation.per_query.loc["q1", "MRR"]


def test_a_document_level_run_has_one_level(tiny, tmp_path):
    result = tiny_run(tiny, tmp_path, ["evaluation.level=document"])
    assert result.level == "document" and result.parent is None
    assert list(result.levels) == ["document"]
    assert set(result.level_aggregates()["level"]) == {"document"}
    assert list(result.level_table().columns) == ["document"]
    assert not any(k.startswith("parent/") for k in metric_names(result))
    long = result.per_query_long()
    # One level: the wide table is as recorded, no parent/ columns.
    assert list(cmp.wide_scores(long).columns) == sorted(result.evaluation.per_query.columns)


@pytest.fixture(scope="module")
def two_runs(store) -> tuple[str, str, str]:
    baseline = record_run(store, name="levels-baseline", experiment="levels-tests")
    candidate = record_run(
        store, overrides=["retrieval.stages.0.candidates=3"], name="levels-candidate", experiment="levels-tests"
    )
    return store, baseline, candidate


def test_the_comparison_lines_up_both_levels_with_significance_per_level(two_runs):
    store, baseline, candidate = two_runs
    tracker = Tracker(store)
    inputs = load_inputs(tracker, baseline, [candidate])
    comparison = cmp.compare(inputs, statistics=cmp.Statistics(resamples=200, samples=500))
    overall = comparison.overall
    assert set(overall["level"]) == {"passage", "document"}
    assert comparison.primary == "nDCG@10"
    configured = ["nDCG@10", "R@5", "R@20", "R@100", "Hit@5", "MRR", "P@5", "AP"]  # params/bm25.yaml
    assert comparison.measures == [*configured, *(f"parent/{m}" for m in configured)]
    rows = overall.set_index(["run", "measure"])
    assert rows.loc[("levels-candidate", "parent/nDCG@10"), "level"] == "document"
    assert rows.loc[("levels-candidate", "nDCG@10"), "level"] == "passage"
    assert rows.loc[("levels-baseline", "parent/nDCG@10"), "mean"] == pytest.approx(
        all_metrics(tracker.run(baseline).metrics, tracker.sealed_frame(baseline, "tables/more_metrics.parquet"))[
            "parent/nDCG_at_10"
        ]
    )
    deltas = comparison.deltas().set_index(["run", "measure"])
    assert deltas.loc[("levels-candidate", "parent/nDCG@10"), "delta"] == pytest.approx(
        rows.loc[("levels-candidate", "parent/nDCG@10"), "delta"]
    )
    assert set(comparison.metrics()) == {"delta_nDCG_at_10", "p_holm_nDCG_at_10"}
    display = cmp.significance_display(overall)
    assert display.index.names == ["run", "level", "measure"]

    # A run recorded before the parent level (per-query rows of one level, no level column) still
    # compares: passage measures only, and their p-values are the same as with the parent level beside.
    old = dataclasses.replace(
        inputs.candidates[0],
        per_query=inputs.candidates[0].per_query.query("level == 'passage'").drop(columns="level"),
    )
    quick = cmp.Statistics(resamples=200, samples=500)
    older = cmp.compare(dataclasses.replace(inputs, candidates=[old]), statistics=quick)
    assert set(older.overall["level"]) == {"passage"}
    assert not any(m.startswith("parent/") for m in older.measures)
    both = overall.set_index(["run", "measure"])
    only = older.overall.set_index(["run", "measure"])
    for measure in older.measures:
        key = ("levels-candidate", measure)
        assert only.loc[key, "p_holm"] == pytest.approx(both.loc[key, "p_holm"], nan_ok=True)
        assert only.loc[key, "mean"] == pytest.approx(both.loc[key, "mean"])
