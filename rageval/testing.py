"""The contract a retrieval stage of your own must keep, as a pytest base class.

Subclass it in your tests and say how to build your stage::

    from rageval.testing import RetrieverContract

    class TestMyRetriever(RetrieverContract):
        def make_stage(self, corpus):
            return MyRetriever(corpus, depth=20)

pytest then runs every ``test_*`` method below against it, on a small bundled corpus. The
contract is what rageval's pipeline and metrics rely on: hits are ``Hit(chunk_id, score)`` of
chunks of the corpus, best first (scores never increase), no chunk twice, the same answer every
time, an empty list rather than an error for a query that matches nothing, and only allowed chunks
when the query restricts them (a ``filter`` stage with ``when: before``) — for a reranker
(``retriever = False``), only chunks it was given.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from rageval.benchmark.chunking import chunk_corpus
from rageval.benchmark.schema import ChunkingConfig, Document
from rageval.retrieval.base import Corpus, Hit, Query, Stage

CONTRACT_DOCUMENTS = [
    (
        "publish-retries",
        "Publish retries",
        "A publish that fails on a cache error is retried three times with backoff.",
    ),
    ("webhook-secrets", "Webhook secrets", "Webhooks are signed with a shared secret. Rotate the secret every month."),
    ("billing-plans", "Billing plans", "The team plan includes ten seats, single sign-on and audit logs."),
    (
        "backup-restore",
        "Restoring backups",
        "Restore from the nightly snapshot, then replay the journal to the failure.",
    ),
    ("cache-purge", "Cache purges", "Every publish commit purges the CDN cache for the affected paths."),
    ("sso-setup", "Single sign-on", "Configure SAML single sign-on under Settings, then map groups to roles."),
]
CONTRACT_QUERIES = ["how are failed publishes retried", "rotate webhook secret", "single sign-on", "zzzz qqqq"]


class RetrieverContract:
    """Base class of a plugin's contract tests; implement :meth:`make_stage`."""

    retriever = True  # False for a stage that consumes the previous stage's ranking (a reranker)

    def make_stage(self, corpus: Corpus) -> Stage:
        raise NotImplementedError("return your stage built on `corpus`")

    # ------------------------------------------------------------------ fixtures

    @pytest.fixture
    def corpus(self) -> Corpus:
        documents = [Document(id=i, title=t, text=x) for i, t, x in CONTRACT_DOCUMENTS]
        chunks = chunk_corpus(documents, ChunkingConfig(method="none"))
        return Corpus(chunks, {d.id: d for d in documents})

    @pytest.fixture
    def stage(self, corpus: Corpus) -> Stage:
        stage = self.make_stage(corpus)
        stage.name = getattr(stage, "name", None) or "plugin"
        return stage

    def _inputs(self, corpus: Corpus) -> list[list[Hit]]:
        if self.retriever:
            return []
        # A reranker gets every chunk, in reverse ID order, with made-up decreasing scores.
        ids = sorted(corpus.ids, reverse=True)
        return [[Hit(c, float(len(ids) - i)) for i, c in enumerate(ids)]]

    def _run(self, stage: Stage, corpus: Corpus, text: str, allowed: np.ndarray | None = None) -> list[Hit]:
        return stage(Query("contract", text, None, allowed), self._inputs(corpus))

    # ------------------------------------------------------------------ the contract

    def test_returns_hits_of_the_corpus(self, stage: Stage, corpus: Corpus) -> None:
        for text in CONTRACT_QUERIES:
            hits = self._run(stage, corpus, text)
            assert isinstance(hits, list)
            for hit in hits:
                assert isinstance(hit, Hit), f"return rageval.retrieval.Hit values, not {type(hit).__name__}"
                assert hit.chunk_id in corpus.position, f"{hit.chunk_id!r} is not a chunk ID of the corpus"
                assert isinstance(hit.score, float) and not math.isnan(hit.score)

    def test_best_first_and_no_repeats(self, stage: Stage, corpus: Corpus) -> None:
        for text in CONTRACT_QUERIES:
            hits = self._run(stage, corpus, text)
            scores = [h.score for h in hits]
            assert scores == sorted(scores, reverse=True), "hits must come best first (scores never increase)"
            ids = [h.chunk_id for h in hits]
            assert len(ids) == len(set(ids)), "a chunk may appear only once per ranking"

    def test_finds_something_for_a_plain_query(self, stage: Stage, corpus: Corpus) -> None:
        assert self._run(stage, corpus, CONTRACT_QUERIES[0]), "no hits for a query the corpus answers"

    def test_is_deterministic(self, stage: Stage, corpus: Corpus) -> None:
        for text in CONTRACT_QUERIES:
            assert self._run(stage, corpus, text) == self._run(stage, corpus, text)

    def test_a_query_matching_nothing_is_not_an_error(self, stage: Stage, corpus: Corpus) -> None:
        assert isinstance(self._run(stage, corpus, ""), list)

    def test_returns_only_allowed_chunks(self, stage: Stage, corpus: Corpus) -> None:
        if not self.retriever:  # a reranker may return only what it was given
            given = {h.chunk_id for h in self._inputs(corpus)[0]}
            for text in CONTRACT_QUERIES:
                assert {h.chunk_id for h in self._run(stage, corpus, text)} <= given
            return
        allowed = np.array([corpus.position[c] for c in corpus.ids if not c.startswith("publish")])
        for text in CONTRACT_QUERIES:
            hits = self._run(stage, corpus, text, allowed)
            assert all(corpus.position[h.chunk_id] in set(allowed.tolist()) for h in hits), (
                "with Query.allowed set, return only those chunks (positions in corpus.chunks)"
            )
