"""Lexical BM25 through bm25s, over the chunks' indexed text."""

from __future__ import annotations

from collections.abc import Sequence

import bm25s
import numpy as np

from rageval.chunking import Chunk
from rageval.retrieval.base import Hit, Query
from rageval.schema import BM25Config


class BM25Stage:
    """bm25s with the configured k1, b, variant and tokenizer. A first stage: it ignores ``previous``.
    Equal scores come out in chunk-ID order.

    Scores <= 0 are dropped: bm25s returns arbitrary chunks with score 0 for a query with no known
    term, which would otherwise count as retrieved.
    """

    def __init__(self, config: BM25Config, chunks: Sequence[Chunk]) -> None:
        self.name = config.name
        self.config = config
        options = config.tokenizer
        self._tokenize_options = {
            "lower": options.lowercase,
            "token_pattern": options.pattern,
            "stopwords": options.stopwords or [],
            "stemmer": _stemmer(options.stemmer),
            "show_progress": False,
        }
        self._ids = [chunk.chunk_id for chunk in chunks]
        # Position of each chunk in chunk-ID order: equal scores are ordered by ID, vectorized.
        self._id_order = np.argsort(np.argsort(np.array(self._ids)))
        self._k = min(config.candidates, len(chunks))
        self._retriever = bm25s.BM25(k1=config.k1, b=config.b, method=config.method)
        tokens = bm25s.tokenize([chunk.index_text for chunk in chunks], **self._tokenize_options)
        self._retriever.index(tokens, show_progress=False)

    def __call__(self, query: Query, previous: list[Hit] | None = None) -> list[Hit]:
        tokens = bm25s.tokenize([query.text], return_ids=False, **self._tokenize_options)
        if not tokens[0] or self._k == 0:
            return []
        docs, scores = self._retriever.retrieve(tokens, k=self._k, show_progress=False)
        keep = scores[0] > 0
        docs, scores = docs[0][keep], scores[0][keep]
        order = np.lexsort((self._id_order[docs], -scores))
        ids = self._ids
        return [Hit(ids[d], s) for d, s in zip(docs[order].tolist(), scores[order].tolist(), strict=True)]


def _stemmer(language: str | None):
    if language is None:
        return None
    import Stemmer

    return Stemmer.Stemmer(language)
