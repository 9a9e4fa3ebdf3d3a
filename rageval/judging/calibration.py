"""Calibration before trust: a judge's labels against the human labels of a calibration benchmark.

- The calibration set is the benchmark's own judgments on a split (each judgment one item: its
  passage, or its document), judged blind like any pool.
- Agreement: weighted Cohen's kappa (linear or quadratic weights over the rubric's order) and the
  confusion matrix, overall and per slice. ``1 - sum(w * observed) / sum(w * expected)`` with
  ``w_ij = |i - j| / (k - 1)`` (linear) or its square (quadratic); undefined (``nan``) when the
  expected disagreement is 0.
- System rankings, as UMBRELA and the TREC 2024 RAG track report them: every run's rankings are
  scored (at document level: each parent at its best chunk, a document's grade the highest of its
  judged spans) under the human grades and under the judge's; Kendall's tau (``scipy.stats``,
  tau-b) between the two orders of the runs. An item the judge gave no label is unjudged (0) under
  the judge's labels, as it would be in a benchmark built from them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import kendalltau

from rageval.benchmark.loading import Benchmark
from rageval.evaluation.metrics import evaluate
from rageval.evaluation.rollup import rollup_to_parent
from rageval.judging.pooling import item_id
from rageval.judging.schema import Found, PoolItem, PoolManifest


def calibration_pool(benchmark: Benchmark, split: str, seed: int = 0) -> tuple[PoolManifest, dict[str, int]]:
    """The calibration set as a pool (one item per judged unit) and the human grade of each item."""
    items: dict[str, PoolItem] = {}
    human: dict[str, int] = {}
    for case in benchmark.cases_for(split):
        for judgment in case.relevant:
            key = item_id(case.queryId, judgment.documentId, judgment.start, judgment.end)
            human[key] = max(human.get(key, judgment.grade), judgment.grade)
            items[key] = PoolItem(
                itemId=key,
                queryId=case.queryId,
                documentId=judgment.documentId,
                start=judgment.start,
                end=judgment.end,
                slice=list(case.slice),
                found=[Found(run="calibration")],
            )
    manifest = PoolManifest(
        benchmark=benchmark.spec.name,
        version=benchmark.spec.version,
        cases=benchmark.file_hashes.get("cases.jsonl", ""),
        path=str(benchmark.path),
        relevanceUnit=benchmark.spec.relevanceUnit,
        split=split,
        depth=1,
        seed=seed,
        created=dt.date.today(),
        runs=["calibration"],
        rubric=dict(benchmark.spec.rubric),
        items=[items[k] for k in sorted(items)],
    )
    return manifest, human


def weighted_kappa(a: Sequence[int], b: Sequence[int], categories: Sequence[int], weights: str = "linear") -> float:
    """Weighted Cohen's kappa of two label sequences over the ordered ``categories``."""
    if len(a) != len(b):
        raise ValueError(f"different numbers of labels ({len(a)} vs {len(b)})")
    k = len(categories)
    if not len(a) or k < 2:
        return float("nan")
    position = {c: i for i, c in enumerate(sorted(categories))}
    observed = np.zeros((k, k))
    np.add.at(observed, ([position[x] for x in a], [position[y] for y in b]), 1)
    observed /= observed.sum()
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    distance = np.abs(np.subtract.outer(np.arange(k), np.arange(k))) / (k - 1)
    w = distance if weights == "linear" else distance**2
    denominator = float((w * expected).sum())
    return float("nan") if np.isclose(denominator, 0.0) else float(1 - (w * observed).sum() / denominator)


@dataclass(frozen=True)
class Agreement:
    """``per_slice``: per scope ("all", then each slice) items, labelled items, exact agreement and
    weighted kappa; ``confusion``: scope, human grade, judge grade, count (every cell, zeros too)."""

    per_slice: pd.DataFrame
    confusion: pd.DataFrame


def agreement_with_humans(
    human: Mapping[str, int],
    judge: Mapping[str, int],
    slices: Mapping[str, Sequence[str]],
    categories: Sequence[int],
    weights: str = "linear",
) -> Agreement:
    """Agreement over the items both labelled (an item the judge failed counts in ``items`` only)."""
    categories = sorted(categories)
    scopes: dict[str, list[str]] = {"all": sorted(human)}
    for label in sorted({s for key in human for s in slices.get(key, ())}):
        scopes[label] = [key for key in sorted(human) if label in slices.get(key, ())]
    rows, cells = [], []
    for scope, keys in scopes.items():
        both = [key for key in keys if key in judge]
        a, b = [human[k] for k in both], [judge[k] for k in both]
        rows.append(
            {
                "scope": scope,
                "items": len(keys),
                "labelled": len(both),
                "exact": float(np.mean([x == y for x, y in zip(a, b, strict=True)])) if both else float("nan"),
                "weighted_kappa": weighted_kappa(a, b, categories, weights),
            }
        )
        table = pd.crosstab(pd.Categorical(a, categories), pd.Categorical(b, categories), dropna=False)
        for h in categories:
            for j in categories:
                cells.append({"scope": scope, "human": h, "judge": j, "count": int(table.loc[h, j])})
    return Agreement(per_slice=pd.DataFrame(rows).set_index("scope"), confusion=pd.DataFrame(cells))


def unit_qrels(
    manifest: PoolManifest, grades: Mapping[str, int], split_cases: Sequence[str]
) -> dict[str, dict[str, int]]:
    """Document-level qrels from item grades: a document takes the highest grade of its items."""
    out: dict[str, dict[str, int]] = {q: {} for q in split_cases}
    for item in manifest.items:
        if item.itemId in grades:
            docs = out.setdefault(item.queryId, {})
            docs[item.documentId] = max(docs.get(item.documentId, grades[item.itemId]), grades[item.itemId])
    return out


@dataclass(frozen=True)
class RankCorrelation:
    """``scores``: per run its mean measure under human and under judge labels (and its place
    under each); ``tau``/``p_value``: Kendall's tau-b of the two orders (``nan`` under 2 runs)."""

    measure: str
    scores: pd.DataFrame
    tau: float
    p_value: float


def system_ranking_correlation(
    rankings: Mapping[str, pd.DataFrame],
    human_qrels: Mapping[str, Mapping[str, int]],
    judge_qrels: Mapping[str, Mapping[str, int]],
    measure: str = "nDCG@10",
) -> RankCorrelation:
    """Score each run's rankings under both label sets and correlate the two orders of the runs."""
    rows = []
    for run, frame in rankings.items():
        documents = rollup_to_parent(frame)
        values = {}
        for labels, qrels in (("human", human_qrels), ("judge", judge_qrels)):
            result = evaluate(documents, qrels, [measure])
            values[labels] = float(result.per_query[measure].mean()) if len(result.per_query) else float("nan")
        rows.append({"run": run, **values})
    scores = pd.DataFrame(rows, columns=["run", "human", "judge"])
    scores["human_place"] = scores["human"].rank(ascending=False, method="min")
    scores["judge_place"] = scores["judge"].rank(ascending=False, method="min")
    if len(scores) < 2:
        return RankCorrelation(measure, scores, float("nan"), float("nan"))
    result = kendalltau(scores["human"], scores["judge"])
    return RankCorrelation(measure, scores, float(result.statistic), float(result.pvalue))
