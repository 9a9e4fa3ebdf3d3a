"""What every retrieval stage takes and returns.

A stage is built from its config model and the :class:`Corpus`, and has one method::

    __call__(query: Query, inputs: Sequence[list[Hit]]) -> list[Hit]

``inputs`` are the rankings of the stages it consumes, in the order its config names them: empty
for a retriever, the previous stage's ranking for a reranker, filter or dedup step, several for a
fusion. A stage returns hits best first with no chunk repeated. Optional attributes a stage may set,
recorded by the pipeline: ``cache_hit`` (bool, after construction), ``external_calls`` (int, calls
to services outside the process so far), ``call_counts`` (``{"attempts", "retries", "failures"}``
of those calls), ``steps`` (``{step: seconds}`` of its last call, e.g. ``{"embed": …, "search": …}``)
and ``query_seconds`` (its own measure of its last call, recorded instead of the call's duration).
A retriever that waits on a service may also have ``prefetch(queries)`` and ``prefetch_window``
(the pipeline hands it each window of queries first, so its calls overlap) and ``close()`` (called
after each run). See :mod:`rageval.retrieval.pipeline` and the ``http`` stage.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, NamedTuple, Protocol

import numpy as np

if TYPE_CHECKING:
    from rageval.benchmark.chunking import Chunk
    from rageval.benchmark.schema import Document
    from rageval.retrieval.cache import Cache


@dataclass(frozen=True, eq=False)
class Query:
    query_id: str
    text: str
    principal: tuple[str, ...] | None = None
    # Chunks a retriever may return (positions in Corpus.chunks); None: all. Set by a filter
    # stage with ``when: before``.
    allowed: np.ndarray | None = None


class Hit(NamedTuple):
    # A tuple, not a dataclass: stages build thousands per query and tuples are cheap.
    chunk_id: str
    score: float


@dataclass(frozen=True, eq=False)
class Corpus:
    """The chunks a pipeline searches, their documents, and where expensive builds are cached.

    ``key`` identifies the content (corpus hash + chunking hash): cache entries are keyed by it.
    """

    chunks: Sequence[Chunk]
    documents: Mapping[str, Document]
    key: Mapping[str, str] = field(default_factory=dict)
    cache: Cache | None = None

    @cached_property
    def ids(self) -> list[str]:
        return [chunk.chunk_id for chunk in self.chunks]

    @cached_property
    def position(self) -> dict[str, int]:
        return {chunk.chunk_id: index for index, chunk in enumerate(self.chunks)}

    @cached_property
    def id_rank(self) -> np.ndarray:
        """Each chunk's position in chunk-ID order: equal scores are ordered by ID, vectorized."""
        return np.argsort(np.argsort(np.array(self.ids)))

    def by_id(self, chunk_id: str) -> Chunk:
        return self.chunks[self.position[chunk_id]]


class Stage(Protocol):
    """A retrieval stage (see the module docstring)."""

    name: str

    def __call__(self, query: Query, inputs: Sequence[list[Hit]] = ()) -> list[Hit]: ...


def top_hits(corpus: Corpus, scores: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[Hit]:
    """The ``k`` best of a dense score vector over ``corpus.chunks``, ties by chunk ID; chunks not
    in ``allowed`` (a position array) are never returned."""
    if allowed is not None:
        masked = np.full(scores.shape, -np.inf, dtype=scores.dtype)
        masked[allowed] = scores[allowed]
        scores = masked
    k = min(k, int(np.isfinite(scores).sum()))
    if k <= 0:
        return []
    top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
    # Equal scores straddling the cut must be settled by ID too: widen to every chunk tied with the k-th.
    kth = scores[top].min()
    top = np.union1d(top, np.flatnonzero(scores == kth))
    order = np.lexsort((corpus.id_rank[top], -scores[top]))[:k]
    ids = corpus.ids
    return [Hit(ids[i], s) for i, s in zip(top[order].tolist(), scores[top[order]].tolist(), strict=True)]
