"""Figures of a comparison and of one evaluation run: pure functions from results to matplotlib
figures. matplotlib is imported inside each function, so that importing :mod:`rageval.analysis`
(every comparison and gate does) does not load it; only notebooks draw."""

from __future__ import annotations

import io
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from rageval.analysis.comparison import Comparison
from rageval.analysis.diffs import ordered, recall_curve
from rageval.experiment.run import ExperimentResult
from rageval.safety import strip_control

if TYPE_CHECKING:
    from matplotlib.figure import Figure

_COLORS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c", "#ccb974", "#64b5cd"]


def _color(i: int) -> str:
    return _COLORS[i % len(_COLORS)]


def _label(text: object) -> str:
    """Untrusted text (a slice label, a run name) as matplotlib shows it literally: no control
    characters, no mathtext (``$`` escaped), and never hidden from a legend (a leading ``_``)."""
    shown = strip_control(str(text)).replace("$", r"\$")
    return f" {shown}" if shown.startswith("_") else shown


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
            title=f"{_label(run)} − {_label(comparison.baseline)}: {measure} per query (win/tie/loss {wins}/{ties}/{losses})",
            xlabel="queries, sorted by delta",
            ylabel=f"Δ {measure}",
            xlim=(-0.5, max(len(delta), 1) - 0.5),
        )
    return figure


def figure_slices(comparison: Comparison, measure: str | None = None) -> Figure:
    """One measure per slice for every run, slice labels with their query counts."""
    measure = measure or comparison.primary
    return _slice_bars(
        comparison.slice_view(measure),
        [comparison.baseline, *comparison.candidates],
        xlabel=measure,
        title=f"{measure} by slice (n = queries evaluated)",
    )


def figure_recall(comparison: Comparison) -> Figure:
    """Recall@k over k for every run."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import FormatStrFormatter

    figure = Figure(figsize=(8, 4.2), layout="constrained")
    ax = figure.subplots()
    for i, (run, part) in enumerate(comparison.recall.groupby("run", sort=False)):
        ax.plot(part["k"], part["recall"], color=_color(i), label=_label(run), linewidth=1.8)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))  # 1, 10, 100 rather than powers of ten
    ax.set(xlabel="k (log scale)", ylabel="mean Recall@k", ylim=(0, 1.02), title="Recall@k over k")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize="small")
    return figure


def figure_latency(comparison: Comparison) -> Figure:
    """Per-query latency of each stage, per run (milliseconds, log scale where every value is positive)."""
    frame = comparison.latency
    runs = [comparison.baseline, *comparison.candidates]
    return _latency_boxes({run: frame[frame["run"] == run] for run in runs}, "Latency per stage")


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
            ax.annotate(
                _label(name), (getattr(row, cost), row.quality), fontsize=7, xytext=(4, 3), textcoords="offset points"
            )
        ax.set(xlabel=label, ylabel=comparison.primary, title=f"{comparison.primary} vs {label}")
        if _spans_decades(frame[cost]):  # a linear axis would squash the cheap members onto 0
            ax.set_xscale("log")
            ax.set_xlabel(f"{label}, log scale")
        ax.margins(x=0.25, y=0.15)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small", loc="best")
    return figure


def _spans_decades(values: pd.Series) -> bool:
    """Whether positive costs differ by more than ten times: then a log axis separates the members."""
    finite = values[np.isfinite(values.astype(float))]
    return bool(len(finite) > 1 and (finite > 0).all() and finite.max() > 10 * finite.min())


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


def overview(result: ExperimentResult, measure: str | None = None) -> Figure:
    """Per-query distribution of one measure and its mean per slice."""
    from matplotlib.figure import Figure

    measure = measure or result.evaluation.measures[0].text
    figure = Figure(figsize=(11, 3.8), layout="constrained")
    left, right = figure.subplots(1, 2, width_ratios=[1, 1.6])
    values = result.evaluation.per_query[measure].dropna()
    _histogram(left, values, measure)
    slices = result.slices[measure].dropna().sort_values()
    shown = [f"{_label(s)} ({result.slices.loc[s, 'queries']})" for s in slices.index]
    right.barh(np.arange(len(shown)), slices.to_numpy(), color="#55a868")
    right.set_yticks(np.arange(len(shown)), shown)
    right.axvline(values.mean() if len(values) else 0, color="black", linestyle="--", linewidth=1, label="all queries")
    right.set(title=f"{measure} by slice (queries)", xlim=(0, 1), xlabel=measure)
    right.legend(loc="lower right")
    return figure


# --------------------------------------------------------------------------- one evaluation run


def figure_distribution(result: ExperimentResult, measure: str | None = None) -> Figure:
    """How the primary measure is distributed over the evaluated queries."""
    from matplotlib.figure import Figure

    measure = measure or result.evaluation.measures[0].text
    figure = Figure(figsize=(7, 3.8), layout="constrained")
    _histogram(figure.subplots(), result.evaluation.per_query[measure].dropna(), measure)
    return figure


def figure_run_slices(result: ExperimentResult) -> Figure:
    """Each configured measure per slice."""
    measures = [m.text for m in result.evaluation.measures if m.text in result.slices.columns]
    return _slice_bars(
        result.slices,
        measures,
        xlabel="mean over the slice's evaluated queries",
        title="Measures by slice (n = queries)",
    )


def figure_recall_at_k(result: ExperimentResult) -> Figure | None:
    """Mean Recall@k at every k from 1 to the ranking's depth (log scale), the configured R@k cut-offs
    marked; ``None`` when no query has a relevant item."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import FormatStrFormatter

    judged = list(result.evaluation.per_query.index)  # a run's evaluated queries each have relevant evidence
    if not judged or result.rankings.empty:
        return None
    ranking = ordered(result.rankings, result.config, result.level)
    depth = int(ranking.groupby("query_id").size().max())
    curve = recall_curve(ranking, result.qrels, judged, range(1, depth + 1), result.config.evaluation.relevance)
    figure = Figure(figsize=(7, 3.8), layout="constrained")
    ax = figure.subplots()
    ax.plot(curve.index, curve.to_numpy(), color=_color(0), linewidth=1.8)
    marks = {
        int(m.text[2:]): result.evaluation.aggregates[m.text]
        for m in result.evaluation.measures
        if m.text[2:].isdigit() and m.text.startswith("R@")
    }
    if marks:
        ax.plot(list(marks), list(marks.values()), "o", color=_color(0), label="configured R@k")
        ax.legend(loc="lower right", fontsize="small")
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))  # 1, 10, 100 rather than powers of ten
    ax.set(
        xlabel="k (log scale)",
        ylabel="mean Recall@k",
        ylim=(0, 1.02),
        title=f"Recall@k, k = 1…{depth} (n={len(judged)})",
    )
    ax.grid(True, which="both", alpha=0.3)
    return figure


def figure_run_latency(result: ExperimentResult) -> Figure:
    """Per-query latency of each stage, step, fetch and total (milliseconds)."""
    return _latency_boxes({"": result.latency}, "Latency by stage")


# The figures of one evaluation run, by PNG file name (``figures/NAME`` in the run); Recall@k's
# drawer gives None where no query has a relevant item.
_RUN_FIGURES: dict[str, Callable[[ExperimentResult], Figure | None]] = {
    "distribution.png": figure_distribution,
    "slices.png": figure_run_slices,
    "latency.png": figure_run_latency,
    "recall_at_k.png": figure_recall_at_k,
}
EVALUATION_FIGURES = tuple(_RUN_FIGURES)


def evaluation_pngs(result: ExperimentResult, skip: Collection[str] = ()) -> dict[str, bytes]:
    """Every figure of one evaluation run (:data:`EVALUATION_FIGURES`) as the PNG it records, by file
    name, but those named in ``skip`` (drawn already)."""
    drawn = {name: draw(result) for name, draw in _RUN_FIGURES.items() if name not in skip}
    return {name: png(figure) for name, figure in drawn.items() if figure is not None}


def png(figure: Figure) -> bytes:
    """A figure as the PNG file a run records."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    return buffer.getvalue()


# --------------------------------------------------------------------------- shared drawing


def _slice_bars(view: pd.DataFrame, groups: Sequence[str], *, xlabel: str, title: str) -> Figure:
    """Horizontal bars per slice, one per group (runs of a comparison, or measures of one run);
    slices without an evaluated query are left out and the legend stands outside the bars."""
    from matplotlib.figure import Figure

    view = view[view["queries"] > 0].dropna(how="all", subset=list(groups))
    figure = Figure(figsize=(10, 0.35 * max(len(view), 1) * max(1, len(groups) / 2) + 1.4), layout="constrained")
    ax = figure.subplots()
    height = 0.8 / max(len(groups), 1)
    positions = np.arange(len(view))[::-1]
    for i, group in enumerate(groups):
        ax.barh(
            positions + (len(groups) / 2 - i - 0.5) * height,
            view[group].to_numpy(dtype=float),
            height=height,
            color=_color(i),
            label=_label(group),
        )
    ax.set_yticks(positions, [f"{_label(s)} (n={int(n)})" for s, n in zip(view.index, view["queries"], strict=True)])
    ax.set(xlim=(0, 1), xlabel=xlabel, title=title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    return figure


def _latency_boxes(frames: Mapping[str, pd.DataFrame], title: str) -> Figure:
    """Boxes of per-query milliseconds per stage, one box per group and stage (a legend when there
    are several groups); log scale only where every value is positive."""
    from matplotlib.figure import Figure

    stages = list(dict.fromkeys(s for frame in frames.values() for s in frame["stage"]))
    figure = Figure(figsize=(min(14, max(7, 0.5 * len(stages) * len(frames) + 3)), 4.4), layout="constrained")
    ax = figure.subplots()
    width = 0.8 / max(len(frames), 1)
    positive = True
    for i, (group, frame) in enumerate(frames.items()):
        data = [frame[frame["stage"] == s]["seconds"].to_numpy() * 1000 for s in stages]
        positive = positive and all(d.size == 0 or d.min() > 0 for d in data)
        boxes = ax.boxplot(
            [d if d.size else np.array([np.nan]) for d in data],
            positions=np.arange(len(stages)) + (i - (len(frames) - 1) / 2) * width,
            widths=width * 0.9,
            patch_artist=True,
            showfliers=False,
            manage_ticks=False,
        )
        for box in boxes["boxes"]:
            box.set(facecolor=_color(i), alpha=0.75)
        if len(frames) > 1:
            ax.plot([], [], color=_color(i), linewidth=6, label=_label(group))
    ax.set_xticks(np.arange(len(stages)), [_label(s) for s in stages], rotation=20 if len(stages) > 4 else 0)
    if stages and positive:
        ax.set_yscale("log")
    ax.set(ylabel="ms per query", title=f"{title} (boxes: quartiles, whiskers: 1.5 IQR)")
    if len(frames) > 1:
        ax.legend(fontsize="small")
    return figure


def _histogram(ax: Any, values: pd.Series, measure: str) -> None:
    """Per-query values of one measure in [0, 1], their mean marked; counts get integer ticks."""
    from matplotlib.ticker import MaxNLocator

    ax.hist(values, bins=20, range=(0, 1), color="#4c72b0")
    if len(values):
        ax.axvline(values.mean(), color="black", linestyle="--", linewidth=1, label=f"mean {values.mean():.3f}")
        ax.legend(loc="upper center", fontsize="small")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set(title=f"{measure} per query (n={len(values)})", xlabel=measure, ylabel="queries", xlim=(0, 1))
