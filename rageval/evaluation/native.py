"""The native engine: rank-based measures computed with numpy over the judged rows of a ranked run."""

from __future__ import annotations

import ir_measures
import numpy as np

from rageval.evaluation.measures import param
from rageval.evaluation.ordering import Ranked, ranks
from rageval.evaluation.qrels import Judgments

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
    """Everything the native measures read, per query code of the ranked run; caches what repeats."""

    def __init__(self, ranked: Ranked, judgments: Judgments, relevance: int, gain: str) -> None:
        self.size = len(ranked.queries)
        self.lengths = ranked.lengths.astype(np.float64)
        self.relevance = relevance
        self.gain = gain
        retrieved = np.flatnonzero(judgments.row >= 0)
        by_position = retrieved[np.argsort(judgments.row[retrieved], kind="stable")]
        self.query = judgments.code[by_position]  # judged retrieved rows, in ranked order
        self.rank = ranked.rank[judgments.row[by_position]]
        self.grade = judgments.grade[by_position]
        in_run = judgments.code >= 0
        self.judged_query = judgments.code[in_run]
        self.judged_grade = judgments.grade[in_run]
        self._relevant: dict[int, np.ndarray] = {}
        self._ideal: dict[int | None, np.ndarray] = {}

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


_NATIVE_FAMILIES = {"P", "R", "Success", "RR", "AP", "Rprec", "nDCG", "Judged"}
_NEEDS_CUTOFF = {"P", "R", "Success"}


def supports(measure: ir_measures.measures.Measure) -> bool:
    """Whether the native engine computes ``measure``."""
    if measure.NAME not in _NATIVE_FAMILIES or param(measure, "judged_only"):
        return False
    if measure.NAME in _NEEDS_CUTOFF and param(measure, "cutoff") is None:
        return False
    if measure.NAME == "nDCG" and (param(measure, "gains") is not None or param(measure, "dcg") != "log2"):
        return False
    return True


def native_values(measure: ir_measures.measures.Measure, ctx: Context) -> np.ndarray:
    """One value per query code of the ranked run (queries without judgments included)."""
    name = measure.NAME
    cutoff = param(measure, "cutoff")
    within = ctx.within(cutoff)
    if name == "Judged":
        shown = ctx.lengths if cutoff is None else np.minimum(ctx.lengths, cutoff)
        return divide(ctx.count(within), shown)
    if name == "nDCG":
        gains = gain_values(ctx.grade, ctx.gain)
        chosen = within & (gains > 0)
        dcg = np.bincount(
            ctx.query[chosen], weights=gains[chosen] / np.log2(ctx.rank[chosen] + 1.0), minlength=ctx.size
        )
        return divide(dcg, ctx.ideal(cutoff))
    threshold = int(measure.params.get("rel", ctx.relevance))
    relevant = ctx.grade >= threshold
    total = ctx.relevant(threshold)
    if name == "P":
        return ctx.count(relevant & within) / cutoff
    if name == "R":
        return divide(ctx.count(relevant & within), total)
    if name == "Success":
        return (ctx.count(relevant & within) > 0).astype(np.float64)
    if name == "Rprec":
        return divide(ctx.count(relevant & (ctx.rank <= total[ctx.query])), total)
    chosen = np.flatnonzero(relevant & within)
    query, rank = ctx.query[chosen], ctx.rank[chosen].astype(np.float64)
    if name == "RR":
        first = np.r_[True, query[1:] != query[:-1]] if len(query) else np.zeros(0, dtype=bool)
        values = np.zeros(ctx.size)
        values[query[first]] = 1.0 / rank[first]
        return values
    if name == "AP":
        found = ranks(query).astype(np.float64)  # relevant items up to and including this one
        return divide(np.bincount(query, weights=found / rank, minlength=ctx.size), total)
    raise AssertionError(f"no native computation for {name}")  # supports guards this
