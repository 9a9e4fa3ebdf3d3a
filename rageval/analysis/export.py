"""The comparison's results as one table people paste into papers and PRs: each run's quality
measures, rounded, marked where the difference from the baseline is significant (Holm-corrected),
beside its p95 latency and mean context tokens — as text, Markdown or LaTeX."""

from __future__ import annotations

import html

import pandas as pd

from rageval.analysis.comparison import Comparison
from rageval.analysis.formats import Format
from rageval.safety import strip_control

# Significantly better / worse than the baseline, per format.
_MARKS = {"text": ("▲", "▼"), "markdown": ("▲", "▼"), "latex": (r"$^{\uparrow}$", r"$^{\downarrow}$")}


def results_table(
    comparison: Comparison, *, digits: int = 4, alpha: float = 0.05, form: Format = "text"
) -> pd.DataFrame:
    """One row per run (the baseline first), one column per measure (its mean over every evaluated
    query), then p95 latency (ms), mean context tokens and, at passage level, the evidence recall and
    precision in the context (docs/metric-contract.md, ``evidence``). A candidate's mean is marked when its
    paired randomization test, Holm-corrected over measures × slices (one family per level), gives p below ``alpha``."""
    better, worse = _MARKS[form]
    overall = comparison.overall.set_index(["run", "measure"])
    runs = [comparison.baseline, *comparison.candidates]
    costs = comparison.costs.set_index("run") if not comparison.costs.empty else pd.DataFrame()
    rows = []
    for run in runs:
        row: dict[str, str] = {"run": run}
        for measure in comparison.measures:
            cell = overall.loc[(run, measure)]
            mean = cell["mean"]
            text = "–" if pd.isna(mean) else f"{mean:.{digits}f}"
            if run != comparison.baseline and pd.notna(cell["p_holm"]) and cell["p_holm"] < alpha:
                text += better if cell["delta"] > 0 else worse
            row[measure] = text
        for column, name, fmt in (
            ("p95_ms", "p95 ms", "{:.1f}"),
            ("context_tokens", "context tokens", "{:.0f}"),
            ("evidence_recall", "evidence recall", f"{{:.{digits}f}}"),
            ("evidence_precision", "evidence precision", f"{{:.{digits}f}}"),
        ):
            if column.startswith("evidence") and (column not in costs or costs[column].isna().all()):
                continue  # document-level runs: no evidence columns
            value = costs[column].get(run) if column in costs else None
            row[name] = "–" if value is None or pd.isna(value) else fmt.format(value)
        rows.append(row)
    return pd.DataFrame(rows).set_index("run")


def legend(alpha: float = 0.05, form: Format = "text") -> str:
    better, worse = _MARKS[form]
    return (
        f"{better} / {worse}: better / worse than the baseline (paired randomization test, Holm-corrected "
        f"over measures and slices, p < {alpha}); means over each run's evaluated queries."
    )


def latency_note(comparison: Comparison) -> str:
    """What the p95 column means: each run's recorded figure with the clock it was read on and the
    load it ran under (never a paired timing of the two; ``rageval gate`` times a pair interleaved)."""
    costs = comparison.costs
    if costs.empty or "latency" not in costs:
        return ""
    meant = "; ".join(f"{run}: {text}" for run, text in zip(costs["run"], costs["latency"], strict=True))
    return (
        f"p95 ms: each run's recorded p95, timed on its own, not a paired timing ({meant}). "
        "Timed beside other work a figure is noise; `rageval gate` times the pair interleaved: the paired p95 "
        "ratio with its 95% interval is the gate run's results.md and its metric p95_cpu_ratio (p95_wall_ratio "
        "on the wall clock), in the experiment rageval-release."
    )


def render(comparison: Comparison, form: Format = "text", *, digits: int = 4, alpha: float = 0.05) -> str:
    """The results table in ``form``, with its legend and what its latency means."""
    table = results_table(comparison, digits=digits, alpha=alpha, form=form)
    note = latency_note(comparison)
    if form == "markdown":
        return f"{_markdown(table)}\n\n{legend(alpha, form)}\n" + (f"\n{_markdown_text(note)}\n" if note else "")
    if form == "latex":
        body = table.rename(index=_latex_text, columns=_latex_text).map(_latex_cell)
        latex = body.style.to_latex(hrules=True, column_format="l" + "r" * len(body.columns))
        return f"{latex}% {legend(alpha, form)}\n" + (
            f"% {strip_control(note).replace(chr(10), ' ')}\n" if note else ""
        )
    return f"{table.to_string()}\n{legend(alpha, form)}\n" + (f"{note}\n" if note else "")


def _markdown_text(text: str) -> str:
    """A line of Markdown from text with run names in it: control characters out, HTML escaped."""
    return html.escape(strip_control(text), quote=False).replace("\n", " ")


def _markdown(table: pd.DataFrame) -> str:
    def cell(value: object) -> str:
        # HTML escaped too: a notebook renders Markdown, and run names are text users wrote.
        return html.escape(strip_control(str(value)), quote=False).replace("|", r"\|").replace("\n", " ")

    header = [table.index.name or "", *table.columns]
    lines = [
        "| " + " | ".join(cell(h) for h in header) + " |",
        "|" + "|".join(["---"] + ["---:"] * len(table.columns)) + "|",
    ]
    for index, row in table.iterrows():
        lines.append("| " + " | ".join(cell(v) for v in (index, *row.tolist())) + " |")
    return "\n".join(lines)


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def _latex_text(value: object) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in strip_control(str(value)))


def _latex_cell(value: object) -> str:
    # Marks are LaTeX already; the number before them has nothing to escape.
    text = str(value)
    return text if "$" in text else _latex_text(text).replace("–", "--")
