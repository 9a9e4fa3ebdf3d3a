"""Measures under the metric contract (:mod:`rageval.evaluation.contract`), behind one pure function: :func:`evaluate`.

The common rank-based measures (P, R, Success, RR, AP, Rprec, nDCG, Judged) are computed here with
numpy on integer-coded arrays; any other measure, or one with parameters this engine does not
take, goes to ir-measures. Either way the values are trec_eval's, and each measure records which
provider computed it.

How a run becomes numbers, once, whatever the measures:

1. IDs are read as Arrow strings; each document ID gets a 64-bit hash (vectorized over the Arrow
   buffers) combined with its query's code. Hashes only *find* candidates: every duplicate and
   every qrels match is confirmed on the strings, and any collision falls back to an exact join.
2. The tie policy decides the order: a run already grouped by query in score order costs one
   check; otherwise rows are grouped by a radix sort and each query sorted by score. Only tied
   rows are sorted again, by document ID.
3. Duplicates: sorting each query's 32-bit hash prefixes finds candidates; the first occurrence in
   the decided order stays.
4. The measures read only the judged rows (a few per query) and per-query counts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import ir_measures
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from rageval.errors import EvaluationError, MeasureError, Problem
from rageval.evaluation.contract import (
    CONTRACT,
    DEFAULT_DEPTH,
    DUPLICATE_POLICIES,
    GAINS,
    MISSING_POLICIES,
    TIE_POLICIES,
    DuplicatePolicy,
    Gain,
    MissingPolicy,
    TiePolicy,
    check_choice,
    contract_record,
)

__all__ = [
    "CONTRACT",
    "DEFAULT_DEPTH",
    "DUPLICATE_POLICIES",
    "GAINS",
    "MISSING_POLICIES",
    "NATIVE",
    "TIE_POLICIES",
    "Abstention",
    "DuplicatePolicy",
    "Evaluation",
    "Gain",
    "Measure",
    "MissingPolicy",
    "TiePolicy",
    "abstention",
    "evaluate",
    "measure_from_key",
    "metric_key",
    "order_ranking",
    "parse_measure",
    "parse_measures",
    "rollup_to_parent",
    "top_scores",
]

Provider = Literal["auto", "ir_measures"]
PROVIDERS: tuple[Provider, ...] = get_args(Provider)
NATIVE = "rageval"

# Names users know from other tools → the ir-measures name that computes the same thing.
ALIASES: dict[str, str] = {"Hit": "Success", "MRR": "RR"}
_ALIAS_PATTERN = re.compile(r"^(" + "|".join(ALIASES) + r")(?=$|[@(])")


@dataclass(frozen=True)
class Measure:
    """A measure as the user wrote it, and the ir-measures object that defines it."""

    text: str
    measure: ir_measures.measures.Measure

    @property
    def key(self) -> str:
        """Its name in MLflow (see :func:`metric_key`)."""
        return metric_key(self.text)

    @property
    def definition(self) -> str:
        return repr(self.measure)


def parse_measure(text: str) -> Measure:
    """Parse ``nDCG@10``, ``Hit@5``, ``MRR`` … into a :class:`Measure`."""
    canonical = _ALIAS_PATTERN.sub(lambda m: ALIASES[m.group(1)], text.strip())
    try:
        measure = ir_measures.parse_measure(canonical)
    except (ValueError, NameError, SyntaxError, TypeError, AttributeError) as exc:
        raise MeasureError(
            Problem(
                file="<measures>",
                field="measures",
                message=f"cannot parse measure {text!r}: {exc}",
                fix="write measures as ir-measures names them, e.g. nDCG@10, R@100, RR, P@5, AP, Rprec, Success@5 "
                f"(aliases: {', '.join(f'{a}→{b}' for a, b in ALIASES.items())})",
            )
        ) from None
    return Measure(text=text.strip(), measure=measure)


def parse_measures(texts: Iterable[str]) -> list[Measure]:
    measures = [parse_measure(t) for t in texts]
    seen: dict[str, str] = {}
    for m in measures:
        if m.definition in seen:
            raise MeasureError(
                Problem(file="<measures>", field="measures", message=f"{m.text!r} repeats {seen[m.definition]!r}")
            )
        seen[m.definition] = m.text
    return measures


# --------------------------------------------------------------------------- metric keys

# MLflow keys allow letters, digits, '_', '-', '.', ' ', ':' and '/'. Everything else is escaped
# reversibly: '@' → '_at_', '_' → '__', any other character → '_xHH_' (its code point in hex).
_PLAIN = re.compile(r"[A-Za-z0-9.\-]")
_ESCAPE = re.compile(r"__|_at_|_x([0-9a-f]+)_")


def metric_key(text: str) -> str:
    """``nDCG@10`` → ``nDCG_at_10``; reversible with :func:`measure_from_key`."""
    out = []
    for char in text:
        if char == "@":
            out.append("_at_")
        elif char == "_":
            out.append("__")
        elif _PLAIN.match(char):
            out.append(char)
        else:
            out.append(f"_x{ord(char):x}_")
    return "".join(out)


def measure_from_key(key: str) -> str:
    def undo(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "__":
            return "_"
        if token == "_at_":
            return "@"
        return chr(int(match.group(1), 16))

    return _ESCAPE.sub(undo, key)


# --------------------------------------------------------------------------- string keys

_MUL = np.uint64(0x9E3779B97F4A7C15)
_ONE = np.uint64(1)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_BYTE_MASKS = np.array([(1 << (8 * n)) - 1 for n in range(8)] + [2**64 - 1], dtype=np.uint64)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: a bijection on uint64 that spreads every input bit."""
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    return x ^ (x >> np.uint64(31))


def _arrow_strings(values: pd.Series | Sequence[str] | np.ndarray, what: str) -> pa.Array:
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


_BLOCK = 1 << 20  # rows hashed at a time: bounds the temporaries, keeps them in cache


def _hash_strings(array: pa.Array) -> np.ndarray:
    """A 64-bit hash of each string, read 8 bytes at a time straight from the Arrow buffers.

    Multiply-xor mixes upwards: the high bits are the well-mixed ones (used for buckets)."""
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
    for low in range(0, n, _BLOCK):
        high = min(n, low + _BLOCK)
        value[low:high] = _hash_block(data, words, offsets[low : high + 1])
    return value


def _hash_block(data: np.ndarray, words: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    start = offsets[:-1].astype(np.int64)
    length = offsets[1:].astype(np.int64)
    length -= start
    last = len(words) - 1
    value = length.astype(np.uint64)
    value *= _MUL
    longest = int(length.max())
    # The last few strings of the buffer would read past its end: clamped here, redone from a padded tail.
    tail = np.flatnonzero(start + longest > last)
    for chunk in range(0, longest, 8):
        position = start + chunk
        np.minimum(position, last, out=position)
        word = words[position]
        remaining = length - chunk
        np.clip(remaining, 0, 8, out=remaining)
        word &= _BYTE_MASKS[remaining]
        value ^= word
        # A string shorter than this chunk must hash as if alone: no further multiply.
        value *= _MUL if chunk == 0 else np.where(remaining > 0, _MUL, _ONE)
    if len(tail):
        value[tail] = _hash_tail(data, start[tail], length[tail], longest)
    return value


def _hash_tail(data: np.ndarray, start: np.ndarray, length: np.ndarray, longest: int) -> np.ndarray:
    """:func:`_hash_strings` for strings near the end of the data buffer, from a zero-padded copy of it."""
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


def _query_key(codes: np.ndarray) -> np.ndarray:
    return _mix(codes.astype(np.uint64) + np.uint64(1))


# --------------------------------------------------------------------------- the decided order


@dataclass(frozen=True)
class _Ranked:
    """A run in the decided order: rows grouped by query, duplicates dropped, ranks 1..n."""

    queries: np.ndarray  # query IDs (str objects); a row's query code indexes it
    query: np.ndarray  # per kept row: query code (non-decreasing)
    rank: np.ndarray  # per kept row: 1-based rank within its query
    score: np.ndarray  # per kept row
    row: np.ndarray  # per kept row: its position in the input frame
    hash: np.ndarray  # per kept row: hash of its document ID
    docs: pa.Array  # the input's document IDs, in input order
    lengths: np.ndarray  # per query: kept rows
    dropped: np.ndarray  # per query: duplicates dropped

    def doc_ids(self, rows: np.ndarray | None = None) -> np.ndarray:
        """Document IDs (str objects) of the kept rows, or of the given kept-row positions."""
        positions = self.row if rows is None else self.row[rows]
        return self.docs.take(pa.array(positions, type=pa.int64())).to_numpy(zero_copy_only=False)


def _check_policies(ties: str, duplicates: str) -> None:
    check_choice("tie policy", ties, TIE_POLICIES)
    check_choice("duplicate policy", duplicates, DUPLICATE_POLICIES)


def _rank(run: pd.DataFrame, ties: str, duplicates: str) -> _Ranked:
    _check_policies(ties, duplicates)
    needed = ["query_id", "doc_id"] + ([] if ties == "input-order" else ["score"])
    absent = [c for c in needed if c not in run.columns]
    if absent:
        raise EvaluationError(
            f"the run lacks column(s) {', '.join(absent)}; a run has query_id, doc_id, score and optionally rank"
        )
    codes, queries = _query_codes(_arrow_strings(run["query_id"], "query ID"))
    docs = _arrow_strings(run["doc_id"], "document ID")
    score = run["score"].to_numpy(dtype=np.float64) if "score" in run.columns else np.zeros(len(run))
    order = _decide_order(run, codes, score, docs, ties)
    doc_hash = _hash_strings(docs)
    if order is None:  # already in the decided order: no gathers
        order, query = np.arange(len(codes)), codes
    else:
        query, score, doc_hash = codes[order], score[order], doc_hash[order]
    rank = _ranks(query)
    dropped_at = _duplicates(query, rank, doc_hash, order, docs, len(queries))
    dropped = np.bincount(query[dropped_at], minlength=len(queries))
    if len(dropped_at):
        if duplicates == "error":
            examples = ", ".join(f"{queries[query[i]]}/{docs[int(order[i])].as_py()}" for i in dropped_at[:5])
            raise EvaluationError(
                f"{len(dropped_at)} repeated document(s) within a query's ranking (e.g. {examples}); "
                "deduplicate the run or evaluate with duplicates='keep-first'"
            )
        keep = np.ones(len(order), dtype=bool)
        keep[dropped_at] = False
        order, query, score, doc_hash = order[keep], query[keep], score[keep], doc_hash[keep]
        rank = _ranks(query)
    return _Ranked(
        queries=queries,
        query=query,
        rank=rank,
        score=score,
        row=order,
        hash=doc_hash,
        docs=docs,
        lengths=np.bincount(query, minlength=len(queries)),
        dropped=dropped,
    )


def _as_str(values: pd.Series, what: str) -> pd.Series:
    if values.isna().any():
        raise EvaluationError(f"{int(values.isna().sum())} missing {what}(s); every row needs one")
    return values if pd.api.types.is_string_dtype(values.dtype) and values.dtype != object else values.astype(str)


def _query_codes(array: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Each row's query code (queries numbered in order of first appearance) and the query IDs."""
    if len(array) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=object)
    # A run is usually grouped by query: its runs of equal IDs are then the queries themselves.
    runs = pc.run_end_encode(array)
    if len(runs.values) * 4 > len(array):  # not grouped: hash every row once
        codes, queries = pd.factorize(pd.Series(array, dtype=pd.ArrowDtype(array.type)), sort=False)
        return codes.astype(np.int64, copy=False), np.asarray(queries, dtype=object)
    lengths = np.diff(runs.run_ends.to_numpy(zero_copy_only=False).astype(np.int64), prepend=0)
    names = runs.values.to_numpy(zero_copy_only=False).astype(object)
    if pd.Index(names, dtype=object).is_unique:
        return np.repeat(np.arange(len(names), dtype=np.int64), lengths), names
    codes, queries = pd.factorize(names, sort=False)
    return np.repeat(codes.astype(np.int64), lengths), np.asarray(queries, dtype=object)


def _ranks(query: np.ndarray) -> np.ndarray:
    """1-based position within each run of equal (non-decreasing) query codes."""
    n = len(query)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, query[1:] != query[:-1]])
    return np.arange(1, n + 1, dtype=np.int64) - np.repeat(starts, np.diff(np.r_[starts, n]))


def _decide_order(
    run: pd.DataFrame, codes: np.ndarray, score: np.ndarray, docs: pa.Array, ties: str
) -> np.ndarray | None:
    """Input positions in the decided order (grouped by query in order of first appearance, then by
    the tie policy); None when the input already is in that order."""
    grouped = bool((codes[1:] >= codes[:-1]).all())
    same = codes[1:] == codes[:-1]
    if ties == "input-order":
        if "rank" not in run.columns:
            return None if grouped else np.argsort(codes, kind="stable")
        rank = run["rank"].to_numpy(dtype=np.float64)
        if np.isnan(rank).any():
            raise EvaluationError(f"{int(np.isnan(rank).sum())} missing rank(s) in the run's rank column")
        if grouped and not (same & (rank[1:] < rank[:-1])).any():
            return None
        return np.lexsort((rank, codes))
    if np.isnan(score).any():
        raise EvaluationError(
            f"{int(np.isnan(score).sum())} missing score(s); score-ordered tie policies need every score "
            "(or evaluate with ties='input-order')"
        )
    if grouped and not (same & (score[1:] > score[:-1])).any():
        tied = same & (score[1:] == score[:-1])
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
    grid[grouped_codes, _ranks(grouped_codes) - 1] = -score[grouped]
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


_EMPTY = np.zeros(0, dtype=np.int64)


def _duplicates(
    query: np.ndarray, rank: np.ndarray, doc_hash: np.ndarray, order: np.ndarray, docs: pa.Array, size: int
) -> np.ndarray:
    """Positions (in the decided order) of repeated (query, document) rows after their first occurrence."""
    n = len(query)
    if n < 2:
        return _EMPTY
    counts = np.bincount(query, minlength=size)
    width = int(counts.max())
    if size * width <= 2 * n + 1024:
        # One row per query, on 32 bits of the hash: sorting short rows is several times faster than
        # one long sort; the rare equal halves are settled on the IDs below.
        short = (doc_hash >> np.uint64(32)).astype(np.uint32)
        if (counts == width).all():
            grid = np.sort(short.reshape(size, width), axis=1)
        else:
            grid = np.full((size, width), np.iinfo(np.uint32).max, dtype=np.uint32)
            grid[query, rank - 1] = short
            grid.sort(axis=1)
        at_query, at_column = np.nonzero(grid[:, 1:] == grid[:, :-1])
        if not len(at_query):
            return _EMPTY
        marked = np.zeros(size, dtype=bool)
        marked[at_query] = True
        inside = np.flatnonzero(marked[query])
        suspects = np.unique(grid[at_query, at_column].astype(np.uint64) ^ _query_key(at_query))
        keys = short[inside].astype(np.uint64) ^ _query_key(query[inside])
        candidates = inside[pd.Index(keys).isin(suspects)]
    else:
        keys = doc_hash ^ _query_key(query)
        ordered = np.sort(keys)
        suspects = ordered[1:][ordered[1:] == ordered[:-1]]
        if not len(suspects):
            return _EMPTY
        candidates = np.flatnonzero(pd.Index(keys).isin(np.unique(suspects)))
    # Equal hashes only suggest a repeat: confirm on the IDs themselves.
    names = docs.take(pa.array(order[candidates], type=pa.int64())).to_numpy(zero_copy_only=False)
    confirmed = pd.DataFrame({"q": query[candidates], "d": names}).duplicated(keep="first").to_numpy()
    return candidates[confirmed]


def order_ranking(run: pd.DataFrame, ties: TiePolicy, duplicates: DuplicatePolicy = "keep-first") -> pd.DataFrame:
    """A run ``query_id, doc_id, score[, rank]`` in the decided order with a 1-based ``rank``.

    Rows are grouped by query in order of first appearance. Pure: returns a new frame.
    """
    ranked = _rank(run, ties, duplicates)
    taken = pa.array(ranked.row, type=pa.int64())
    return pd.DataFrame(
        {
            "query_id": pd.Series(_arrow_strings(run["query_id"], "query ID").take(taken), dtype="str"),
            "doc_id": pd.Series(ranked.docs.take(taken), dtype="str"),
            "score": ranked.score,
            "rank": ranked.rank,
        }
    )


# --------------------------------------------------------------------------- judgments


@dataclass(frozen=True)
class _Judgments:
    """The qrels as flat arrays, and where each judged (query, document) sits in the ranked run."""

    queries: tuple[str, ...]  # every query the qrels name, empty ones included
    query: np.ndarray  # per judgment: query ID (str objects)
    doc: np.ndarray  # per judgment: document ID (str objects)
    grade: np.ndarray  # per judgment: int64
    code: np.ndarray  # per judgment: the run's query code, -1 where the run lacks that query
    row: np.ndarray  # per judgment: kept-row position in the ranked run, -1 where not retrieved


def _judgments(qrels: Mapping[str, Mapping[str, int]], ranked: _Ranked) -> _Judgments:
    names = [str(q) for q in qrels]
    sizes = [len(judged) for judged in qrels.values()]
    query = np.repeat(np.array(names, dtype=object), sizes)
    doc = np.array([str(d) for judged in qrels.values() for d in judged], dtype=object)
    grade = np.array([int(g) for judged in qrels.values() for g in judged.values()], dtype=np.int64)
    code = pd.Index(ranked.queries, dtype=object).get_indexer(query).astype(np.int64) if len(query) else _EMPTY
    row = _locate(ranked, doc, code)
    return _Judgments(tuple(dict.fromkeys(names)), query, doc, grade, code, row)


def _locate(ranked: _Ranked, doc: np.ndarray, code: np.ndarray) -> np.ndarray:
    """For each judgment, the kept-row position of its (query, document) in the run, else -1."""
    row = np.full(len(doc), -1, dtype=np.int64)
    known = np.flatnonzero(code >= 0)
    if len(known) == 0 or len(ranked.query) == 0:
        return row
    doc_hash = _hash_strings(_arrow_strings(doc[known], "document ID"))
    keys = pd.Index(doc_hash ^ _query_key(code[known]))
    if keys.is_unique:
        # A bit table on the document hash discards most unjudged rows before any key is built.
        bits = min(max(10, int(16 * len(known)).bit_length()), 30)
        shift = np.uint64(64 - bits)
        table = np.zeros(1 << bits, dtype=bool)
        table[doc_hash >> shift] = True
        candidates = np.flatnonzero(table[ranked.hash >> shift])
        at = keys.get_indexer(ranked.hash[candidates] ^ _query_key(ranked.query[candidates]))
        hits = candidates[at >= 0]
        judgment = known[at[at >= 0]]
        # A hash match is a candidate; the IDs decide.
        if (ranked.doc_ids(hits) == doc[judgment]).all() and (ranked.query[hits] == code[judgment]).all():
            row[judgment] = hits
            return row
    # A hash collision: join on the IDs themselves (exact, slower).
    kept = pd.DataFrame({"q": ranked.query, "d": ranked.doc_ids(), "row": np.arange(len(ranked.query))})
    wanted = pd.DataFrame({"q": code[known], "d": doc[known], "j": known})
    joined = wanted.merge(kept, on=["q", "d"], how="inner")
    row[joined["j"].to_numpy()] = joined["row"].to_numpy()
    return row


# --------------------------------------------------------------------------- native measures


_NATIVE_FAMILIES = {"P", "R", "Success", "RR", "AP", "Rprec", "nDCG", "Judged"}
_NEEDS_CUTOFF = {"P", "R", "Success"}


def _param(measure: ir_measures.measures.Measure, name: str) -> Any:
    if name in measure.params:
        return measure.params[name]
    supported = measure.SUPPORTED_PARAMS.get(name)
    default = supported.default if supported is not None else None
    # ir-measures marks "no default" (no cutoff, no gains) with a bare object() sentinel.
    return default if isinstance(default, bool | int | float | str) else None


def _native_supports(measure: ir_measures.measures.Measure) -> bool:
    if measure.NAME not in _NATIVE_FAMILIES or _param(measure, "judged_only"):
        return False
    if measure.NAME in _NEEDS_CUTOFF and _param(measure, "cutoff") is None:
        return False
    if measure.NAME == "nDCG" and (_param(measure, "gains") is not None or _param(measure, "dcg") != "log2"):
        return False
    return True


def _gain(grade: np.ndarray, gain: str) -> np.ndarray:
    positive = np.maximum(grade, 0).astype(np.float64)
    return np.exp2(positive) - 1.0 if gain == "exp" else positive


class _Context:
    """Everything the native measures read, per query code of the ranked run; caches what repeats."""

    def __init__(self, ranked: _Ranked, judgments: _Judgments, relevance: int, gain: str) -> None:
        self.size = len(ranked.queries)
        self.lengths = ranked.lengths.astype(np.float64)
        self.relevance = relevance
        self.gain = gain
        retrieved = np.flatnonzero(judgments.row >= 0)
        by_position = retrieved[np.argsort(judgments.row[retrieved], kind="stable")]
        self.query = judgments.code[by_position]  # judged retrieved rows, in ranked order
        self.rank = ranked.rank[judgments.row[by_position]]
        self.grade = judgments.grade[by_position]
        in_run = judgments.code >= 0
        self.judged_query = judgments.code[in_run]
        self.judged_grade = judgments.grade[in_run]
        self._relevant: dict[int, np.ndarray] = {}
        self._ideal: dict[int | None, np.ndarray] = {}

    def count(self, mask: np.ndarray) -> np.ndarray:
        return np.bincount(self.query[mask], minlength=self.size).astype(np.float64)

    def relevant(self, threshold: int) -> np.ndarray:
        """Relevant items in the qrels per query, at ``threshold``."""
        if threshold not in self._relevant:
            chosen = self.judged_query[self.judged_grade >= threshold]
            self._relevant[threshold] = np.bincount(chosen, minlength=self.size).astype(np.float64)
        return self._relevant[threshold]

    def ideal(self, cutoff: int | None) -> np.ndarray:
        """DCG of the ideal ordering of each query's judged grades, to ``cutoff``."""
        if cutoff not in self._ideal:
            gains = _gain(self.judged_grade, self.gain)
            positive = gains > 0
            query, gains = self.judged_query[positive], gains[positive]
            order = np.lexsort((-gains, query))
            query, gains = query[order], gains[order]
            position = _ranks(query)
            within = position <= cutoff if cutoff is not None else np.ones(len(position), dtype=bool)
            weights = gains[within] / np.log2(position[within] + 1.0)
            self._ideal[cutoff] = np.bincount(query[within], weights=weights, minlength=self.size)
        return self._ideal[cutoff]


def _divide(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    out = np.zeros_like(numerator, dtype=np.float64)
    np.divide(numerator, denominator, out=out, where=denominator > 0)
    return out


def _first_per_query(query: np.ndarray) -> np.ndarray:
    return np.r_[True, query[1:] != query[:-1]] if len(query) else np.zeros(0, dtype=bool)


def _native_values(measure: ir_measures.measures.Measure, ctx: _Context) -> np.ndarray:
    """One value per query code of the ranked run (queries without judgments included)."""
    name = measure.NAME
    cutoff = _param(measure, "cutoff")
    within = ctx.rank <= cutoff if cutoff is not None else np.ones(len(ctx.rank), dtype=bool)
    if name == "Judged":
        shown = ctx.lengths if cutoff is None else np.minimum(ctx.lengths, cutoff)
        return _divide(ctx.count(within), shown)
    if name == "nDCG":
        gains = _gain(ctx.grade, ctx.gain)
        chosen = within & (gains > 0)
        dcg = np.bincount(
            ctx.query[chosen], weights=gains[chosen] / np.log2(ctx.rank[chosen] + 1.0), minlength=ctx.size
        )
        return _divide(dcg, ctx.ideal(cutoff))
    threshold = int(measure.params.get("rel", ctx.relevance))
    relevant = ctx.grade >= threshold
    total = ctx.relevant(threshold)
    if name == "P":
        return ctx.count(relevant & within) / cutoff
    if name == "R":
        return _divide(ctx.count(relevant & within), total)
    if name == "Success":
        return (ctx.count(relevant & within) > 0).astype(np.float64)
    if name == "Rprec":
        return _divide(ctx.count(relevant & (ctx.rank <= total[ctx.query])), total)
    chosen = np.flatnonzero(relevant & within)
    query, rank = ctx.query[chosen], ctx.rank[chosen].astype(np.float64)
    if name == "RR":
        first = _first_per_query(query)
        values = np.zeros(ctx.size)
        values[query[first]] = 1.0 / rank[first]
        return values
    if name == "AP":
        found = _ranks(query).astype(np.float64)  # relevant items up to and including this one
        return _divide(np.bincount(query, weights=found / rank, minlength=ctx.size), total)
    raise AssertionError(f"no native computation for {name}")  # _native_supports guards this


# --------------------------------------------------------------------------- evaluation


@dataclass(frozen=True)
class Evaluation:
    """Per-query values (rows: queries; columns: measures as written), diagnostics and how they were made."""

    per_query: pd.DataFrame
    measures: tuple[Measure, ...]
    skipped: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    policy: dict[str, str] = field(default_factory=dict)
    providers: dict[str, str] = field(default_factory=dict)  # measure text → provider that computed it
    diagnostics: pd.DataFrame = field(default_factory=pd.DataFrame)  # same rows as per_query
    duplicates: int = 0  # repeated IDs dropped from the whole run (every query, evaluated or not)
    contract: dict[str, Any] = field(default_factory=dict)  # contract_record(...) of this evaluation

    @property
    def aggregates(self) -> pd.Series:
        """Mean of each measure over evaluated queries."""
        columns = [m.text for m in self.measures]
        if self.per_query.empty:
            return pd.Series(np.nan, index=columns, dtype=float)
        return self.per_query[columns].mean()

    @property
    def diagnostic_means(self) -> pd.Series:
        """Mean of each diagnostic over evaluated queries (the tie rate over queries that have one)."""
        if self.diagnostics.empty:
            return pd.Series(np.nan, index=self.diagnostics.columns, dtype=float)
        return self.diagnostics.mean()

    @property
    def evaluated(self) -> int:
        return len(self.per_query)

    def definitions(self) -> dict[str, dict[str, str]]:
        """What each metric means, keyed by its MLflow key."""
        return {
            m.key: {
                "measure": m.text,
                "ir_measures": m.definition,
                **self.policy,
                "provider": self.providers.get(m.text, self.policy.get("provider", "")),
            }
            for m in self.measures
        }

    def long(self) -> pd.DataFrame:
        """One row per (query, measure): ``query_id, measure, value``."""
        frame = self.per_query.reset_index().melt(id_vars="query_id", var_name="measure", value_name="value")
        return frame.sort_values(["query_id", "measure"], kind="stable").reset_index(drop=True)


def evaluate(
    run: pd.DataFrame,
    qrels: Mapping[str, Mapping[str, int]],
    measures: Sequence[str | Measure],
    *,
    ties: TiePolicy = "docid-asc",
    duplicates: DuplicatePolicy = "keep-first",
    missing: MissingPolicy = "zero",
    relevance: int = 1,
    gain: Gain = "grade",
    depth: int = DEFAULT_DEPTH,
    provider: Provider = "auto",
) -> Evaluation:
    """Evaluate a run (``query_id, doc_id, score`` and optionally ``rank``) against graded qrels.

    ``provider="auto"`` computes the measures it can natively and the rest with ir-measures;
    ``"ir_measures"`` sends every measure there (same values; for cross-checks). Always returns an
    :class:`Evaluation`; never writes anything.
    """
    parsed = tuple(m if isinstance(m, Measure) else parse_measure(m) for m in measures)
    _check_options(missing, relevance, gain, depth, provider)
    ranked = _rank(run, ties, duplicates)
    judgments = _judgments(qrels, ranked)

    answerable = set(judgments.query[judgments.grade >= relevance].tolist())
    in_run = set(ranked.queries.tolist())
    skipped = sorted((set(judgments.queries) | in_run) - answerable)
    absent = sorted(answerable - in_run)
    codes = np.flatnonzero(pd.Index(ranked.queries, dtype=object).isin(answerable))
    evaluated = ranked.queries[codes]

    ctx = _Context(ranked, judgments, relevance, gain)
    providers: dict[str, str] = {}
    columns: dict[str, np.ndarray] = {}
    deferred = []
    for m in parsed:
        if provider == "auto" and _native_supports(m.measure):
            columns[m.text] = _native_values(m.measure, ctx)[codes]
            providers[m.text] = NATIVE
        else:
            deferred.append(m)
    if deferred:
        values, names = _ir_measures_values(deferred, ranked, judgments, codes, relevance, gain)
        columns.update(values)
        providers.update(names)

    per_query = pd.DataFrame({m.text: columns[m.text] for m in parsed}, index=pd.Index(evaluated, dtype=object))
    diagnostics = _diagnostics(ranked, ctx, depth).iloc[codes].set_axis(pd.Index(evaluated, dtype=object))
    if missing == "zero" and absent:
        per_query = pd.concat(
            [per_query, pd.DataFrame(0.0, index=pd.Index(absent, dtype=object), columns=per_query.columns)]
        )
        zero = pd.DataFrame(0.0, index=pd.Index(absent, dtype=object), columns=diagnostics.columns)
        zero[_tie_column(depth)] = np.nan
        diagnostics = pd.concat([diagnostics, zero])
    per_query = per_query.astype(float).sort_index()
    per_query.index.name = "query_id"
    diagnostics = diagnostics.astype(float).sort_index()
    diagnostics.index.name = "query_id"

    options = {
        "ties": ties,
        "duplicates": duplicates,
        "missing": missing,
        "relevance": relevance,
        "gain": gain,
        "depth": depth,
    }
    policy = {
        "contract": CONTRACT,
        **{k: str(v) for k, v in options.items()},
        "provider": "+".join(sorted(set(providers.values()))) or "none",
    }
    return Evaluation(
        per_query=per_query,
        measures=parsed,
        skipped=tuple(skipped),
        missing=tuple(absent),
        policy=policy,
        providers=providers,
        diagnostics=diagnostics,
        duplicates=int(ranked.dropped.sum()),
        contract=contract_record(**options),
    )


def _check_options(missing: str, relevance: int, gain: str, depth: int, provider: str) -> None:
    check_choice("missing-query policy", missing, MISSING_POLICIES)
    check_choice("gain", gain, GAINS)
    check_choice("provider", provider, PROVIDERS)
    if isinstance(relevance, bool) or not isinstance(relevance, int | np.integer) or relevance < 1:
        raise EvaluationError(f"relevance threshold must be an integer grade >= 1 (got {relevance!r})")
    if isinstance(depth, bool) or not isinstance(depth, int | np.integer) or depth < 1:
        raise EvaluationError(f"diagnostic depth must be a positive integer (got {depth!r})")


def _tie_column(depth: int) -> str:
    return f"tie_rate@{depth}"


def _diagnostics(ranked: _Ranked, ctx: _Context, depth: int) -> pd.DataFrame:
    """Per query code: Judged@depth, unjudged in the first depth, tie rate in the first depth, duplicates."""
    shown = np.minimum(ranked.lengths, depth).astype(np.float64)
    judged = ctx.count(ctx.rank <= depth)
    # Adjacent pairs inside one query's first `depth`: a row ranked 2..depth and the row before it.
    second = np.flatnonzero((ranked.rank <= depth) & (ranked.rank >= 2))
    tied = second[ranked.score[second] == ranked.score[second - 1]]
    ties = np.bincount(ranked.query[tied], minlength=ctx.size).astype(np.float64)
    rate = np.full(ctx.size, np.nan)
    np.divide(ties, shown - 1, out=rate, where=shown >= 2)
    return pd.DataFrame(
        {
            f"Judged@{depth}": _divide(judged, shown),
            f"unjudged@{depth}": shown - judged,
            _tie_column(depth): rate,
            "duplicates": ranked.dropped.astype(np.float64),
        }
    )


def _effective(measure: ir_measures.measures.Measure, relevance: int, gain: str, grades: np.ndarray):
    """The ir-measures object computing ``measure`` under the contract's options."""
    if "rel" in measure.SUPPORTED_PARAMS and "rel" not in measure.params and relevance != 1:
        measure = measure(rel=relevance)
    if measure.NAME == "nDCG" and gain == "exp" and _param(measure, "gains") is None:
        measure = measure(gains={int(g): 2 ** int(g) - 1 if g > 0 else 0 for g in np.unique(grades)})
    return measure


def _provider_name(measure: ir_measures.measures.Measure) -> str:
    for candidate in ir_measures.DefaultPipeline.providers:
        if candidate.is_available() and candidate.supports(measure):
            return f"ir_measures:{candidate.NAME}"
    return "ir_measures"


def _ir_measures_values(
    measures: list[Measure],
    ranked: _Ranked,
    judgments: _Judgments,
    codes: np.ndarray,
    relevance: int,
    gain: str,
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Values of the measures the native engine does not take, through ir-measures, per evaluated query."""
    effective = {m.text: _effective(m.measure, relevance, gain, judgments.grade) for m in measures}
    names = {text: _provider_name(e) for text, e in effective.items()}
    evaluated = ranked.queries[codes]
    values = {text: np.zeros(len(codes)) for text in effective}
    if not len(codes):
        return values, names
    chosen = np.flatnonzero(np.isin(ranked.query, codes))
    # Strictly decreasing scores carry the decided order; ir-measures' own tie rule never applies.
    run: dict[str, dict[str, float]] = {}
    for q, d, r in zip(ranked.queries[ranked.query[chosen]], ranked.doc_ids(chosen), ranked.rank[chosen], strict=True):
        run.setdefault(q, {})[d] = -float(r)
    wanted = set(evaluated.tolist())
    qrels: dict[str, dict[str, int]] = {}
    for q, d, g in zip(judgments.query, judgments.doc, judgments.grade, strict=True):
        if q in wanted:
            qrels.setdefault(q, {})[d] = int(g)
    position = {q: i for i, q in enumerate(evaluated)}
    # Under the options two measures as written can become one (R@5 with relevance=2 is R(rel=2)@5).
    by_definition: dict[str, list[str]] = {}
    for text, e in effective.items():
        by_definition.setdefault(repr(e), []).append(text)
    unique = {repr(e): e for e in effective.values()}
    evaluator = ir_measures.evaluator(list(unique.values()), qrels)
    for metric in evaluator.iter_calc(run):
        for text in by_definition[repr(metric.measure)]:
            values[text][position[metric.query_id]] = float(metric.value)
    return values, names


# --------------------------------------------------------------------------- chunk → parent


def rollup_to_parent(rankings: pd.DataFrame) -> pd.DataFrame:
    """A chunk ranking (``query_id, rank, chunk_id, parent_id, score``) at parent level:
    ``query_id, doc_id, score, rank``.

    Each parent appears once, at its best-ranked chunk (lowest rank; input order among equal
    ranks), with that chunk's score; ranks are renumbered 1..n per query. Queries keep their order
    of first appearance.
    """
    absent = [c for c in ("query_id", "rank", "parent_id", "score") if c not in rankings.columns]
    if absent:
        raise EvaluationError(f"the chunk ranking lacks column(s) {', '.join(absent)}")
    query_ids = _arrow_strings(rankings["query_id"], "query ID")
    codes, _ = _query_codes(query_ids)
    parents = _arrow_strings(rankings["parent_id"], "parent ID")
    rank = rankings["rank"].to_numpy(dtype=np.float64)
    if np.isnan(rank).any():
        raise EvaluationError(f"{int(np.isnan(rank).sum())} missing rank(s) in the chunk ranking")
    grouped = bool((codes[1:] >= codes[:-1]).all()) and not ((codes[1:] == codes[:-1]) & (rank[1:] < rank[:-1])).any()
    order = np.arange(len(codes)) if grouped else np.lexsort((rank, codes))
    parent_codes = pd.factorize(pd.Series(parents, dtype=pd.ArrowDtype(parents.type)), sort=False)[0]
    codes = codes[order]
    first = ~pd.Index(codes * (int(parent_codes.max(initial=0)) + 1) + parent_codes[order]).duplicated(keep="first")
    order, codes = order[first], codes[first]
    taken = pa.array(order, type=pa.int64())
    return pd.DataFrame(
        {
            "query_id": pd.Series(query_ids.take(taken), dtype="str"),
            "doc_id": pd.Series(parents.take(taken), dtype="str"),
            "score": rankings["score"].to_numpy(dtype=np.float64)[order],
            "rank": _ranks(codes),
        }
    )


# --------------------------------------------------------------------------- unanswerable queries


@dataclass(frozen=True)
class Abstention:
    """How retrieval's top score separates unanswerable from answerable queries at ``threshold``.

    A query abstains when its top score is below the threshold or it retrieved nothing (NaN).
    Rates are NaN where their slice is empty.
    """

    threshold: float
    per_query: pd.DataFrame  # query_id → top_score, answerable, abstained
    abstention_rate: float  # unanswerable queries that abstained / unanswerable queries
    false_confidence_rate: float  # unanswerable queries that did not abstain / unanswerable queries
    wrongful_abstention_rate: float  # answerable queries that abstained / answerable queries given

    @property
    def unanswerable(self) -> int:
        return int((~self.per_query["answerable"]).sum())

    @property
    def answerable(self) -> int:
        return int(self.per_query["answerable"].sum())


def top_scores(run: pd.DataFrame, queries: Iterable[str] | None = None) -> pd.Series:
    """The highest score per query of a run; with ``queries``, one value each (NaN: nothing retrieved)."""
    scores = run.groupby(_as_str(run["query_id"], "query ID"), sort=True)["score"].max().astype(float)
    if queries is not None:
        scores = scores.reindex([str(q) for q in queries])
    scores.index.name = "query_id"
    return scores.rename("top_score")


def abstention(
    unanswerable: Mapping[str, float] | pd.Series,
    threshold: float,
    answerable: Mapping[str, float] | pd.Series | None = None,
) -> Abstention:
    """Abstention on the unanswerable slice (queries whose judgments hold nothing relevant).

    ``unanswerable`` and ``answerable`` map query IDs to their top retrieval score (NaN or absent
    from the run: nothing retrieved). Pure; separate from the ranking measures.
    """
    threshold = float(threshold)
    if np.isnan(threshold):
        raise EvaluationError("the confidence threshold is NaN; give a number")
    frames = []
    for scores, is_answerable in ((unanswerable, False), (answerable, True)):
        if scores is None:
            continue
        series = pd.Series(scores, dtype=float)
        frames.append(
            pd.DataFrame({"top_score": series.to_numpy(), "answerable": is_answerable}, index=series.index.astype(str))
        )
    per_query = pd.concat(frames) if frames else pd.DataFrame({"top_score": [], "answerable": []})
    if per_query.index.duplicated().any():
        both = ", ".join(per_query.index[per_query.index.duplicated()][:5])
        raise EvaluationError(f"queries given as both unanswerable and answerable: {both}")
    per_query = per_query.astype({"top_score": float, "answerable": bool})
    per_query["abstained"] = ~(per_query["top_score"] >= threshold)  # NaN (nothing retrieved) abstains
    per_query.index.name = "query_id"
    slice_ = per_query.loc[~per_query["answerable"], "abstained"]
    given = per_query.loc[per_query["answerable"], "abstained"]
    rate = float(slice_.mean()) if len(slice_) else float("nan")
    return Abstention(
        threshold=threshold,
        per_query=per_query.sort_index(),
        abstention_rate=rate,
        false_confidence_rate=1.0 - rate if len(slice_) else float("nan"),
        wrongful_abstention_rate=float(given.mean()) if len(given) else float("nan"),
    )
