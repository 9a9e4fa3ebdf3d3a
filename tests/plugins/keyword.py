"""A retriever written only against rageval's public API, as a plugin author would."""

from __future__ import annotations

import re

from rageval.retrieval import Corpus, Hit, Query

_WORD = re.compile(r"\w+")


class KeywordOverlap:
    """Scores a chunk by how many distinct query words it contains."""

    def __init__(self, corpus: Corpus, min_overlap: int = 1) -> None:
        self.name = "keyword"
        self.corpus = corpus
        self.min_overlap = min_overlap
        self.words = [set(_WORD.findall(c.index_text.lower())) for c in corpus.chunks]

    def __call__(self, query: Query, inputs=()) -> list[Hit]:
        wanted = set(_WORD.findall(query.text.lower()))
        positions = range(len(self.corpus.chunks)) if query.allowed is None else query.allowed.tolist()
        scored = [(len(wanted & self.words[p]), self.corpus.chunks[p].chunk_id) for p in positions]
        scored = [(n, c) for n, c in scored if n >= self.min_overlap]
        scored.sort(key=lambda x: (-x[0], x[1]))
        return [Hit(c, float(n)) for n, c in scored]
