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

from rageval.benchmark.chunking import Chunk, passage_chunk
from rageval.benchmark.spans import locate
from rageval.errors import InputError

if TYPE_CHECKING:
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
    # Passages other systems returned (by offsets or text) that are not chunks of this corpus: by hit ID.
    passages: dict[str, Chunk] = field(default_factory=dict, compare=False, repr=False)

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

    @cached_property
    def extents(self) -> dict[tuple[str, int, int], str]:
        """Each chunk's ID by its (document, start, end)."""
        return {(chunk.parent_id, chunk.start, chunk.end): chunk.chunk_id for chunk in self.chunks}

    def by_id(self, chunk_id: str) -> Chunk:
        """A chunk, or a passage registered by :meth:`passage`, by its hit ID."""
        position = self.position.get(chunk_id)
        return self.chunks[position] if position is not None else self.passages[chunk_id]

    def knows(self, hit_id: str) -> bool:
        return hit_id in self.position or hit_id in self.passages

    def passage(self, document_id: str, start: int, end: int) -> str:
        """The hit ID of the passage ``[start, end)`` of a corpus document: the chunk's ID where the
        passage is exactly one of this corpus's chunks, else ``{document}#span:{start}-{end}``
        (registered, so every later step reads it like a chunk). A document that is not in the corpus
        or offsets outside its text raise :class:`InputError`."""
        document = self.documents.get(document_id)
        if document is None:
            raise InputError(
                f"passage of '{document_id}': no such document in this corpus (the system must answer with "
                "this corpus version's document IDs)"
            )
        if not 0 <= start < end <= len(document.text):
            raise InputError(
                f"passage {start}-{end} of '{document_id}': offsets must satisfy 0 <= start < end <= "
                f"{len(document.text)} (the document's length in characters)"
            )
        known = self.extents.get((document_id, start, end))
        if known is not None:
            return known
        chunk = passage_chunk(document, start, end, self.chunks[0].tokenizer if self.chunks else "words")
        self.passages.setdefault(chunk.chunk_id, chunk)
        return chunk.chunk_id

    def whole_document(self, document_id: str) -> str:
        """The hit ID of a whole document given by its ID (graded as the whole document)."""
        document = self.documents.get(document_id)
        if document is None or not document.text:
            raise InputError(f"'{document_id}' is neither a chunk nor a non-empty document of this corpus")
        return self.passage(document_id, 0, len(document.text))

    def locate_passage(self, document_id: str, text: str) -> str:
        """The hit ID of the passage of ``document_id`` whose text is ``text``: found exactly, else
        tolerant of whitespace and Unicode forms (:func:`rageval.benchmark.spans.locate`). Absent or
        ambiguous text raises :class:`InputError` naming the candidates."""
        document = self.documents.get(document_id)
        if document is None:
            raise InputError(f"passage text of '{document_id}': no such document in this corpus")
        found = locate(document.text, text)
        if found.unique is not None:
            return self.passage(document_id, *found.unique)
        shown = text if len(text) <= 60 else text[:57] + "..."
        if not found.spans:
            raise InputError(
                f"passage text {shown!r} is not in document '{document_id}' (not even after normalising whitespace and Unicode)"
            )
        places = ", ".join(f"{a}-{b}" for a, b in found.spans[:5])
        raise InputError(
            f"passage text {shown!r} occurs {len(found.spans)} times in document '{document_id}' (at {places}); "
            "give the passage by offsets (start, end) instead"
        )


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
