"""A plugin retriever written only against the public API passes the shipped contract test, and
runs in a pipeline from a params file."""

from __future__ import annotations

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
    assert 0 < result.evaluation.aggregates["R@100"] <= 1
