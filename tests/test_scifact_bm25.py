"""The BM25 baseline gives exactly what raw bm25s and trec_eval give on SciFact, inside the published range."""

from __future__ import annotations

import pytest
from conftest import ROOT, shared

from rageval.benchmark.beir import BeirImport, import_beir
from rageval.config.load import load_config
from rageval.experiment.run import run_experiment

pytestmark = pytest.mark.realdata


# The reference, computed without rageval: bm25s 0.3.16 (Lucene variant, k1 0.9, b 0.4) over the BEIR
# corpus.jsonl (title, a space, text), tokenized as params/bm25.yaml says (lower case, bm25s' English
# stopwords, PyStemmer's English stemmer), each test query's top 1,000 with a score above 0, ties by
# ID; scored by ir_measures 0.4 (pytrec_eval: trec_eval's code) against qrels/test.tsv: nDCG@10
# 0.676188, R@100 0.912667. Published for comparison, Anserini Lucene BM25 (k1 0.9, b 0.4,
# title+text): nDCG@10 0.6789, R@100 0.9253 — another tokenizer, so a near figure, not the same one.
REFERENCE = {"nDCG@10": 0.6762, "R@100": 0.9127}


def test_bm25_on_scifact_release_gives_the_reference_figures(tmp_path):
    folder = import_beir(
        BeirImport(
            source=shared("scifact"),
            out=tmp_path / "scifact",
            name="scifact",
            version="1",
            splits={"train": "dev", "test": "release"},
        )
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
    figures = {measure: round(float(value), 4) for measure, value in result.evaluation.aggregates.items()}
    assert figures == REFERENCE
    assert abs(figures["nDCG@10"] - 0.6789) < 0.01 and abs(figures["R@100"] - 0.9253) < 0.02  # the published run
