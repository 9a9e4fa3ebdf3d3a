"""A plugin retriever written only against the public API passes the shipped contract test, and
runs in a pipeline from a params file."""

from __future__ import annotations

import ir_measures
import pytest
from conftest import ROOT
from plugins.keyword import KeywordOverlap

from rageval.config.load import load_config
from rageval.experiment.run import run_experiment
from rageval.testing import RetrieverContract


class TestKeywordPlugin(RetrieverContract):
    def make_stage(self, corpus):
        return KeywordOverlap(corpus)


def test_a_plugin_runs_from_params_and_is_measured(tmp_path):
    config = load_config(
        ROOT / "params" / "bm25.yaml",
        [
            'retrieval.stages=[{type: plugin, name: keyword, entrypoint: "plugins.keyword:KeywordOverlap", options: {min_overlap: 2}}]'
        ],
    )
    result = run_experiment(config, cache=False)
    assert result.stage_names == ("keyword",)
    assert set(result.rankings["stage"]) == {"keyword"} and len(result.rankings) > 0
    # The reference: ir_measures (pytrec_eval, trec_eval's code) on the plugin's final ranking and the
    # judgments it was measured against, ranked as rageval ranked them (its ties broken by chunk ID).
    qrels = [ir_measures.Qrel(q, chunk, grade) for q, graded in result.qrels.items() for chunk, grade in graded.items()]
    run = [ir_measures.ScoredDoc(r.query_id, r.chunk_id, -float(r.rank)) for r in result.rankings.itertuples()]
    reference = ir_measures.calc_aggregate([ir_measures.R @ 100], qrels, run)[ir_measures.R @ 100]
    assert round(reference, 4) == 0.7301
    assert result.evaluation.aggregates["R@100"] == pytest.approx(reference, abs=1e-12)
    assert (result.level, result.evaluation.evaluated) == ("passage", 31)
