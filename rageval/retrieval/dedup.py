"""Deduplication: exact duplicates (same normalized text), near duplicates (word-shingle Jaccard)
and a cap on chunks per parent document. The better-ranked chunk always stays."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from functools import lru_cache

from rageval.retrieval.base import Corpus, Hit, Query
from rageval.retrieval.schema import DedupConfig

_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"\w+")


@lru_cache(maxsize=4096)  # the context and the diagnostics key the same top chunks of each query
def text_key(text: str) -> str:
    """Exact-duplicate key: case and whitespace do not make two chunks different."""
    return hashlib.sha1(_SPACE.sub(" ", text).strip().lower().encode()).hexdigest()


def shingles(text: str, size: int) -> frozenset[tuple[str, ...]]:
    words = _WORD.findall(text.lower())
    if len(words) <= size:
        return frozenset([tuple(words)]) if words else frozenset()
    return frozenset(tuple(words[i : i + size]) for i in range(len(words) - size + 1))


def jaccard(a: frozenset, b: frozenset) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def exact_dedup(chunk_ids: Sequence[str], corpus: Corpus, limit: int | None = None) -> list[str]:
    """``chunk_ids`` without exact duplicates (the first stays), at most ``limit`` of them."""
    seen: set[str] = set()
    out: list[str] = []
    for chunk_id in chunk_ids:
        if limit is not None and len(out) >= limit:
            break
        key = text_key(corpus.by_id(chunk_id).text)
        if key not in seen:
            seen.add(key)
            out.append(chunk_id)
    return out


class DedupStage:
    def __init__(self, config: DedupConfig, corpus: Corpus) -> None:
        self.name = config.name
        self.config = config
        self.corpus = corpus
        self._keys = [text_key(chunk.text) for chunk in corpus.chunks] if config.exact else None
        self._shingles: dict[int, frozenset] = {}

    def _shingle(self, position: int) -> frozenset:
        if position not in self._shingles:
            assert self.config.near is not None
            self._shingles[position] = shingles(self.corpus.chunks[position].text, self.config.near.shingle)
        return self._shingles[position]

    def _near_duplicate(self, position: int, kept: list[int], threshold: float) -> bool:
        mine = self._shingle(position)
        for other in kept:
            theirs = self._shingle(other)
            # Jaccard <= min/max of the set sizes: skip pairs that cannot reach the threshold.
            small, large = sorted((len(mine), len(theirs)))
            if large and small / large < threshold:
                continue
            if jaccard(mine, theirs) >= threshold:
                return True
        return False

    def __call__(self, query: Query, inputs: Sequence[list[Hit]] = ()) -> list[Hit]:
        (previous,) = inputs
        position = self.corpus.position
        keys_seen: set[str] = set()
        kept_positions: list[int] = []
        per_parent: dict[str, int] = {}
        out = []
        near = self.config.near
        cap = self.config.max_per_parent
        for hit in previous:
            pos = position[hit.chunk_id]
            if self._keys is not None:
                if self._keys[pos] in keys_seen:
                    continue
            if near is not None and self._near_duplicate(pos, kept_positions, near.threshold):
                continue
            parent = self.corpus.chunks[pos].parent_id
            if cap is not None and per_parent.get(parent, 0) >= cap:
                continue
            if self._keys is not None:
                keys_seen.add(self._keys[pos])
            kept_positions.append(pos)
            per_parent[parent] = per_parent.get(parent, 0) + 1
            out.append(hit)
        return out
