"""Figures for notebooks: pure functions from results to matplotlib figures."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from rageval.experiment.run import ExperimentResult


def overview(result: ExperimentResult, measure: str | None = None) -> Figure:
    """Per-query distribution of one measure and its mean per slice."""
    from matplotlib.figure import Figure

    measure = measure or result.evaluation.measures[0].text
    figure = Figure(figsize=(11, 3.8), layout="constrained")
    left, right = figure.subplots(1, 2, width_ratios=[1, 1.6])
    values = result.evaluation.per_query[measure].dropna()
    left.hist(values, bins=20, range=(0, 1), color="#4c72b0")
    left.set(title=f"{measure} per query (n={len(values)})", xlabel=measure, ylabel="queries")
    slices = result.slices[measure].dropna().sort_values()
    right.barh([f"{s} ({result.slices.loc[s, 'queries']})" for s in slices.index], slices.to_numpy(), color="#55a868")
    right.axvline(values.mean() if len(values) else 0, color="black", linestyle="--", linewidth=1, label="all queries")
    right.set(title=f"{measure} by slice (queries)", xlim=(0, 1), xlabel=measure)
    right.legend(loc="lower right")
    return figure
