"""Retrieval stages: BM25 ranks exactly as raw bm25s does; the pipeline times and isolates failures."""

from __future__ import annotations

import bm25s
import pandas as pd
import pytest
import Stemmer

from rageval.benchmark.chunking import chunk_corpus
from rageval.benchmark.schema import ChunkingConfig, Document
from rageval.errors import EvaluationError
from rageval.experiment.run import level_run
from rageval.retrieval import BM25Stage, Corpus, Hit, Pipeline, Query
from rageval.retrieval.schema import BM25Config

TEXTS = [
    "Publishing retries after a cache failure keep the revision tuple.",
    "Webhooks are signed with a shared secret; rotate the secret monthly.",
    "Billing plans: the team plan includes ten seats and SSO.",
    "Restore a backup from the nightly snapshot and replay the journal.",
    "Cache purges run after every publish commit.",
]
DOCS = [Document(id=f"d{i}", title="", text=t) for i, t in enumerate(TEXTS)]
CHUNKS = chunk_corpus(DOCS, ChunkingConfig(method="none", headings=False))
CORPUS = Corpus(CHUNKS, {d.id: d for d in DOCS})
CONFIG = BM25Config(type="bm25", k1=1.2, b=0.75, candidates=10)


def test_bm25_stage_ranks_exactly_as_raw_bm25s():
    stage = BM25Stage(CONFIG, CORPUS)
    stemmer = Stemmer.Stemmer("english")
    raw = bm25s.BM25(k1=1.2, b=0.75)
    raw.index(bm25s.tokenize(TEXTS, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
    for query in ("cache publish", "secret rotation", "nightly backup restore"):
        docs, scores = raw.retrieve(
            bm25s.tokenize([query], stopwords="en", stemmer=stemmer, show_progress=False), k=5, show_progress=False
        )
        expected = sorted(
            ((f"d{d}", float(s)) for d, s in zip(docs[0], scores[0], strict=True) if s > 0), key=lambda x: (-x[1], x[0])
        )
        got = [(h.chunk_id.split("#")[0], h.score) for h in stage(Query("q", query))]
        assert [d for d, _ in got] == [d for d, _ in expected] and got
        assert [s for _, s in got] == pytest.approx([s for _, s in expected])


def test_a_query_with_no_known_term_retrieves_nothing():
    assert BM25Stage(CONFIG, CORPUS)(Query("q", "zebra xylophone")) == []
    assert BM25Stage(CONFIG, CORPUS)(Query("q", "the and of")) == []


def test_candidates_bound_the_ranking():
    hits = BM25Stage(CONFIG.model_copy(update={"candidates": 1}), CORPUS)(Query("q", "cache publish"))
    assert len(hits) == 1


class Exploding:
    name = "exploding"

    def __call__(self, query: Query, inputs=()) -> list[Hit]:
        if query.query_id == "bad":
            raise RuntimeError("index unavailable")
        return inputs[0]


def test_pipeline_records_latency_and_isolates_a_failing_query():
    pipeline = Pipeline([BM25Stage(CONFIG, CORPUS), Exploding()])
    output = pipeline.run([Query("good", "cache"), Query("bad", "cache")])
    assert list(output.hits) == ["good"] and output.final_stage["good"] == "exploding"
    assert output.failures == [("bad", "exploding", "RuntimeError", "index unavailable")]
    stages = [(q, s) for q, s, _ in output.latencies if ":" not in s]
    assert stages == [("good", "bm25"), ("good", "exploding"), ("bad", "bm25"), ("bad", "exploding")]
    assert {s for _, s, _ in output.latencies if ":" in s} == {"bm25:tokenize", "bm25:search"}
    assert set(output.stages["bm25"]) == {"good", "bad"} and set(output.stages["exploding"]) == {"good"}
    assert all(seconds >= 0 for _, _, seconds in output.latencies)


def test_document_level_keeps_each_parent_once_at_its_best_chunk():
    rankings = pd.DataFrame(
        {
            "query_id": ["q", "q", "q", "r"],
            "rank": [1, 2, 3, 1],
            "chunk_id": ["a#h-1", "a#h-0", "b#h-0", "b#h-2"],
            "parent_id": ["a", "a", "b", "b"],
            "score": [3.0, 2.0, 1.0, 5.0],
        }
    )
    documents = level_run(rankings, "document")
    assert documents.to_dict("list") == {
        "query_id": ["q", "q", "r"],
        "doc_id": ["a", "b", "b"],
        "score": [3.0, 1.0, 5.0],
        "rank": [1, 2, 1],
    }
    assert level_run(rankings, "passage")["doc_id"].tolist() == ["a#h-1", "a#h-0", "b#h-0", "b#h-2"]
    with pytest.raises(EvaluationError, match="document, passage"):
        level_run(rankings, "sentence")


def test_stage_registry_and_config_union_name_the_same_types():
    """One source: the stage types are the members of StageConfig; the pipeline's classes follow it."""
    from rageval.retrieval.pipeline import STAGES, stage_class
    from rageval.retrieval.schema import RETRIEVER_TYPES, STAGE_TYPES

    assert list(STAGES) == list(STAGE_TYPES)
    assert all(callable(stage_class(stage_type)) for stage_type in STAGES)  # every lazy entry resolves
    assert RETRIEVER_TYPES == {"bm25", "dense", "runfile", "http", "langchain", "llamaindex"}


def test_a_cached_index_is_memory_mapped_and_ranks_as_a_fresh_one(tmp_path):
    import numpy as np

    from rageval.retrieval.cache import Cache

    cached = Corpus(CHUNKS, {d.id: d for d in DOCS}, key={"corpus": "t", "chunking": "none"}, cache=Cache(tmp_path))
    built, reused, fresh = BM25Stage(CONFIG, cached), BM25Stage(CONFIG, cached), BM25Stage(CONFIG, CORPUS)
    assert (built.cache_hit, reused.cache_hit, fresh.cache_hit) == (False, True, None)
    for stage in (built, reused):  # the score matrix stays in the entry's files
        assert all(isinstance(stage._retriever.scores[k], np.memmap) for k in ("data", "indices", "indptr"))
    assert not isinstance(fresh._retriever.scores["data"], np.memmap)
    for query in ("cache publish", "secret rotation", "nightly backup restore", "seats"):
        expected = fresh(Query("q", query))
        assert expected and built(Query("q", query)) == expected == reused(Query("q", query))
