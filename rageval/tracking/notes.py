"""The descriptions rageval writes on its experiments and runs (``mlflow.note.content``, shown by
the MLflow UI): what an experiment holds, and one paragraph per evaluation, comparison or gate run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from rageval.tracking.records import sweep_parent


def experiment_note(name: str) -> str:
    """The description of an experiment rageval creates (the UI opens on runs, not traces)."""
    return (
        f"rageval evaluations of retrieval on **{name}**. Each run is sealed and has a `rageval.kind` tag: "
        "`evaluation` (one configuration on one split: headline metrics, `tables/` breakdowns, `figures/`, "
        "the executed notebook as HTML), `sweep` (a parent of evaluation runs), `comparison` (a baseline against "
        "candidates), `gate` (a release decision) or `reproduction`. Add metric columns to the runs table with "
        '"Columns"; a run\'s description says what it is. Verify a run with `rageval verify RUN`.'
    )


def _number(value: object) -> str:
    try:
        return f"{float(value):.4f}"  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(value)


def evaluation_note(tags: Mapping[str, str], headline: Mapping[str, float]) -> str:
    """One paragraph: which configuration, on which benchmark version and split, and how it scored."""
    scores = ", ".join(f"{name} {_number(value)}" for name, value in headline.items())
    sweep = (
        f" Member `{tags['rageval.sweep.member']}` of sweep run `{sweep_parent(tags)}`."
        if ("rageval.sweep.member" in tags and sweep_parent(tags))
        else ""
    )
    return (
        f"Evaluation of configuration **{tags.get('rageval.config.label', tags.get('rageval.config.name', '?'))}** "
        f"(`{tags.get('rageval.config.file', '?')}`) on benchmark **{tags.get('rageval.benchmark.name', '?')}** "
        f"version {tags.get('rageval.benchmark.version', '?')}, split `{tags.get('rageval.split', '?')}`, "
        f"{tags.get('rageval.level', '?')} level.{sweep} Headline: {scores or 'see the metrics'}. Breakdowns are in "
        "`tables/`, figures in `figures/`, the executed notebook in `notebook/` (HTML beside the .ipynb)."
    )


def comparison_note(baseline: str, candidates: Sequence[str], deltas: Mapping[str, float], sweep: str | None) -> str:
    """One paragraph: the baseline, the candidates, and each candidate's deltas (``RUN/MEASURE`` →
    delta, as in ``tables/deltas``)."""
    shown = ", ".join(f"`{k}` {v:+.4f}" for k, v in list(deltas.items())[:12])
    more = f" and {len(deltas) - 12} more" if len(deltas) > 12 else ""
    where = f" Belongs to sweep run `{sweep}`." if sweep else ""
    return (
        f"Comparison of baseline **{baseline}** (tag `rageval.baseline`) against {len(candidates)} "
        f"candidate(s): {', '.join(candidates[:6])}{' …' if len(candidates) > 6 else ''}.{where} "
        f"Deltas (candidate − baseline): {shown or 'none'}{more}. Every delta with its Holm p-value is the table "
        "tables/deltas; the results table is results.md; per-query differences in per_query_diff.csv; figures in figures/."
    )


def gate_note(candidate: str, baseline: str, verdict: str, rules: pd.DataFrame) -> str:
    """The gate's verdict in a sentence, then its rule table as Markdown."""
    header = "| " + " | ".join(str(c) for c in rules.columns) + " |"
    rows = [
        "| " + " | ".join(str(v).replace("|", "\\|").replace("\n", " ") for v in row) + " |"
        for row in rules.itertuples(index=False)
    ]
    table = "\n".join([header, "|" + "---|" * len(rules.columns), *rows])
    return f"Release gate of candidate **{candidate}** against baseline **{baseline}**: **{verdict}**.\n\n{table}"
