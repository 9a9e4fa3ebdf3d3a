"""The qrels as flat arrays, each judgment located in the ranked run: the measures read only these
judged rows (a few per query), never the whole run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import chain

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from rageval.evaluation import kernels
from rageval.evaluation.ids import arrow_strings, hash_strings, query_key
from rageval.evaluation.ordering import EMPTY, Ranked


@dataclass(frozen=True)
class Judgments:
    """The qrels as flat arrays, and where each judged (query, document) sits in the ranked run."""

    queries: tuple[str, ...]  # every query the qrels name, empty ones included
    query: np.ndarray  # per judgment: query ID (str objects)
    doc: np.ndarray  # per judgment: document ID (str objects)
    grade: np.ndarray  # per judgment: int64
    code: np.ndarray  # per judgment: the run's query code, -1 where the run lacks that query
    row: np.ndarray  # per judgment: kept-row position in the ranked run, -1 where not retrieved


@dataclass(frozen=True)
class Graded:
    """What the measures read: the judged items of each query and the retrieved rows that earn grades.

    Matched by ID, an item is one judgment and the row holding its document earns its grade. Graded
    on spans (:mod:`rageval.evaluation.spans`), an item is a judged span, credited to the first row
    covering it, and a row may be credited several items (its grade is their highest).
    """

    queries: tuple[str, ...]  # every query judged, empty ones included
    item_query: np.ndarray  # per item: query ID (str objects)
    item_grade: np.ndarray  # per item: int64
    item_code: np.ndarray  # per item: the run's query code, -1 where the run lacks that query
    item_row: np.ndarray  # per item: kept-row position of the row credited with it, -1 where none
    row: np.ndarray  # the judged kept rows (ascending positions: the decided order)
    row_grade: np.ndarray  # their grades


def graded_by_id(judgments: Judgments) -> Graded:
    """ID matching as :class:`Graded`: each retrieved judgment's row earns its grade."""
    retrieved = np.flatnonzero(judgments.row >= 0)
    by_position = retrieved[np.argsort(judgments.row[retrieved], kind="stable")]
    return Graded(
        queries=judgments.queries,
        item_query=judgments.query,
        item_grade=judgments.grade,
        item_code=judgments.code,
        item_row=judgments.row,
        row=judgments.row[by_position],
        row_grade=judgments.grade[by_position],
    )


def locate_judgments(qrels: Mapping[str, Mapping[str, int]], ranked: Ranked) -> Judgments:
    """``qrels`` (query → document → grade) as :class:`Judgments` located in ``ranked``."""
    names = [str(q) for q in qrels]
    sizes = [len(judged) for judged in qrels.values()]
    query = np.repeat(np.array(names, dtype=object), sizes)
    doc = _strings(list(chain.from_iterable(qrels.values())))
    grade = _grades(list(chain.from_iterable(judged.values() for judged in qrels.values())))
    # Each query's code looked up once, not once per judgment.
    per_query = pd.Index(ranked.queries, dtype=object).get_indexer(np.array(names, dtype=object))
    code = np.repeat(per_query.astype(np.int64), sizes) if len(query) else EMPTY
    row = _locate(ranked, doc, code)
    return Judgments(tuple(dict.fromkeys(names)), query, doc, grade, code, row)


def _strings(values: list[object]) -> np.ndarray:
    """``values`` as an object array of str (each converted unless it already is one)."""
    if set(map(type, values)) <= {str}:
        return np.array(values, dtype=object)
    return np.array([str(v) for v in values], dtype=object)


def _grades(values: list[object]) -> np.ndarray:
    """Grades as int64: integers as they are, anything else through ``int()`` (as before)."""
    if set(map(type, values)) <= {int}:
        return np.array(values, dtype=np.int64)
    return np.array([int(v) for v in values], dtype=np.int64)  # type: ignore[call-overload]


def _locate(ranked: Ranked, doc: np.ndarray, code: np.ndarray) -> np.ndarray:
    """For each judgment, the kept-row position of its (query, document) in the run, else -1."""
    row = np.full(len(doc), -1, dtype=np.int64)
    known = np.flatnonzero(code >= 0)
    if len(known) == 0 or len(ranked.query) == 0:
        return row
    judged_docs = arrow_strings(doc[known], "document ID")
    doc_hash = hash_strings(judged_docs)
    keys = pd.Index(doc_hash ^ query_key(code[known]))
    if keys.is_unique:
        candidates = _candidates(ranked, doc_hash, code[known])
        at = keys.get_indexer(ranked.hash[candidates] ^ query_key(ranked.query[candidates]))
        hits = candidates[at >= 0]
        at = at[at >= 0]
        # A hash match is a candidate; the IDs decide (compared as Arrow strings: no Python objects).
        same_doc = pc.all(pc.equal(ranked.docs.take(pa.array(ranked.rows(hits))), judged_docs.take(pa.array(at))))
        if (same_doc.as_py() is not False) and (ranked.query[hits] == code[known[at]]).all():
            row[known[at]] = hits
            return row
    # A hash collision: join on the IDs themselves (exact, slower).
    kept = pd.DataFrame({"q": ranked.query, "d": ranked.doc_ids(), "row": np.arange(len(ranked.query))})
    wanted = pd.DataFrame({"q": code[known], "d": doc[known], "j": known})
    joined = wanted.merge(kept, on=["q", "d"], how="inner")
    row[joined["j"].to_numpy()] = joined["row"].to_numpy()
    return row


_SPREAD = np.uint64(0x9E3779B97F4A7C15)  # odd: a query's code times it moves the hash's high bits
_BLOCK = 1 << 16  # rows filtered at a time: their temporaries stay in the L2 cache


def _candidates(ranked: Ranked, doc_hash: np.ndarray, code: np.ndarray) -> np.ndarray:
    """Kept-row positions whose (query, document) may be judged: a bit table on the judged pairs'
    keys discards most rows, including a judged document retrieved for another query."""
    bits = min(max(10, int(16 * len(code)).bit_length()), 30)
    shift = np.uint64(64 - bits)
    mask, shift2 = np.uint64((1 << bits) - 1), np.uint64(max(64 - 2 * bits, 0))
    judged = doc_hash + code.astype(np.uint64) * _SPREAD
    if kernels.available(len(ranked.query)):  # one compiled pass
        return kernels.candidates(ranked.query, ranked.hash, judged, (_SPREAD, shift, shift2, mask))
    # Two tables on the key's top bits and the bits below them (a product's best-mixed bits): the
    # second discards most of the first's false hits, for a pass over those hits only.
    top, below = np.zeros(1 << bits, dtype=bool), np.zeros(1 << bits, dtype=bool)
    top[judged >> shift] = True
    below[(judged >> shift2) & mask] = True
    found = []
    for low in range(0, len(ranked.query), _BLOCK):
        key = ranked.query[low : low + _BLOCK].astype(np.uint64)
        key *= _SPREAD
        key += ranked.hash[low : low + _BLOCK]
        hit = np.flatnonzero(top[key >> shift])
        found.append(hit[below[(key[hit] >> shift2) & mask]] + low)
    return np.concatenate(found)
