"""Evidence in the context handed to generation, measured in tokens; and what a person must know
when a system answered a passage benchmark with whole documents.

Pure functions over ranking frames (``query_id, parent_id, start, end`` …) and judged spans.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from rageval.benchmark.schema import Document
from rageval.evaluation.spans import Evidence
from rageval.retrieval.base import Corpus

EVIDENCE_MEASURES = ("evidence_recall", "evidence_precision", "evidence_iou")
EVIDENCE_COLUMNS = [
    "evidence_recall",
    "evidence_precision",
    "evidence_iou",
    "evidence_tokens",
    "context_tokens",
    "evidence_in_context_tokens",
]

Spans = list[tuple[int, int]]


def merged(spans: Sequence[tuple[int, int]]) -> Spans:
    """The union of character spans, as sorted disjoint spans."""
    out: Spans = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def intersection(a: Spans, b: Spans) -> Spans:
    """The intersection of two sorted disjoint span lists."""
    out: Spans = []
    i = j = 0
    while i < len(a) and j < len(b):
        start, end = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if start < end:
            out.append((start, end))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def tokens_in(starts: np.ndarray, spans: Spans) -> int:
    """Tokens (by their first character's offset, ``starts`` sorted) inside sorted disjoint ``spans``."""
    if not spans:
        return 0
    bounds = np.asarray(spans, dtype=np.int64)
    return int((np.searchsorted(starts, bounds[:, 1]) - np.searchsorted(starts, bounds[:, 0])).sum())


def context_evidence(
    context: pd.DataFrame,
    evidence: Evidence,
    documents: Mapping[str, Document],
    token_starts: Callable[[str], np.ndarray],
    relevance: int,
) -> pd.DataFrame:
    """Per query with evidence: how much of the judged evidence (spans graded at least ``relevance``)
    the context holds, and how much of the context is evidence, in tokens (``EVIDENCE_COLUMNS``).
    ``token_starts(document_id)``: the sorted character offsets at which the document's tokens begin."""
    wanted = evidence.grade >= relevance
    by_query: dict[str, dict[str, tuple[Spans, Spans]]] = {}
    for query, document, start, end in zip(
        evidence.query[wanted], evidence.document[wanted], evidence.start[wanted], evidence.end[wanted], strict=True
    ):
        by_query.setdefault(query, {}).setdefault(document, ([], []))[0].append((int(start), int(end)))
    for query, document, start, end in context[["query_id", "parent_id", "start", "end"]].itertuples(index=False):
        if query in by_query:
            by_query[query].setdefault(document, ([], []))[1].append((int(start), int(end)))
    rows = {}
    for query, per_document in by_query.items():
        counts = np.zeros(3, dtype=np.int64)  # evidence, context, both
        for document, (judged, shown) in per_document.items():
            starts = token_starts(document)
            judged, shown = merged(judged), merged(shown)
            counts += (
                tokens_in(starts, judged),
                tokens_in(starts, shown),
                tokens_in(starts, intersection(judged, shown)),
            )
        found, context_tokens, both = (int(c) for c in counts)
        union = found + context_tokens - both
        rows[query] = (
            both / found if found else np.nan,
            both / context_tokens if context_tokens else 0.0,
            both / union if union else np.nan,
            found,
            context_tokens,
            both,
        )
    frame = pd.DataFrame.from_dict(rows, orient="index", columns=EVIDENCE_COLUMNS)
    frame.index.name = "query_id"
    return frame


def whole_document_warnings(rankings: pd.DataFrame, corpus: Corpus, level: str) -> list[str]:
    """At passage level, a note when the final ranking names whole documents by their IDs: they are
    then graded as whole documents (a document holding the evidence covers it, however long)."""
    if level != "passage" or rankings.empty:
        return []
    foreign = ~rankings["chunk_id"].isin(corpus.position.keys())
    if not foreign.any():
        return []
    lengths = rankings.loc[foreign, "parent_id"].map(lambda d: len(corpus.documents[d].text))
    whole = (rankings.loc[foreign, "start"] == 0) & (rankings.loc[foreign, "end"] == lengths)
    if not whole.any():
        return []
    return [
        f"{int(whole.sum())} of {len(rankings)} hits name whole documents (document IDs, not passages): at passage "
        "level they are graded as whole documents, so passage-level figures grade whole documents; evidence "
        "precision shows how much of such a context is evidence"
    ]
