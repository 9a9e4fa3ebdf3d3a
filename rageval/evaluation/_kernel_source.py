"""The compiled passes: plain loops compiled by numba, imported only by
:func:`rageval.evaluation.kernels._compiled` (importing this module imports numba).

Compiled with ``cache=True``: numba writes the machine code to ``__pycache__`` beside this file, or
to its user-wide cache directory when that is read-only (``NUMBA_CACHE_DIR`` chooses another);
with no writable directory at all, each process compiles them once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba
import numpy as np


def _jit(function: Callable[..., Any], **options: Any) -> Any:
    try:
        return numba.njit(cache=True, nogil=True, **options)(function)
    except RuntimeError:  # numba found no writable cache directory
        return numba.njit(cache=False, nogil=True, **options)(function)


def _inline(function: Callable[..., Any]) -> Any:
    """A helper compiled into its callers (a call per row costs more than its work)."""
    return _jit(function, inline="always")


_MUL = np.uint64(0x9E3779B97F4A7C15)
_LONG = 256  # hash_strings hashes longer IDs another way: the scan leaves them to the numpy path
_TOP = 48  # table slots come from the hash bits from here up (tables up to 2**16 slots)
_DIRECTIONS = 4  # a group change on more than one row in this many: not grouped


@_inline
def _hash(offsets: np.ndarray, data: np.ndarray, words: np.ndarray, masks: np.ndarray, row: int) -> np.uint64:
    """hash_strings of one string of at most _LONG bytes: its words, xor-multiplied in order."""
    start = offsets[row]
    length = offsets[row + 1] - start
    value = np.uint64(length) * _MUL
    chunk = 0
    while True:
        size = min(length - chunk, 8)
        word = np.uint64(0)
        if size > 0:
            at = start + chunk
            if at < words.shape[0]:
                word = words[at] & masks[size]
            else:  # the buffer's last 7 bytes: byte by byte
                for b in range(size):
                    word |= np.uint64(data[at + b]) << np.uint64(8 * b)
        value = (value ^ word) * _MUL
        chunk += 8
        if chunk >= length:
            return value


@_jit
def grouped_scan(queries, docs, masks, score, check_score, out):  # fmt: skip
    """One pass over a grouped run: ``queries`` (offsets, bytes) and ``docs`` (offsets, bytes, words)
    of its IDs; fills ``out`` (codes, ranks, hashes, starts, suspects, table): each row's query code,
    rank and document hash, each query's first row, the rows whose hash repeats in their query (and
    the firsts), ``table`` a hash table (all -1; a slot is the current query's while it holds a row
    from that query's start on).

    Returns (status, queries, suspects found, tied rows): status 0, or 1 not grouped, 2 a query's
    scores not descending (or NaN) when ``check_score``, 3 an ID longer than _LONG bytes, 4 more
    suspects than fit, 5 a query with more than half as many rows as ``table`` has slots."""
    query_offsets, query_data = queries
    doc_offsets, doc_data, doc_words = docs
    codes, ranks, hashes, starts, suspects, table = out
    n = doc_offsets.shape[0] - 1
    group, start, found, ties = -1, 0, 0, 0
    for row in range(n):
        changed = row == 0
        if not changed:  # the query ID differs from the row before's
            a, b = query_offsets[row], query_offsets[row - 1]
            size = query_offsets[row + 1] - a
            changed = size != a - b
            k = 0
            while not changed and k < size:
                changed = query_data[a + k] != query_data[b + k]
                k += 1
        if changed:
            group += 1
            if group >= starts.shape[0] or (group > 1024 and group * _DIRECTIONS > row):
                return 1, group, found, ties
            starts[group] = row
            start = row
        elif check_score and not score[row] <= score[row - 1]:
            return 2, group, found, ties
        elif check_score and score[row] == score[row - 1]:
            ties += 1  # the tie policy orders these rows next
        if check_score and score[row] != score[row]:
            return 2, group, found, ties
        if doc_offsets[row + 1] - doc_offsets[row] > _LONG:
            return 3, group, found, ties
        value = _hash(doc_offsets, doc_data, doc_words, masks, row)
        codes[row] = group
        ranks[row] = row - start + 1
        hashes[row] = value
        if 2 * (row - start + 1) > table.shape[0]:
            return 5, group, found, ties
        slot = _free(table, hashes, start, row)
        if table[slot] < start:
            table[slot] = row
        else:  # an earlier row of this query with the same hash: both are suspects
            if found + 2 > suspects.shape[0]:
                return 4, group, found, ties
            suspects[found] = table[slot]
            suspects[found + 1] = row
            found += 2
    return 0, group + 1, found, ties


@_inline
def _free(table, hashes, start, row):  # fmt: skip
    """The slot for ``row``'s hash: a free one (none of this query's rows), or the row with that hash."""
    mask = table.shape[0] - 1
    value = hashes[row]
    slot = np.int64(value >> np.uint64(_TOP)) & mask  # the top bits: a product's best mixed
    while table[slot] >= start and hashes[table[slot]] != value:
        slot = (slot + 1) & mask
    return slot


@_jit
def candidates(query, hashes, judged, shifts, out):  # fmt: skip
    """Rows whose key ``hash + query * spread`` is in both bit tables of the ``judged`` keys (the top
    bits, the bits below; ``shifts``: spread, the top's shift, the lower's shift and mask), written to
    ``out`` while it has room; returns how many there are. Tables packed 64 bits to a word: 8 times
    smaller than bytes, so they stay in the CPU's cache."""
    spread, shift, shift2, mask = shifts
    words = np.int64(mask >> np.uint64(6)) + 1
    top, below = np.zeros(words, dtype=np.uint64), np.zeros(words, dtype=np.uint64)
    for key in judged:
        high, bits = key >> shift, (key >> shift2) & mask
        top[high >> np.uint64(6)] |= np.uint64(1) << (high & np.uint64(63))
        below[bits >> np.uint64(6)] |= np.uint64(1) << (bits & np.uint64(63))
    found = 0
    six, low = np.uint64(6), np.uint64(63)
    one = np.uint64(1)
    for row in range(query.shape[0]):
        key = hashes[row] + np.uint64(query[row]) * spread
        high = key >> shift
        if top[high >> six] & (one << (high & low)):
            bits = (key >> shift2) & mask
            if below[bits >> six] & (one << (bits & low)):
                if found < out.shape[0]:
                    out[found] = row
                found += 1
    return found
