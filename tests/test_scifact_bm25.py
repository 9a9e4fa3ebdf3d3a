"""The BM25 baseline lands where published BM25 numbers say a correct one must."""

from __future__ import annotations

import pytest
from conftest import ROOT, shared

from rageval.benchmark.importers import import_beir
from rageval.config.load import load_config
from rageval.experiment.run import run_experiment

pytestmark = pytest.mark.realdata


def test_bm25_on_scifact_release_is_in_the_published_range(tmp_path):
    folder = import_beir(
        shared("scifact"), tmp_path / "scifact", name="scifact", version="1", splits={"train": "dev", "test": "release"}
    )
    config = load_config(
        ROOT / "params" / "bm25.yaml",
        ["chunking.method=none", "retrieval.stages.0.candidates=1000", "evaluation.measures=[nDCG@10, R@100]"],
        benchmark=folder,
        split="release",
    )
    assert (config.retrieval.stages[0].k1, config.retrieval.stages[0].b) == (0.9, 0.4)
    result = run_experiment(config)
    assert result.evaluation.evaluated == 300 and result.level == "document"
    # Anserini Lucene BM25 (k1 0.9, b 0.4, title+text): nDCG@10 0.6789, R@100 0.9253.
    assert 0.66 <= result.evaluation.aggregates["nDCG@10"] <= 0.70
    assert 0.88 <= result.evaluation.aggregates["R@100"] <= 0.95
