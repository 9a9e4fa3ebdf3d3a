"""IDs as numbers: query and document IDs read as Arrow strings, queries numbered, documents hashed.

A document's 64-bit hash is computed vectorized, 8 bytes at a time, straight from the Arrow buffers,
and combined with its query's code (:func:`query_key`). Hashes only *find* candidates: whoever
uses them confirms every match on the strings themselves.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from rageval.errors import EvaluationError

_MUL = np.uint64(0x9E3779B97F4A7C15)
_ONE = np.uint64(1)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_BYTE_MASKS = np.array([(1 << (8 * n)) - 1 for n in range(8)] + [2**64 - 1], dtype=np.uint64)
_BLOCK = 1 << 14  # rows hashed at a time: their temporaries stay in the L2 cache (1 << 20 was 1.7x slower)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: a bijection on uint64 that spreads every input bit."""
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    return x ^ (x >> np.uint64(31))


def arrow_strings(values: pd.Series | Sequence[str] | np.ndarray, what: str) -> pa.Array:
    """``values`` as one Arrow string array (non-strings converted); a missing value is an error naming ``what``."""
    if isinstance(values, pd.Series):
        if values.isna().any():
            raise EvaluationError(f"{int(values.isna().sum())} missing {what}(s); every row needs one")
        if not pd.api.types.is_string_dtype(values.dtype) or values.dtype == object:
            values = values.astype(str)
        array = pa.array(values)
    else:
        array = pa.array(np.asarray(values, dtype=object), type=pa.large_string())
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if not (pa.types.is_string(array.type) or pa.types.is_large_string(array.type)):
        array = array.cast(pa.large_string())
    return array


def as_str(values: pd.Series, what: str) -> pd.Series:
    """``values`` as a pandas string column; a missing value is an error naming ``what``."""
    if values.isna().any():
        raise EvaluationError(f"{int(values.isna().sum())} missing {what}(s); every row needs one")
    return values if pd.api.types.is_string_dtype(values.dtype) and values.dtype != object else values.astype(str)


def query_codes(array: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Each row's query code (queries numbered in order of first appearance) and the query IDs."""
    codes, queries, _ = grouped_query_codes(array)
    return codes, queries


def grouped_query_codes(array: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """:func:`query_codes`, and each query's row count when the rows are grouped by query (the codes
    then never decrease), else None."""
    if len(array) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=object), np.zeros(0, dtype=np.int64)
    # A run is usually grouped by query: its runs of equal IDs are then the queries themselves.
    n = len(array)
    change = pc.not_equal(array.slice(1), array.slice(0, n - 1))
    if (pc.sum(change).as_py() or 0) * 4 + 4 > n:  # not grouped: hash every row once
        codes, queries = pd.factorize(pd.Series(array, dtype=pd.ArrowDtype(array.type)), sort=False)
        return codes.astype(np.int64, copy=False), np.asarray(queries, dtype=object), None
    starts = np.r_[0, pc.indices_nonzero(change).to_numpy(zero_copy_only=False).astype(np.int64) + 1]
    lengths = np.diff(starts, append=n)
    names = array.take(pa.array(starts)).to_numpy(zero_copy_only=False).astype(object)
    if pd.Index(names, dtype=object).is_unique:
        return np.repeat(np.arange(len(names), dtype=np.int64), lengths), names, lengths
    codes, queries = pd.factorize(names, sort=False)
    return np.repeat(codes.astype(np.int64), lengths), np.asarray(queries, dtype=object), None


def query_key(codes: np.ndarray) -> np.ndarray:
    """A well-mixed 64-bit key per query code: XORed with a document hash, it keys (query, document)."""
    return _mix(codes.astype(np.uint64) + np.uint64(1))


def hash_strings(array: pa.Array) -> np.ndarray:
    """A 64-bit hash of each string, read 8 bytes at a time straight from the Arrow buffers.

    A string of up to :data:`_SHORT` bytes is hashed word by word, multiply-xor mixing upwards (the
    high bits are the well-mixed ones, used for buckets); a longer one by :func:`_hash_long`, whose
    cost is linear in its length. Which of the two depends on the string alone, so a string hashes
    the same in every batch."""
    n = len(array)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    _, offsets_buffer, data_buffer = array.buffers()
    offset_type = np.int64 if pa.types.is_large_string(array.type) else np.int32
    offsets = np.frombuffer(offsets_buffer, dtype=offset_type)[array.offset : array.offset + n + 1]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    if len(data) < 8:  # too short for one word: pad (tiny)
        data = np.concatenate([data, np.zeros(8, dtype=np.uint8)])
    # Every byte position as the start of an unaligned little-endian uint64 word: a strided view, no copy.
    words = np.ndarray(shape=(len(data) - 7,), dtype="<u8", buffer=data, strides=(1,))
    value = np.empty(n, dtype=np.uint64)
    longs: list[np.ndarray] = []  # the long strings' positions, hashed together at the end
    for low in range(0, n, _BLOCK):  # a block at a time: the temporaries stay in cache
        high = min(n, low + _BLOCK)
        start = offsets[low:high].astype(np.int64)
        length = offsets[low + 1 : high + 1].astype(np.int64) - start
        if int(length.max()) <= _SHORT:
            value[low:high] = _hash_block(data, words, start, length)
            continue
        long = length > _SHORT
        short = np.flatnonzero(~long)
        value[low + short] = _hash_block(data, words, start[short], length[short])
        longs.append(low + np.flatnonzero(long))
    if longs:
        at = np.concatenate(longs)
        start = offsets[at].astype(np.int64)
        value[at] = _hash_long(data, start, offsets[at + 1].astype(np.int64) - start)
    return value


# Strings up to this many bytes hash word by word (one pass over the rows per word of the longest).
_SHORT = 256
_LONG_SEED = np.uint64(0xD6E8FEB86659FD93)


def _hash_block(data: np.ndarray, words: np.ndarray, start: np.ndarray, length: np.ndarray) -> np.ndarray:
    """The word-by-word hash of strings of at most :data:`_SHORT` bytes (``start`` non-decreasing).

    The first word is every string's; each later word only the strings that reach it. A string whose
    words would read past the end of the data buffer is redone from a padded copy of the tail."""
    if len(start) == 0:
        return np.zeros(0, dtype=np.uint64)
    last = len(words) - 1
    longest = int(length.max())
    # Rows from `safe` on may read past the buffer's end (start is non-decreasing): redone below.
    safe = int(np.searchsorted(start, last - max(longest - 1, 0) // 8 * 8, side="right"))
    value = length.astype(np.uint64)
    value *= _MUL
    head = words[start[:safe]]
    head &= _BYTE_MASKS[np.minimum(length[:safe], 8)]
    value[:safe] ^= head
    value *= _MUL
    for chunk in range(8, longest, 8):
        # Only strings longer than `chunk` change: a shorter one hashes as if alone.
        active = np.flatnonzero(length[:safe] > chunk)
        word = words[start[active] + chunk]
        word &= _BYTE_MASKS[np.minimum(length[active] - chunk, 8)]
        value[active] = (value[active] ^ word) * _MUL
    if safe < len(start):
        value[safe:] = _hash_tail(data, start[safe:], length[safe:], longest)
    return value


def _hash_tail(data: np.ndarray, start: np.ndarray, length: np.ndarray, longest: int) -> np.ndarray:
    """:func:`hash_strings` for strings near the end of the data buffer, from a zero-padded copy of it."""
    base = int(start.min())
    padded = np.zeros(len(data) - base + longest + 8, dtype=np.uint8)
    padded[: len(data) - base] = data[base:]
    words = np.ndarray(shape=(len(padded) - 7,), dtype="<u8", buffer=padded, strides=(1,))
    value = length.astype(np.uint64) * _MUL
    for chunk in range(0, longest, 8):
        remaining = np.clip(length - chunk, 0, 8)
        value ^= words[start - base + chunk] & _BYTE_MASKS[remaining]
        value *= _MUL if chunk == 0 else np.where(remaining > 0, _MUL, _ONE)
    return value


def _hash_long(data: np.ndarray, start: np.ndarray, length: np.ndarray) -> np.ndarray:
    """The hash of strings longer than :data:`_SHORT` bytes: each 8-byte word mixed with its
    position, summed per string, the sum mixed with the length. Every word of every string is read
    once, in vectorised blocks, so the cost is linear in the bytes (the word-by-word hash costs one
    pass over all rows per word of the longest string: quadratic with one huge ID)."""
    padded = np.concatenate([data, np.zeros(8, dtype=np.uint8)])
    words = np.ndarray(shape=(len(padded) - 7,), dtype="<u8", buffer=padded, strides=(1,))
    count = (length + 7) // 8
    value = np.empty(len(start), dtype=np.uint64)
    budget = 1 << 22  # words gathered at a time: bounds the temporaries
    ends = np.cumsum(count)
    low = 0
    while low < len(start):
        before = int(ends[low - 1]) if low else 0
        high = max(low + 1, int(np.searchsorted(ends, before + budget, side="right")))
        total = int(ends[high - 1]) - before
        n = count[low:high]
        first = np.cumsum(n) - n
        owner = np.repeat(np.arange(high - low), n)
        index = np.arange(total, dtype=np.int64) - first[owner]  # word number within its string
        word = words[start[low:high][owner] + 8 * index]
        remaining = np.clip(length[low:high][owner] - 8 * index, 0, 8)
        word &= _BYTE_MASKS[remaining]
        mixed = _mix(word ^ _mix(index.astype(np.uint64) + _LONG_SEED))
        sums = np.add.reduceat(mixed, first)
        value[low:high] = _mix(sums ^ (length[low:high].astype(np.uint64) * _MUL))
        low = high
    return value
