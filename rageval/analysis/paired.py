"""Two runs' per-query scores side by side, paired by query ID: the one way both the comparison's
significance table and the gate's rules read scores against a baseline.

Only queries both runs evaluated are paired (a run leaves out queries it could not score, such as
those without a relevant item), and one candidate's tests are corrected together as one Holm family.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rageval.evaluation.rollup import PARENT_LEVEL, PARENT_PREFIX
from rageval.evaluation.stats import holm, paired_randomization

ALL = "all"  # the slice label of the whole query set


def wide_scores(per_query: pd.DataFrame) -> pd.DataFrame:
    """Long ``query_id, measure, value[, level]`` → rows: query_id, columns: measures.

    A passage-level run's rows rolled up to parents (``level`` document beside passage) become the
    columns ``parent/MEASURE``; a table without ``level`` (older runs) or with one level is as recorded."""
    if "level" in per_query.columns:
        levels = set(per_query["level"])
        rolled = (per_query["level"] == PARENT_LEVEL) if len(levels) > 1 else pd.Series(False, index=per_query.index)
        per_query = per_query.assign(measure=per_query["measure"].where(~rolled, PARENT_PREFIX + per_query["measure"]))
    frame = per_query.pivot(index="query_id", columns="measure", values="value")
    frame.columns.name = None
    return frame.sort_index()


def query_slices(queries: pd.DataFrame) -> dict[str, list[str]]:
    """Each query's slice labels, from a run's ``queries`` table."""
    return {str(q): [str(s) for s in slices] for q, slices in zip(queries["query_id"], queries["slices"], strict=True)}


def in_slice(queries: pd.Index, slice_: str, slices: Mapping[str, Sequence[str]]) -> pd.Index:
    """The members of ``queries`` that carry the slice label ``slice_``, in their order."""
    return queries[[slice_ in slices.get(q, ()) for q in queries]]


def paired(
    baseline: pd.DataFrame, candidate: pd.DataFrame, measure: str, queries: pd.Index | None = None
) -> pd.DataFrame:
    """Columns ``baseline`` and ``candidate`` of one measure, a row per query both runs evaluated,
    among ``queries`` (default: every query both wide score tables have)."""
    if queries is None:
        queries = baseline.index.intersection(candidate.index)
    return pd.DataFrame(
        {"baseline": baseline.loc[queries, measure], "candidate": candidate.loc[queries, measure]}
    ).dropna()


def paired_deltas(baseline: pd.DataFrame, candidate: pd.DataFrame, measure: str) -> pd.DataFrame:
    """``query_id, baseline, candidate, delta`` (candidate − baseline) over the paired queries."""
    pair = paired(baseline, candidate, measure)
    return pair.assign(delta=pair["candidate"] - pair["baseline"]).rename_axis("query_id").reset_index()


@dataclass(frozen=True)
class PairedTest:
    """One paired sample with its randomization p-value and its p-value Holm-adjusted in its family."""

    baseline: np.ndarray
    candidate: np.ndarray
    p_value: float
    p_holm: float


def paired_tests(pairs: Sequence[pd.DataFrame], *, samples: int, seed: int) -> list[PairedTest]:
    """A two-sided paired randomization test per pair (from :func:`paired`), Holm-adjusted as one
    family. A pair without queries is no test: its p-values are NaN and it is not counted."""
    arrays = [(pair["baseline"].to_numpy(), pair["candidate"].to_numpy()) for pair in pairs]
    p_values = [paired_randomization(a, b, samples=samples, seed=seed) if a.size else np.nan for a, b in arrays]
    return [
        PairedTest(a, b, p, float(adjusted))
        for (a, b), p, adjusted in zip(arrays, p_values, holm(p_values), strict=True)
    ]
