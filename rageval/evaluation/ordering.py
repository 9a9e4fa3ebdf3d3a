"""The decided order: a run grouped by query, ordered by the tie policy, duplicates dropped, ranked 1..n.

The tie policy decides the order: a run already grouped by query in score order costs one check;
otherwise rows are grouped by a radix sort and each query sorted by score. Only tied rows are
sorted again, by document ID. Duplicates: sorting each query's 32-bit hash prefixes finds
candidates, confirmed on the IDs; the first occurrence in the decided order stays. A large run
already in the decided order is read in one compiled pass instead (:mod:`~rageval.evaluation.kernels`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd
import pyarrow as pa

from rageval.errors import EvaluationError
from rageval.evaluation import kernels
from rageval.evaluation.contract import (
    DUPLICATE_POLICIES,
    TIE_POLICIES,
    DuplicatePolicy,
    TiePolicy,
    check_choice,
)
from rageval.evaluation.ids import arrow_strings, grouped_query_codes, hash_strings, query_key
from rageval.validation import absent_columns

EMPTY = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class Ranked:
    """A run in the decided order: rows grouped by query, duplicates dropped, ranks 1..n."""

    queries: np.ndarray  # query IDs (str objects); a row's query code indexes it
    query: np.ndarray  # per kept row: query code (non-decreasing)
    rank: np.ndarray  # per kept row: 1-based rank within its query
    score: np.ndarray  # per kept row
    order: np.ndarray | None  # per kept row: its position in the input frame; None: the input's own order
    hash: np.ndarray  # per kept row: hash of its document ID
    docs: pa.Array  # the input's document IDs, in input order
    lengths: np.ndarray  # per query: kept rows
    dropped: np.ndarray  # per query: duplicates dropped

    @cached_property
    def row(self) -> np.ndarray:
        """Per kept row: its position in the input frame."""
        return np.arange(len(self.query)) if self.order is None else self.order

    def rows(self, positions: np.ndarray) -> np.ndarray:
        """The input positions of the given kept-row positions (no array of every row built)."""
        return positions if self.order is None else self.order[positions]

    def doc_ids(self, rows: np.ndarray | None = None) -> np.ndarray:
        """Document IDs (str objects) of the kept rows, or of the given kept-row positions."""
        positions = self.row if rows is None else self.rows(rows)
        return self.docs.take(pa.array(positions, type=pa.int64())).to_numpy(zero_copy_only=False)


def rank_run(run: pd.DataFrame, ties: str, duplicates: str) -> Ranked:
    """``run`` (``query_id, doc_id, score`` and optionally ``rank``) in the decided order."""
    check_choice("tie policy", ties, TIE_POLICIES)
    check_choice("duplicate policy", duplicates, DUPLICATE_POLICIES)
    needed = ["query_id", "doc_id"] + ([] if ties == "input-order" else ["score"])
    absent = absent_columns(run, needed)
    if absent:
        raise EvaluationError(
            f"the run lacks column(s) {', '.join(absent)}; a run has query_id, doc_id, score and optionally rank"
        )
    query_ids = arrow_strings(run["query_id"], "query ID")
    docs = arrow_strings(run["doc_id"], "document ID")
    score = run["score"].to_numpy(dtype=np.float64) if "score" in run.columns else np.zeros(len(run))
    if kernels.available(len(run)) and (ties != "input-order" or "rank" not in run.columns):
        scanned = _scanned(query_ids, docs, score, ties, duplicates)
        if scanned is not None:
            return scanned
    codes, queries, grouped_lengths = grouped_query_codes(query_ids)
    counts = grouped_lengths if grouped_lengths is not None else np.bincount(codes, minlength=len(queries))
    order = _decide_order(run, codes, score, docs, ties, grouped_lengths)
    doc_hash = hash_strings(docs)
    if order is None:  # already in the decided order: no gathers
        query = codes
    else:
        query, score, doc_hash = codes[order], score[order], doc_hash[order]
    rank = ranks(query, counts)
    dropped_at = _duplicates(query, rank, doc_hash, order, docs, counts)
    return _ranked(Ordered(queries, query, rank, score, order, doc_hash, docs, counts), dropped_at, duplicates)


@dataclass(frozen=True)
class Ordered:
    """A run in the decided order before its repeats are dropped (the fields of :class:`Ranked`)."""

    queries: np.ndarray
    query: np.ndarray
    rank: np.ndarray
    score: np.ndarray
    order: np.ndarray | None
    hash: np.ndarray
    docs: pa.Array
    counts: np.ndarray


def _ranked(run: Ordered, dropped_at: np.ndarray, duplicates: str) -> Ranked:
    """``run`` as :class:`Ranked`, the repeats at ``dropped_at`` dropped (or an error, by the policy)."""
    queries, query, rank, score, order, doc_hash, docs, counts = (
        run.queries, run.query, run.rank, run.score, run.order, run.hash, run.docs, run.counts,
    )  # fmt: skip
    dropped = np.bincount(query[dropped_at], minlength=len(queries))
    if len(dropped_at):
        if duplicates == "error":
            at = dropped_at if order is None else order[dropped_at]
            examples = ", ".join(
                f"{queries[query[i]]}/{docs[int(j)].as_py()}" for i, j in zip(dropped_at[:5], at[:5], strict=True)
            )
            raise EvaluationError(
                f"{len(dropped_at)} repeated document(s) within a query's ranking (e.g. {examples}); "
                "deduplicate the run or evaluate with duplicates='keep-first'"
            )
        keep = np.ones(len(query), dtype=bool)
        keep[dropped_at] = False
        order = np.flatnonzero(keep) if order is None else order[keep]
        query, score, doc_hash = query[keep], score[keep], doc_hash[keep]
        counts = counts - dropped
        rank = ranks(query, counts)
    return Ranked(
        queries=queries,
        query=query,
        rank=rank,
        score=score,
        order=order,
        hash=doc_hash,
        docs=docs,
        lengths=counts,
        dropped=dropped,
    )


def _scanned(query_ids: pa.Array, docs: pa.Array, score: np.ndarray, ties: str, duplicates: str) -> Ranked | None:
    """The run in the decided order from one compiled pass (:mod:`~rageval.evaluation.kernels`) when
    it is grouped by query, each query in descending score (or ``ties`` is input-order): tied rows are
    then ordered by the tie policy. Else None: the numpy path decides."""
    by_score = ties != "input-order"
    status, scan = kernels.grouped_scan(query_ids, docs, score if by_score else None)
    if status != kernels.OK or scan is None:
        return None
    names = query_ids.take(pa.array(scan.starts)).to_numpy(zero_copy_only=False).astype(object)
    if not pd.Index(names, dtype=object).is_unique:  # a query in several blocks: not grouped
        return None
    counts = np.diff(scan.starts, append=len(docs))
    order, hashes, suspects = None, scan.hashes, scan.suspects
    if by_score and scan.tied:  # tied rows move within their query: codes and ranks stay
        order = np.arange(len(docs))
        _sort_tied_by_doc(
            order, _inside(score[1:] == score[:-1], _breaks(counts)), docs, descending=ties == "docid-desc"
        )
        score, hashes = score[order], hashes[order]
        if len(suspects):  # every row of a repeat is a suspect: where each now stands
            position = np.empty(len(order), dtype=np.int64)
            position[order] = np.arange(len(order))
            suspects = np.sort(position[suspects])
    dropped_at = _confirm(suspects, scan.codes, order, docs)
    return _ranked(Ordered(names, scan.codes, scan.ranks, score, order, hashes, docs, counts), dropped_at, duplicates)


def ranks(query: np.ndarray, counts: np.ndarray | None = None) -> np.ndarray:
    """1-based position within each run of equal (non-decreasing) query codes; ``counts``, when
    given, is each code's number of rows (``np.bincount(query)``), and saves finding the runs."""
    n = len(query)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if counts is None:
        starts = np.flatnonzero(np.r_[True, query[1:] != query[:-1]])
        counts = np.diff(np.r_[starts, n])
    else:
        counts = counts[counts > 0]
        if len(counts) and (counts == counts[0]).all():  # k rows per query, as a retrieval stage writes
            return np.tile(np.arange(1, int(counts[0]) + 1, dtype=np.int64), len(counts))
        starts = np.cumsum(counts) - counts
    # Ones, each query's first row stepping back by the previous query's length, summed: one array.
    rank = np.ones(n, dtype=np.int64)
    rank[starts[1:]] = 1 - counts[:-1]
    np.cumsum(rank, out=rank)
    return rank


def _breaks(lengths: np.ndarray) -> np.ndarray:
    """Where a grouped run's query changes: positions i with rows i and i + 1 in different queries."""
    return np.cumsum(lengths[lengths > 0])[:-1] - 1


def _inside(pairs: np.ndarray, breaks: np.ndarray) -> np.ndarray:
    """``pairs`` (a mask over adjacent rows i, i + 1 of a grouped run) where both rows are in one query. In place."""
    pairs[breaks] = False
    return pairs


def _decide_order(
    run: pd.DataFrame, codes: np.ndarray, score: np.ndarray, docs: pa.Array, ties: str, lengths: np.ndarray | None
) -> np.ndarray | None:
    """Input positions in the decided order (grouped by query in order of first appearance, then by
    the tie policy); None when the input already is in that order. ``lengths``: each query's rows
    when the input is grouped by query, else None."""
    if lengths is None and len(codes) and bool((codes[1:] >= codes[:-1]).all()):
        lengths = np.bincount(codes)
    breaks = _breaks(lengths) if lengths is not None else None
    if ties == "input-order":
        if "rank" not in run.columns:
            return None if breaks is not None else np.argsort(codes, kind="stable")
        rank = run["rank"].to_numpy(dtype=np.float64)
        if np.isnan(rank).any():
            raise EvaluationError(f"{int(np.isnan(rank).sum())} missing rank(s) in the run's rank column")
        if breaks is not None and not _inside(rank[1:] < rank[:-1], breaks).any():
            return None
        return np.lexsort((rank, codes))
    if np.isnan(score).any():
        raise EvaluationError(
            f"{int(np.isnan(score).sum())} missing score(s); score-ordered tie policies need every score "
            "(or evaluate with ties='input-order')"
        )
    if breaks is not None and not _inside(score[1:] > score[:-1], breaks).any():
        # Grouped, each query in score order: only tied rows may move.
        tied = _inside(score[1:] == score[:-1], breaks)
        if not tied.any():
            return None
        order = np.arange(len(codes))
    else:
        order = _score_order(codes, score)
        ordered_score, ordered_codes = score[order], codes[order]
        tied = (ordered_codes[1:] == ordered_codes[:-1]) & (ordered_score[1:] == ordered_score[:-1])
    if tied.any():
        _sort_tied_by_doc(order, tied, docs, descending=ties == "docid-desc")
    return order


def _score_order(codes: np.ndarray, score: np.ndarray) -> np.ndarray:
    """Positions grouped by query code, each query by score descending (equal scores in no set order:
    the tie policy orders them next)."""
    n = len(codes)
    counts = np.bincount(codes)
    width = int(counts.max())
    if len(counts) > np.iinfo(np.uint16).max or len(counts) * width > 2 * n + 1024:
        return np.lexsort((-score, codes))
    # A radix sort groups the rows (16-bit codes); short per-query rows then sort by score, padded with
    # NaN, which sorts after every score (scores are never NaN here).
    grouped = np.argsort(codes.astype(np.uint16), kind="stable")
    grouped_codes = codes[grouped]
    grid = np.full((len(counts), width), np.nan)
    grid[grouped_codes, ranks(grouped_codes) - 1] = -score[grouped]
    within = np.argsort(grid, axis=1)
    starts = np.cumsum(counts) - counts
    return grouped[(starts[:, None] + within)[np.arange(width) < counts[:, None]]]


def _sort_tied_by_doc(order: np.ndarray, tied: np.ndarray, docs: pa.Array, *, descending: bool) -> None:
    """Within each block of equal (query, score), order rows by document ID (byte order). In place."""
    member = np.r_[tied, False] | np.r_[False, tied]
    first = member & ~np.r_[False, tied]
    block = np.cumsum(first)
    positions = np.flatnonzero(member)
    names = docs.take(pa.array(order[positions], type=pa.int64())).to_numpy(zero_copy_only=False)
    # Python compares str by code point, which is UTF-8 byte order: trec_eval's strcmp.
    name_rank = pd.factorize(names, sort=True)[0]
    permutation = np.lexsort((-name_rank if descending else name_rank, block[positions]))
    order[positions] = order[positions][permutation]


def _duplicates(
    query: np.ndarray,
    rank: np.ndarray,
    doc_hash: np.ndarray,
    order: np.ndarray | None,
    docs: pa.Array,
    counts: np.ndarray,
) -> np.ndarray:
    """Positions (in the decided order) of repeated (query, document) rows after their first
    occurrence; ``counts``: each query code's rows; ``order``: their input positions (None: the same)."""
    n, size = len(query), len(counts)
    if n < 2:
        return EMPTY
    width = int(counts.max())
    if size * width <= 2 * n + 1024:
        # One row per query, on 32 bits of the hash: sorting short rows is several times faster than
        # one long sort; the rare equal halves are settled on the IDs below.
        short = _high_halves(doc_hash)
        if (counts == width).all():
            grid = np.sort(short.reshape(size, width), axis=1)
        else:
            grid = np.full((size, width), np.iinfo(np.uint32).max, dtype=np.uint32)
            grid[query, rank - 1] = short
            grid.sort(axis=1)
        equal = grid[:, 1:] == grid[:, :-1]
        if not equal.any():  # the usual case: one cheap pass, no positions built
            return EMPTY
        at_query, at_column = np.nonzero(equal)
        # The marked queries' rows: each query's rows are contiguous in the decided order.
        marked = np.unique(at_query)
        sizes = counts[marked]
        shift = (np.cumsum(counts) - counts)[marked] - (np.cumsum(sizes) - sizes)
        inside = np.arange(int(sizes.sum())) + np.repeat(shift, sizes)
        suspects = np.unique(grid[at_query, at_column].astype(np.uint64) ^ query_key(at_query))
        keys = short[inside].astype(np.uint64) ^ query_key(query[inside])
        candidates = inside[pd.Index(keys).isin(suspects)]
    else:
        keys = doc_hash ^ query_key(query)
        ordered = np.sort(keys)
        suspects = ordered[1:][ordered[1:] == ordered[:-1]]
        if not len(suspects):
            return EMPTY
        candidates = np.flatnonzero(pd.Index(keys).isin(np.unique(suspects)))
    return _confirm(candidates, query, order, docs)


def _confirm(candidates: np.ndarray, query: np.ndarray, order: np.ndarray | None, docs: pa.Array) -> np.ndarray:
    """The ``candidates`` (ascending positions in the decided order, each repeat's first occurrence
    among them) that repeat an earlier one's query and document ID: equal hashes only suggest it."""
    if not len(candidates):
        return EMPTY
    at = candidates if order is None else order[candidates]
    names = docs.take(pa.array(at, type=pa.int64())).to_numpy(zero_copy_only=False)
    confirmed = pd.DataFrame({"q": query[candidates], "d": names}).duplicated(keep="first").to_numpy()
    return candidates[confirmed]


def _high_halves(values: np.ndarray) -> np.ndarray:
    """The high 32 bits of each uint64: a strided view on a little-endian machine, no pass."""
    if sys.byteorder == "little" and values.flags.c_contiguous:
        return values.view(np.uint32)[1::2]
    return (values >> np.uint64(32)).astype(np.uint32)


def order_ranking(run: pd.DataFrame, ties: TiePolicy, duplicates: DuplicatePolicy = "keep-first") -> pd.DataFrame:
    """A run ``query_id, doc_id, score[, rank]`` in the decided order with a 1-based ``rank``; any
    other column (a passage's ``document_id, start, end``) comes along.

    Rows are grouped by query in order of first appearance. Pure: returns a new frame.
    """
    ranked = rank_run(run, ties, duplicates)
    taken = pa.array(ranked.row, type=pa.int64())
    frame = pd.DataFrame(
        {
            "query_id": pd.Series(arrow_strings(run["query_id"], "query ID").take(taken), dtype="str"),
            "doc_id": pd.Series(ranked.docs.take(taken), dtype="str"),
            "score": ranked.score,
            "rank": ranked.rank,
        }
    )
    for column in run.columns.difference(frame.columns, sort=False):
        frame[column] = run[column].to_numpy()[ranked.row]
    return frame
