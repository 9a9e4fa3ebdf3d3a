"""Comparison tables, per-query diffs, figures and the gate's decision: pure functions over the
values sealed runs hold (:mod:`rageval.analysis.records`). Reading runs back from the store is
:mod:`rageval.workflows.readback`'s job.

- ``comparability``: whether two runs' numbers mean the same thing (the one check)
- ``paired``: per-query scores paired by query ID; the paired test and its Holm family
- ``tables``: significance per run × slice × measure, per-query deltas, stages, the frontier
- ``diffs``: rankings as their measures saw them, the recall curve, gains and losses explained
- ``compare``: :class:`ComparisonInputs` → :class:`Comparison` (its :class:`Statistics` settings), and its displays
- ``plots``: matplotlib figures of a comparison and of one run (matplotlib loaded on use)
- ``gate``: the decision a release policy gives; ``gate_policy`` the policy model,
  ``gate_latency`` the latency rules, ``noninferiority`` the margin rules
- ``rbo``: rank-biased overlap, Jaccard@k and top-1 change of two rankings (no judgments needed)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rageval.lazy import exports

# name -> the module that defines it; each loads on first use
_EXPORTS = {
    "FORMATS": "rageval.analysis.formats",
    "render": "rageval.analysis.export",
    "results_table": "rageval.analysis.export",
    "CHUNKING_TAG": "rageval.analysis.comparability",
    "CONTRACT_PARAM": "rageval.analysis.comparability",
    "CONTRACT_PARAMS": "rageval.analysis.comparability",
    "CONTRACT_TAGS": "rageval.analysis.comparability",
    "check_comparable": "rageval.analysis.comparability",
    "differences": "rageval.analysis.comparability",
    "short_value": "rageval.analysis.comparability",
    "Comparison": "rageval.analysis.comparison",
    "ComparisonInputs": "rageval.analysis.comparison",
    "Statistics": "rageval.analysis.comparison",
    "compare": "rageval.analysis.comparison",
    "labels_for": "rageval.analysis.comparison",
    "overall_display": "rageval.analysis.comparison",
    "significance_display": "rageval.analysis.comparison",
    "slices_display": "rageval.analysis.comparison",
    "Judgments": "rageval.analysis.diffs",
    "diff_table": "rageval.analysis.diffs",
    "explain_query": "rageval.analysis.diffs",
    "ordered": "rageval.analysis.diffs",
    "recall_curve": "rageval.analysis.diffs",
    "RELEASE_SPLIT": "rageval.analysis.gate",
    "Decision": "rageval.analysis.gate",
    "GatePolicy": "rageval.analysis.gate",
    "MeasureRule": "rageval.analysis.gate",
    "RuleResult": "rageval.analysis.gate",
    "SliceRule": "rageval.analysis.gate",
    "Verdict": "rageval.analysis.gate",
    "check_policy_against": "rageval.analysis.gate",
    "decide": "rageval.analysis.gate",
    "load_policy": "rageval.analysis.gate",
    "release_warning": "rageval.analysis.gate",
    "require_release": "rageval.analysis.gate",
    "LOSS_RULES": "rageval.analysis.gate_policy",
    "NONINFERIORITY_RULES": "rageval.analysis.gate_policy",
    "RBO": "rageval.analysis.rbo",
    "jaccard_at": "rageval.analysis.rbo",
    "rank_biased_overlap": "rageval.analysis.rbo",
    "top1_changed": "rageval.analysis.rbo",
    "ALL": "rageval.analysis.paired",
    "query_slices": "rageval.analysis.paired",
    "wide_scores": "rageval.analysis.paired",
    "figure_frontier": "rageval.analysis.plots",
    "figure_latency": "rageval.analysis.plots",
    "figure_query_deltas": "rageval.analysis.plots",
    "figure_recall": "rageval.analysis.plots",
    "figure_slices": "rageval.analysis.plots",
    "figures": "rageval.analysis.plots",
    "overview": "rageval.analysis.plots",
    "frontier_table": "rageval.analysis.tables",
    "pareto": "rageval.analysis.tables",
    "per_query_deltas": "rageval.analysis.tables",
    "significance_table": "rageval.analysis.tables",
    "stage_table": "rageval.analysis.tables",
    "total_p95_ms": "rageval.analysis.tables",
}
__all__ = [
    "FORMATS",
    "render",
    "results_table",
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
    "LOSS_RULES",
    "MeasureRule",
    "NONINFERIORITY_RULES",
    "RBO",
    "RELEASE_SPLIT",
    "RuleResult",
    "SliceRule",
    "Statistics",
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
    "jaccard_at",
    "labels_for",
    "load_policy",
    "ordered",
    "overall_display",
    "overview",
    "pareto",
    "per_query_deltas",
    "query_slices",
    "rank_biased_overlap",
    "recall_curve",
    "release_warning",
    "require_release",
    "short_value",
    "significance_display",
    "significance_table",
    "slices_display",
    "stage_table",
    "top1_changed",
    "total_p95_ms",
    "wide_scores",
]
__getattr__, __dir__ = exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from rageval.analysis.comparability import (
        CHUNKING_TAG,
        CONTRACT_PARAM,
        CONTRACT_PARAMS,
        CONTRACT_TAGS,
        check_comparable,
        differences,
        short_value,
    )
    from rageval.analysis.comparison import (
        Comparison,
        ComparisonInputs,
        Statistics,
        compare,
        labels_for,
        overall_display,
        significance_display,
        slices_display,
    )
    from rageval.analysis.diffs import Judgments, diff_table, explain_query, ordered, recall_curve
    from rageval.analysis.export import render, results_table
    from rageval.analysis.formats import FORMATS
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
    from rageval.analysis.gate_policy import LOSS_RULES, NONINFERIORITY_RULES
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
    from rageval.analysis.rbo import RBO, jaccard_at, rank_biased_overlap, top1_changed
    from rageval.analysis.tables import (
        frontier_table,
        pareto,
        per_query_deltas,
        significance_table,
        stage_table,
        total_p95_ms,
    )
