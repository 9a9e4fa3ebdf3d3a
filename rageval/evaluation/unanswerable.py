"""Unanswerable queries (the contract's ``unanswerable`` rule): whether retrieval's top score lets a
system abstain where the judgments hold nothing relevant. Stated apart from the ranking measures."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rageval.errors import EvaluationError
from rageval.evaluation.ids import as_str


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
    scores = run.groupby(as_str(run["query_id"], "query ID"), sort=True)["score"].max().astype(float)
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
