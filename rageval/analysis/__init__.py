"""Comparison tables, per-query diffs, figures and the gate's decision: pure functions over the
values sealed runs hold (:mod:`rageval.analysis.records`). Reading runs back from the store is
:mod:`rageval.workflows.readback`'s job.

- ``comparability``: whether two runs' numbers mean the same thing (the one check)
- ``paired``: per-query scores paired by query ID; the paired test and its Holm family
- ``tables``: significance per run × slice × measure, per-query deltas, stages, the frontier
- ``diffs``: rankings as their measures saw them, the recall curve, gains and losses explained
- ``compare``: :class:`ComparisonInputs` → :class:`Comparison`, and its displays
- ``plots``: matplotlib figures of a comparison and of one run (matplotlib loaded on use)
- ``gate``: the release policy and the decision it gives
"""

from __future__ import annotations

from rageval.analysis.comparability import (
    CHUNKING_TAG,
    CONTRACT_PARAM,
    CONTRACT_PARAMS,
    CONTRACT_TAGS,
    check_comparable,
    differences,
    short_value,
)
from rageval.analysis.compare import (
    Comparison,
    ComparisonInputs,
    compare,
    labels_for,
    overall_display,
    significance_display,
    slices_display,
)
from rageval.analysis.diffs import Judgments, diff_table, explain_query, ordered, recall_curve
from rageval.analysis.gate import (
    RELEASE_SPLIT,
    Decision,
    GatePolicy,
    MeasureRule,
    RuleResult,
    SliceRule,
    Verdict,
    check_policy_against,
    decide,
    load_policy,
    release_warning,
    require_release,
)
from rageval.analysis.paired import ALL, query_slices, wide_scores
from rageval.analysis.plots import (
    figure_frontier,
    figure_latency,
    figure_query_deltas,
    figure_recall,
    figure_slices,
    figures,
    overview,
)
from rageval.analysis.tables import (
    frontier_table,
    pareto,
    per_query_deltas,
    significance_table,
    stage_table,
    total_p95_ms,
)

__all__ = [
    "ALL",
    "CHUNKING_TAG",
    "CONTRACT_PARAM",
    "CONTRACT_PARAMS",
    "CONTRACT_TAGS",
    "Comparison",
    "ComparisonInputs",
    "Decision",
    "GatePolicy",
    "Judgments",
    "MeasureRule",
    "RELEASE_SPLIT",
    "RuleResult",
    "SliceRule",
    "Verdict",
    "check_comparable",
    "check_policy_against",
    "compare",
    "decide",
    "diff_table",
    "differences",
    "explain_query",
    "figure_frontier",
    "figure_latency",
    "figure_query_deltas",
    "figure_recall",
    "figure_slices",
    "figures",
    "frontier_table",
    "labels_for",
    "load_policy",
    "ordered",
    "overall_display",
    "overview",
    "pareto",
    "per_query_deltas",
    "query_slices",
    "recall_curve",
    "release_warning",
    "require_release",
    "short_value",
    "significance_display",
    "significance_table",
    "slices_display",
    "stage_table",
    "total_p95_ms",
    "wide_scores",
]
