"""Execute one run configuration: benchmark → chunks → pipeline → rankings → metrics.

:func:`run_experiment` is pure computation: it returns an :class:`ExperimentResult` and records
nothing. Recording is :mod:`rageval.tracking`'s job.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from rageval.benchmark import Benchmark, load_benchmark
from rageval.chunking import Chunk, chunk_corpus, chunk_qrels, config_hash
from rageval.errors import EvaluationError
from rageval.metrics import Evaluation, evaluate
from rageval.retrieval import Pipeline, Query
from rageval.schema import RunConfig

RANKING_COLUMNS = ["query_id", "rank", "chunk_id", "parent_id", "score", "stage"]


@dataclass(frozen=True)
class ExperimentResult:
    config: RunConfig
    benchmark: Benchmark
    level: str
    chunking_hash: str
    rankings: pd.DataFrame  # RANKING_COLUMNS: every candidate chunk of the final stage
    evaluation: Evaluation
    slices: pd.DataFrame  # rows: slice; columns: "queries" + measures (means over evaluated queries)
    latency: pd.DataFrame  # query_id, stage, seconds
    context_tokens: pd.Series  # per query: tokens in the final_k chunks
    failures: pd.DataFrame  # query_id, stage, error, message
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def summary(self) -> pd.DataFrame:
        """One row per measure: the mean over evaluated queries."""
        frame = self.evaluation.aggregates.rename("mean").to_frame()
        frame.index.name = "measure"
        return frame

    def latency_percentiles(self) -> pd.DataFrame:
        """p50/p95 per stage, in milliseconds."""
        if self.latency.empty:
            return pd.DataFrame(columns=["p50_ms", "p95_ms"])
        grouped = self.latency.groupby("stage", sort=False)["seconds"]
        return pd.DataFrame({"p50_ms": grouped.quantile(0.5) * 1000, "p95_ms": grouped.quantile(0.95) * 1000})

    def counts(self) -> dict[str, int]:
        return {
            "queries_total": len(self.context_tokens),
            "queries_evaluated": self.evaluation.evaluated,
            "queries_skipped": len(self.evaluation.skipped),
            "queries_failed": len(self.failures),
        }


def run_experiment(config: RunConfig, benchmark: Benchmark | None = None) -> ExperimentResult:
    """Run a resolved configuration on its benchmark split."""
    timings: dict[str, float] = {}
    started = time.perf_counter()
    benchmark = benchmark or load_benchmark(config.benchmark)
    cases = benchmark.cases_for(config.split)
    timings["load"] = time.perf_counter() - started

    started = time.perf_counter()
    chunks = chunk_corpus(benchmark.documents.values(), config.chunking)
    by_id = {chunk.chunk_id: chunk for chunk in chunks}
    timings["chunking"] = time.perf_counter() - started

    started = time.perf_counter()
    pipeline = Pipeline.from_config(config.retrieval.stages, chunks)
    timings["index"] = time.perf_counter() - started

    started = time.perf_counter()
    queries = [Query(c.queryId, c.query, tuple(c.principal) if c.principal else None) for c in cases]
    output = pipeline.run(queries)
    timings["retrieval"] = time.perf_counter() - started

    started = time.perf_counter()
    rankings = _rankings(output.hits, output.final_stage, by_id)
    level = benchmark.spec.relevanceUnit if config.evaluation.level == "auto" else config.evaluation.level
    qrels = benchmark.qrels(config.split) if level == "document" else chunk_qrels(cases, chunks)
    evaluation = evaluate(
        level_run(rankings, level),
        qrels,
        config.evaluation.measures,
        ties=config.evaluation.ties,
        duplicates=config.evaluation.duplicates,
    )
    slices = slice_table(evaluation, {c.queryId: c.slice for c in cases})
    timings["evaluation"] = time.perf_counter() - started

    context = rankings[rankings["rank"] <= config.final_k]
    tokens = context["chunk_id"].map(lambda cid: by_id[cid].tokens).groupby(context["query_id"]).sum()
    context_tokens = tokens.reindex([c.queryId for c in cases], fill_value=0).astype(int)
    context_tokens.index.name = "query_id"
    return ExperimentResult(
        config=config,
        benchmark=benchmark,
        level=level,
        chunking_hash=config_hash(config.chunking),
        rankings=rankings,
        evaluation=evaluation,
        slices=slices,
        latency=pd.DataFrame(output.latencies, columns=["query_id", "stage", "seconds"]),
        context_tokens=context_tokens,
        failures=pd.DataFrame(output.failures, columns=["query_id", "stage", "error", "message"]),
        timings=timings,
    )


def _rankings(hits: dict[str, list], final_stage: dict[str, str], chunks: dict[str, Chunk]) -> pd.DataFrame:
    rows = [
        (qid, rank, hit.chunk_id, chunks[hit.chunk_id].parent_id, hit.score, final_stage[qid])
        for qid, query_hits in hits.items()
        for rank, hit in enumerate(query_hits, start=1)
    ]
    frame = pd.DataFrame(rows, columns=RANKING_COLUMNS)
    return frame.astype({"rank": np.int64, "score": np.float64})


def level_run(rankings: pd.DataFrame, level: str) -> pd.DataFrame:
    """A chunk ranking as evaluated at ``level``: ``query_id, doc_id, score, rank``.

    ``passage``: chunk IDs as ranked. ``document``: each parent once, at its best-ranked chunk,
    ranks renumbered.
    """
    if level == "document":
        frame = rankings.drop_duplicates(["query_id", "parent_id"], keep="first").rename(columns={"parent_id": "doc_id"})
        frame = frame.assign(rank=frame.groupby("query_id", sort=False).cumcount() + 1)
    elif level == "passage":
        frame = rankings.rename(columns={"chunk_id": "doc_id"})
    else:
        raise EvaluationError(f"unknown evaluation level {level!r}; valid choices are document, passage")
    return frame[["query_id", "doc_id", "score", "rank"]].reset_index(drop=True)


def slice_table(evaluation: Evaluation, slices: dict[str, list[str]]) -> pd.DataFrame:
    """Mean of each measure per slice label, over the evaluated queries carrying that label."""
    per_query = evaluation.per_query
    labels = sorted({label for values in slices.values() for label in values})
    rows = {}
    for label in labels:
        members = [q for q in per_query.index if label in slices.get(q, ())]
        values = per_query.loc[members]
        rows[label] = {"queries": len(members), **values.mean().to_dict()}
    frame = pd.DataFrame.from_dict(rows, orient="index", columns=["queries", *per_query.columns])
    frame.index.name = "slice"
    return frame.astype({"queries": int})
