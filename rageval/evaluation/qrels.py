"""The qrels as flat arrays, each judgment located in the ranked run: the measures read only these
judged rows (a few per query), never the whole run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

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
    doc = np.array([str(d) for judged in qrels.values() for d in judged], dtype=object)
    grade = np.array([int(g) for judged in qrels.values() for g in judged.values()], dtype=np.int64)
    # Each query's code looked up once, not once per judgment.
    per_query = pd.Index(ranked.queries, dtype=object).get_indexer(np.array(names, dtype=object))
    code = np.repeat(per_query.astype(np.int64), sizes) if len(query) else EMPTY
    row = _locate(ranked, doc, code)
    return Judgments(tuple(dict.fromkeys(names)), query, doc, grade, code, row)


def _locate(ranked: Ranked, doc: np.ndarray, code: np.ndarray) -> np.ndarray:
    """For each judgment, the kept-row position of its (query, document) in the run, else -1."""
    row = np.full(len(doc), -1, dtype=np.int64)
    known = np.flatnonzero(code >= 0)
    if len(known) == 0 or len(ranked.query) == 0:
        return row
    doc_hash = hash_strings(arrow_strings(doc[known], "document ID"))
    keys = pd.Index(doc_hash ^ query_key(code[known]))
    if keys.is_unique:
        candidates = _candidates(ranked, doc_hash, code[known])
        at = keys.get_indexer(ranked.hash[candidates] ^ query_key(ranked.query[candidates]))
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


_SPREAD = np.uint64(0x9E3779B97F4A7C15)  # odd: a query's code times it moves the hash's high bits
_BLOCK = 1 << 16  # rows filtered at a time: their temporaries stay in the L2 cache


def _candidates(ranked: Ranked, doc_hash: np.ndarray, code: np.ndarray) -> np.ndarray:
    """Kept-row positions whose (query, document) may be judged: a bit table on the judged pairs'
    keys discards most rows, including a judged document retrieved for another query."""
    bits = min(max(10, int(16 * len(code)).bit_length()), 30)
    shift = np.uint64(64 - bits)
    table = np.zeros(1 << bits, dtype=bool)
    table[(doc_hash + code.astype(np.uint64) * _SPREAD) >> shift] = True
    found = []
    for low in range(0, len(ranked.query), _BLOCK):
        key = ranked.query[low : low + _BLOCK].astype(np.uint64)
        key *= _SPREAD
        key += ranked.hash[low : low + _BLOCK]
        key >>= shift
        found.append(np.flatnonzero(table[key]) + low)
    return np.concatenate(found)
