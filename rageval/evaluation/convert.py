"""The shapes the field hands a run, its qrels and its measures, as :func:`~rageval.evaluation.evaluate` takes them.

=====================  ======================================================  ==========================
input                  run                                                     qrels
=====================  ======================================================  ==========================
a DataFrame            ``query_id, doc_id, score[, rank]`` (ir-measures,        ``query_id, doc_id,
                       rageval); ranx's ``q_id``; PyTerrier's ``qid, docno``    relevance`` (ir-measures);
                                                                               ranx's ``q_id, score``;
                                                                               PyTerrier's ``label``
a dict of dicts        ``{query: {doc: score}}`` (ir-measures, ranx, pytrec)   ``{query: {doc: grade}}``
namedtuples            ``ir_measures.ScoredDoc`` rows                          ``ir_measures.Qrel`` rows
a ranx object          ``ranx.Run``                                            ``ranx.Qrels``
=====================  ======================================================  ==========================

Measures: strings (``"nDCG@10"``), :class:`~rageval.evaluation.measures.Measure` objects, or
ir-measures measure objects (``ir_measures.nDCG@10``), whose text is their ``repr``.

Nothing here imports ranx: a ranx object is known by its ``to_dict()``. Every conversion keeps the
values as given (IDs become strings; grades must be whole numbers).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from rageval.errors import EvaluationError
from rageval.evaluation.measures import Measure, parse_measure

__all__ = ["QREL_COLUMNS", "RUN_COLUMNS", "as_measures", "as_qrels", "as_run_frame"]

# Another tool's column name → rageval's (ir-measures' names are rageval's own).
RUN_COLUMNS: dict[str, str] = {"q_id": "query_id", "qid": "query_id", "docno": "doc_id", "docid": "doc_id"}
QREL_COLUMNS: dict[str, str] = {**RUN_COLUMNS, "label": "relevance", "score": "relevance", "rel": "relevance"}

_RUN_SHAPES = (
    "a DataFrame with query_id, doc_id, score (ir-measures' names; ranx's q_id and PyTerrier's qid, docno "
    "are renamed), a dict {query_id: {doc_id: score}}, ir_measures.ScoredDoc rows or a ranx.Run"
)
_QREL_SHAPES = (
    "a dict {query_id: {doc_id: grade}}, a DataFrame with query_id, doc_id, relevance, ir_measures.Qrel "
    "rows or a ranx.Qrels"
)


def as_run_frame(run: Any) -> pd.DataFrame:
    """``run`` in any shape of the module's table as a ``query_id, doc_id, score[, rank]`` DataFrame."""
    if isinstance(run, pd.DataFrame):
        return _renamed(run, RUN_COLUMNS, "run")
    nested = _nested(run)
    if nested is not None:
        rows = [(str(q), str(d), s) for q, docs in nested.items() for d, s in _pairs(docs, q, "run")]
        return pd.DataFrame(rows, columns=["query_id", "doc_id", "score"]).astype({"score": float})
    rows = _tuples(run, ("query_id", "doc_id", "score"), "run", _RUN_SHAPES)
    return pd.DataFrame(rows, columns=["query_id", "doc_id", "score"]).astype({"score": float})


def as_qrels(qrels: Any) -> dict[str, dict[str, int]]:
    """``qrels`` in any shape of the module's table as ``{query_id: {doc_id: grade}}``."""
    if isinstance(qrels, pd.DataFrame):
        frame = _renamed(qrels, QREL_COLUMNS, "qrels")
        absent = [c for c in ("query_id", "doc_id", "relevance") if c not in frame.columns]
        if absent:
            raise EvaluationError(
                f"the qrels DataFrame lacks column(s) {', '.join(absent)} (it has {', '.join(map(str, qrels.columns))}); "
                f"give {_QREL_SHAPES}"
            )
        triples: Iterable[tuple[Any, Any, Any]] = frame[["query_id", "doc_id", "relevance"]].itertuples(index=False)
    else:
        nested = _nested(qrels)
        if nested is not None:  # the common shape, built in one pass (an int grade is taken as it is)
            return {
                str(q): {str(d): g if type(g) is int else _grade(g, q, d) for d, g in _pairs(docs, q, "qrels")}
                for q, docs in nested.items()
            }
        triples = _tuples(qrels, ("query_id", "doc_id", "relevance"), "qrels", _QREL_SHAPES)
    out: dict[str, dict[str, int]] = {}
    for query, doc, grade in triples:
        out.setdefault(str(query), {})[str(doc)] = _grade(grade, query, doc)
    return out


def as_measures(measures: Any) -> list[str | Measure]:
    """``measures`` (one or a sequence of strings, rageval ``Measure`` or ir-measures measure objects)
    as strings and :class:`Measure` objects; an ir-measures object becomes its ``repr`` (``nDCG@10``)."""
    if isinstance(measures, str | Measure) or _is_ir_measure(measures):
        measures = [measures]
    out: list[str | Measure] = []
    for m in measures:
        if isinstance(m, str | Measure):
            out.append(m)
        elif _is_ir_measure(m):
            out.append(parse_measure(repr(m)))
        else:
            raise EvaluationError(
                f"a measure is {type(m).__name__} {m!r}; give measure strings (nDCG@10), "
                "rageval.parse_measure(...) results or ir_measures objects (ir_measures.nDCG@10)"
            )
    return out


def _is_ir_measure(value: object) -> bool:
    import ir_measures

    return isinstance(value, ir_measures.measures.BaseMeasure)


def _renamed(frame: pd.DataFrame, names: Mapping[str, str], what: str) -> pd.DataFrame:
    """``frame`` with another tool's column names as rageval's; a name given twice is an error."""
    rename = {c: names[c] for c in frame.columns if c in names and names[c] not in frame.columns}
    targets = list(rename.values())
    twice = sorted({t for t in targets if targets.count(t) > 1})
    if twice:
        raise EvaluationError(
            f"the {what} DataFrame has more than one column for {', '.join(twice)} "
            f"({', '.join(c for c, t in rename.items() if t in twice)}); keep one"
        )
    return frame.rename(columns=rename) if rename else frame


def _nested(value: Any) -> Mapping[Any, Any] | None:
    """A dict of dicts as it is, a ranx ``Run``/``Qrels`` as its dict; None for anything else."""
    if isinstance(value, Mapping):
        return value
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict) and type(value).__module__.split(".")[0] == "ranx":
        result = to_dict()
        if isinstance(result, Mapping):
            return result
    return None


def _pairs(docs: Any, query: Any, what: str) -> Iterable[tuple[Any, Any]]:
    if not isinstance(docs, Mapping):
        shape = "{query_id: {doc_id: score}}" if what == "run" else "{query_id: {doc_id: grade}}"
        raise EvaluationError(
            f"the {what}'s entry for query {query!r} is a {type(docs).__name__}, not a dict; a {what} given as "
            f"a dict is {shape}"
        )
    return docs.items()


def _tuples(value: Any, fields: tuple[str, str, str], what: str, shapes: str) -> list[tuple[Any, Any, Any]]:
    """Rows of namedtuples (ir-measures' ``ScoredDoc``/``Qrel``) or plain 3-tuples, as triples."""
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise EvaluationError(f"cannot read a {what} from a {type(value).__name__}; give {shapes}")
    rows = []
    for i, row in enumerate(value):
        if all(hasattr(row, f) for f in fields):
            rows.append(tuple(getattr(row, f) for f in fields))
        elif isinstance(row, tuple | list) and len(row) == 3:
            rows.append(tuple(row))
        else:
            raise EvaluationError(
                f"{what} row {i} is {type(row).__name__} {row!r}; rows are ({', '.join(fields)}) tuples, "
                f"or give {shapes}"
            )
    return rows


def _grade(value: Any, query: Any, doc: Any) -> int:
    try:
        grade = float(value)
    except (TypeError, ValueError):
        grade = float("nan")
    if not grade.is_integer():
        raise EvaluationError(
            f"the qrels grade of query {query!r}, document {doc!r} is {value!r}; grades are whole numbers "
            "(0 not relevant, 1, 2, … more relevant)"
        )
    return int(grade)
