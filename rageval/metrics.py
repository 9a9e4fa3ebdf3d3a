"""Metrics through ir-measures, behind one pure function: :func:`evaluate`.

The metric contract (version :data:`CONTRACT`), recorded with every run:

- Measures are written as users know them (``nDCG@10``, ``R@20``, ``RR``, ``RR@10``,
  ``Success@5``, ``P@5``, ``AP``), parsed once by ``ir_measures.parse_measure``; ``Hit@k`` is an
  alias of ``Success@k`` and ``MRR``/``MRR@k`` of ``RR``/``RR@k``. A grade >= 1 is relevant for
  binary measures; nDCG uses the grades as gains (trec_eval's ``ndcg_cut``).
- Ties are broken before evaluation by an explicit policy, because ir-measures would otherwise
  order equal scores by document ID descending: ``docid-asc`` (score, then ID ascending),
  ``docid-desc`` (trec_eval's own rule) or ``input-order`` (the order, or ``rank`` column, given).
  The ranking is then handed over with strictly decreasing scores, so nothing else reorders it.
- A document repeated within one query's ranking is an error (``duplicates="error"``) or keeps its
  best-ranked occurrence (``"keep-first"``); ir-measures would otherwise keep the last silently.
- A query with no relevant item yields no value: it is excluded from means and listed in
  ``skipped``. A judged query with relevant items that is absent from the run scores 0 on every
  measure (``missing="zero"``, trec_eval ``-c``) or is left out (``missing="skip"``, trec_eval's
  default); either way it is listed in ``missing``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import ir_measures
import numpy as np
import pandas as pd

from rageval.errors import EvaluationError, MeasureError, Problem

CONTRACT = "rageval-metrics/1"
TiePolicy = Literal["docid-asc", "docid-desc", "input-order"]
DuplicatePolicy = Literal["error", "keep-first"]
MissingPolicy = Literal["zero", "skip"]
TIE_POLICIES: tuple[str, ...] = ("docid-asc", "docid-desc", "input-order")
DUPLICATE_POLICIES: tuple[str, ...] = ("error", "keep-first")

# Names users know from other tools → the ir-measures name that computes the same thing.
ALIASES: dict[str, str] = {"Hit": "Success", "MRR": "RR"}
_ALIAS_PATTERN = re.compile(r"^(" + "|".join(ALIASES) + r")(?=$|[@(])")


@dataclass(frozen=True)
class Measure:
    """A measure as the user wrote it, and the ir-measures object that computes it."""

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
                fix="write measures as ir-measures names them, e.g. nDCG@10, R@100, RR, P@5, AP, Success@5 "
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


# --------------------------------------------------------------------------- evaluation


@dataclass(frozen=True)
class Evaluation:
    """Per-query values (rows: queries; columns: measures as written) and how they were made."""

    per_query: pd.DataFrame
    measures: tuple[Measure, ...]
    skipped: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    policy: dict[str, str] = field(default_factory=dict)

    @property
    def aggregates(self) -> pd.Series:
        """Mean of each measure over evaluated queries."""
        columns = [m.text for m in self.measures]
        if self.per_query.empty:
            return pd.Series(np.nan, index=columns, dtype=float)
        return self.per_query[columns].mean()

    @property
    def evaluated(self) -> int:
        return len(self.per_query)

    def definitions(self) -> dict[str, dict[str, str]]:
        """What each metric means, keyed by its MLflow key."""
        return {
            m.key: {"measure": m.text, "ir_measures": m.definition, **self.policy} for m in self.measures
        }

    def long(self) -> pd.DataFrame:
        """One row per (query, measure): ``query_id, measure, value``."""
        frame = self.per_query.reset_index().melt(id_vars="query_id", var_name="measure", value_name="value")
        return frame.sort_values(["query_id", "measure"], kind="stable").reset_index(drop=True)


def order_ranking(run: pd.DataFrame, ties: TiePolicy, duplicates: DuplicatePolicy) -> pd.DataFrame:
    """Order a run ``query_id, doc_id, score[, rank]`` under the tie and duplicate policies and
    add a 1-based ``rank``. Pure: returns a new frame."""
    if ties not in TIE_POLICIES:
        raise EvaluationError(f"unknown tie policy {ties!r}; valid choices are {', '.join(TIE_POLICIES)}")
    if duplicates not in DUPLICATE_POLICIES:
        raise EvaluationError(
            f"unknown duplicate policy {duplicates!r}; valid choices are {', '.join(DUPLICATE_POLICIES)}"
        )
    frame = run.loc[:, [c for c in ("query_id", "doc_id", "score", "rank") if c in run.columns]].copy()
    frame["query_id"] = frame["query_id"].astype(str)
    frame["doc_id"] = frame["doc_id"].astype(str)
    frame["_order"] = np.arange(len(frame))
    if ties == "input-order":
        keys, ascending = (["query_id", "rank", "_order"] if "rank" in frame else ["query_id", "_order"]), True
    else:
        keys = ["query_id", "score", "doc_id"]
        ascending = [True, False, ties == "docid-asc"]
    frame = frame.sort_values(keys, ascending=ascending, kind="stable")
    repeated = frame.duplicated(["query_id", "doc_id"], keep="first")
    if repeated.any():
        if duplicates == "error":
            examples = frame.loc[repeated, ["query_id", "doc_id"]].drop_duplicates().head(5)
            listed = ", ".join(f"{q}/{d}" for q, d in examples.itertuples(index=False))
            raise EvaluationError(
                f"{int(repeated.sum())} repeated document(s) within a query's ranking (e.g. {listed}); "
                "deduplicate the run or evaluate with duplicates='keep-first'"
            )
        frame = frame.loc[~repeated]
    frame["rank"] = frame.groupby("query_id", sort=False).cumcount() + 1
    return frame.drop(columns="_order").reset_index(drop=True)


def evaluate(
    run: pd.DataFrame,
    qrels: Mapping[str, Mapping[str, int]],
    measures: Sequence[str | Measure],
    *,
    ties: TiePolicy = "docid-asc",
    duplicates: DuplicatePolicy = "error",
    missing: MissingPolicy = "zero",
) -> Evaluation:
    """Evaluate a run (``query_id, doc_id, score`` and optionally ``rank``) against graded qrels.

    Always returns an :class:`Evaluation`; never writes anything.
    """
    parsed = tuple(m if isinstance(m, Measure) else parse_measure(m) for m in measures)
    if missing not in ("zero", "skip"):
        raise EvaluationError(f"unknown missing-query policy {missing!r}; valid choices are zero, skip")
    ordered = order_ranking(run, ties, duplicates)

    judged = {str(q): {str(d): int(g) for d, g in docs.items()} for q, docs in qrels.items()}
    answerable = {q: docs for q, docs in judged.items() if any(g > 0 for g in docs.values())}
    in_run = set(ordered["query_id"].unique())
    skipped = sorted((set(judged) | in_run) - set(answerable))
    absent = sorted(set(answerable) - in_run)

    # Strictly decreasing scores carry the decided order; ir-measures' own tie rule never applies.
    ordered = ordered[ordered["query_id"].isin(answerable.keys())]
    scores = (-ordered["rank"]).astype(float).to_numpy()
    run_dict: dict[str, dict[str, float]] = {}
    for qid, did, score in zip(ordered["query_id"].to_numpy(), ordered["doc_id"].to_numpy(), scores, strict=True):
        run_dict.setdefault(qid, {})[did] = float(score)

    columns = [m.text for m in parsed]
    values: dict[str, dict[str, float]] = {q: {} for q in run_dict}
    provider = "none"
    if run_dict:
        evaluator = ir_measures.evaluator([m.measure for m in parsed], {q: answerable[q] for q in run_dict})
        provider = type(evaluator).__name__
        by_definition = {m.definition: m.text for m in parsed}
        for metric in evaluator.iter_calc(run_dict):
            values[metric.query_id][by_definition[repr(metric.measure)]] = float(metric.value)
    if missing == "zero":
        for qid in absent:
            values[qid] = {c: 0.0 for c in columns}
    per_query = pd.DataFrame.from_dict(values, orient="index", columns=columns, dtype=float)
    per_query.index.name = "query_id"
    per_query = per_query.sort_index()
    policy = {"contract": CONTRACT, "ties": ties, "duplicates": duplicates, "missing": missing, "provider": provider}
    return Evaluation(per_query=per_query, measures=parsed, skipped=tuple(skipped), missing=tuple(absent), policy=policy)
