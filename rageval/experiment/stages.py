"""Measure every stage of a pipeline on its own, find where each query's evidence was lost, and
table each query's seconds per stage.

Pure functions over rankings frames (``query_id, rank, chunk_id, parent_id, score``); nothing here
runs a retriever or records anything.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from rageval.benchmark.chunking import Chunk
from rageval.benchmark.spans import covers
from rageval.evaluation.spans import Evidence, span_label
from rageval.retrieval.base import Hit

# A row names its passage by ID (a chunk, or another system's passage) and by where it lies: its
# document and character offsets, which span-native grading reads (rageval.evaluation.spans).
RANKING_COLUMNS = ["query_id", "rank", "chunk_id", "parent_id", "start", "end", "score", "stage"]
CONTEXT_STAGE = "context"


def rankings_frame(hits: Mapping[str, Sequence[Hit]], stage: str, chunks: Callable[[str], Chunk]) -> pd.DataFrame:
    """Per-query hits as a ranking frame (``RANKING_COLUMNS``); ``chunks`` finds a hit's chunk or
    passage by its ID (``Corpus.by_id``)."""
    # Built column by column: a frame from millions of row tuples costs seconds more.
    lengths = [len(query_hits) for query_hits in hits.values()]
    ids = [hit.chunk_id for query_hits in hits.values() for hit in query_hits]
    if not ids:
        return pd.DataFrame([], columns=RANKING_COLUMNS).astype(
            {"rank": np.int64, "start": np.int64, "end": np.int64, "score": np.float64}
        )
    found = [chunks(chunk_id) for chunk_id in ids]
    columns = {
        "query_id": [qid for qid, n in zip(hits, lengths, strict=True) for _ in range(n)],
        "rank": np.concatenate([np.arange(1, n + 1, dtype=np.int64) for n in lengths]),
        "chunk_id": ids,
        "parent_id": [chunk.parent_id for chunk in found],
        "start": np.fromiter((chunk.start for chunk in found), dtype=np.int64, count=len(found)),
        "end": np.fromiter((chunk.end for chunk in found), dtype=np.int64, count=len(found)),
        "score": np.array([hit.score for query_hits in hits.values() for hit in query_hits], dtype=np.float64),
        "stage": [stage] * len(ids),
    }
    return pd.DataFrame(columns, columns=RANKING_COLUMNS)


def level_items(rankings: pd.DataFrame, level: str) -> dict[str, set[str]]:
    """The items (chunk IDs, or parent IDs at document level) each query's ranking holds."""
    column = "parent_id" if level == "document" else "chunk_id"
    return {qid: set(group) for qid, group in rankings.groupby("query_id", sort=False)[column]}


def evidence_items(evidence: Evidence) -> dict[str, dict[str, int]]:
    """Judged spans as trail items: query → ``document:start-end`` → grade (the best, where repeated)."""
    out: dict[str, dict[str, int]] = {q: {} for q in evidence.queries}
    for query, document, start, end, grade in zip(
        evidence.query, evidence.document, evidence.start, evidence.end, evidence.grade, strict=True
    ):
        item = span_label(document, int(start), int(end))
        out[query][item] = max(int(grade), out[query].get(item, int(grade)))
    return out


def covered_items(rankings: pd.DataFrame, evidence: Evidence) -> dict[str, set[str]]:
    """The judged spans (as trail items) each query's ranking covers (the contract's passages rule)."""
    spans: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for query, document, start, end in zip(
        evidence.query, evidence.document, evidence.start, evidence.end, strict=True
    ):
        spans.setdefault((query, document), []).append((int(start), int(end)))
    out: dict[str, set[str]] = {}
    rows = rankings[["query_id", "parent_id", "start", "end"]].itertuples(index=False)
    for query, document, start, end in rows:
        for s_start, s_end in spans.get((query, document), ()):
            if covers(int(start), int(end), s_start, s_end):
                out.setdefault(query, set()).add(span_label(document, s_start, s_end))
    return out


def evidence_trail(
    stage_rankings: Mapping[str, pd.DataFrame],
    inputs: Mapping[str, Sequence[str]],
    qrels: Mapping[str, Mapping[str, int]] | Evidence,
    level: str,
    context_rankings: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """For each relevant item (grade >= 1) of each query: which retrievers found it, and the first
    stage that had it among its inputs but not in its output (``context`` when the final stage had
    it but the context cut it). Graded on spans (``qrels`` an :class:`Evidence`), an item is a judged
    span (``document:start-end``), held by a ranking with a passage covering it.

    Columns: ``query_id, item_id, grade, found_by, lost_at, status`` with status one of ``kept`` (in
    the last ranking: the context when given), ``dropped`` or ``not-retrieved``.
    """
    order = list(stage_rankings)

    def items(frame: pd.DataFrame) -> dict[str, set[str]]:
        return covered_items(frame, qrels) if isinstance(qrels, Evidence) else level_items(frame, level)

    held = {stage: items(frame) for stage, frame in stage_rankings.items()}
    if context_rankings is not None:
        held[CONTEXT_STAGE] = items(context_rankings)
    if isinstance(qrels, Evidence):
        qrels = evidence_items(qrels)
        inputs = {**inputs, CONTEXT_STAGE: [order[-1]]}
        order = [*order, CONTEXT_STAGE]
    rows = []
    for qid, judged in qrels.items():
        for item, grade in sorted(judged.items()):
            if grade < 1:
                continue
            found_by = [s for s in order if not inputs.get(s) and item in held[s].get(qid, ())]
            lost_at = None
            for stage in order:
                fed = any(item in held[source].get(qid, ()) for source in inputs.get(stage, ()))
                if fed and item not in held[stage].get(qid, ()):
                    lost_at = stage
                    break
            if item in held[order[-1]].get(qid, ()):
                status = "kept"
            elif found_by:
                status = "dropped"
            else:
                status = "not-retrieved"
            rows.append((qid, item, grade, ",".join(found_by), lost_at, status))
    return pd.DataFrame(rows, columns=["query_id", "item_id", "grade", "found_by", "lost_at", "status"])


def describe_loss(row: pd.Series) -> str:
    """``found by dense, dropped by fusion`` — one line a person reads."""
    if row["status"] == "not-retrieved":
        return "not retrieved by any retriever"
    found = f"found by {row['found_by'].replace(',', ' and ')}"
    return f"{found}, dropped by {row['lost_at']}" if row["lost_at"] else f"{found}, kept"


def overlap_ratio(chunks: Sequence[Chunk]) -> float:
    """1 - (characters covered / characters in all chunks): 0 when no two chunks share text of
    the same parent."""
    total = sum(c.end - c.start for c in chunks)
    if total == 0:
        return 0.0
    return 1.0 - covered_characters(chunks) / total


def merged_spans(chunks: Sequence[Chunk]) -> dict[str, list[tuple[int, int]]]:
    """Per parent, the union of the chunks' character spans."""
    spans: dict[str, list[tuple[int, int]]] = {}
    for chunk in sorted(chunks, key=lambda c: (c.parent_id, c.start)):
        merged = spans.setdefault(chunk.parent_id, [])
        if merged and chunk.start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], chunk.end))
        else:
            merged.append((chunk.start, chunk.end))
    return spans


def covered_characters(chunks: Sequence[Chunk]) -> int:
    return sum(end - start for spans in merged_spans(chunks).values() for start, end in spans)


def latency_table(latencies: Sequence[Any], fetch: Mapping[str, float]) -> pd.DataFrame:
    """Per query and stage the seconds, then the context fetch and each query's total (the stages
    whose name has no ``:`` — sub-steps are inside their stage — plus the fetch)."""
    latency = pd.DataFrame(latencies, columns=["query_id", "stage", "seconds"])
    totals = latency[~latency["stage"].str.contains(":")].groupby("query_id", sort=False)["seconds"].sum()
    return pd.concat(
        [
            latency,
            pd.DataFrame({"query_id": list(fetch), "stage": "fetch", "seconds": list(fetch.values())}),
            pd.DataFrame(
                {
                    "query_id": totals.index,
                    "stage": "total",
                    "seconds": totals.to_numpy() + totals.index.map(fetch).to_numpy(),
                }
            ),
        ],
        ignore_index=True,
    )
