"""The ir-measures bridge: measures the native engine does not take, computed by ir-measures on the
run in the decided order, each recorded with the ir-measures provider that computed it."""

from __future__ import annotations

import ir_measures
import numpy as np

from rageval.evaluation.measures import Measure, param
from rageval.evaluation.ordering import Ranked
from rageval.evaluation.qrels import Judgments


def effective_measure(
    measure: ir_measures.measures.Measure, relevance: int, gain: str, grades: np.ndarray
) -> ir_measures.measures.Measure:
    """The ir-measures object computing ``measure`` under the contract's options."""
    if "rel" in measure.SUPPORTED_PARAMS and "rel" not in measure.params and relevance != 1:
        measure = measure(rel=relevance)
    if measure.NAME == "nDCG" and gain == "exp" and param(measure, "gains") is None:
        measure = measure(gains={int(g): 2 ** int(g) - 1 if g > 0 else 0 for g in np.unique(grades)})
    return measure


def provider_name(measure: ir_measures.measures.Measure) -> str:
    """``ir_measures:<provider>``: the first available ir-measures provider that supports ``measure``."""
    for candidate in ir_measures.DefaultPipeline.providers:
        if candidate.is_available() and candidate.supports(measure):
            return f"ir_measures:{candidate.NAME}"
    return "ir_measures"


def ir_measures_values(
    measures: list[Measure],
    ranked: Ranked,
    judgments: Judgments,
    codes: np.ndarray,
    relevance: int,
    gain: str,
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Values of ``measures`` through ir-measures, per evaluated query (the query codes ``codes``),
    and the provider of each; keyed by measure text."""
    effective = {m.text: effective_measure(m.measure, relevance, gain, judgments.grade) for m in measures}
    names = {text: provider_name(e) for text, e in effective.items()}
    evaluated = ranked.queries[codes]
    values = {text: np.zeros(len(codes)) for text in effective}
    if not len(codes):
        return values, names
    chosen = np.flatnonzero(np.isin(ranked.query, codes))
    # Strictly decreasing scores carry the decided order; ir-measures' own tie rule never applies.
    run: dict[str, dict[str, float]] = {}
    for q, d, r in zip(ranked.queries[ranked.query[chosen]], ranked.doc_ids(chosen), ranked.rank[chosen], strict=True):
        run.setdefault(q, {})[d] = -float(r)
    wanted = set(evaluated.tolist())
    qrels: dict[str, dict[str, int]] = {}
    for q, d, g in zip(judgments.query, judgments.doc, judgments.grade, strict=True):
        if q in wanted:
            qrels.setdefault(q, {})[d] = int(g)
    position = {q: i for i, q in enumerate(evaluated)}
    # Under the options two measures as written can become one (R@5 with relevance=2 is R(rel=2)@5).
    by_definition: dict[str, list[str]] = {}
    for text, e in effective.items():
        by_definition.setdefault(repr(e), []).append(text)
    unique = {repr(e): e for e in effective.values()}
    evaluator = ir_measures.evaluator(list(unique.values()), qrels)
    for metric in evaluator.iter_calc(run):
        for text in by_definition[repr(metric.measure)]:
            values[text][position[metric.query_id]] = float(metric.value)
    return values, names
