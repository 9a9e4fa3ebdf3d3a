"""Compare sealed runs: comparability, significance tables, per-query diffs, curves and figures.

Everything here computes from DataFrames and returns values; nothing is recorded (that is
:meth:`rageval.tracking.store.Tracker.log_comparison`). :func:`load_inputs` is the one reader: it pulls
the runs through a :class:`~rageval.tracking.store.Tracker` and re-chunks the benchmark each run used, for
query texts, judgments and chunk snippets.

The overall and slice tables hold, for each run, measure and slice: the mean with a bootstrap
confidence interval, the delta against the baseline with its own interval, a paired randomization
test, the Holm-adjusted p-value (one family per candidate: every measure × slice, "all" included),
and win/tie/loss counts. Queries are paired by ID; only queries both runs evaluated are compared.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from rageval.analysis.records import RunArtifacts, RunInfo
from rageval.errors import ComparisonError
from rageval.evaluation import metric_key
from rageval.evaluation.stats import bootstrap_ci, holm, paired_randomization, win_tie_loss

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from rageval.config.schema import RunConfig

ALL = "all"  # the slice label of the whole query set
# What must match for two runs' numbers to mean the same thing (tag → what it is).
CONTRACT_TAGS: dict[str, str] = {
    "rageval.hash.corpus": "corpus hash",
    "rageval.hash.cases": "cases hash",
    "rageval.hash.qrels": "qrels hash",
    "rageval.split": "split",
    "rageval.level": "evaluation level",
}
CHUNKING_TAG = "rageval.chunking.hash"
CONTRACT_PARAM = "metrics.contract"
# The contract's version and rule digest, and the evaluation options it leaves to the configuration.
CONTRACT_PARAMS = (
    CONTRACT_PARAM,
    "metrics.contract_digest",
    "evaluation.ties",
    "evaluation.duplicates",
    "evaluation.relevance",
    "evaluation.gain",
)


# --------------------------------------------------------------------------- comparability


def short_value(value: str | None) -> str:
    if value is None:
        return "nothing recorded"
    return f"{value[:12]}…" if len(value) > 16 else value


def differences(baseline: RunInfo, candidate: RunInfo) -> list[str]:
    """Every way ``candidate``'s numbers would mean something else than ``baseline``'s."""
    out = []
    b, c = baseline.run_id[:8], candidate.run_id[:8]
    for tag, what in CONTRACT_TAGS.items():
        before, after = baseline.tags.get(tag), candidate.tags.get(tag)
        if before != after:
            out.append(
                f"{what} differs ({tag}): baseline {b} has {short_value(before)}, candidate {c} has {short_value(after)}"
            )
    levels = {baseline.tags.get("rageval.level"), candidate.tags.get("rageval.level")}
    if "passage" in levels and baseline.tags.get(CHUNKING_TAG) != candidate.tags.get(CHUNKING_TAG):
        out.append(
            f"chunking differs ({CHUNKING_TAG}) and passage-level measures count chunks: baseline {b} has "
            f"{short_value(baseline.tags.get(CHUNKING_TAG))}, candidate {c} has {short_value(candidate.tags.get(CHUNKING_TAG))}"
        )
    for param in CONTRACT_PARAMS:
        before, after = baseline.params.get(param), candidate.params.get(param)
        if before != after:
            out.append(
                f"metric contract differs ({param}): baseline {b} has {short_value(before)}, candidate {c} has {short_value(after)}"
            )
    return out


def check_comparable(baseline: RunInfo, candidates: Sequence[RunInfo], *, allow_mismatch: bool = False) -> list[str]:
    """Refuse unsealed runs, and runs whose contract differs unless ``allow_mismatch``; return the
    differences found (to be recorded when allowed)."""
    unsealed = [f"run {r.run_id} is {r.status} and not sealed" for r in (baseline, *candidates) if not r.sealed]
    if unsealed:
        raise ComparisonError("only sealed runs are results; these are not:", differences=unsealed)
    found = [d for candidate in candidates for d in differences(baseline, candidate)]
    if found and not allow_mismatch:
        raise ComparisonError(
            "the runs are not comparable (pass --allow-mismatch to compare anyway; it is recorded):", differences=found
        )
    return found


# --------------------------------------------------------------------------- per-query scores


def wide_scores(per_query: pd.DataFrame) -> pd.DataFrame:
    """Long ``query_id, measure, value`` → rows: query_id, columns: measures."""
    frame = per_query.pivot(index="query_id", columns="measure", values="value")
    frame.columns.name = None
    return frame.sort_index()


def query_slices(queries: pd.DataFrame) -> dict[str, list[str]]:
    return {str(q): [str(s) for s in slices] for q, slices in zip(queries["query_id"], queries["slices"], strict=True)}


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
    rows: list[dict[str, Any]] = []
    base = scores[baseline]
    for run, frame in scores.items():
        is_base = run == baseline
        pool = frame.index if is_base else base.index.intersection(frame.index)
        first = len(rows)
        for slice_ in (ALL, *labels):
            members = pool if slice_ == ALL else pool[[slice_ in slices.get(q, ()) for q in pool]]
            for measure in measures:
                row: dict[str, Any] = {
                    "run": run,
                    "role": "baseline" if is_base else "candidate",
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
                if is_base:
                    values = frame.loc[members, measure].dropna().to_numpy()
                    row.update(queries=values.size, mean=values.mean() if values.size else np.nan)
                    row["ci_low"], row["ci_high"] = bootstrap_ci(
                        values, confidence=confidence, resamples=resamples, seed=seed
                    )
                else:
                    pair = pd.concat([base.loc[members, measure], frame.loc[members, measure]], axis=1).dropna()
                    a, b = pair.iloc[:, 0].to_numpy(), pair.iloc[:, 1].to_numpy()
                    if a.size:
                        row.update(
                            queries=a.size,
                            mean=b.mean(),
                            delta=(b - a).mean(),
                            p_value=paired_randomization(a, b, samples=samples, seed=seed),
                        )
                        row["ci_low"], row["ci_high"] = bootstrap_ci(
                            b, confidence=confidence, resamples=resamples, seed=seed
                        )
                        row["delta_ci_low"], row["delta_ci_high"] = bootstrap_ci(
                            b - a, confidence=confidence, resamples=resamples, seed=seed
                        )
                        row["wins"], row["ties"], row["losses"] = win_tie_loss(a, b)
                rows.append(row)
        if not is_base:
            block = rows[first:]
            for row, adjusted in zip(block, holm([r["p_value"] for r in block]), strict=True):
                row["p_holm"] = float(adjusted)
    table = pd.DataFrame(rows)
    return table.astype({"queries": int, "wins": int, "ties": int, "losses": int})


def per_query_deltas(scores: Mapping[str, pd.DataFrame], baseline: str, measures: Sequence[str]) -> pd.DataFrame:
    """Long ``run, query_id, measure, baseline, candidate, delta`` over queries both runs evaluated."""
    base = scores[baseline]
    parts = []
    for run, frame in scores.items():
        if run == baseline:
            continue
        common = base.index.intersection(frame.index)
        for measure in measures:
            part = pd.DataFrame(
                {"baseline": base.loc[common, measure], "candidate": frame.loc[common, measure]}
            ).dropna()
            part = part.assign(delta=part["candidate"] - part["baseline"], run=run, measure=measure)
            parts.append(part.rename_axis("query_id").reset_index())
    columns = ["run", "query_id", "measure", "baseline", "candidate", "delta"]
    return pd.concat(parts, ignore_index=True)[columns] if parts else pd.DataFrame(columns=columns)


# --------------------------------------------------------------------------- rankings and judgments


@dataclass(frozen=True)
class Judgments:
    """What a diff needs from the benchmark: judgments at the runs' level, query and chunk texts."""

    level: str
    qrels: dict[str, dict[str, int]]  # query → evaluated item (document or chunk ID) → grade
    queries: dict[str, str]
    texts: dict[str, str]  # chunk ID → text, for every chunking the runs used


def ordered(rankings: pd.DataFrame, config: RunConfig, level: str) -> pd.DataFrame:
    """A run's ranking at ``level`` in the order its measures saw it (tie and duplicate policy applied)."""
    from rageval.evaluation import order_ranking
    from rageval.experiment.run import level_run

    return order_ranking(level_run(rankings, level), config.evaluation.ties, config.evaluation.duplicates)


def recall_curve(
    ranking: pd.DataFrame,
    qrels: Mapping[str, Mapping[str, int]],
    queries: Sequence[str],
    ks: Sequence[int],
    relevance: int = 1,
) -> pd.Series:
    """Mean R@k over ``queries`` at each k, computed by :func:`rageval.evaluation.evaluate` under the
    metric contract (queries without a relevant item are not averaged). ``ranking`` is already in
    its decided order (see :func:`ordered`)."""
    from rageval.evaluation import evaluate

    ks = sorted({int(k) for k in ks})
    index = pd.Index(ks, name="k")
    judged = {q: qrels[q] for q in queries if q in qrels}
    if not judged:
        return pd.Series(np.nan, index=index, name="recall")
    evaluation = evaluate(
        ranking[ranking["query_id"].isin(judged.keys())],
        judged,
        [f"R@{k}" for k in ks],
        ties="input-order",
        relevance=relevance,
    )
    return pd.Series(evaluation.aggregates.to_numpy(), index=index, name="recall")


def _snippet(text: str, width: int = 140) -> str:
    return textwrap.shorten(" ".join(text.split()), width=width, placeholder=" …")


def explain_query(
    query_id: str,
    judgments: Judgments,
    before: tuple[pd.DataFrame, pd.DataFrame],
    after: tuple[pd.DataFrame, pd.DataFrame],
    *,
    depth: int = 10,
    moved: int = 4,
) -> dict[str, Any]:
    """Why one query's score changed. ``before``/``after``: (ranking at the evaluated level,
    chunk ranking) of the baseline and the candidate. Returns the query text, each relevant item's
    rank before → after, and the chunks that entered, left or moved within the top ``depth``."""

    def ranks(frame: pd.DataFrame, column: str) -> dict[str, int]:
        rows = frame[frame["query_id"] == query_id]
        return dict(zip(rows[column].astype(str), rows["rank"].astype(int), strict=True))

    grades = judgments.qrels.get(query_id, {})
    level_before, level_after = ranks(before[0], "doc_id"), ranks(after[0], "doc_id")
    relevant = [
        {"item": item, "grade": grade, "before": level_before.get(item), "after": level_after.get(item)}
        for item, grade in sorted(grades.items(), key=lambda kv: (-kv[1], kv[0]))
        if grade > 0
    ]
    chunk_before, chunk_after = ranks(before[1], "chunk_id"), ranks(after[1], "chunk_id")
    shown = {c for c, r in chunk_before.items() if r <= depth} | {c for c, r in chunk_after.items() if r <= depth}

    def change(chunk: str) -> tuple[float, str]:
        a, b = chunk_before.get(chunk), chunk_after.get(chunk)
        gap = abs((a or depth * 10) - (b or depth * 10))
        return (-gap, chunk)

    def grade_of(chunk: str) -> int:
        from rageval.benchmark.chunking import parent_of

        return int(
            grades.get(chunk, grades.get(parent_of(chunk), 0))
            if judgments.level == "passage"
            else grades.get(parent_of(chunk), 0)
        )

    movers = [c for c in sorted(shown, key=change) if chunk_before.get(c) != chunk_after.get(c)][:moved]
    return {
        "query_id": query_id,
        "query": judgments.queries.get(query_id, ""),
        "relevant": relevant,
        "moved": [
            {
                "chunk_id": c,
                "before": chunk_before.get(c),
                "after": chunk_after.get(c),
                "grade": grade_of(c),
                "snippet": _snippet(judgments.texts.get(c, "")),
            }
            for c in movers
        ],
    }


def _rank_text(value: int | None) -> str:
    return "–" if value is None else str(value)


def diff_table(
    deltas: pd.DataFrame,
    measure: str,
    judgments: Judgments,
    rankings: Mapping[str, tuple[pd.DataFrame, pd.DataFrame]],
    baseline: str,
    *,
    top_n: int = 10,
    depth: int = 10,
) -> pd.DataFrame:
    """The ``top_n`` largest gains and losses on ``measure`` per candidate, explained."""
    rows = []
    for run, group in deltas[deltas["measure"] == measure].groupby("run", sort=False):
        gains = group[group["delta"] > 0].sort_values(["delta", "query_id"], ascending=[False, True]).head(top_n)
        losses = group[group["delta"] < 0].sort_values(["delta", "query_id"], ascending=[True, True]).head(top_n)
        for kind, chosen in (("gain", gains), ("loss", losses)):
            for item in chosen.itertuples(index=False):
                why = explain_query(str(item.query_id), judgments, rankings[baseline], rankings[str(run)], depth=depth)
                rows.append(
                    {
                        "run": run,
                        "change": kind,
                        "query_id": item.query_id,
                        "query": why["query"],
                        "measure": measure,
                        "baseline": item.baseline,
                        "candidate": item.candidate,
                        "delta": item.delta,
                        "relevant_ranks": "; ".join(
                            f"{r['item']} (grade {r['grade']}): {_rank_text(r['before'])} → {_rank_text(r['after'])}"
                            for r in why["relevant"]
                        ),
                        "moved_chunks": "\n".join(
                            f"{m['chunk_id']} (grade {m['grade']}): {_rank_text(m['before'])} → {_rank_text(m['after'])} “{m['snippet']}”"
                            for m in why["moved"]
                        ),
                    }
                )
    columns = [
        "run",
        "change",
        "query_id",
        "query",
        "measure",
        "baseline",
        "candidate",
        "delta",
        "relevant_ranks",
        "moved_chunks",
    ]
    return pd.DataFrame(rows, columns=columns)


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


# --------------------------------------------------------------------------- the comparison


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
    table: pd.DataFrame  # every run × slice × measure
    per_query: pd.DataFrame  # run, query_id, measure, baseline, candidate, delta
    diffs: pd.DataFrame  # largest gains and losses on the primary measure, explained
    recall: pd.DataFrame  # run, k, recall
    stages: pd.DataFrame
    latency: pd.DataFrame  # run, query_id, stage, seconds
    frontier: pd.DataFrame
    differences: list[str]
    warnings: list[str]
    settings: dict[str, Any]

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

    def metrics(self) -> dict[str, float]:
        """Per candidate and measure: delta and Holm p-value over all queries (MLflow keys)."""
        out = {}
        for row in self.overall[self.overall["role"] == "candidate"].itertuples(index=False):
            key = f"{metric_key(str(row.run))}/{metric_key(str(row.measure))}"
            out[f"delta/{key}"] = row.delta
            out[f"p_holm/{key}"] = row.p_holm
        return {k: float(v) for k, v in out.items() if pd.notna(v)}


def labels_for(runs: Sequence[RunInfo]) -> dict[str, str]:
    """Readable, unique labels: the run name, with the run ID's head where names repeat."""
    names = [r.name for r in runs]
    return {r.run_id: r.name if names.count(r.name) == 1 else f"{r.name} [{r.run_id[:6]}]" for r in runs}


def compare(
    inputs: ComparisonInputs,
    *,
    measures: Sequence[str] | None = None,
    top_n: int = 10,
    depth: int = 10,
    confidence: float = 0.95,
    resamples: int = 10_000,
    samples: int = 10_000,
    seed: int = 0,
    max_k: int = 100,
) -> Comparison:
    """Compute every table of a comparison. ``measures``: default, those every run recorded, in
    the baseline's order; the first is the primary measure (diffs, slice plot, frontier)."""
    from rageval.config.load import config_from_yaml

    runs = [inputs.baseline, *inputs.candidates]
    labels = labels_for(list({r.info.run_id: r.info for r in (*runs, *inputs.sweep)}.values()))
    scores = {labels[r.info.run_id]: wide_scores(r.per_query) for r in runs}
    baseline = labels[inputs.baseline.info.run_id]
    recorded = [m for m in scores[baseline].columns if all(m in s.columns for s in scores.values())]
    baseline_order = config_from_yaml(inputs.baseline.config_yaml).evaluation.measures
    recorded = sorted(recorded, key=lambda m: baseline_order.index(m) if m in baseline_order else len(baseline_order))
    chosen = list(measures) if measures else recorded
    missing = [m for m in chosen if m not in recorded]
    if missing:
        raise ComparisonError(
            f"measures {', '.join(missing)} are not recorded by every run; recorded by all: {', '.join(recorded)}"
        )
    slices = query_slices(inputs.baseline.queries)
    table = significance_table(
        scores, baseline, slices, chosen, confidence=confidence, resamples=resamples, samples=samples, seed=seed
    )
    deltas = per_query_deltas(scores, baseline, chosen)

    level = inputs.judgments.level
    orders, curves = {}, []
    ks = np.arange(1, max_k + 1)
    for run in runs:
        label = labels[run.info.run_id]
        config = config_from_yaml(run.config_yaml)
        level_ranking = ordered(run.rankings, config, level)
        chunk_ranking = run.rankings.sort_values(["query_id", "rank"], kind="stable")
        orders[label] = (level_ranking, chunk_ranking)
        curve = recall_curve(
            level_ranking, inputs.judgments.qrels, list(scores[label].index), ks, config.evaluation.relevance
        )
        curves.append(curve.reset_index().assign(run=label))
    recall = pd.concat(curves, ignore_index=True)[["run", "k", "recall"]]
    diffs = diff_table(deltas, chosen[0], inputs.judgments, orders, baseline, top_n=top_n, depth=depth)
    latency = pd.concat([r.latency.assign(run=labels[r.info.run_id]) for r in runs], ignore_index=True)
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
        frontier=frontier_table(sweep, labels, chosen[0]) if sweep else frontier_table([], labels, chosen[0]),
        differences=list(inputs.differences),
        warnings=list(inputs.warnings),
        settings={
            "confidence": confidence,
            "resamples": resamples,
            "samples": samples,
            "seed": seed,
            "top_n": top_n,
            "depth": depth,
            "test": "paired randomization (sign flip), two-sided",
            "correction": "Holm over measures x slices, per candidate",
        },
    )


def significance_display(frame: pd.DataFrame, index: Sequence[str] = ("run", "measure")) -> pd.DataFrame:
    """Rows of a significance table as people read them: intervals and p-values as text."""
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


# --------------------------------------------------------------------------- figures

_COLORS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c", "#ccb974", "#64b5cd"]


def _color(i: int) -> str:
    return _COLORS[i % len(_COLORS)]


def figure_query_deltas(comparison: Comparison, measure: str | None = None) -> Figure:
    """Each candidate's per-query delta on one measure, sorted: where it wins and loses, and how much."""
    from matplotlib.figure import Figure

    measure = measure or comparison.primary
    runs = list(comparison.candidates)
    figure = Figure(figsize=(10, 2.6 * len(runs) + 0.6), layout="constrained")
    axes = np.atleast_1d(figure.subplots(len(runs), 1, squeeze=False)[:, 0])
    for ax, run in zip(axes, runs, strict=True):
        part = comparison.per_query[(comparison.per_query["run"] == run) & (comparison.per_query["measure"] == measure)]
        delta = np.sort(part["delta"].to_numpy())[::-1]
        colors = np.where(delta > 0, "#55a868", np.where(delta < 0, "#c44e52", "#bbbbbb"))
        ax.bar(np.arange(len(delta)), delta, color=colors, width=1.0)
        ax.axhline(0, color="black", linewidth=0.8)
        wins, ties, losses = int((delta > 0).sum()), int((delta == 0).sum()), int((delta < 0).sum())
        ax.set(
            title=f"{run} − {comparison.baseline}: {measure} per query (win/tie/loss {wins}/{ties}/{losses})",
            xlabel="queries, sorted by delta",
            ylabel=f"Δ {measure}",
            xlim=(-0.5, max(len(delta), 1) - 0.5),
        )
    return figure


def figure_slices(comparison: Comparison, measure: str | None = None) -> Figure:
    """One measure per slice for every run, slice labels with their query counts."""
    from matplotlib.figure import Figure

    measure = measure or comparison.primary
    view = comparison.slice_view(measure)
    runs = [comparison.baseline, *comparison.candidates]
    figure = Figure(figsize=(10, 0.45 * len(view) * max(1, len(runs) / 2) + 1.2), layout="constrained")
    ax = figure.subplots()
    height = 0.8 / len(runs)
    positions = np.arange(len(view))[::-1]
    for i, run in enumerate(runs):
        ax.barh(
            positions + (len(runs) / 2 - i - 0.5) * height,
            view[run].to_numpy(),
            height=height,
            color=_color(i),
            label=run,
        )
    ax.set_yticks(positions, [f"{s} (n={n})" for s, n in zip(view.index, view["queries"], strict=True)])
    ax.set(xlabel=measure, xlim=(0, 1), title=f"{measure} by slice (n = queries evaluated)")
    ax.legend(loc="lower right", fontsize="small")
    return figure


def figure_recall(comparison: Comparison) -> Figure:
    """Recall@k over k for every run."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 4.2), layout="constrained")
    ax = figure.subplots()
    for i, (run, part) in enumerate(comparison.recall.groupby("run", sort=False)):
        ax.plot(part["k"], part["recall"], color=_color(i), label=run, linewidth=1.8)
    ax.set_xscale("log")
    ax.set(xlabel="k (log scale)", ylabel="mean Recall@k", ylim=(0, 1.02), title="Recall@k over k")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize="small")
    return figure


def figure_latency(comparison: Comparison) -> Figure:
    """Per-query latency of each stage, per run (milliseconds, log scale)."""
    from matplotlib.figure import Figure

    frame = comparison.latency
    stages = list(dict.fromkeys(frame["stage"]))
    runs = [comparison.baseline, *comparison.candidates]
    figure = Figure(figsize=(min(14, max(7, 0.5 * len(stages) * len(runs) + 3)), 4.4), layout="constrained")
    ax = figure.subplots()
    width = 0.8 / len(runs)
    for i, run in enumerate(runs):
        data = [frame[(frame["run"] == run) & (frame["stage"] == s)]["seconds"].to_numpy() * 1000 for s in stages]
        data = [d if d.size else np.array([np.nan]) for d in data]
        boxes = ax.boxplot(
            data,
            positions=np.arange(len(stages)) + (i - (len(runs) - 1) / 2) * width,
            widths=width * 0.9,
            patch_artist=True,
            showfliers=False,
            manage_ticks=False,
        )
        for box in boxes["boxes"]:
            box.set(facecolor=_color(i), alpha=0.75)
        ax.plot([], [], color=_color(i), linewidth=6, label=run)
    ax.set_xticks(np.arange(len(stages)), stages, rotation=20 if len(stages) > 4 else 0)
    ax.set_yscale("log")
    ax.set(ylabel="ms per query (log scale)", title="Latency per stage (boxes: quartiles, whiskers: 1.5 IQR)")
    ax.legend(fontsize="small")
    return figure


def figure_frontier(comparison: Comparison) -> Figure:
    """A sweep's quality against p95 latency and against mean context tokens; the frontier joined."""
    from matplotlib.figure import Figure

    frame = comparison.frontier
    figure = Figure(figsize=(12, 4.6), layout="constrained")
    for ax, cost, flag, label in zip(
        figure.subplots(1, 2),
        ("p95_ms", "context_tokens"),
        ("pareto_latency", "pareto_context"),
        ("p95 latency per query (ms)", "mean context tokens"),
        strict=True,
    ):
        ax.scatter(frame[cost], frame["quality"], color="#8c8c8c", zorder=2)
        best = frame[frame[flag]].sort_values(cost)
        ax.plot(best[cost], best["quality"], color="#c44e52", marker="o", zorder=3, label="frontier")
        base = frame[frame["run_id"] == comparison.baseline_run_id]
        ax.scatter(base[cost], base["quality"], s=120, facecolor="none", edgecolor="black", zorder=4, label="baseline")
        for row in frame.itertuples(index=False):
            name = str(row.run).rsplit("/", 1)[-1]  # a sweep member's own name is enough here
            ax.annotate(name, (getattr(row, cost), row.quality), fontsize=7, xytext=(4, 3), textcoords="offset points")
        ax.set(xlabel=label, ylabel=comparison.primary, title=f"{comparison.primary} vs {label}")
        ax.margins(x=0.25, y=0.15)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small", loc="best")
    return figure


def figures(comparison: Comparison) -> dict[str, Figure]:
    """Every figure of a comparison, by PNG file name."""
    out = {
        "query_deltas.png": figure_query_deltas(comparison),
        "slices.png": figure_slices(comparison),
        "recall_at_k.png": figure_recall(comparison),
        "latency.png": figure_latency(comparison),
    }
    if not comparison.frontier.empty:
        out["frontier.png"] = figure_frontier(comparison)
    return out
