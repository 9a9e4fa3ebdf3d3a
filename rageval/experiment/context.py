"""What the generator would get, per query, and what is in it: the context (the final ranking
deduplicated, cut at ``final_k`` and the token budget), the judged evidence inside it, and the
per-query diagnostics of context size, redundancy and permission leaks. One token counter per run
serves the context and the diagnostics, so each distinct text is tokenized once."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from rageval.benchmark.loading import Benchmark
from rageval.benchmark.schema import Document
from rageval.benchmark.tokenizers import get_tokenizer
from rageval.config.schema import RunConfig
from rageval.evaluation import Evaluation
from rageval.evaluation.spans import Evidence
from rageval.experiment.evidence import context_evidence
from rageval.experiment.stages import covered_characters, merged_spans, overlap_ratio
from rageval.retrieval import Corpus, visible
from rageval.retrieval.dedup import exact_dedup


def contexts(
    config: RunConfig, hits: dict[str, list], corpus: Corpus, count: Callable[[str], int]
) -> tuple[dict[str, list], dict[str, float]]:
    """What the generator would get per query: the final ranking, exact duplicates removed, the
    first ``final_k``, cut at ``max_tokens`` (``count``: :func:`token_counter`); and the seconds
    spent fetching it."""
    from rageval.retrieval.base import Hit

    out: dict[str, list] = {}
    seconds: dict[str, float] = {}
    for qid, query_hits in hits.items():
        started = time.perf_counter()
        ids = [h.chunk_id for h in query_hits]
        if config.context.dedup == "exact":
            ids = exact_dedup(ids, corpus, limit=config.final_k)
        ids = ids[: config.final_k]
        if config.context.max_tokens is not None:
            kept, used = [], 0
            for chunk_id in ids:
                used += count(corpus.by_id(chunk_id).text)
                if used > config.context.max_tokens:
                    break
                kept.append(chunk_id)
            ids = kept
        scores = {h.chunk_id: h.score for h in query_hits}
        out[qid] = [Hit(c, scores[c]) for c in ids]
        seconds[qid] = time.perf_counter() - started
    return out, seconds


def in_context(
    config: RunConfig,
    benchmark: Benchmark,
    judged: dict[str, dict[str, int]] | Evidence,
    context: pd.DataFrame,
    evaluation: Evaluation,
) -> pd.DataFrame | None:
    """At passage level, the evidence in each evaluated query's context (contract rule ``evidence``)."""
    if not isinstance(judged, Evidence):
        return None
    tokens = _token_spans(config, benchmark.documents)
    found = context_evidence(context, judged, benchmark.documents, tokens, config.evaluation.relevance)
    return found.reindex(evaluation.per_query.index)


def _token_spans(config: RunConfig, documents: Mapping[str, Document]) -> Callable[[str], np.ndarray]:
    """Where each document's tokens begin, in the tokens the context budget is stated in (each
    document tokenized once, when first asked)."""
    tokenizer = get_tokenizer(config.context.tokenizer or config.chunking.tokenizer)
    starts: dict[str, np.ndarray] = {}

    def token_starts(document_id: str) -> np.ndarray:
        known = starts.get(document_id)
        if known is None:
            spans = tokenizer(documents[document_id].text)
            known = starts[document_id] = np.fromiter((s for s, _ in spans), dtype=np.int64, count=len(spans))
        return known

    return token_starts


def token_counter(config: RunConfig) -> Callable[[str], int]:
    """Tokens in a text, each distinct text tokenized once per run: the same chunks reach many
    queries' contexts, and each is counted for the context and again for its merged spans."""
    tokenizer = get_tokenizer(config.context.tokenizer or config.chunking.tokenizer)
    counts: dict[str, int] = {}

    def count(text: str) -> int:
        known = counts.get(text)
        if known is None:
            known = counts[text] = len(tokenizer(text))
        return known

    return count


def diagnostics(
    config: RunConfig,
    cases: list,
    hits: dict[str, list],
    context: dict[str, list],
    corpus: Corpus,
    count: Callable[[str], int],
) -> pd.DataFrame:
    """Per query: context size and tokens (with overlapping text counted once), redundancy in the
    final top ``final_k``, permission leaks, and the top score (for abstention); ``count``: the
    run's :func:`token_counter`, shared with :func:`contexts` so each text is tokenized once."""
    rows = []
    any_acl = any(d.acl is not None for d in corpus.documents.values())
    for case in cases:
        qid = case.queryId
        final = [corpus.by_id(h.chunk_id) for h in hits.get(qid, [])]
        chunks = [corpus.by_id(h.chunk_id) for h in context.get(qid, [])]
        top = final[: config.final_k]
        principal = case.principal
        # Without any acl every chunk is visible: skip the per-hit check.
        leaks = [not visible(corpus.documents[c.parent_id], principal) for c in final] if any_acl else []

        merged = merged_spans(chunks)
        dedup_tokens = sum(
            count(corpus.documents[parent].text[start:end]) for parent, spans in merged.items() for start, end in spans
        )
        rows.append(
            {
                "query_id": qid,
                "context_chunks": len(chunks),
                "context_tokens": sum(count(c.text) for c in chunks),
                "context_tokens_dedup": dedup_tokens,
                "context_characters_covered": covered_characters(chunks),
                "unique_parents": len({c.parent_id for c in top}),
                "overlap_ratio": overlap_ratio(top),
                "exact_duplicates": len(top) - len(exact_dedup([c.chunk_id for c in top], corpus)),
                "permission_leaks": sum(leaks),
                "permission_leaks_context": sum(not visible(corpus.documents[c.parent_id], principal) for c in chunks)
                if any_acl
                else 0,
                "top_score": hits[qid][0].score if hits.get(qid) else np.nan,
            }
        )
    frame = pd.DataFrame(rows).set_index("query_id") if rows else pd.DataFrame()
    return frame
