"""Permission and metadata filters.

Permission rule: a document without ``acl`` is public; a document with ``acl`` is visible to a case
whose ``principal`` shares at least one group with it. A case without ``principal`` asks as an
anonymous user and sees public documents only. Every run counts the retrieved chunks its asker may
not see (permission leaks), filter or not.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from rageval.benchmark.schema import Document
from rageval.retrieval.base import Corpus, Hit, Query
from rageval.retrieval.schema import FilterConfig


def visible(document: Document, principal: Iterable[str] | None) -> bool:
    if document.acl is None:
        return True
    return bool(set(document.acl) & set(principal or ()))


def _matches(document: Document, wanted: dict[str, Any]) -> bool:
    for key, allowed in wanted.items():
        values = allowed if isinstance(allowed, list) else [allowed]
        if document.metadata.get(key) not in values:
            return False
    return True


class FilterStage:
    """Drops what the asker may not see and what does not match the metadata. With ``when:
    before`` the pipeline also hands :meth:`allowed` to the retrievers, so they search only
    allowed chunks (and fill their candidate lists with them)."""

    def __init__(self, config: FilterConfig, corpus: Corpus) -> None:
        self.name = config.name
        self.config = config
        self.corpus = corpus
        parents = [chunk.parent_id for chunk in corpus.chunks]
        self._parents = np.array(parents, dtype=object)
        documents = corpus.documents
        metadata_ok = np.array([_matches(documents[p], config.metadata) for p in parents], dtype=bool)
        self._metadata_ok = metadata_ok
        self._public = np.array([documents[p].acl is None for p in parents], dtype=bool)
        self._restricted = {p: set(documents[p].acl or ()) for p in set(parents) if documents[p].acl is not None}
        self._ok_cache: dict[tuple[str, ...] | None, np.ndarray] = {}

    def allowed_mask(self, principal: tuple[str, ...] | None) -> np.ndarray:
        if principal not in self._ok_cache:
            ok = self._metadata_ok.copy()
            if self.config.permission:
                groups = set(principal or ())
                seen = self._public | np.array([bool(self._restricted.get(p, set()) & groups) for p in self._parents])
                ok &= seen
            self._ok_cache[principal] = ok
        return self._ok_cache[principal]

    def allowed(self, query: Query) -> np.ndarray:
        """Positions of the chunks this query may retrieve."""
        return np.flatnonzero(self.allowed_mask(query.principal))

    def document_allowed(self, document_id: str, principal: tuple[str, ...] | None) -> bool:
        """Whether the asker may see a document that matches the metadata (for another system's
        passages, which are no chunk of the corpus)."""
        document = self.corpus.documents[document_id]
        if not _matches(document, self.config.metadata):
            return False
        return not self.config.permission or document.acl is None or bool(set(document.acl) & set(principal or ()))

    def __call__(self, query: Query, inputs: Sequence[list[Hit]] = ()) -> list[Hit]:
        (previous,) = inputs
        ok = self.allowed_mask(query.principal)
        position = self.corpus.position
        return [
            hit
            for hit in previous
            if (
                ok[position[hit.chunk_id]]
                if hit.chunk_id in position
                else self.document_allowed(self.corpus.by_id(hit.chunk_id).parent_id, query.principal)
            )
        ]
