"""The native engine: rank-based measures computed with numpy over the judged rows of a ranked run.

:data:`NATIVE_MEASURES` is its registry, as ir-measures registers providers: an ir-measures family
name → a :class:`NativeMeasure` that declares the parameters it takes and computes one value per
query from the shared :class:`Context`. A measure is computed here when its family is registered,
a cutoff it needs is given, and every other parameter is at its ir-measures default
(:func:`supports`); otherwise the ir-measures bridge computes it. A new native measure is one entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import ir_measures
import numpy as np

from rageval.evaluation.measures import param, param_default
from rageval.evaluation.ordering import Ranked, ranks
from rageval.evaluation.qrels import Graded

NATIVE = "rageval"  # the provider name an Evaluation records for measures computed here


def gain_values(grade: np.ndarray, gain: str) -> np.ndarray:
    """nDCG's gain of each grade under the contract's ``gain`` option; grades <= 0 gain nothing."""
    positive = np.maximum(grade, 0).astype(np.float64)
    return np.exp2(positive) - 1.0 if gain == "exp" else positive


def divide(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """``numerator / denominator``, 0 where the denominator is 0."""
    out = np.zeros_like(numerator, dtype=np.float64)
    np.divide(numerator, denominator, out=out, where=denominator > 0)
    return out


class Context:
    """Everything the native measures read, per query code of the ranked run; caches what repeats.

    Rows are the judged retrieved rows (their rank and grade); items are the judged items (their
    grade, and the rank of the row credited with each): a judgment matched by ID, or a judged span
    (:mod:`rageval.evaluation.spans`). Counting relevant rows or relevant credited items is the same
    when each row holds one item, as under ID matching.
    """

    def __init__(self, ranked: Ranked, graded: Graded, relevance: int, gain: str) -> None:
        self.ranked = ranked
        self.size = len(ranked.queries)
        self.lengths = ranked.lengths.astype(np.float64)
        self.relevance = relevance
        self.gain = gain
        self.row = graded.row  # judged retrieved rows' kept-row positions, in ranked order
        self.query = ranked.query[graded.row]
        self.rank = ranked.rank[graded.row]
        self.grade = graded.row_grade
        in_run = graded.item_code >= 0
        self.judged_query = graded.item_code[in_run]
        self.judged_grade = graded.item_grade[in_run]
        credited = graded.item_row >= 0
        self.item_row = graded.item_row[credited]
        self.item_query = ranked.query[self.item_row]
        self.item_rank = ranked.rank[self.item_row]
        self.item_grade = graded.item_grade[credited]
        self._relevant: dict[int, np.ndarray] = {}
        self._ideal: dict[int | None, np.ndarray] = {}

    def credited(self, threshold: int, cutoff: int | None) -> np.ndarray:
        """Relevant items (at ``threshold``) credited to a row within the first ``cutoff``, per query."""
        mask = self.item_grade >= threshold
        if cutoff is not None:
            mask &= self.item_rank <= cutoff
        return np.bincount(self.item_query[mask], minlength=self.size).astype(np.float64)

    def count(self, mask: np.ndarray) -> np.ndarray:
        """Judged retrieved rows per query where ``mask`` holds."""
        return np.bincount(self.query[mask], minlength=self.size).astype(np.float64)

    def within(self, cutoff: int | None) -> np.ndarray:
        """Which judged retrieved rows are in the first ``cutoff`` (all of them for None)."""
        return self.rank <= cutoff if cutoff is not None else np.ones(len(self.rank), dtype=bool)

    def relevant(self, threshold: int) -> np.ndarray:
        """Relevant items in the qrels per query, at ``threshold``."""
        if threshold not in self._relevant:
            chosen = self.judged_query[self.judged_grade >= threshold]
            self._relevant[threshold] = np.bincount(chosen, minlength=self.size).astype(np.float64)
        return self._relevant[threshold]

    def ideal(self, cutoff: int | None) -> np.ndarray:
        """DCG of the ideal ordering of each query's judged grades, to ``cutoff``."""
        if cutoff not in self._ideal:
            gains = gain_values(self.judged_grade, self.gain)
            positive = gains > 0
            query, gains = self.judged_query[positive], gains[positive]
            order = np.lexsort((-gains, query))
            query, gains = query[order], gains[order]
            position = ranks(query)
            within = position <= cutoff if cutoff is not None else np.ones(len(position), dtype=bool)
            weights = gains[within] / np.log2(position[within] + 1.0)
            self._ideal[cutoff] = np.bincount(query[within], weights=weights, minlength=self.size)
        return self._ideal[cutoff]


# One value per query code of the ranked run (queries without judgments included), from the context,
# the measure's cutoff (None: none given) and its relevance threshold (its rel=, else the evaluation's).
Values = Callable[[Context, int | None, int], np.ndarray]


@dataclass(frozen=True)
class NativeMeasure:
    """How the native engine computes one ir-measures family."""

    values: Values
    params: frozenset[str]  # the parameters it takes; any other must stay at its ir-measures default
    needs_cutoff: bool = False  # defined here at a cutoff only (P divides by k): uncut forms go to ir-measures


def _precision(ctx: Context, cutoff: int | None, threshold: int) -> np.ndarray:
    # Divides by the cutoff, not by what was retrieved (the contract's fewer_than_k rule); needs_cutoff
    # guarantees one.
    return ctx.count((ctx.grade >= threshold) & ctx.within(cutoff)) / cutoff


def _recall(ctx: Context, cutoff: int | None, threshold: int) -> np.ndarray:
    return divide(ctx.credited(threshold, cutoff), ctx.relevant(threshold))


def _success(ctx: Context, cutoff: int | None, threshold: int) -> np.ndarray:
    return (ctx.count((ctx.grade >= threshold) & ctx.within(cutoff)) > 0).astype(np.float64)


def _r_precision(ctx: Context, cutoff: int | None, threshold: int) -> np.ndarray:
    total = ctx.relevant(threshold)
    mask = (ctx.item_grade >= threshold) & (ctx.item_rank <= total[ctx.item_query])
    return divide(np.bincount(ctx.item_query[mask], minlength=ctx.size).astype(np.float64), total)


def _reciprocal_rank(ctx: Context, cutoff: int | None, threshold: int) -> np.ndarray:
    chosen = np.flatnonzero((ctx.grade >= threshold) & ctx.within(cutoff))
    query, rank = ctx.query[chosen], ctx.rank[chosen].astype(np.float64)
    first = np.r_[True, query[1:] != query[:-1]] if len(query) else np.zeros(0, dtype=bool)
    values = np.zeros(ctx.size)
    values[query[first]] = 1.0 / rank[first]
    return values


def _average_precision(ctx: Context, cutoff: int | None, threshold: int) -> np.ndarray:
    # The mean, over relevant items, of the precision at the rank of the row credited with each.
    chosen = np.flatnonzero((ctx.grade >= threshold) & ctx.within(cutoff))
    precision = ranks(ctx.query[chosen]) / ctx.rank[chosen].astype(np.float64)  # relevant rows so far / rank
    items = (ctx.item_grade >= threshold) & (ctx.item_rank <= (cutoff if cutoff is not None else np.inf))
    at = np.searchsorted(ctx.row[chosen], ctx.item_row[items])
    weights = precision[at]
    return divide(np.bincount(ctx.item_query[items], weights=weights, minlength=ctx.size), ctx.relevant(threshold))


def _ndcg(ctx: Context, cutoff: int | None, threshold: int) -> np.ndarray:
    gains = gain_values(ctx.grade, ctx.gain)  # gains ignore the threshold (the contract's relevance rule)
    chosen = ctx.within(cutoff) & (gains > 0)
    dcg = np.bincount(ctx.query[chosen], weights=gains[chosen] / np.log2(ctx.rank[chosen] + 1.0), minlength=ctx.size)
    return divide(dcg, ctx.ideal(cutoff))


def _judged(ctx: Context, cutoff: int | None, threshold: int) -> np.ndarray:
    shown = ctx.lengths if cutoff is None else np.minimum(ctx.lengths, cutoff)
    return divide(ctx.count(ctx.within(cutoff)), shown)


_BINARY = frozenset({"cutoff", "rel"})

NATIVE_MEASURES: dict[str, NativeMeasure] = {
    "P": NativeMeasure(_precision, _BINARY, needs_cutoff=True),
    "R": NativeMeasure(_recall, _BINARY, needs_cutoff=True),
    "Success": NativeMeasure(_success, _BINARY, needs_cutoff=True),
    "RR": NativeMeasure(_reciprocal_rank, _BINARY),
    "AP": NativeMeasure(_average_precision, _BINARY),
    "Rprec": NativeMeasure(_r_precision, frozenset({"rel"})),
    "nDCG": NativeMeasure(_ndcg, frozenset({"cutoff"})),  # dcg='log2', no gains=: the defaults
    "Judged": NativeMeasure(_judged, frozenset({"cutoff"})),
}


def supports(measure: ir_measures.measures.Measure) -> bool:
    """Whether the native engine computes ``measure``, read from its entry in :data:`NATIVE_MEASURES`."""
    native = NATIVE_MEASURES.get(str(measure.NAME))
    if native is None or (native.needs_cutoff and param(measure, "cutoff") is None):
        return False
    # judged_only=True, nDCG's dcg= or gains= …: a parameter the entry does not take is computed only
    # at its default.
    return all(name in native.params or param(measure, name) == param_default(measure, name) for name in measure.params)


def native_values(measure: ir_measures.measures.Measure, ctx: Context) -> np.ndarray:
    """One value per query code of the ranked run; ``measure`` must be one :func:`supports` accepts."""
    threshold = int(measure.params.get("rel", ctx.relevance))
    return NATIVE_MEASURES[str(measure.NAME)].values(ctx, param(measure, "cutoff"), threshold)
