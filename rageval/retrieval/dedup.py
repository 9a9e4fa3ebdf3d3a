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
        self._shingles: dict[str, frozenset] = {}

    def _shingle(self, hit_id: str) -> frozenset:
        if hit_id not in self._shingles:
            size = self.config.near.shingle if self.config.near is not None else 1
            self._shingles[hit_id] = shingles(self.corpus.by_id(hit_id).text, size)
        return self._shingles[hit_id]

    def _key(self, hit_id: str) -> str:
        """A hit's exact-duplicate key: precomputed for chunks, computed for another system's passages."""
        position = self.corpus.position.get(hit_id)
        if self._keys is not None and position is not None:
            return self._keys[position]
        return text_key(self.corpus.by_id(hit_id).text)

    def _near_duplicate(self, hit_id: str, kept: list[str], threshold: float) -> bool:
        mine = self._shingle(hit_id)
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
        keys_seen: set[str] = set()
        kept_ids: list[str] = []
        per_parent: dict[str, int] = {}
        out = []
        near = self.config.near
        cap = self.config.max_per_parent
        for hit in previous:
            key = self._key(hit.chunk_id) if self._keys is not None else ""
            if self._keys is not None and key in keys_seen:
                continue
            if near is not None and self._near_duplicate(hit.chunk_id, kept_ids, near.threshold):
                continue
            parent = self.corpus.by_id(hit.chunk_id).parent_id
            if cap is not None and per_parent.get(parent, 0) >= cap:
                continue
            if self._keys is not None:
                keys_seen.add(key)
            kept_ids.append(hit.chunk_id)
            per_parent[parent] = per_parent.get(parent, 0) + 1
            out.append(hit)
        return out
