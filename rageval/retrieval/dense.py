"""Dense retrieval: a sentence-transformers bi-encoder, normalized embeddings, cosine similarity.

Document embeddings are cached by corpus, chunking, model identity and every encoding setting, so
a second run (or a sweep member varying anything downstream) never encodes the corpus again. A team's own
vectors may be imported instead (``vectors:``, :mod:`rageval.retrieval.vectors`): nothing is encoded
but the queries. Search is exact (a matrix-vector product in numpy, or faiss's flat inner-product
index) or approximate (``ivf``, ``hnsw``: faiss), the approximate index's recall against exact search
measured at build and recorded with the run's model record.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from rageval import progress
from rageval.errors import ConfigError, Problem
from rageval.progress import SILENT, Reporter
from rageval.retrieval import encoders, vectors
from rageval.retrieval.base import Corpus, Hit, Query, top_hits
from rageval.retrieval.schema import DenseConfig

EMBEDDINGS_VERSION = "rageval-embeddings/1"
EMBEDDINGS_FILE = "embeddings.npy"


def document_embeddings(
    config: DenseConfig, corpus: Corpus, reporter: Reporter = SILENT
) -> tuple[np.ndarray, bool | None, dict[str, str]]:
    """Embeddings of every chunk's indexed text (rows in corpus order), whether they came from
    the cache, and the model's identity. ``reporter``: the step, and a bar while encoding."""
    reporter.step(f"{config.name}: corpus embeddings")
    path = encoders.resolve_model(config.model)
    identity = encoders.model_identity(config.model, path)

    def build() -> np.ndarray:
        # The texts only when encoding: on a cache hit they would be a copy of the whole corpus.
        texts = [config.document_prefix + chunk.index_text for chunk in corpus.chunks]
        model = encoders.bi_encoder(path, config.device)
        return encoders.encode(
            model,
            texts,
            batch_size=config.batch_size,
            max_seq_length=config.max_seq_length,
            reporter=reporter,
            desc="chunks encoded",
        )

    if corpus.cache is None:
        return build(), None, identity
    key = embeddings_key(config, corpus, identity)
    entry = corpus.cache.get_or_build("embeddings", key, lambda folder: np.save(folder / EMBEDDINGS_FILE, build()))
    embeddings = np.load(entry.path / EMBEDDINGS_FILE)
    if embeddings.shape[0] != len(corpus.chunks):  # guards a hash collision or a hand-edited entry
        raise ConfigError(
            Problem(file=str(entry.path), message="cached embeddings do not match the corpus", fix="delete the entry")
        )
    return embeddings, entry.hit, identity


def embeddings_key(config: DenseConfig, corpus: Corpus, identity: dict[str, str] | None = None) -> dict:
    """The cache key of ``corpus``'s embeddings under ``config`` (``identity``: the model's, if known)."""
    if identity is None:
        identity = encoders.model_identity(config.model, encoders.resolve_model(config.model))
    return {
        "version": EMBEDDINGS_VERSION,
        **corpus.key,
        "model": identity,
        "settings": config.model_dump(mode="json", include={"max_seq_length", "document_prefix"}),
    }


class DenseStage:
    """A retriever over the corpus embeddings."""

    def __init__(self, config: DenseConfig, corpus: Corpus) -> None:
        self.name = config.name
        self.config = config
        self.corpus = corpus
        reporter = progress.current()
        reporter.step(f"{config.name}: load model")  # torch and the model: seconds, once per process
        self._path = encoders.resolve_model(config.model)
        self._model = encoders.bi_encoder(self._path, config.device)
        if config.vectors is None:
            self.embeddings, self.cache_hit, self.model_identity = document_embeddings(config, corpus, reporter)
        else:
            reporter.step(f"{config.name}: import vectors")
            imported = vectors.import_vectors(
                config.vectors, corpus, model=config.model, dimension=encoders.embedding_dimension(self._model)
            )
            self.embeddings, self.cache_hit = imported.matrix, None
            self.model_identity = {**encoders.model_identity(config.model, self._path), **imported.identity}
        self.ann: vectors.AnnIndex | None = None
        self._index = _faiss_index(self.embeddings) if config.search == "faiss" else None
        if config.search in ("ivf", "hnsw"):
            reporter.step(f"{config.name}: {config.search} index")
            k = min(config.candidates, len(corpus.chunks))
            self.ann = vectors.build_ann(self.embeddings, config.search, config.ann, k)
            self.model_identity = {**self.model_identity, **self.ann.record(config.search, config.ann)}
        self.steps: dict[str, float] = {}

    def embed_query(self, text: str) -> np.ndarray:
        return encoders.encode_query(
            self._model, self.config.query_prefix + text, max_seq_length=self.config.max_seq_length
        )

    def __call__(self, query: Query, inputs: Sequence[list[Hit]] = ()) -> list[Hit]:
        started = time.perf_counter()
        vector = self.embed_query(query.text)
        embedded = time.perf_counter()
        if self.ann is not None and query.allowed is None:
            hits = vectors.ann_hits(
                self.corpus, self.ann.index, vector, min(self.config.candidates, len(self.corpus.chunks))
            )
            self.steps = {"embed": embedded - started, "search": time.perf_counter() - embedded}
            return hits
        if self._index is not None and query.allowed is None:
            k = min(self.config.candidates, len(self.corpus.chunks))
            # faiss returns the top k; ask for one more to settle ties at the cut by chunk ID below.
            scores_k, positions = self._index.search(vector[None, :], min(k + 1, len(self.corpus.chunks)))
            scores = np.full(len(self.corpus.chunks), -np.inf, dtype=np.float32)
            valid = positions[0] >= 0
            scores[positions[0][valid]] = scores_k[0][valid]
        else:
            scores = self.embeddings @ vector
        hits = top_hits(self.corpus, scores, self.config.candidates, query.allowed)
        self.steps = {"embed": embedded - started, "search": time.perf_counter() - embedded}
        return hits


def _faiss_index(embeddings: np.ndarray):
    faiss = vectors.faiss_module()
    index = faiss.IndexFlatIP(embeddings.shape[1])
    index.add(np.ascontiguousarray(embeddings, dtype=np.float32))
    return index
