"""Rerank the top ``top_n`` candidates of the previous stage.

``cross-encoder``: any local sentence-transformers CrossEncoder folder scores (query, chunk) pairs.
No cross-encoder is packaged for offline use on PyPI as far as we found (flashrank and the
sentence-transformers examples download from the Hugging Face hub at run time), so rageval ships
none. ``bi-encoder``: re-scores with the offline bi-encoder (cosine of query and chunk embeddings,
the chunk embeddings taken from the same content-addressed cache as the dense stage). Candidates
below ``top_n`` keep their order after the reranked ones.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from rageval import progress
from rageval.retrieval import encoders
from rageval.retrieval.base import Corpus, Hit, Query
from rageval.retrieval.dense import document_embeddings
from rageval.retrieval.schema import DenseConfig, RerankConfig


class RerankStage:
    def __init__(self, config: RerankConfig, corpus: Corpus) -> None:
        self.name = config.name
        self.config = config
        self.corpus = corpus
        self.steps: dict[str, float] = {}
        path = encoders.resolve_model(config.model)
        self.model_identity = encoders.model_identity(config.model, path)
        self.cache_hit: bool | None = None
        if config.model_type == "cross-encoder":
            self._cross = encoders.cross_encoder(path, config.device, config.max_seq_length)
        else:
            as_dense = DenseConfig(
                type="dense",
                model=config.model,
                batch_size=config.batch_size,
                max_seq_length=config.max_seq_length,
                device=config.device,
            )
            self._embeddings, self.cache_hit, _ = document_embeddings(as_dense, corpus, progress.current())
            self._bi = encoders.bi_encoder(path, config.device)

    def scores(self, query: Query, chunk_ids: list[str]) -> np.ndarray:
        if self.config.model_type == "cross-encoder":
            texts = [self.corpus.by_id(c).index_text for c in chunk_ids]
            return np.asarray(
                self._cross.predict(
                    [(query.text, t) for t in texts], batch_size=self.config.batch_size, show_progress_bar=False
                ),
                dtype=np.float64,
            )
        vector = encoders.encode_query(self._bi, query.text, max_seq_length=self.config.max_seq_length)
        position = self.corpus.position
        values = np.empty(len(chunk_ids), dtype=np.float64)
        known = [i for i, c in enumerate(chunk_ids) if c in position]
        values[known] = self._embeddings[[position[chunk_ids[i]] for i in known]] @ vector
        # Another system's passages are not in the cached embeddings: encoded now with the same model.
        others = [i for i, c in enumerate(chunk_ids) if c not in position]
        if others:
            texts = [self.corpus.by_id(chunk_ids[i]).index_text for i in others]
            encoded = encoders.encode(
                self._bi, texts, batch_size=self.config.batch_size, max_seq_length=self.config.max_seq_length
            )
            values[others] = encoded @ vector
        return values

    def __call__(self, query: Query, inputs: Sequence[list[Hit]] = ()) -> list[Hit]:
        (previous,) = inputs
        head, tail = previous[: self.config.top_n], previous[self.config.top_n :]
        if not head:
            return list(previous)
        started = time.perf_counter()
        values = self.scores(query, [h.chunk_id for h in head])
        # Equal scores by ID (byte order), chunks and other systems' passages alike.
        order = np.lexsort((np.argsort(np.argsort(np.array([h.chunk_id for h in head]))), -values))
        reranked = [Hit(head[i].chunk_id, float(values[i])) for i in order.tolist()]
        # The tail keeps its order; its scores are shifted below the reranked ones so scores stay non-increasing.
        floor = float(values.min())
        tail_hits = [Hit(h.chunk_id, floor - 1.0 - i) for i, h in enumerate(tail)]
        self.steps = {"score": time.perf_counter() - started}
        return reranked + tail_hits
