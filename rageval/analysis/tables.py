"""The comparison's tables, computed from wide per-query scores and recorded runs: significance per
run × slice × measure, per-query deltas, per-stage means, and a sweep's quality/cost frontier.

The significance table holds, for each run, measure and slice: the mean with a bootstrap confidence
interval, the delta against the baseline with its own interval, a paired randomization test, the
Holm-adjusted p-value (one family per candidate and level: every measure × slice, "all" included), and
win/tie/loss counts. Queries are paired by ID (:mod:`rageval.analysis.paired`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from rageval.analysis.paired import ALL, PairedTest, in_slice, paired, paired_deltas, paired_tests
from rageval.analysis.records import RunArtifacts
from rageval.evaluation import PARENT_PREFIX, metric_key
from rageval.evaluation.stats import bootstrap_ci, win_tie_loss

DELTA_COLUMNS = ["run", "query_id", "measure", "baseline", "candidate", "delta"]


def _row(run: str, role: str, slice_: str, measure: str) -> dict[str, Any]:
    """A significance row before anything is measured: NaN where nothing is known yet."""
    return {
        "run": run,
        "role": role,
        "slice": slice_,
        "measure": measure,
        "queries": 0,
        "mean": np.nan,
        "ci_low": np.nan,
        "ci_high": np.nan,
        "delta": np.nan,
        "delta_ci_low": np.nan,
        "delta_ci_high": np.nan,
        "p_value": np.nan,
        "p_holm": np.nan,
        "wins": 0,
        "ties": 0,
        "losses": 0,
    }


def _baseline_row(
    run: str, slice_: str, measure: str, values: np.ndarray, *, confidence: float, resamples: int, seed: int
) -> dict[str, Any]:
    row = _row(run, "baseline", slice_, measure)
    row.update(queries=values.size, mean=values.mean() if values.size else np.nan)
    row["ci_low"], row["ci_high"] = bootstrap_ci(values, confidence=confidence, resamples=resamples, seed=seed)
    return row


def _candidate_row(
    run: str, slice_: str, measure: str, test: PairedTest, *, confidence: float, resamples: int, seed: int
) -> dict[str, Any]:
    row = _row(run, "candidate", slice_, measure)
    a, b = test.baseline, test.candidate
    if a.size:
        row.update(queries=a.size, mean=b.mean(), delta=(b - a).mean(), p_value=test.p_value)
        row["ci_low"], row["ci_high"] = bootstrap_ci(b, confidence=confidence, resamples=resamples, seed=seed)
        row["delta_ci_low"], row["delta_ci_high"] = bootstrap_ci(
            b - a, confidence=confidence, resamples=resamples, seed=seed
        )
        row["wins"], row["ties"], row["losses"] = win_tie_loss(a, b)
    row["p_holm"] = test.p_holm
    return row


def significance_table(
    scores: Mapping[str, pd.DataFrame],
    baseline: str,
    slices: Mapping[str, Sequence[str]],
    measures: Sequence[str],
    *,
    confidence: float = 0.95,
    resamples: int = 10_000,
    samples: int = 10_000,
    seed: int = 0,
) -> pd.DataFrame:
    """One row per run × slice × measure (slice ``all`` first). ``scores`` maps a run label to its
    wide per-query scores; ``baseline`` is one of the labels."""
    labels = sorted({label for values in slices.values() for label in values})
    cells = [(slice_, measure) for slice_ in (ALL, *labels) for measure in measures]
    settings: dict[str, Any] = {"confidence": confidence, "resamples": resamples, "seed": seed}
    rows: list[dict[str, Any]] = []
    base = scores[baseline]
    for run, frame in scores.items():
        if run == baseline:
            # The baseline's own mean is over every query it evaluated, paired or not.
            for slice_, measure in cells:
                members = frame.index if slice_ == ALL else in_slice(frame.index, slice_, slices)
                values = frame.loc[members, measure].dropna().to_numpy()
                rows.append(_baseline_row(run, slice_, measure, values, **settings))
            continue
        pool = base.index.intersection(frame.index)
        pairs = [
            paired(base, frame, measure, pool if slice_ == ALL else in_slice(pool, slice_, slices))
            for slice_, measure in cells
        ]
        # One Holm family per level: adding the parent level leaves the passage-level p-values as they were.
        tests: list[PairedTest | None] = [None] * len(cells)
        for rolled in (False, True):
            family = [i for i, (_, measure) in enumerate(cells) if measure.startswith(PARENT_PREFIX) is rolled]
            for i, test in zip(
                family, paired_tests([pairs[i] for i in family], samples=samples, seed=seed), strict=True
            ):
                tests[i] = test
        rows += [
            _candidate_row(run, slice_, measure, test, **settings)
            for (slice_, measure), test in zip(cells, tests, strict=True)
            if test is not None
        ]
    table = pd.DataFrame(rows)
    return table.astype({"queries": int, "wins": int, "ties": int, "losses": int})


def per_query_deltas(scores: Mapping[str, pd.DataFrame], baseline: str, measures: Sequence[str]) -> pd.DataFrame:
    """Long ``run, query_id, measure, baseline, candidate, delta`` over queries both runs evaluated."""
    base = scores[baseline]
    parts = [
        paired_deltas(base, frame, measure).assign(run=run, measure=measure)
        for run, frame in scores.items()
        if run != baseline
        for measure in measures
    ]
    return pd.concat(parts, ignore_index=True)[DELTA_COLUMNS] if parts else pd.DataFrame(columns=DELTA_COLUMNS)


def stage_table(stages: Mapping[str, pd.DataFrame | None], baseline: str) -> pd.DataFrame:
    """Mean per stage and measure for each run that records stages, with the delta against the
    baseline's stage of the same name where it has one."""
    parts = []
    for run, frame in stages.items():
        if frame is None or frame.empty:
            continue
        means = frame.groupby(["stage", "measure"], sort=False)["value"].agg(["mean", "count"]).reset_index()
        parts.append(means.rename(columns={"count": "queries"}).assign(run=run))
    columns = ["run", "stage", "measure", "queries", "mean", "delta"]
    if not parts:
        return pd.DataFrame(columns=columns)
    table = pd.concat(parts, ignore_index=True)
    base = table[table["run"] == baseline].set_index(["stage", "measure"])["mean"]
    keys = list(zip(table["stage"], table["measure"], strict=True))
    table["delta"] = [
        m - base.get(k, np.nan) if r != baseline else np.nan
        for r, k, m in zip(table["run"], keys, table["mean"], strict=True)
    ]
    return table[columns]


def total_p95_ms(latency: pd.DataFrame) -> float:
    """p95 over queries of the total latency in milliseconds: the recorded ``total`` stage, else the
    sum of the stages (``stage:step`` rows are parts of their stage and are not added again)."""
    if latency.empty:
        return float("nan")
    if (latency["stage"] == "total").any():
        totals = latency[latency["stage"] == "total"].set_index("query_id")["seconds"]
    else:
        totals = latency[~latency["stage"].str.contains(":")].groupby("query_id")["seconds"].sum()
    return float(totals.quantile(0.95) * 1000)


def pareto(points: pd.DataFrame, quality: str, cost: str) -> pd.Series:
    """True where no other point has at least the quality at no more cost, one of them strictly."""
    q, c = points[quality].to_numpy(float), points[cost].to_numpy(float)
    flags = []
    for i in range(len(points)):
        dominated = (q >= q[i]) & (c <= c[i]) & ((q > q[i]) | (c < c[i]))
        flags.append(not dominated.any() and not np.isnan(q[i]) and not np.isnan(c[i]))
    return pd.Series(flags, index=points.index)


def frontier_table(runs: Sequence[RunArtifacts], labels: Mapping[str, str], measure: str) -> pd.DataFrame:
    """Quality vs p95 latency and vs mean context tokens for a sweep's members (and the compared runs)."""
    rows = []
    for artifacts in runs:
        metrics = artifacts.info.metrics
        p95 = metrics.get("latency/total/p95_ms", total_p95_ms(artifacts.latency))
        rows.append(
            {
                "run": labels[artifacts.info.run_id],
                "run_id": artifacts.info.run_id,
                "measure": measure,
                "quality": metrics.get(metric_key(measure), np.nan),
                "p95_ms": p95,
                "context_tokens": metrics.get("context_tokens_mean", np.nan),
            }
        )
    table = pd.DataFrame(rows, columns=["run", "run_id", "measure", "quality", "p95_ms", "context_tokens"])
    if table.empty:
        return table.assign(pareto_latency=pd.Series(dtype=bool), pareto_context=pd.Series(dtype=bool))
    return table.assign(
        pareto_latency=pareto(table, "quality", "p95_ms"), pareto_context=pareto(table, "quality", "context_tokens")
    )
