"""Inter-assessor agreement: Cohen's kappa, Fleiss' kappa and Krippendorff's alpha (ordinal).

Pure functions over grades, and :func:`agreement` over imported labels (``rageval.judging``),
overall and per slice. A coefficient that is undefined for its data (every label in one grade, no
item labelled twice) is ``nan``, never a made-up 0 or 1.

- Cohen's kappa (two assessors, the items both labelled): ``(p_o - p_e) / (1 - p_e)`` with ``p_e``
  from each assessor's own grade distribution.
- Fleiss' kappa (the items every assessor labelled): agreement among the pairs of labels of each
  item against the pooled grade distribution. With two assessors it is Scott's pi.
- Krippendorff's alpha, ordinal metric (every item labelled at least twice; missing labels
  allowed): ``1 - (n - 1) * sum(o_ck * d_ck) / sum(n_c * n_k * d_ck)`` over the coincidence matrix
  ``o``, with ``d_ck = (sum of n_g for g from c to k - (n_c + n_k) / 2) ** 2`` (Krippendorff 2011,
  "Computing Krippendorff's Alpha-Reliability"), computed by the ``krippendorff`` package.

Which library computes what, measured by ``benchmarks/stats_libraries.py`` on 20-300 items and
checked by ``tests/test_stats_golden.py``:

- alpha: ``krippendorff.alpha`` from the items' grade counts. It agrees with the former
  hand-written version to 7e-16, is 2-11x faster, and imports in under a millisecond.
- Cohen's kappa stays hand-written: ``sklearn.metrics.cohen_kappa_score`` agrees to 2e-15 but
  takes 11-30x as long (its argument validation) and ``sklearn.metrics`` takes 0.55 s to import.
- Fleiss' kappa stays hand-written: ``statsmodels.stats.inter_rater.fleiss_kappa`` agrees to the
  bit and, with this module's checks around it (its own is an ``assert``; it divides 0 by 0 with a
  warning), is as fast per call (0.8-1.1x), but importing it loads ``scipy.stats``: 0.43 s in a
  process that otherwise never loads scipy, against 20-30 microseconds per call here.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import krippendorff
import numpy as np
import pandas as pd


def _index(categories: Sequence[int], values: Sequence[int]) -> np.ndarray:
    position = {c: i for i, c in enumerate(categories)}
    unknown = sorted(set(values) - set(position))
    if unknown:
        raise ValueError(f"grades {unknown} are not among the categories {list(categories)}")
    return np.array([position[v] for v in values], dtype=np.int64)


def cohen_kappa(a: Sequence[int], b: Sequence[int], categories: Sequence[int] | None = None) -> float:
    """Cohen's kappa of two assessors' grades for the same items, in the same order."""
    if len(a) != len(b):
        raise ValueError(f"the two assessors label different numbers of items ({len(a)} vs {len(b)})")
    if not len(a):
        return float("nan")
    categories = sorted(set(a) | set(b)) if categories is None else list(categories)
    k = len(categories)
    table = np.zeros((k, k))
    np.add.at(table, (_index(categories, a), _index(categories, b)), 1)
    n = table.sum()
    observed = np.trace(table) / n
    expected = float(table.sum(axis=1) @ table.sum(axis=0)) / n**2
    return float("nan") if np.isclose(expected, 1.0) else float((observed - expected) / (1 - expected))


def fleiss_kappa(counts: np.ndarray | Sequence[Sequence[int]] | Sequence[np.ndarray]) -> float:
    """Fleiss' kappa of an items × categories matrix of label counts, the same number of labels per item."""
    table = np.asarray(counts, dtype=float)
    if table.ndim != 2 or not len(table):
        return float("nan")
    raters = table.sum(axis=1)
    if not np.all(raters == raters[0]) or raters[0] < 2:
        raise ValueError("Fleiss' kappa needs the same number (at least 2) of labels for every item")
    m = raters[0]
    per_item = ((table**2).sum(axis=1) - m) / (m * (m - 1))
    shares = table.sum(axis=0) / table.sum()
    observed, expected = per_item.mean(), float((shares**2).sum())
    return float("nan") if np.isclose(expected, 1.0) else float((observed - expected) / (1 - expected))


def krippendorff_alpha_ordinal(units: Sequence[Sequence[int]], categories: Sequence[int] | None = None) -> float:
    """Krippendorff's alpha with the ordinal metric. ``units``: the grades each item received (any
    number; items with fewer than two are not pairable and are left out)."""
    pairable = [unit for unit in units if len(unit) >= 2]
    if not pairable:
        return float("nan")
    categories = sorted({v for unit in pairable for v in unit}) if categories is None else list(categories)
    k = len(categories)
    grades = _index(categories, [v for unit in pairable for v in unit])
    rows = np.repeat(np.arange(len(pairable)), [len(unit) for unit in pairable])
    counts = np.bincount(rows * k + grades, minlength=len(pairable) * k).reshape(len(pairable), k)
    # With one grade among the pairable labels no disagreement is expected: alpha is 0 / 0 (the
    # library would warn and return nan, or refuse a one-grade domain).
    if np.count_nonzero(counts.sum(axis=0)) < 2:
        return float("nan")
    return float(krippendorff.alpha(value_counts=counts, value_domain=categories, level_of_measurement="ordinal"))


# --------------------------------------------------------------------------- over imported labels


@dataclass(frozen=True)
class AgreementReport:
    """``summary``: per scope ("all", then each slice) the items, assessors, labels, share of items
    with one grade, Fleiss' kappa (``fleiss_items`` labelled by every assessor) and Krippendorff's
    alpha. ``pairs``: Cohen's kappa per scope and assessor pair. ``disagreements``: the items whose
    grades differ, one column per assessor, ``spread`` = highest - lowest grade."""

    summary: pd.DataFrame
    pairs: pd.DataFrame
    disagreements: pd.DataFrame


def agreement(labels: pd.DataFrame, slices: Mapping[str, Sequence[str]], categories: Sequence[int]) -> AgreementReport:
    """Agreement of imported labels (``item_id, query_id, assessor, grade`` columns); ``slices``
    maps an item ID to its case's slice labels; ``categories`` are the rubric's grades in order."""
    categories = sorted(categories)
    grid = labels.pivot(index="item_id", columns="assessor", values="grade")
    assessors = sorted(grid.columns)
    grid = grid[assessors]
    scopes: dict[str, list[str]] = {"all": list(grid.index)}
    for label in sorted({s for item in grid.index for s in slices.get(item, ())}):
        scopes[label] = [item for item in grid.index if label in slices.get(item, ())]

    summary_rows, pair_rows = [], []
    for scope, items in scopes.items():
        part = grid.loc[items]
        units = [[int(v) for v in row if not pd.isna(v)] for row in part.to_numpy()]
        complete = part.dropna()
        counts = [
            np.bincount(_index(categories, [int(v) for v in row]), minlength=len(categories))
            for row in complete.to_numpy()
        ]
        pairable = [unit for unit in units if len(unit) >= 2]
        summary_rows.append(
            {
                "scope": scope,
                "items": len(items),
                "assessors": int(part.notna().any().sum()),
                "labels": int(part.notna().sum().sum()),
                "unanimous": float(np.mean([len(set(u)) == 1 for u in pairable])) if pairable else float("nan"),
                "fleiss_items": len(counts),
                "fleiss_kappa": fleiss_kappa(counts) if len(assessors) >= 2 and counts else float("nan"),
                "krippendorff_alpha": krippendorff_alpha_ordinal(units, categories),
            }
        )
        for first, second in itertools.combinations(assessors, 2):
            both = part[[first, second]].dropna()
            pair_rows.append(
                {
                    "scope": scope,
                    "assessor_a": first,
                    "assessor_b": second,
                    "items": len(both),
                    "cohen_kappa": cohen_kappa(
                        both[first].astype(int).tolist(), both[second].astype(int).tolist(), categories
                    ),
                }
            )
    summary = pd.DataFrame(summary_rows).set_index("scope")
    pairs = pd.DataFrame(pair_rows, columns=["scope", "assessor_a", "assessor_b", "items", "cohen_kappa"])

    spread = grid.max(axis=1) - grid.min(axis=1)
    differing = grid[spread > 0]
    queries = labels.drop_duplicates("item_id").set_index("item_id")["query_id"]
    disagreements = differing.astype("Int64")
    disagreements.insert(0, "query_id", queries.reindex(differing.index))
    disagreements["spread"] = spread[spread > 0].astype(int)
    disagreements["slice"] = [", ".join(slices.get(item, ())) for item in differing.index]
    disagreements = disagreements.sort_values(["spread", "query_id"], ascending=[False, True], kind="stable")
    disagreements.columns.name = None
    return AgreementReport(summary=summary, pairs=pairs, disagreements=disagreements)
