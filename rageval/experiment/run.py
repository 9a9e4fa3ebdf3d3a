"""Execute one run configuration: benchmark → chunks → pipeline → rankings → metrics.

:func:`run_experiment` is pure computation: it returns an :class:`ExperimentResult` and records
nothing. Recording is :mod:`rageval.tracking`'s job.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from rageval.benchmark.chunking import Chunk, chunk_corpus, config_hash
from rageval.benchmark.loading import Benchmark, load_benchmark
from rageval.benchmark.schema import Case
from rageval.config.schema import RunConfig
from rageval.errors import EvaluationError
from rageval.evaluation import (
    PARENT_LEVEL,
    Abstention,
    ContractOptions,
    Evaluation,
    abstention,
    evaluate,
    rollup_to_parent,
    top_scores,
)
from rageval.evaluation.spans import Evidence, evidence_spans
from rageval.experiment.context import contexts, diagnostics, in_context, token_counter
from rageval.experiment.evidence import EVIDENCE_MEASURES, whole_document_warnings
from rageval.experiment.failures import FAILURE_COLUMNS, failure_warning, over_budget
from rageval.experiment.stages import (
    CONTEXT_STAGE,
    RANKING_COLUMNS,
    describe_loss,
    evidence_trail,
    latency_table,
    rankings_frame,
)
from rageval.progress import Reporter, from_environment, reporting
from rageval.retrieval import Corpus, Pipeline, Query
from rageval.retrieval.cache import Cache
from rageval.retrieval.pipeline import PipelineOutput, stage_inputs

__all__ = ["RANKING_COLUMNS", "ExperimentResult", "level_run", "run_experiment", "slice_table"]

PERCENTILES = {"p50_ms": 0.5, "p95_ms": 0.95, "p99_ms": 0.99}


@dataclass(frozen=True)
class ExperimentResult:
    config: RunConfig
    benchmark: Benchmark
    level: str
    chunking_hash: str
    rankings: pd.DataFrame  # RANKING_COLUMNS: every candidate chunk of the final stage
    evaluation: Evaluation
    slices: pd.DataFrame  # rows: slice; columns: "queries" + measures (means over evaluated queries)
    latency: pd.DataFrame  # query_id, stage (or "stage:step", "fetch", "total"), seconds
    context_tokens: pd.Series  # per query: tokens in the context handed to the generator
    failures: pd.DataFrame  # query_id, stage, error, message
    timings: dict[str, float] = field(default_factory=dict)
    stage_names: tuple[str, ...] = ()
    stage_rankings: pd.DataFrame | None = None  # RANKING_COLUMNS for every stage, and the context
    stage_metrics: pd.DataFrame | None = None  # long: stage, query_id, measure, value
    evidence: pd.DataFrame | None = None  # see rageval.experiment.stages.evidence_trail
    diagnostics: pd.DataFrame | None = None  # per query: context, dedup and permission figures
    cache_hits: dict[str, bool] = field(default_factory=dict)
    models: dict[str, dict[str, str]] = field(default_factory=dict)  # stage → model identity
    external_calls: dict[str, int] = field(default_factory=dict)
    call_counts: dict[str, dict[str, int]] = field(default_factory=dict)  # stage → attempts, retries, failures
    abstention: Abstention | None = None  # the unanswerable contract, when evaluation.abstain_below is set
    # The judgments measured against: document qrels, or at passage level the judged spans
    qrels: dict[str, dict[str, int]] | Evidence = field(default_factory=dict)
    # A passage-level run rolled up to its parents, against the document qrels (contract rule "levels")
    parent: Evaluation | None = None
    # Per evaluated query at passage level: evidence_recall, evidence_precision, evidence_iou and the
    # token counts behind them, in the context handed to generation (contract rule "evidence")
    context_evidence: pd.DataFrame | None = None
    warnings: tuple[str, ...] = ()  # what a person must know to read the numbers (also on the terminal)

    @property
    def levels(self) -> dict[str, Evaluation]:
        """Every level this run was measured at, its own ``level`` first."""
        return {self.level: self.evaluation, **({PARENT_LEVEL: self.parent} if self.parent is not None else {})}

    def level_aggregates(self) -> pd.DataFrame:
        """``level, measure, mean``: each level's means over its evaluated queries, side by side."""
        rows = [
            (level, str(measure), float(mean))
            for level, evaluation in self.levels.items()
            for measure, mean in evaluation.aggregates.items()
        ]
        return pd.DataFrame(rows, columns=["level", "measure", "mean"])

    def level_table(self) -> pd.DataFrame:
        """Rows: measures; columns: each level's mean (the run's own level first)."""
        table = self.level_aggregates().pivot(index="measure", columns="level", values="mean")
        table = table.reindex(index=[m.text for m in self.evaluation.measures], columns=list(self.levels))
        table.columns.name = None
        return table

    def per_query_long(self) -> pd.DataFrame:
        """``query_id, measure, value, level``: the per-query values of every level."""
        frames = [evaluation.long().assign(level=level) for level, evaluation in self.levels.items()]
        return pd.concat(frames, ignore_index=True)

    def evidence_means(self) -> pd.Series:
        """Evidence recall, precision and IoU in the context, each a mean over the queries that have
        a value (empty at document level)."""
        if self.context_evidence is None:
            return pd.Series(dtype=float)
        return self.context_evidence[list(EVIDENCE_MEASURES)].mean()

    @property
    def summary(self) -> pd.DataFrame:
        """One row per measure: the mean over evaluated queries."""
        frame = self.evaluation.aggregates.rename("mean").to_frame()
        frame.index.name = "measure"
        return frame

    def latency_percentiles(self) -> pd.DataFrame:
        """p50/p95/p99 per stage (and step, fetch, total), in milliseconds."""
        if self.latency.empty:
            return pd.DataFrame(columns=list(PERCENTILES))
        grouped = self.latency.groupby("stage", sort=False)["seconds"]
        return pd.DataFrame({name: grouped.quantile(q) * 1000 for name, q in PERCENTILES.items()})

    def stage_table(self) -> pd.DataFrame:
        """Rows: stages in order, then ``context``; columns: candidates (mean per query) and each
        measure's mean over the evaluated queries."""
        if self.stage_metrics is None or self.stage_metrics.empty or self.stage_rankings is None:
            return pd.DataFrame()
        table = self.stage_metrics.pivot_table(
            index="stage", columns="measure", values="value", aggfunc="mean", sort=False
        )
        counts = self.stage_rankings.groupby(["stage", "query_id"]).size().groupby("stage").mean()
        table.insert(0, "candidates", counts.reindex(table.index))
        order = [*self.stage_names, CONTEXT_STAGE]
        return table.reindex([s for s in order if s in table.index])[
            ["candidates", *[m.text for m in self.evaluation.measures]]
        ]

    def losses(self) -> pd.DataFrame:
        """Relevant items that some retriever found and a later stage dropped, each with its
        ``trail`` as a person reads it (``found by dense, dropped by fusion``)."""
        if self.evidence is None:
            return pd.DataFrame()
        dropped = self.evidence[self.evidence["status"] == "dropped"].reset_index(drop=True)
        return dropped.assign(trail=[describe_loss(row) for _, row in dropped.iterrows()])

    def counts(self) -> dict[str, int]:
        out = {
            "queries_total": len(self.context_tokens),
            "queries_evaluated": self.evaluation.evaluated,
            "queries_skipped": len(self.evaluation.skipped),
            "queries_failed": len(self.failures),
        }
        if self.diagnostics is not None and not self.diagnostics.empty:
            out["permission_leaks"] = int(self.diagnostics["permission_leaks"].sum())
            out["permission_leaks_context"] = int(self.diagnostics["permission_leaks_context"].sum())
            out["queries_with_leaks"] = int((self.diagnostics["permission_leaks"] > 0).sum())
        if self.call_counts:  # stages that call a service: attempts, retries and failed queries
            for count in ("attempts", "retries", "failures"):
                out[f"external_calls/{count}"] = sum(c.get(count, 0) for c in self.call_counts.values())
        return out


def run_experiment(
    config: RunConfig,
    benchmark: Benchmark | None = None,
    cache: Cache | None | bool = True,
    reporter: Reporter | None = None,
) -> ExperimentResult:
    """Run a resolved configuration on its benchmark split. ``cache``: True for the default
    content-addressed cache, a :class:`Cache`, or False/None to build everything afresh.
    ``reporter`` receives the steps and bars; by default, the channel ``rageval run`` gives the
    notebook's kernel (:func:`rageval.progress.from_environment`), else nothing."""
    reporter = reporter if reporter is not None else from_environment()
    with reporting(reporter):  # the stages, built with a fixed signature, find it there
        result = _run(config, benchmark, cache, reporter)
    reporter.end()
    over = over_budget(result.failures, result.counts()["queries_total"], config.failures.max_fraction)
    if over:  # refused: a run whose queries failed past its budget is never a result
        raise EvaluationError(over)
    return result


def _run(
    config: RunConfig, benchmark: Benchmark | None, cache: Cache | None | bool, reporter: Reporter
) -> ExperimentResult:
    timings: dict[str, float] = {}
    retrieved = _retrieve(config, benchmark, cache, reporter, timings)
    with _timed(timings, "evaluation"):  # until the measures, the parent level and abstention are in
        measured = _measure(config, retrieved, reporter)
    with _timed(timings, "stage_evaluation"):
        staged = _measure_stages(config, retrieved, measured, reporter)
    in_context_ = in_context(config, retrieved.benchmark, measured.qrels, staged.context_frame, measured.evaluation)
    shown = in_context_[list(EVIDENCE_MEASURES)] if in_context_ is not None else None
    slices = slice_table(measured.evaluation, {c.queryId: c.slice for c in retrieved.cases}, shown)

    reporter.step("diagnostics")
    output, qrels = retrieved.output, measured.qrels
    per_query = diagnostics(config, retrieved.cases, output.hits, retrieved.context, retrieved.corpus, retrieved.count)
    return ExperimentResult(
        config=config,
        benchmark=retrieved.benchmark,
        level=measured.level,
        chunking_hash=config_hash(config.chunking),
        rankings=measured.rankings,
        evaluation=measured.evaluation,
        slices=slices,
        latency=latency_table(output.latencies, retrieved.fetch),
        context_tokens=per_query["context_tokens"].rename(None) if not per_query.empty else pd.Series(dtype=int),
        failures=measured.failures,
        timings=timings,
        stage_rankings=pd.concat([*staged.per_stage.values(), staged.context_frame], ignore_index=True),
        stage_metrics=staged.metrics,
        evidence=staged.evidence,
        diagnostics=per_query,
        **_pipeline_facts(retrieved.pipeline),
        abstention=measured.abstained,
        qrels=qrels if isinstance(qrels, Evidence) else {q: dict(items) for q, items in qrels.items()},
        parent=measured.parent,
        context_evidence=in_context_,
        warnings=measured.warnings,
    )


@dataclass(frozen=True)
class _Retrieved:
    """A run up to its context: the split's cases, the corpus and pipeline built for them, the
    pipeline's output, and per query the context handed to the generator (and its fetch time)."""

    benchmark: Benchmark
    cases: list[Case]
    corpus: Corpus
    pipeline: Pipeline
    output: PipelineOutput
    count: Callable[[str], int]  # tokens in a text (token_counter)
    context: dict[str, list]  # per query: the hits handed to the generator
    fetch: dict[str, float]


def _retrieve(
    config: RunConfig,
    benchmark: Benchmark | None,
    cache: Cache | None | bool,
    reporter: Reporter,
    timings: dict[str, float],
) -> _Retrieved:
    """Load the benchmark, chunk it, build the stages, rank every case and cut each context."""
    with _timed(timings, "load"):
        reporter.step("load benchmark")
        benchmark = benchmark or load_benchmark(config.benchmark)
        cases = benchmark.cases_for(config.split)
    with _timed(timings, "chunking"):
        reporter.step("chunking")
        chunks = chunk_corpus(benchmark.document_texts(), config.chunking)
    with _timed(timings, "index"):
        reporter.step("build stages")
        corpus = corpus_for(config, benchmark, chunks, Cache() if cache is True else (cache or None))
        pipeline = Pipeline.from_config(config.retrieval.stages, corpus, source=f"run configuration '{config.name}'")
    timings.update({f"index/{name}": seconds for name, seconds in pipeline.build_seconds.items()})
    with _timed(timings, "retrieval"):
        queries = [query_of(c) for c in cases]
        reporter.step("retrieval")
        output = pipeline.run(reporter.bar(queries, desc="queries"))
    count = token_counter(config)
    with _timed(timings, "context"):
        reporter.step("context")
        context, fetch = contexts(config, output.hits, corpus, count)
    return _Retrieved(benchmark, cases, corpus, pipeline, output, count, context, fetch)


@dataclass(frozen=True)
class _Measured:
    """The final stage's ranking measured: at the run's level on its judgments (and at parent level
    beside it), the abstention contract, the failed queries and what a reader must be warned of."""

    rankings: pd.DataFrame
    level: str
    qrels: dict[str, dict[str, int]] | Evidence
    measure: Callable[..., Evaluation]  # _measurer's, for the other stages' rankings
    evaluation: Evaluation
    parent: Evaluation | None
    abstained: Abstention | None
    failures: pd.DataFrame
    warnings: tuple[str, ...]


def _measure(config: RunConfig, retrieved: _Retrieved, reporter: Reporter) -> _Measured:
    """The final ranking measured (the failures and whole-document warnings reported first)."""
    reporter.step("evaluation")
    benchmark, cases, output = retrieved.benchmark, retrieved.cases, retrieved.output
    rankings = rankings_frame(output.hits, retrieved.pipeline.names[-1], retrieved.corpus.by_id)
    level, qrels = _graded(config, benchmark, cases)
    failures = pd.DataFrame(output.failures, columns=FAILURE_COLUMNS)
    failed = failure_warning(failures, len(cases))
    warnings = [*whole_document_warnings(rankings, retrieved.corpus, level), *([failed] if failed else [])]
    for warning in warnings:
        reporter.warn(warning)

    measure = _measurer(config, level, qrels)
    evaluation = measure(rankings)
    # The same ranking at parent level, beside it: a document's grade is its best judged span's (Benchmark.qrels).
    parent = measure(rankings, PARENT_LEVEL, benchmark.qrels(config.split)) if level == "passage" else None
    abstained = _abstention(config, cases, rankings, level)
    return _Measured(rankings, level, qrels, measure, evaluation, parent, abstained, failures, tuple(warnings))


@dataclass(frozen=True)
class _Staged:
    """Every stage's ranking and the context's, measured, and where each relevant item went."""

    per_stage: dict[str, pd.DataFrame]  # stage → its ranking (RANKING_COLUMNS)
    context_frame: pd.DataFrame  # the context as a ranking (RANKING_COLUMNS)
    metrics: pd.DataFrame  # stage, query_id, measure, value
    evidence: pd.DataFrame  # see rageval.experiment.stages.evidence_trail


def _measure_stages(config: RunConfig, retrieved: _Retrieved, measured: _Measured, reporter: Reporter) -> _Staged:
    """Each stage's ranking and the context measured like the final one, and the evidence trail."""
    reporter.step("stage evaluation")
    names, by_id = retrieved.pipeline.names, retrieved.corpus.by_id
    per_stage = {name: rankings_frame(retrieved.output.stages[name], name, by_id) for name in names}
    context_frame = rankings_frame(retrieved.context, CONTEXT_STAGE, by_id)
    frames = [*per_stage.items(), (CONTEXT_STAGE, context_frame)]
    stage_metrics = _stage_metrics(frames, (names[-1], measured.evaluation), measured.measure, reporter)
    inputs = dict(zip(names, stage_inputs(config.retrieval.stages), strict=True))
    evidence = evidence_trail(per_stage, inputs, measured.qrels, measured.level, context_frame)
    return _Staged(per_stage, context_frame, stage_metrics, evidence)


def _graded(
    config: RunConfig, benchmark: Benchmark, cases: Sequence[Case]
) -> tuple[str, dict[str, dict[str, int]] | Evidence]:
    """The level the run is measured at, and what grades it: document qrels, or at passage level the
    judged spans, whatever the run's chunking (the contract's passages rule)."""
    level = benchmark.spec.relevanceUnit if config.evaluation.level == "auto" else config.evaluation.level
    if level == "document":
        return level, benchmark.qrels(config.split)
    return level, evidence_spans(cases, benchmark.documents)


def _pipeline_facts(pipeline: Pipeline) -> dict[str, Any]:
    """What a run records of its pipeline: the stages' names, cache hits, models and external calls."""
    return {
        "stage_names": tuple(pipeline.names),
        "cache_hits": pipeline.cache_hits(),
        "models": {s.name: m for s in pipeline.stages if (m := getattr(s, "model_identity", None))},
        "external_calls": pipeline.external_calls(),
        "call_counts": pipeline.call_counts(),
    }


@contextmanager
def _timed(timings: dict[str, float], step: str) -> Iterator[None]:
    """``timings[step]``: the seconds the block took (not set when it raised)."""
    started = time.perf_counter()
    yield
    timings[step] = time.perf_counter() - started


def _measurer(config: RunConfig, level: str, qrels: dict[str, dict[str, int]] | Evidence) -> Callable[..., Evaluation]:
    """The run's evaluation of a ranking frame under its configuration, at ``level`` on ``qrels`` by default."""

    def measure(
        frame: pd.DataFrame, at: str = level, judged: dict[str, dict[str, int]] | Evidence = qrels
    ) -> Evaluation:
        return evaluate(
            level_run(frame, at),
            judged,
            config.evaluation.measures,
            ContractOptions(
                ties=config.evaluation.ties,
                duplicates=config.evaluation.duplicates,
                relevance=config.evaluation.relevance,
                gain=config.evaluation.gain,
                depth=config.evaluation.depth,
            ),
        )

    return measure


def _abstention(config: RunConfig, cases: Sequence[Case], rankings: pd.DataFrame, level: str) -> Abstention | None:
    """With ``abstain_below``: how a score threshold separates unanswerable from answerable cases."""
    if config.evaluation.abstain_below is None:
        return None
    evaluated_run = level_run(rankings, level)
    answerable = {c.queryId for c in cases if c.answerable}
    return abstention(
        top_scores(evaluated_run, [c.queryId for c in cases if c.queryId not in answerable]),
        config.evaluation.abstain_below,
        top_scores(evaluated_run, sorted(answerable)),
    )


def _stage_metrics(
    frames: Sequence[tuple[str, pd.DataFrame]],
    final: tuple[str, Evaluation],
    measure: Callable[..., Evaluation],
    reporter: Reporter,
) -> pd.DataFrame:
    """Each stage's ranking (and the context) measured, long: stage, query_id, measure, value.
    The final stage's ranking is the run's ranking, ``final``: measured once, already."""
    stage_metrics = []
    for name, frame in reporter.bar(frames, desc="stages measured"):
        long = (final[1] if name == final[0] else measure(frame)).long()
        stage_metrics.append(long.assign(stage=name))
    return pd.concat(stage_metrics, ignore_index=True)[["stage", "query_id", "measure", "value"]]


def corpus_for(config: RunConfig, benchmark: Benchmark, chunks: Sequence[Chunk], cache: Cache | None) -> Corpus:
    """What ``config``'s stages retrieve from: ``chunks`` of ``benchmark``, under the cache key that
    names the corpus and the chunking (the gate's timing builds the same corpus)."""
    return Corpus(
        chunks=chunks,
        documents=benchmark.documents,
        key={"corpus": benchmark.hashes["corpus"], "chunking": config_hash(config.chunking)},
        cache=cache,
    )


def query_of(case: Case) -> Query:
    """A benchmark case as a retrieval query (with the asker's principals, when it names them)."""
    return Query(case.queryId, case.query, tuple(case.principal) if case.principal else None)


def level_run(rankings: pd.DataFrame, level: str) -> pd.DataFrame:
    """A chunk ranking as evaluated at ``level``: ``query_id, doc_id, score, rank``.

    ``passage``: chunk (or passage) IDs as ranked, with each passage's ``document_id, start, end``
    (graded on spans). ``document``: each parent once, at its best-ranked chunk, ranks renumbered.
    """
    if level == "document":
        return rollup_to_parent(rankings)
    if level == "passage":
        frame = rankings.rename(columns={"chunk_id": "doc_id", "parent_id": "document_id"})
        columns = ["query_id", "doc_id", "score", "rank", *[c for c in ("document_id", "start", "end") if c in frame]]
        return frame[columns].reset_index(drop=True)
    raise EvaluationError(f"unknown evaluation level {level!r}; valid choices are document, passage")


def slice_table(
    evaluation: Evaluation, slices: dict[str, list[str]], extra: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Mean of each measure per slice label, over the evaluated queries carrying that label; then the
    means of ``extra``'s columns (per query: the evidence in the context), where given."""
    per_query = evaluation.per_query
    if extra is not None:
        per_query = per_query.join(extra.reindex(per_query.index))
    labels = sorted({label for values in slices.values() for label in values})
    rows = {}
    for label in labels:
        members = [q for q in per_query.index if label in slices.get(q, ())]
        values = per_query.loc[members]
        rows[label] = {"queries": len(members), **values.mean().to_dict()}
    frame = pd.DataFrame.from_dict(rows, orient="index", columns=["queries", *per_query.columns])
    frame.index.name = "slice"
    return frame.astype({"queries": int})
