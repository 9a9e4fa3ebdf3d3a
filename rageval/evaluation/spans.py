"""Span-native grading: any system's passages graded against one set of judged evidence spans.

A judgment is a character span of a document with a grade (a whole-document judgment spans the
whole text). A retrieved passage is a span of a document too: one of rageval's chunks, another
system's passage given by offsets or by text, or a whole document. Grading needs no shared IDs:

* **cover** — a passage covers a judged span of the same document when they overlap by at least
  half of the shorter of the two (a short span inside a long passage; a passage inside a long
  span, such as a whole-document judgment); a passage that is exactly a judged span (an assessor
  judged that very passage) covers only the spans it equals;
* **credit once** — each judged span is credited to the first passage (in the decided order) that
  covers it; a later passage covering it again earns nothing for it;
* **grade** — a passage's grade is the highest grade among the spans credited to it; a passage that
  covers judged spans but is credited none (they came earlier) is judged with grade 0; a passage
  that covers no judged span is unjudged.

The measures then read these rows and items exactly as they read ID-matched judgments
(:mod:`rageval.evaluation.native`): the judged items are the spans, so recall counts evidence
spans covered, and nDCG's ideal ranks each span once. With whole-document passages and
whole-document judgments this is ID matching, value for value. The rule is ``passages`` in the
metric contract (:mod:`rageval.evaluation.contract`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from rageval.benchmark.schema import Case, Document
from rageval.benchmark.spans import covers
from rageval.errors import EvaluationError
from rageval.evaluation.contract import DuplicatePolicy, TiePolicy
from rageval.evaluation.ids import arrow_strings, hash_strings, query_key
from rageval.evaluation.ordering import EMPTY, Ranked, rank_run
from rageval.evaluation.qrels import Graded
from rageval.validation import absent_columns

PASSAGE_COLUMNS = ("document_id", "start", "end")


@dataclass(frozen=True)
class Evidence:
    """Judged evidence spans as flat arrays, one entry per judgment."""

    queries: tuple[str, ...]  # every query judged (unanswerable cases included: they name no span)
    query: np.ndarray  # per span: query ID (str objects)
    document: np.ndarray  # per span: document ID (str objects)
    start: np.ndarray  # int64, character offset
    end: np.ndarray  # int64, exclusive
    grade: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.query)

    def subset(self, queries: Iterable[str]) -> Evidence:
        """The spans of ``queries`` only."""
        chosen = set(queries)
        wanted = [q for q in self.queries if q in chosen]
        keep = pd.Index(self.query, dtype=object).isin(wanted)
        return Evidence(
            tuple(wanted), self.query[keep], self.document[keep], self.start[keep], self.end[keep], self.grade[keep]
        )


def evidence_spans(cases: Iterable[Case], documents: Mapping[str, Document]) -> Evidence:
    """The judged spans of ``cases``; a judgment without a span covers its whole document."""
    queries, rows = [], []
    for case in cases:
        queries.append(case.queryId)
        for judgment in case.relevant:
            span = judgment.span
            if span is None:
                document = documents.get(judgment.documentId)
                if document is None:
                    raise EvaluationError(
                        f"case {case.queryId} judges document '{judgment.documentId}', which is not in the corpus"
                    )
                span = (0, len(document.text))
            rows.append((case.queryId, judgment.documentId, span[0], span[1], judgment.grade))
    return evidence_from_rows(queries, rows)


def evidence_from_rows(queries: Iterable[str], rows: list[tuple[str, str, int, int, int]]) -> Evidence:
    """``Evidence`` from ``(query, document, start, end, grade)`` rows."""
    columns = list(zip(*rows, strict=True)) if rows else [(), (), (), (), ()]
    start = np.array(columns[2], dtype=np.int64)
    end = np.array(columns[3], dtype=np.int64)
    if (end <= start).any():
        at = int(np.flatnonzero(end <= start)[0])
        raise EvaluationError(f"judged span {start[at]}-{end[at]} of query {columns[0][at]} is empty or reversed")
    return Evidence(
        queries=tuple(dict.fromkeys(str(q) for q in queries)),
        query=np.array(columns[0], dtype=object),
        document=np.array(columns[1], dtype=object),
        start=start,
        end=end,
        grade=np.array(columns[4], dtype=np.int64),
    )


def passage_columns(run: pd.DataFrame) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """A passage run's document IDs (Arrow strings) and offsets, in input order."""
    absent = absent_columns(run, PASSAGE_COLUMNS)
    if absent:
        raise EvaluationError(
            f"the run lacks column(s) {', '.join(absent)}; graded on spans, each row names its passage's "
            "document_id, start and end"
        )
    offsets = []
    for column in ("start", "end"):
        values = run[column]
        if not pd.api.types.is_integer_dtype(values.dtype):  # floats or objects: whole numbers, no gaps
            floats = values.to_numpy(dtype=np.float64)
            if np.isnan(floats).any() or (floats != np.floor(floats)).any():
                raise EvaluationError(f"passage offsets must be whole numbers on every row ({column})")
        offsets.append(values.to_numpy(dtype=np.int64))
    start, end = offsets
    if (end < start).any() or (start < 0).any():
        raise EvaluationError("passage offsets must satisfy 0 <= start <= end on every row")
    return arrow_strings(run["document_id"], "passage document ID"), start, end


@dataclass(frozen=True)
class Coverage:
    """Every (kept row, span) pair where the row's passage covers the span."""

    row: np.ndarray  # kept-row position
    span: np.ndarray  # index into the Evidence


def coverage(ranked: Ranked, evidence: Evidence, run: pd.DataFrame) -> Coverage:
    """Which kept rows of ``ranked`` cover which evidence spans (see :func:`covers`)."""
    if not len(evidence) or not len(ranked.query):
        return Coverage(EMPTY, EMPTY)
    documents, starts, ends = passage_columns(run)
    code = pd.Index(ranked.queries, dtype=object).get_indexer(evidence.query).astype(np.int64)
    known = np.flatnonzero(code >= 0)
    if not len(known):
        return Coverage(EMPTY, EMPTY)
    # (query, document) keys: a document's hash with its query's key (computed once per query).
    per_query = query_key(np.arange(len(ranked.queries), dtype=np.int64))
    span_key = hash_strings(arrow_strings(evidence.document[known], "document ID")) ^ per_query[code[known]]
    candidates, row_key = _candidates(ranked, hash_strings(documents), per_query, span_key)
    order = np.argsort(span_key, kind="stable")
    sorted_key = span_key[order]
    left = np.searchsorted(sorted_key, row_key, side="left")
    count = np.searchsorted(sorted_key, row_key, side="right") - left
    hit = np.flatnonzero(count)
    if not len(hit):
        return Coverage(EMPTY, EMPTY)
    repeats = count[hit]
    pair_row = np.repeat(candidates[hit], repeats)
    offsets = np.arange(len(pair_row)) - np.repeat(np.cumsum(repeats) - repeats, repeats)
    pair_span = known[order[np.repeat(left[hit], repeats) + offsets]]
    # A hash match only suggests the pair: the query and the document ID decide.
    input_row = ranked.row[pair_row]
    same = (ranked.query[pair_row] == code[pair_span]) & (
        documents.take(pa.array(input_row, type=pa.int64())).to_numpy(zero_copy_only=False)
        == evidence.document[pair_span]
    )
    pair_row, pair_span, input_row = pair_row[same], pair_span[same], input_row[same]
    p_start, p_end = starts[input_row], ends[input_row]
    s_start, s_end = evidence.start[pair_span], evidence.end[pair_span]
    inside = covers(p_start, p_end, s_start, s_end)
    # A passage that is exactly a judged span was judged itself: it covers only the spans it equals.
    exact = (p_start == s_start) & (p_end == s_end)
    if exact.any():
        judged_itself = np.isin(pair_row, pair_row[exact])
        inside &= exact | ~judged_itself
    return Coverage(pair_row[inside], pair_span[inside])


_BLOCK = 1 << 16  # kept rows keyed at a time: their temporaries stay in cache


def _candidates(
    ranked: Ranked, doc_hash: np.ndarray, per_query: np.ndarray, span_key: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Kept rows whose (query, document) key may be a judged span's, and their keys: only rows of a
    document judged for their query can cover anything, and a bit table drops the rest (a block of
    rows at a time)."""
    bits = min(max(10, int(16 * len(span_key)).bit_length()), 30)
    shift = np.uint64(64 - bits)
    table = np.zeros(1 << bits, dtype=bool)
    table[span_key >> shift] = True
    rows, keys = [], []
    for low in range(0, len(ranked.row), _BLOCK):
        key = doc_hash[ranked.row[low : low + _BLOCK]]
        key ^= per_query[ranked.query[low : low + _BLOCK]]
        hit = np.flatnonzero(table[key >> shift])
        rows.append(hit + low)
        keys.append(key[hit])
    return np.concatenate(rows), np.concatenate(keys)


def grade_passages(ranked: Ranked, evidence: Evidence, run: pd.DataFrame) -> Graded:
    """The judged rows and items of a passage run, graded on ``evidence`` (see the module docstring)."""
    found = coverage(ranked, evidence, run)
    code = pd.Index(ranked.queries, dtype=object).get_indexer(evidence.query).astype(np.int64)
    credited = np.full(len(evidence), -1, dtype=np.int64)
    if len(found.row):
        # Each span goes to the first kept row covering it (kept rows are in the decided order).
        first = np.lexsort((found.row, found.span))
        span, row = found.span[first], found.row[first]
        lead = np.r_[True, span[1:] != span[:-1]]
        credited[span[lead]] = row[lead]
    rows = np.unique(found.row)
    grade = np.zeros(len(rows), dtype=np.int64)
    taken = np.flatnonzero(credited >= 0)
    if len(taken):
        at = np.searchsorted(rows, credited[taken])
        np.maximum.at(grade, at, np.maximum(evidence.grade[taken], 0))
        # A row credited only negative grades keeps its grade (it was judged, and harmful).
        negative = np.full(len(rows), 0, dtype=np.int64)
        np.minimum.at(negative, at, np.minimum(evidence.grade[taken], 0))
        grade = np.where(grade > 0, grade, negative)
    return Graded(
        queries=evidence.queries,
        item_query=evidence.query,
        item_grade=evidence.grade,
        item_code=code,
        item_row=credited,
        row=rows,
        row_grade=grade,
    )


def span_label(document: str, start: int, end: int) -> str:
    """A judged span as people read it: ``document:start-end``."""
    return f"{document}:{start}-{end}"


def graded_ranking(
    run: pd.DataFrame, evidence: Evidence, ties: TiePolicy, duplicates: DuplicatePolicy = "keep-first"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A passage run graded on ``evidence`` as the measures see it, for people to read:

    * rows — ``query_id, doc_id, rank, grade`` in the decided order; ``grade`` is NaN where the
      passage covers no judged span (unjudged, never grade 0);
    * spans — ``query_id, span, grade, rank``: each judged span (``document:start-end``) and the
      rank of the passage credited with it (NaN: not covered).
    """
    ranked = rank_run(run, ties, duplicates)
    graded = grade_passages(ranked, evidence, run)
    grade = np.full(len(ranked.query), np.nan)
    grade[graded.row] = graded.row_grade
    rows = pd.DataFrame(
        {
            "query_id": ranked.queries[ranked.query],
            "doc_id": ranked.doc_ids(),
            "rank": ranked.rank,
            "grade": grade,
        }
    )
    credited = np.full(len(evidence), np.nan)
    taken = graded.item_row >= 0
    credited[taken] = ranked.rank[graded.item_row[taken]]
    spans = pd.DataFrame(
        {
            "query_id": evidence.query,
            "span": [
                span_label(d, int(s), int(e))
                for d, s, e in zip(evidence.document, evidence.start, evidence.end, strict=True)
            ],
            "grade": evidence.grade,
            "rank": credited,
        }
    )
    return rows, spans
