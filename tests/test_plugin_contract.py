"""A plugin retriever written only against the public API passes the shipped contract test, and
runs in a pipeline from a params file."""

from __future__ import annotations

import ir_measures
import pytest
from conftest import ROOT
from plugins.keyword import KeywordOverlap

from rageval.config.load import load_config
from rageval.experiment.run import level_run, run_experiment
from rageval.testing import RetrieverContract


class TestKeywordPlugin(RetrieverContract):
    def make_stage(self, corpus):
        return KeywordOverlap(corpus)


def test_a_plugin_runs_from_params_and_is_measured(tmp_path):
    config = load_config(
        ROOT / "params" / "bm25.yaml",
        [
            'retrieval.stages=[{type: plugin, name: keyword, entrypoint: "plugins.keyword:KeywordOverlap", options: {min_overlap: 2}}]',
            # Document level: the judgments are IDs there, as ir_measures (the reference) needs.
            "evaluation.level=document",
        ],
    )
    result = run_experiment(config, cache=False)
    assert result.stage_names == ("keyword",)
    assert set(result.rankings["stage"]) == {"keyword"} and len(result.rankings) > 0
    # The reference: ir_measures (pytrec_eval, trec_eval's code) on the plugin's final ranking and the
    # judgments it was measured against, its ranking rolled up to documents as rageval rolls it up.
    qrels = [ir_measures.Qrel(q, chunk, grade) for q, graded in result.qrels.items() for chunk, grade in graded.items()]
    documents = level_run(result.rankings, "document")
    run = [ir_measures.ScoredDoc(r.query_id, r.doc_id, -float(r.rank)) for r in documents.itertuples()]
    reference = ir_measures.calc_aggregate([ir_measures.R @ 100], qrels, run)[ir_measures.R @ 100]
    assert round(reference, 4) == 0.9005
    assert result.evaluation.aggregates["R@100"] == pytest.approx(reference, abs=1e-12)
    assert (result.level, result.evaluation.evaluated) == ("document", 31)
