"""Lexical BM25 through bm25s, over the chunks' indexed text."""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from rageval import progress
from rageval.retrieval.base import Corpus, Hit, Query
from rageval.retrieval.schema import BM25Config

with progress.no_tqdm_notice():
    import bm25s

INDEX_VERSION = "rageval-bm25-index/1"


class BM25Stage:
    """bm25s with the configured k1, b, variant and tokenizer. A retriever: it takes no inputs.
    Equal scores come out in chunk-ID order. The index is cached by corpus, chunking and every
    setting that changes it.

    Scores <= 0 are dropped: bm25s returns arbitrary chunks with score 0 for a query with no known
    term, which would otherwise count as retrieved.

    A cached index is memory-mapped (bm25s ``load(..., mmap=True)``): its arrays stay in the entry's
    files and the operating system pages in what the queries touch, so a million-chunk index costs
    no heap and a second run (or a sweep member) starts without reading it whole. On a miss the
    freshly built index is saved, dropped, and mapped like a hit, so both read the same bytes.
    """

    def __init__(self, config: BM25Config, corpus: Corpus) -> None:
        self.name = config.name
        self.config = config
        self.corpus = corpus
        options = config.tokenizer
        self._tokenize_options = {
            "lower": options.lowercase,
            "token_pattern": options.pattern,
            "stopwords": options.stopwords or [],
            "stemmer": _stemmer(options.stemmer),
            "show_progress": False,
        }
        self._k = min(config.candidates, len(corpus.chunks))
        self.steps: dict[str, float] = {}
        self.cache_hit: bool | None = None
        self._reporter = progress.current()
        self._reporter.step(f"{self.name}: BM25 index")
        if corpus.cache is None:
            self._retriever = self._build()
        else:
            key = {
                "version": INDEX_VERSION,
                "bm25s": bm25s.__version__,
                **corpus.key,
                "settings": config.model_dump(mode="json", include={"k1", "b", "method", "tokenizer"}),
            }
            entry = corpus.cache.get_or_build(
                "bm25", key, lambda folder: self._build().save(str(folder), show_progress=False)
            )
            self.cache_hit = entry.hit
            self._retriever = bm25s.BM25.load(str(entry.path), mmap=True, show_progress=False)

    def _build(self) -> bm25s.BM25:
        retriever = bm25s.BM25(k1=self.config.k1, b=self.config.b, method=self.config.method)
        chunks = self.corpus.chunks
        # bm25s only iterates the texts: each is built as it is tokenized (never all held at once),
        # and the bar counts them.
        texts = (chunk.index_text for chunk in chunks)
        bar = self._reporter.bar(texts, desc="chunks tokenized", total=len(chunks))
        tokens = bm25s.tokenize(bar, **self._tokenize_options)
        retriever.index(tokens, show_progress=False)
        return retriever

    def __call__(self, query: Query, inputs: Sequence[list[Hit]] = ()) -> list[Hit]:
        started = time.perf_counter()
        tokens = bm25s.tokenize([query.text], return_ids=False, **self._tokenize_options)
        tokenized = time.perf_counter()
        self.steps = {"tokenize": tokenized - started}
        if not tokens[0] or self._k == 0:
            return []
        mask = None
        if query.allowed is not None:
            mask = np.zeros(len(self.corpus.chunks), dtype=np.float32)
            mask[query.allowed] = 1.0
        docs, scores = self._retriever.retrieve(tokens, k=self._k, show_progress=False, weight_mask=mask)
        keep = scores[0] > 0
        docs, scores = docs[0][keep], scores[0][keep]
        order = np.lexsort((self.corpus.id_rank[docs], -scores))
        ids = self.corpus.ids
        hits = [Hit(ids[d], s) for d, s in zip(docs[order].tolist(), scores[order].tolist(), strict=True)]
        self.steps["search"] = time.perf_counter() - tokenized
        return hits


def _stemmer(language: str | None):
    if language is None:
        return None
    import Stemmer

    return Stemmer.Stemmer(language)
