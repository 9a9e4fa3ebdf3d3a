"""Measures under the metric contract (:mod:`rageval.evaluation.contract`), behind one pure function: :func:`evaluate`.

The common rank-based measures (P, R, Success, RR, AP, Rprec, nDCG, Judged) are computed by the
native numpy engine on integer-coded arrays; any other measure, or one with parameters that engine
does not take, goes to ir-measures. Either way the values are trec_eval's, and each measure records
which provider computed it.

How a run becomes numbers, once, whatever the measures:

1. IDs are read as Arrow strings; each document ID gets a 64-bit hash (vectorized over the Arrow
   buffers) combined with its query's code (:mod:`~rageval.evaluation.ids`). Hashes only *find*
   candidates: every duplicate and every qrels match is confirmed on the strings, and any collision
   falls back to an exact join.
2. The tie policy decides the order, and duplicates are dropped after their first occurrence
   (:mod:`~rageval.evaluation.ordering`).
3. Each judgment is located in the ranked run (:mod:`~rageval.evaluation.qrels`).
4. The measures read only the judged rows (a few per query) and per-query counts: natively
   (:mod:`~rageval.evaluation.native`, a registry of measures) or through ir-measures
   (:mod:`~rageval.evaluation.bridge`).

On a large run already in the decided order (millions of rows, grouped by query in score order, as
a stage writes them), steps 1–3 take one compiled pass (:mod:`~rageval.evaluation.kernels`, numba)
instead of several numpy ones: same hashes, same answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import numpy as np
import pandas as pd

from rageval.errors import EvaluationError
from rageval.evaluation.bridge import ir_measures_values
from rageval.evaluation.contract import (
    CONTRACT,
    DEFAULT_DEPTH,
    GAINS,
    MISSING_POLICIES,
    NO_RELEVANT_POLICIES,
    DuplicatePolicy,
    Gain,
    MissingPolicy,
    NoRelevantPolicy,
    TiePolicy,
    check_choice,
    contract_record,
)
from rageval.evaluation.convert import as_measures, as_qrels, as_run_frame
from rageval.evaluation.measures import Measure, parse_measure
from rageval.evaluation.native import NATIVE, NATIVE_MEASURES, Context, divide, native_values, supports
from rageval.evaluation.ordering import Ranked, rank_run
from rageval.evaluation.qrels import Graded, Judgments, graded_by_id, locate_judgments
from rageval.evaluation.spans import Evidence, grade_passages

__all__ = ["PROVIDERS", "ContractOptions", "Evaluation", "Provider", "evaluate"]

Provider = Literal["auto", "ir_measures"]
PROVIDERS: tuple[Provider, ...] = get_args(Provider)


@dataclass(frozen=True)
class Evaluation:
    """Per-query values (rows: queries; columns: measures as written), diagnostics and how they were made."""

    per_query: pd.DataFrame
    measures: tuple[Measure, ...]
    skipped: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    policy: dict[str, str] = field(default_factory=dict)
    providers: dict[str, str] = field(default_factory=dict)  # measure text → provider that computed it
    diagnostics: pd.DataFrame = field(default_factory=pd.DataFrame)  # same rows as per_query
    duplicates: int = 0  # repeated IDs dropped from the whole run (every query, evaluated or not)
    contract: dict[str, Any] = field(default_factory=dict)  # contract_record(...) of this evaluation

    @property
    def aggregates(self) -> pd.Series:
        """Mean of each measure over evaluated queries."""
        columns = [m.text for m in self.measures]
        if self.per_query.empty:
            return pd.Series(np.nan, index=columns, dtype=float)
        return self.per_query[columns].mean()

    @property
    def diagnostic_means(self) -> pd.Series:
        """Mean of each diagnostic over evaluated queries (the tie rate over queries that have one)."""
        if self.diagnostics.empty:
            return pd.Series(np.nan, index=self.diagnostics.columns, dtype=float)
        return self.diagnostics.mean()

    @property
    def evaluated(self) -> int:
        return len(self.per_query)

    def definitions(self) -> dict[str, dict[str, str]]:
        """What each metric means, keyed by its MLflow key."""
        return {
            m.key: {
                "measure": m.text,
                "ir_measures": m.definition,
                **self.policy,
                "provider": self.providers.get(m.text, self.policy.get("provider", "")),
            }
            for m in self.measures
        }

    def long(self) -> pd.DataFrame:
        """One row per (query, measure): ``query_id, measure, value``."""
        frame = self.per_query.reset_index().melt(id_vars="query_id", var_name="measure", value_name="value")
        return frame.sort_values(["query_id", "measure"], kind="stable").reset_index(drop=True)


@dataclass(frozen=True)
class ContractOptions:
    """The metric contract's options of one evaluation (recorded with the run): ``ties`` orders equal
    scores, ``duplicates`` treats a repeated ID, ``missing`` a judged query absent from the run
    (``"zero"``: scored 0 and averaged in, trec_eval ``-c``), ``no_relevant`` a judged query with
    nothing relevant (``"skip"``: no value; ``"score"``: scored and averaged in, as trec_eval does),
    ``relevance`` the lowest relevant grade for binary measures (trec_eval ``-l``), ``gain`` nDCG's
    gain, ``depth`` the diagnostics' depth. docs/metric-contract.md states each rule."""

    ties: TiePolicy = "docid-asc"
    duplicates: DuplicatePolicy = "keep-first"
    missing: MissingPolicy = "zero"
    no_relevant: NoRelevantPolicy = "skip"
    relevance: int = 1
    gain: Gain = "grade"
    depth: int = DEFAULT_DEPTH

    def record(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def evaluate(
    run: pd.DataFrame | Any,
    qrels: Mapping[str, Mapping[str, int]] | Evidence | Any,
    measures: Sequence[str | Measure] | Any,
    options: ContractOptions = ContractOptions(),
    *,
    provider: Provider = "auto",
) -> Evaluation:
    """Evaluate a run (``query_id, doc_id, score`` and optionally ``rank``) against graded qrels.

    ``qrels`` is either query → document ID → grade (items matched by ID, as trec_eval does), or
    :class:`~rageval.evaluation.spans.Evidence`, judged character spans: then each row also names its
    passage (``document_id, start, end``) and is graded by the spans it covers, whatever its ID
    (the contract's ``passages`` rule; :mod:`rageval.evaluation.spans`).

    ``options`` are the contract's choices (:class:`ContractOptions`; its defaults are the
    contract's, e.g. ``ContractOptions(ties="docid-desc", no_relevant="score")`` for trec_eval's).
    ``provider="auto"`` computes the measures it can natively and the rest with ir-measures;
    ``"ir_measures"`` sends every measure there (same values; for cross-checks). Always returns an
    :class:`Evaluation`; never writes anything.
    """
    # The field's shapes (ir-measures and ranx runs, qrels and measures; peers' column names) as rageval's.
    run = as_run_frame(run)
    if not isinstance(qrels, Evidence) and not _native_qrels(qrels):
        qrels = as_qrels(qrels)
    parsed = tuple(m if isinstance(m, Measure) else parse_measure(m) for m in as_measures(measures))
    _check_options(options, provider)
    ranked = rank_run(run, options.ties, options.duplicates)
    if isinstance(qrels, Evidence):
        judgments, graded = None, grade_passages(ranked, qrels, run)
    else:
        judgments = locate_judgments(qrels, ranked)
        graded = graded_by_id(judgments)
    scope = _scope(ranked, graded, options)
    ctx = Context(ranked, graded, options.relevance, options.gain)
    columns, providers = _values(parsed, ctx, scope.codes, judgments, provider)
    per_query = pd.DataFrame({m.text: columns[m.text] for m in parsed}, index=pd.Index(scope.evaluated, dtype=object))
    diagnostics = (
        _diagnostics(ranked, ctx, options.depth).iloc[scope.codes].set_axis(pd.Index(scope.evaluated, dtype=object))
    )
    per_query, diagnostics = _with_missing(
        per_query, diagnostics, scope.absent if options.missing == "zero" else [], options.depth
    )
    policy = {
        "contract": CONTRACT,
        **{k: str(v) for k, v in options.record().items()},
        "provider": "+".join(sorted(set(providers.values()))) or "none",
    }
    return Evaluation(
        per_query=per_query,
        measures=parsed,
        skipped=tuple(scope.skipped),
        missing=tuple(scope.absent),
        policy=policy,
        providers=providers,
        diagnostics=diagnostics,
        duplicates=int(ranked.dropped.sum()),
        contract=contract_record(**options.record()),
    )


@dataclass(frozen=True)
class _Scope:
    """Which queries get values: the ranked run's codes evaluated, their IDs, and the queries skipped or absent."""

    codes: np.ndarray
    evaluated: np.ndarray
    skipped: list[str]
    absent: list[str]


def _scope(ranked: Ranked, graded: Graded, options: ContractOptions) -> _Scope:
    """The queries that get values: answerable ones, or (trec_eval's rule) every query with a judgment."""
    items = graded.item_query
    judged = items if options.no_relevant == "score" else items[graded.item_grade >= options.relevance]
    scored = set(judged.tolist())
    in_run = set(ranked.queries.tolist())
    codes = np.flatnonzero(pd.Index(ranked.queries, dtype=object).isin(scored))
    return _Scope(
        codes=codes,
        evaluated=ranked.queries[codes],
        skipped=sorted((set(graded.queries) | in_run) - scored),
        absent=sorted(scored - in_run),
    )


def _values(
    parsed: tuple[Measure, ...], ctx: Context, codes: np.ndarray, judgments: Judgments | None, provider: str
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Each measure's values on the evaluated query codes, and the provider that computed it."""
    providers: dict[str, str] = {}
    columns: dict[str, np.ndarray] = {}
    deferred = []
    for m in parsed:
        if provider == "auto" and supports(m.measure):
            columns[m.text] = native_values(m.measure, ctx)[codes]
            providers[m.text] = NATIVE
        else:
            deferred.append(m)
    if deferred and judgments is None:
        raise EvaluationError(
            f"{', '.join(m.text for m in deferred)}: graded on spans, rageval computes "
            f"{', '.join(NATIVE_MEASURES)} (with their usual parameters); other measures need matching IDs "
            "(evaluate at document level, or give the run chunk IDs of one chunking)"
        )
    if deferred and judgments is not None:
        values, names = ir_measures_values(deferred, ctx.ranked, judgments, codes, ctx.relevance, ctx.gain)
        columns.update(values)
        providers.update(names)
    return columns, providers


def _with_missing(
    per_query: pd.DataFrame, diagnostics: pd.DataFrame, absent: list[str], depth: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Both frames with a zero row for each judged query the run lacks (the ``missing="zero"`` rule),
    sorted by query ID, floats, indexed by ``query_id``."""
    if absent:
        index = pd.Index(absent, dtype=object)
        per_query = pd.concat([per_query, pd.DataFrame(0.0, index=index, columns=per_query.columns)])
        zero = pd.DataFrame(0.0, index=index, columns=diagnostics.columns)
        zero[_tie_column(depth)] = np.nan
        diagnostics = pd.concat([diagnostics, zero])
    # One index type whatever was concatenated (pandas may infer a string dtype when joining indexes).
    per_query = per_query.astype(float).sort_index()
    per_query.index = pd.Index(per_query.index, dtype=object, name="query_id")
    diagnostics = diagnostics.astype(float).sort_index()
    diagnostics.index = pd.Index(diagnostics.index, dtype=object, name="query_id")
    return per_query, diagnostics


def _native_qrels(qrels: object) -> bool:
    """Already query → {document: grade} (IDs and grades are normalised where the judgments are located)."""
    # type() first: an isinstance check against the Mapping ABC costs microseconds per query.
    return isinstance(qrels, Mapping) and all(
        type(judged) is dict or isinstance(judged, Mapping) for judged in qrels.values()
    )


def _check_options(options: ContractOptions, provider: str) -> None:
    """The options :func:`evaluate` checks itself (the tie and duplicate policies: ordering checks those)."""
    if not isinstance(options, ContractOptions):
        raise EvaluationError(
            f"options must be a rageval.ContractOptions, got {type(options).__name__}: "
            "write evaluate(run, qrels, measures, ContractOptions(ties=..., ...))"
        )
    check_choice("missing-query policy", options.missing, MISSING_POLICIES)
    check_choice("no-relevant-query policy", options.no_relevant, NO_RELEVANT_POLICIES)
    check_choice("gain", options.gain, GAINS)
    check_choice("provider", provider, PROVIDERS)
    relevance, depth = options.relevance, options.depth
    if isinstance(relevance, bool) or not isinstance(relevance, int | np.integer) or relevance < 1:
        raise EvaluationError(f"relevance threshold must be an integer grade >= 1 (got {relevance!r})")
    if isinstance(depth, bool) or not isinstance(depth, int | np.integer) or depth < 1:
        raise EvaluationError(f"diagnostic depth must be a positive integer (got {depth!r})")


def _tie_column(depth: int) -> str:
    return f"tie_rate@{depth}"


def _diagnostics(ranked: Ranked, ctx: Context, depth: int) -> pd.DataFrame:
    """Per query code: Judged@depth, unjudged in the first depth, tie rate in the first depth, duplicates."""
    shown = np.minimum(ranked.lengths, depth).astype(np.float64)
    judged = ctx.count(ctx.rank <= depth)
    # Adjacent pairs inside one query's first `depth`: a row ranked 2..depth and the row before it.
    equal = np.flatnonzero(ranked.score[1:] == ranked.score[:-1]) + 1
    tied = equal[(ranked.rank[equal] >= 2) & (ranked.rank[equal] <= depth)]
    ties = np.bincount(ranked.query[tied], minlength=ctx.size).astype(np.float64)
    rate = np.full(ctx.size, np.nan)
    np.divide(ties, shown - 1, out=rate, where=shown >= 2)
    return pd.DataFrame(
        {
            f"Judged@{depth}": divide(judged, shown),
            f"unjudged@{depth}": shown - judged,
            _tie_column(depth): rate,
            "duplicates": ranked.dropped.astype(np.float64),
        }
    )
