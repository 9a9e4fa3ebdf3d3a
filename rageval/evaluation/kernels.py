"""Compiled passes (numba) for large runs: one pass over a grouped run instead of five numpy passes.

Used only above :data:`MIN_ROWS` rows, where they pay: numba is imported on the first such call
(≈0.2 s) and its functions compiled once (seconds), then loaded from numba's cache
(:mod:`~rageval.evaluation._kernel_source` says where). Every answer is the numpy path's: the same document hash
(:func:`rageval.evaluation.ids.hash_strings`), the same repeats, confirmed on the IDs by the caller.
Whatever a kernel cannot settle (a run not grouped by query, scores out of order or tied, a long
ID, many repeats) it reports, and the numpy path takes over.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import pyarrow as pa

MIN_ROWS = 2_000_000  # below this the numpy passes cost less than importing numba and loading its cache
_WIDTH = 1 << 12  # hash table slots for queries of up to 2,048 rows (a larger one is retried)
_SUSPECTS = 1 << 12  # repeat suspects a scan records; more sends the run to the numpy path
_MASKS = np.array([(1 << (8 * n)) - 1 for n in range(8)] + [2**64 - 1], dtype=np.uint64)

# What grouped_scan reports.
OK, NOT_GROUPED, NOT_IN_ORDER, LONG_ID, MANY_REPEATS, LONG_QUERY = 0, 1, 2, 3, 4, 5


def available(rows: int) -> bool:
    """Whether the compiled passes are used for a run of ``rows`` rows."""
    return rows >= MIN_ROWS and sys.byteorder == "little" and _compiled() is not None


@dataclass(frozen=True)
class Scan:
    """A grouped run in one pass: query codes, document hashes, each query's rows, repeat suspects."""

    codes: np.ndarray  # per row: query code (numbered in order of appearance)
    ranks: np.ndarray  # per row: 1-based position in its query
    hashes: np.ndarray  # per row: hash_strings of its document ID
    starts: np.ndarray  # per query: first row
    suspects: np.ndarray  # rows whose document hash repeats within their query (ascending), and the firsts
    tied: bool  # some query has equal scores on neighbouring rows (the tie policy reorders them)


def _buffers(array: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A string array's offsets, its data bytes and every byte position as an unaligned uint64 word."""
    _, offsets_buffer, data_buffer = array.buffers()
    offset_type = np.int64 if pa.types.is_large_string(array.type) else np.int32
    offsets = np.frombuffer(offsets_buffer, dtype=offset_type)[array.offset : array.offset + len(array) + 1]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    if len(data) < 8:
        data = np.concatenate([data, np.zeros(8, dtype=np.uint8)])
    words = np.ndarray(shape=(len(data) - 7,), dtype="<u8", buffer=data, strides=(1,))
    return offsets.astype(np.int64, copy=False), data, words


def grouped_scan(queries: pa.Array, docs: pa.Array, score: np.ndarray | None) -> tuple[int, Scan | None]:
    """One pass over a run grouped by query (``score``: check each query is in descending score
    order, and whether any scores tie; None: the input order is the order). Returns a status (:data:`OK` or why not) and
    the scan."""
    kernels = _compiled()
    query_offsets, query_data, _ = _buffers(queries)
    doc_offsets, doc_data, doc_words = _buffers(docs)
    n = len(docs)
    codes = np.empty(n, dtype=np.int64)
    ranks = np.empty(n, dtype=np.int64)
    hashes = np.empty(n, dtype=np.uint64)
    starts = np.empty(min(n, 1026) + n // 4 + 2, dtype=np.int64)  # the scan gives up past 1,024 queries and n / 4
    suspects = np.empty(_SUSPECTS, dtype=np.int64)
    scores = score if score is not None else np.zeros(0)
    width = _WIDTH
    while True:  # a table of twice the longest query's rows: small enough for the CPU's cache
        out = (codes, ranks, hashes, starts, suspects, np.full(width, -1, dtype=np.int64))
        status, groups, found, ties = kernels.grouped_scan(
            (query_offsets, query_data), (doc_offsets, doc_data, doc_words), _MASKS, scores, score is not None, out
        )
        if status != LONG_QUERY or width >= 2 * n:
            break
        width *= 8
    if status != OK:
        return int(status), None
    return OK, Scan(codes, ranks, hashes, starts[:groups], np.unique(suspects[:found]), ties > 0)


def candidates(query: np.ndarray, hashes: np.ndarray, judged: np.ndarray, shifts: Any) -> np.ndarray:
    """Rows whose key (``hash + query * spread``) may be one of the ``judged`` keys, by two bit tables
    (``shifts``: spread, the top table's shift, the lower table's shift and mask), as
    :func:`rageval.evaluation.qrels._candidates` finds them."""
    kernels = _compiled()
    out = np.empty(max(len(query) // 16, 1024), dtype=np.int64)
    found = kernels.candidates(query, hashes, judged, shifts, out)
    if found > len(out):
        out = np.empty(found, dtype=np.int64)
        kernels.candidates(query, hashes, judged, shifts, out)
    return out[:found]


@cache
def _compiled() -> Any:
    """The compiled kernels (numba imported here, on first use), or None without numba."""
    try:
        from rageval.evaluation import _kernel_source
    except ImportError:  # pragma: no cover - numba is a dependency
        return None
    return _kernel_source
