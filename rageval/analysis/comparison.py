"""The comparison of sealed runs: :func:`compare` assembles every table from the runs' recorded
values (:class:`ComparisonInputs`) into one :class:`Comparison`, and the display helpers show its
significance rows as people read them.

Everything here computes from values and returns values; nothing is recorded (that is
:meth:`rageval.tracking.store.Tracker.log_comparison`), and reading runs back from the store is
:mod:`rageval.workflows.readback`'s job.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from rageval.analysis.diffs import Judgments, diff_table, ordered, recall_curve
from rageval.analysis.paired import ALL, query_slices, wide_scores
from rageval.analysis.records import LATENCY_TAG, RunArtifacts, RunInfo
from rageval.analysis.tables import frontier_table, per_query_deltas, significance_table, stage_table
from rageval.config.load import config_from_yaml
from rageval.errors import ComparisonError
from rageval.evaluation import PARENT_PREFIX, measure_level, metric_key
from rageval.experiment.evidence import EVIDENCE_MEASURES


@dataclass(frozen=True)
class ComparisonInputs:
    baseline: RunArtifacts
    candidates: list[RunArtifacts]
    judgments: Judgments
    sweep: list[RunArtifacts] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Comparison:
    baseline: str
    baseline_run_id: str
    candidates: dict[str, str]  # label → run ID
    measures: list[str]
    primary: str
    table: pd.DataFrame  # every run × slice × measure, with the level each measure is at
    per_query: pd.DataFrame  # run, query_id, measure, baseline, candidate, delta
    diffs: pd.DataFrame  # largest gains and losses on the primary measure, explained
    recall: pd.DataFrame  # run, k, recall
    stages: pd.DataFrame
    latency: pd.DataFrame  # run, query_id, stage, seconds
    frontier: pd.DataFrame
    differences: list[str]
    warnings: list[str]
    settings: dict[str, Any]
    # run, p95_ms, context_tokens and the evidence in the context (compared runs)
    costs: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def overall(self) -> pd.DataFrame:
        return self.table[self.table["slice"] == ALL].drop(columns="slice").reset_index(drop=True)

    @property
    def slices(self) -> pd.DataFrame:
        return self.table[self.table["slice"] != ALL].reset_index(drop=True)

    def slice_view(self, measure: str | None = None) -> pd.DataFrame:
        """Slices as rows, each run's mean (and the query count) as columns, for one measure."""
        frame = self.table[self.table["measure"] == (measure or self.primary)]
        view = frame.pivot(index="slice", columns="run", values="mean")[[self.baseline, *self.candidates]]
        counts = frame[frame["run"] == self.baseline].set_index("slice")["queries"]
        view.insert(0, "queries", counts)
        order = [ALL, *sorted(s for s in view.index if s != ALL)]
        return view.loc[order]

    def deltas(self) -> pd.DataFrame:
        """Per candidate and measure over all queries: the delta against the baseline and its Holm
        p-value (the table ``tables/deltas`` of a comparison run; once 2 metric keys per pair)."""
        rows = self.overall[self.overall["role"] == "candidate"]
        return rows[[c for c in ("run", "measure", "level", "delta", "p_holm") if c in rows.columns]].reset_index(
            drop=True
        )

    def best(self) -> str | None:
        """The candidate with the largest delta on the primary measure (None without candidates)."""
        rows = self.overall[(self.overall["role"] == "candidate") & (self.overall["measure"] == self.primary)]
        rows = rows.dropna(subset=["delta"])
        return None if rows.empty else str(rows.sort_values(["delta", "run"], ascending=[False, True]).iloc[0]["run"])

    def metrics(self) -> dict[str, float]:
        """The headline only: the best candidate's delta and Holm p-value on the primary measure
        (``delta_KEY``, ``p_holm_KEY``); every candidate × measure is :meth:`deltas`."""
        best = self.best()
        if best is None:
            return {}
        row = self.overall[(self.overall["run"] == best) & (self.overall["measure"] == self.primary)].iloc[0]
        key = metric_key(self.primary)
        out = {f"delta_{key}": row["delta"], f"p_holm_{key}": row["p_holm"]}
        return {k: float(v) for k, v in out.items() if pd.notna(v)}


def evidence_means(queries: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Per run: the mean evidence recall, precision and IoU in the context over the queries that have
    one (passage-level runs record them per query; other runs get no value)."""
    rows = [
        {"run": run, **{c: frame[c].mean() if c in frame.columns else np.nan for c in EVIDENCE_MEASURES}}
        for run, frame in queries.items()
    ]
    return pd.DataFrame(rows, columns=["run", *EVIDENCE_MEASURES])


def latency_recorded(runs: Sequence[RunArtifacts], labels: Mapping[str, str]) -> pd.DataFrame:
    """Per run: what its recorded latency means (its ``rageval.latency`` tag: clock and load), or
    "clock and load not recorded" for a run recorded before the tag."""
    text = [r.info.tags.get(LATENCY_TAG, "clock and load not recorded") for r in runs]
    return pd.DataFrame({"run": [labels[r.info.run_id] for r in runs], "latency": text})


def refuse_failed_queries(runs: Sequence[tuple[str, RunInfo, pd.DataFrame | None]]) -> None:
    """Refuse to compare or gate a run whose queries failed: each ``(role, info, queries)`` is
    checked on its per-query record (``queries.parquet``'s ``failed`` column) where given, else on
    its ``queries_failed`` metric. A failed query scores 0 in every measure; compared, it would
    count as a loss (or, on the baseline, as the candidate's win)."""
    problems = []
    for role, info, queries in runs:
        if queries is not None and "failed" in queries.columns:
            failed = [str(q) for q in queries.loc[queries["failed"].astype(bool), "query_id"]]
        else:
            failed = ["?"] * int(info.metrics.get("queries_failed", 0) or 0)
        if failed:
            named = ", ".join(failed[:3]) + (" …" if len(failed) > 3 else "") if "?" not in failed else ""
            problems.append(
                f"the {role} run {info.run_id} ({info.name}) has {len(failed)} failed "
                f"quer{'y' if len(failed) == 1 else 'ies'}{f' ({named})' if named else ''}, scored 0 in every measure"
            )
    if problems:
        raise ComparisonError(
            "; ".join(problems) + ": compared, they would count as losses or wins that no retrieval made. "
            "Fix what failed (the run's failures.json names each query and error) and run it again"
        )


def labels_for(runs: Sequence[RunInfo]) -> dict[str, str]:
    """Readable, unique labels: the run name, with the run ID's head where names repeat."""
    names = [r.name for r in runs]
    return {r.run_id: r.name if names.count(r.name) == 1 else f"{r.name} [{r.run_id[:6]}]" for r in runs}


def _measures(
    scores: dict[str, pd.DataFrame], baseline: str, order: Sequence[str], asked: Sequence[str] | None
) -> list[str]:
    """The measures to compare: those asked for, else every measure all runs recorded in the baseline
    configuration's order; asking for one a run lacks is refused."""
    recorded = [m for m in scores[baseline].columns if all(m in s.columns for s in scores.values())]
    # The run's own measures in the configured order, then the parent-level ones in the same order.
    rank = {m: i for i, m in enumerate([*order, *(PARENT_PREFIX + m for m in order)])}
    recorded = sorted(recorded, key=lambda m: rank.get(m, len(rank)))
    chosen = list(asked) if asked else recorded
    missing = [m for m in chosen if m not in recorded]
    if missing:
        raise ComparisonError(
            f"measures {', '.join(missing)} are not recorded by every run; recorded by all: {', '.join(recorded)}"
        )
    return chosen


# What every comparison's statistics are (recorded in its settings beside the numbers asked for).
TEST_SETTINGS = {
    "test": "paired randomization (sign flip), two-sided",
    "correction": "Holm over measures x slices, per candidate and level",
}


@dataclass(frozen=True)
class Statistics:
    """How a comparison's intervals and tests are computed: bootstrap intervals at ``confidence`` over
    ``resamples``, the paired randomization test over ``samples`` sign flips, both seeded by ``seed``."""

    confidence: float = 0.95
    resamples: int = 10_000
    samples: int = 10_000
    seed: int = 0


def compare(
    inputs: ComparisonInputs,
    *,
    measures: Sequence[str] | None = None,
    top_n: int = 10,
    depth: int = 10,
    max_k: int = 100,
    statistics: Statistics | None = None,
) -> Comparison:
    """Compute every table of a comparison. ``measures``: default, those every run recorded, in
    the baseline's order; the first is the primary measure (diffs, slice plot, frontier). ``top_n``
    gains and losses are explained, ``depth`` deep; Recall@k runs to ``max_k``; ``statistics``:
    default, :class:`Statistics`' defaults."""
    statistics = statistics or Statistics()
    runs = [inputs.baseline, *inputs.candidates]
    refuse_failed_queries(
        [("baseline", inputs.baseline.info, inputs.baseline.queries)]
        + [("candidate", r.info, r.queries) for r in inputs.candidates]
    )
    labels = labels_for(list({r.info.run_id: r.info for r in (*runs, *inputs.sweep)}.values()))
    scores = {labels[r.info.run_id]: wide_scores(r.per_query) for r in runs}
    baseline = labels[inputs.baseline.info.run_id]
    baseline_order = config_from_yaml(inputs.baseline.config_yaml).evaluation.measures
    chosen = _measures(scores, baseline, baseline_order, measures)
    table = _leveled_table(inputs, scores, baseline, chosen, statistics)
    deltas = per_query_deltas(scores, baseline, chosen)
    orders, recall = _orders_and_recall(runs, labels, scores, inputs.judgments, max_k)
    diffs = diff_table(deltas, chosen[0], inputs.judgments, orders, baseline, top_n=top_n, depth=depth)
    latency = pd.concat([r.latency.assign(run=labels[r.info.run_id]) for r in runs], ignore_index=True)
    # A sweep's frontier shows the compared runs among its members.
    sweep = list({r.info.run_id: r for r in (*inputs.sweep, *runs)}.values()) if inputs.sweep else []
    return Comparison(
        baseline=baseline,
        baseline_run_id=inputs.baseline.info.run_id,
        candidates={labels[r.info.run_id]: r.info.run_id for r in inputs.candidates},
        measures=chosen,
        primary=chosen[0],
        table=table,
        per_query=deltas,
        diffs=diffs,
        recall=recall,
        stages=stage_table({labels[r.info.run_id]: r.stages for r in runs}, baseline),
        latency=latency[["run", "query_id", "stage", "seconds"]],
        frontier=frontier_table(sweep, labels, chosen[0]),
        costs=_costs(runs, labels, chosen[0]),
        differences=list(inputs.differences),
        warnings=list(inputs.warnings),
        settings={**asdict(statistics), **{"top_n": top_n, "depth": depth, **TEST_SETTINGS}},
    )


def _leveled_table(
    inputs: ComparisonInputs,
    scores: dict[str, pd.DataFrame],
    baseline: str,
    measures: list[str],
    statistics: Statistics,
) -> pd.DataFrame:
    """The significance table of every run, slice and measure, with the level each measure is at."""
    table = significance_table(
        scores,
        baseline,
        query_slices(inputs.baseline.queries),
        measures,
        confidence=statistics.confidence,
        resamples=statistics.resamples,
        samples=statistics.samples,
        seed=statistics.seed,
    )
    # A passage-level run's parent measures (``parent/…``, from runs that recorded them) line up beside its own.
    levels = [measure_level(m, inputs.judgments.level) for m in table["measure"]]
    table.insert(table.columns.get_loc("measure") + 1, "level", levels)
    return table


def _orders_and_recall(
    runs: Sequence[RunArtifacts],
    labels: Mapping[str, str],
    scores: Mapping[str, pd.DataFrame],
    judgments: Judgments,
    max_k: int,
) -> tuple[dict[str, tuple[pd.DataFrame, pd.DataFrame]], pd.DataFrame]:
    """Per run label: its ranking at the judgments' level and by chunk (for the diffs), and every
    run's Recall@k for k = 1..max_k."""
    orders, curves = {}, []
    ks = list(range(1, max_k + 1))
    for run in runs:
        label = labels[run.info.run_id]
        config = config_from_yaml(run.config_yaml)
        level_ranking = ordered(run.rankings, config, judgments.level)
        chunk_ranking = run.rankings.sort_values(["query_id", "rank"], kind="stable")
        orders[label] = (level_ranking, chunk_ranking)
        curve = recall_curve(level_ranking, judgments.qrels, list(scores[label].index), ks, config.evaluation.relevance)
        curves.append(curve.reset_index().assign(run=label))
    return orders, pd.concat(curves, ignore_index=True)[["run", "k", "recall"]]


def _costs(runs: Sequence[RunArtifacts], labels: Mapping[str, str], primary: str) -> pd.DataFrame:
    """Per compared run: p95, context tokens, the evidence in the context and what its latency means."""
    return (
        frontier_table(runs, labels, primary)[["run", "p95_ms", "context_tokens"]]
        .merge(evidence_means({labels[r.info.run_id]: r.queries for r in runs}), on="run", how="left")
        .merge(latency_recorded(runs, labels), on="run", how="left")
    )


def significance_display(frame: pd.DataFrame, index: Sequence[str] | None = None) -> pd.DataFrame:
    """Rows of a significance table as people read them: intervals and p-values as text. ``index``:
    default run, level (where the table has one) and measure."""
    if index is None:
        index = ("run", "level", "measure") if "level" in frame.columns else ("run", "measure")
    out = pd.DataFrame(
        {
            **{column: frame[column] for column in index},
            "queries": frame["queries"],
            "mean [95% CI]": [
                "" if pd.isna(m) else f"{m:.4f} [{lo:.4f}, {hi:.4f}]"
                for m, lo, hi in zip(frame["mean"], frame["ci_low"], frame["ci_high"], strict=True)
            ],
            "delta [95% CI]": [
                "" if pd.isna(d) else f"{d:+.4f} [{lo:+.4f}, {hi:+.4f}]"
                for d, lo, hi in zip(frame["delta"], frame["delta_ci_low"], frame["delta_ci_high"], strict=True)
            ],
            "p": ["" if pd.isna(p) else f"{p:.4f}" for p in frame["p_value"]],
            "p (Holm)": ["" if pd.isna(p) else f"{p:.4f}" for p in frame["p_holm"]],
            "win/tie/loss": [
                "" if r == "baseline" else f"{w}/{t}/{lo}"
                for r, w, t, lo in zip(frame["role"], frame["wins"], frame["ties"], frame["losses"], strict=True)
            ],
        }
    )
    return out.set_index(list(index))


def overall_display(comparison: Comparison) -> pd.DataFrame:
    """The overall table: one row per run and measure, over every evaluated query."""
    return significance_display(comparison.overall)


def slices_display(comparison: Comparison, measure: str | None = None) -> pd.DataFrame:
    """Every slice for one measure (default: the primary), each run with its query count."""
    frame = comparison.slices[comparison.slices["measure"] == (measure or comparison.primary)]
    return significance_display(
        frame.sort_values(["slice", "role"], ascending=[True, True], kind="stable"), ("slice", "run")
    )
