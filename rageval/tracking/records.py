"""The record layout of rageval's runs, apart from the store that holds them: which artifacts,
metrics and tags an evaluation or a comparison becomes, and how a sealed evaluation run is read
back (what a seal covers and how it is checked: :mod:`rageval.tracking.seal`). Pure: no mlflow
here; :class:`~rageval.tracking.store.Tracker` performs the reads and writes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from rageval.analysis.export import render, results_table
from rageval.analysis.formats import RESULT_FILES
from rageval.analysis.records import LATENCY_TAG, RunArtifacts, RunInfo
from rageval.evaluation import PARENT_PREFIX, metric_key
from rageval.safety import csv_bytes

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from rageval.analysis import Comparison
    from rageval.experiment.run import ExperimentResult

SEAL_TAG = "rageval.seal"
ERROR_TAG = "rageval.error"
MANIFEST = "manifest.json"
KIND_TAG = "rageval.kind"  # evaluation, sweep, comparison, gate or reproduction
# A sweep member's, comparison's or gate's sweep: MLflow's own parent tag, which nests the run under
# its sweep in the UI (runs recorded before 2026-12 repeat it as rageval.sweep.parent, still read).
PARENT_TAG = "mlflow.parentRunId"


def sweep_parent(tags: Mapping[str, str]) -> str | None:
    """The sweep run a run belongs to (None: none)."""
    return tags.get(PARENT_TAG) or tags.get("rageval.sweep.parent") or None


NAME_TAG = "rageval.name"  # the run's name before numbering (``bm25-baseline@dev`` for ``… #2``)
NOTE_TAG = "mlflow.note.content"  # a run's or experiment's description in the MLflow UI
# The release path's runs (gate, review, shadow, online, release, bundle, promotion, rollback), together
# in one experiment apart from the evaluations; each names the evaluation runs it concerns in two tags of
# fixed keys (:func:`role_tags`), so a search finds them from an evaluation run
# (:func:`~rageval.tracking.search.runs_concerning`) without a tag column per run ID.
RELEASE_EXPERIMENT = "rageval-release"
BASELINE_TAG = "rageval.baseline"  # the baseline evaluation run's ID
CANDIDATES_TAG = "rageval.candidates"  # the candidate evaluation runs' IDs, comma-separated
# MLflow 3's UI opens an experiment of unknown kind on its GenAI traces page; this kind opens on the runs.
EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}
# The UI's mode is also read from the address (``?workflowType=``, which overrides a mode the browser
# remembered): every address rageval writes asks for model training (runs), never GenAI (traces).
UI_MODE = "workflowType=machine_learning"


def role_tags(baseline: str | None, candidates: Sequence[str | None]) -> dict[str, str]:
    """The tags naming the evaluation runs a comparison, gate, shadow or online run concerns: the
    baseline's ID and the candidates' IDs (a fixed pair of keys, not one key per run ID)."""
    named = [c for c in candidates if c]
    return {
        **({BASELINE_TAG: baseline} if baseline else {}),
        **({CANDIDATES_TAG: ",".join(named)} if named else {}),
    }


def ui_link(
    experiment_id: str | None = None, run_id: str | None = None, *, base: str = "", view: str | None = None
) -> str:
    """The MLflow UI address (after ``base``, the server's URL) of an experiment, one of its runs, or
    the home page, in model-training mode: ``#/experiments/1/runs/abc?workflowType=machine_learning``;
    ``view``: a query for the experiment's runs page (a saved view: ``viewStateShareKey=…``)."""
    path = "#/"
    if experiment_id is not None:
        path += f"experiments/{experiment_id}"
        if run_id is not None:
            path += f"/runs/{run_id}"
        elif view is not None:
            path += "/runs"
    query = f"{view}&{UI_MODE}" if view is not None else UI_MODE
    return f"{base.rstrip('/')}{'/' if base else ''}{path}?{query}"


def source_tags(tags: Mapping[str, str]) -> dict[str, str]:
    """What the UI's Source column shows for a run with ``tags``: an evaluation's configuration
    file (``params/bm25.yaml``), else the command that made it (``rageval gate``)."""
    kind = tags.get(KIND_TAG, "")
    name = tags.get("rageval.config.file") if kind == "evaluation" else None
    return {"mlflow.source.name": name or (f"rageval {kind}" if kind else "rageval"), "mlflow.source.type": "LOCAL"}


# What every sealed evaluation run holds; a run without them is not an evaluation run.
EVALUATION_ARTIFACTS = (
    "config.yaml",
    "per_query_metrics.parquet",
    "queries.parquet",
    "rankings.parquet",
    "latency.parquet",
)


@dataclass
class Record:
    """What to write into a run: artifacts by path, metrics, tags."""

    files: dict[str, bytes] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)  # name → frame: tables/NAME.{json,csv,parquet}


def parquet(frame: pd.DataFrame) -> bytes:
    return frame.to_parquet(index=False)


def csv(frame: pd.DataFrame, *, index: bool = False) -> bytes:
    """CSV a spreadsheet opens safely: corpus and query text never becomes a live formula."""
    return csv_bytes(frame, index=index)


def as_json(value: Any) -> bytes:
    return json.dumps(value, indent=2, sort_keys=True).encode()


# --------------------------------------------------------------------------- an evaluation run


# The most top-level metrics an evaluation run shows (the UI draws one chart per metric); every
# breakdown is a table artifact instead (:func:`breakdown_tables`).
MAX_METRICS = 40
# What is logged beside the record (the tracker's logging time): within MAX_METRICS too. A run's
# time is MLflow's own Duration column, its steps the table run_timings (run_time_s until 2026-12).
# No "/" in these keys: a prefix is a chart section, and the UI shows every named section before the
# unprefixed keys (the measures), so "time_s/…" opened the chart view (runs before 2026-12: time_s/…).
LOGGING_METRIC = "logging_time_s"
RUN_METRICS = (LOGGING_METRIC,)
HEADLINE_METRICS = MAX_METRICS - len(RUN_METRICS)  # the record's own share
# The figures beside the measures a reviewer reads at a glance (one column each); the rest of
# :func:`metric_names` is the table ``tables/more_metrics``.
OPERATIONAL_METRICS = (
    "queries_total",
    "queries_evaluated",
    "queries_skipped",  # `rageval run` prints it; the demo's unanswerable cases
    "queries_failed",
    "permission_leaks",
    "context_tokens_mean",
)
# Present only where they mean something: abstention (configured) and calls to a service (http stages).
OPERATIONAL_PREFIXES = ("abstention/", "external_calls/")
TABLES_TAG = "mlflow.loggedArtifacts"  # what ``MlflowClient.log_table`` sets: the UI lists these as tables


def metric_names(result: ExperimentResult) -> dict[str, float]:
    """The headline metrics of a result under their MLflow keys (see
    :func:`rageval.evaluation.metric_key`): the configured measures overall, query counts, leaks,
    p95 latency, context tokens, duplicates and abstention. Breakdowns (slices, cache hits,
    stages, latency per step, diagnostics, evidence, timings) are tables: :func:`breakdown_tables`."""
    out: dict[str, float] = {}
    for measure, value in result.evaluation.aggregates.items():
        out[metric_key(measure)] = value
    # Not "evidence/…": that prefix was the evidence trail's breakdown, now a table.
    for name, value in result.evidence_means().items():
        out[str(name)] = value
    out.update(result.counts())
    percentiles = result.latency_percentiles()
    if "total" in percentiles.index:
        out["latency/total/p50_ms"] = percentiles.loc["total", "p50_ms"]
        out["latency/total/p95_ms"] = percentiles.loc["total", "p95_ms"]
    out["duplicates_dropped"] = result.evaluation.duplicates
    if result.abstention is not None:
        out["abstention/threshold"] = result.abstention.threshold
        out["abstention/rate"] = result.abstention.abstention_rate
        out["abstention/false_confidence_rate"] = result.abstention.false_confidence_rate
        out["abstention/wrongful_rate"] = result.abstention.wrongful_abstention_rate
    out["context_tokens_mean"] = float(result.context_tokens.mean()) if len(result.context_tokens) else 0.0
    diagnostics = result.diagnostics
    if diagnostics is not None and not diagnostics.empty:
        for column in ("context_tokens_dedup", "context_chunks", "unique_parents", "overlap_ratio", "exact_duplicates"):
            out[f"{column}_mean"] = float(diagnostics[column].mean())
    # Cache hits are no headline (and a "cache/" chart section would come first in the UI): they are
    # the table tables/cache and the tags rageval.cache.STAGE.
    out["external_calls"] = sum(result.external_calls.values())
    out["time_s/experiment"] = sum(result.timings.values())
    # Parent-level measures last: they take the headline places left over, the rest go to more_metrics
    # (every level's means are in tables/levels either way).
    if result.parent is not None:
        for measure, value in result.parent.aggregates.items():
            out[PARENT_PREFIX + metric_key(measure)] = value
    return {k: float(v) for k, v in out.items() if pd.notna(v)}


def breakdown_tables(result: ExperimentResult) -> dict[str, pd.DataFrame]:
    """Every breakdown of a result, by table name: what used to be hundreds of one-point metrics."""
    measures = list(result.evaluation.per_query.columns)
    tables: dict[str, pd.DataFrame] = {}
    slices = result.slices.rename_axis("slice").reset_index()
    evidence = [c for c in slices.columns if str(c).startswith("evidence_")]
    tables["slices"] = slices[["slice", "queries", *[m for m in measures if m in slices.columns], *evidence]]
    latency = result.latency_percentiles().rename_axis("stage").reset_index()
    tables["latency"] = latency
    tables["levels"] = result.level_aggregates()
    stages = result.stage_table()
    if not stages.empty:
        tables["stages"] = stages.rename_axis("stage").reset_index()
    if result.evidence is not None and not result.evidence.empty:
        lost = result.evidence["lost_at"].value_counts()
        rows = [("lost_at", stage, int(lost.get(stage, 0))) for stage in [*result.stage_names, "context"]]
        rows += [("status", str(s), int(n)) for s, n in result.evidence["status"].value_counts().items()]
        tables["evidence"] = pd.DataFrame(rows, columns=["count", "of", "items"])
    diagnostic = dict(result.evaluation.diagnostic_means.items())
    if diagnostic:
        tables["diagnostics"] = pd.DataFrame(
            {"diagnostic": [str(k) for k in diagnostic], "mean": [float(v) for v in diagnostic.values()]}
        )
    stage_names = list(dict.fromkeys([*result.cache_hits, *result.external_calls]))
    if stage_names:
        tables["cache"] = pd.DataFrame(
            {
                "stage": stage_names,
                "cache": ["hit" if result.cache_hits.get(s) else "miss" for s in stage_names],
                "external_calls": [int(result.external_calls.get(s, 0)) for s in stage_names],
                "retries": [int(result.call_counts.get(s, {}).get("retries", 0)) for s in stage_names],
                "failures": [int(result.call_counts.get(s, {}).get("failures", 0)) for s in stage_names],
            }
        )
    tables["timings"] = pd.DataFrame(
        {"step": list(result.timings), "seconds": [float(v) for v in result.timings.values()]}
    )
    return tables


def table_json(frame: pd.DataFrame) -> bytes:
    """A table as ``MlflowClient.log_table`` writes it (``{"columns": [...], "data": [[...]]}``),
    which the MLflow UI shows as a table."""
    text = frame.to_json(orient="split", index=False, date_format="iso")
    return text.encode()


def table_files(name: str, frame: pd.DataFrame) -> dict[str, bytes]:
    """One table as ``tables/NAME.json`` (the UI's table), ``.csv`` (a spreadsheet) and ``.parquet`` (code)."""
    return {
        f"tables/{name}.json": table_json(frame),
        f"tables/{name}.csv": csv(frame),
        f"tables/{name}.parquet": parquet(frame),
    }


def tables_tag(paths: Sequence[str]) -> str:
    """The ``mlflow.loggedArtifacts`` value naming ``paths`` as tables (as ``log_table`` records them)."""
    return json.dumps([{"path": p, "type": "table"} for p in paths])


def read_table(data: bytes) -> pd.DataFrame:
    """A table written by :func:`table_json`, back as a frame."""
    body = json.loads(data)
    return pd.DataFrame(body["data"], columns=body["columns"])


def all_metrics(metrics: Mapping[str, float], more: pd.DataFrame | None) -> dict[str, float]:
    """An evaluation run's every figure: its metric columns and the rows of its ``tables/more_metrics``."""
    rows = {} if more is None else dict(zip(more["metric"], more["value"], strict=True))
    return {**metrics, **{str(k): float(v) for k, v in rows.items()}}


def evaluation_record(result: ExperimentResult, figures: Mapping[str, bytes] | None = None) -> Record:
    """An experiment's metrics, breakdown tables, figures (PNG bytes by file name), per-query
    artifacts and tags, as a sealed evaluation run holds them."""
    evaluation = result.evaluation
    every = metric_names(result)
    tables = breakdown_tables(result)
    metrics, more = _headline_metrics(result, every)
    if not more.empty:
        tables["more_metrics"] = more
    record = Record(metrics=metrics, tables=tables)
    files = record.files
    for name, data in (figures or {}).items():
        files[f"figures/{name}"] = data
    files["rankings.parquet"] = parquet(result.rankings)
    files["per_query_metrics.parquet"] = parquet(result.per_query_long())
    files["latency.parquet"] = parquet(result.latency)
    if result.warnings:
        record.tags["rageval.warnings"] = " | ".join(result.warnings)
    files["metric_contract.json"] = as_json(evaluation.contract)
    if not evaluation.diagnostics.empty:
        files["diagnostics.parquet"] = parquet(evaluation.diagnostics.reset_index())
    if result.abstention is not None:
        files["abstention.parquet"] = parquet(result.abstention.per_query.reset_index())
    if result.stage_rankings is not None:
        files["stage_rankings.parquet"] = parquet(result.stage_rankings)
        files["stages.parquet"] = parquet(result.stage_metrics)
        files["evidence.parquet"] = parquet(result.evidence)
        files["stages.csv"] = csv(result.stage_table(), index=True)
    if result.models:
        files["models.json"] = as_json(result.models)
        # one tag for every stage's model, one for every stage's cache (not a column per stage)
        record.tags["rageval.models"] = ", ".join(
            f"{stage} {m['name']}@{m['sha256'][:12]}" for stage, m in result.models.items()
        )
    if result.cache_hits:
        record.tags["rageval.cache"] = ", ".join(
            f"{stage} {'hit' if hit else 'miss'}" for stage, hit in result.cache_hits.items()
        )
    files["queries.parquet"] = parquet(_queries_table(result))
    files["slices.csv"] = csv(result.slices, index=True)
    files["failures.json"] = json.dumps(result.failures.to_dict(orient="records"), indent=2).encode()
    summary = _summary(result, every)
    files["metrics.json"] = as_json(summary)
    record.tags[LATENCY_TAG] = latency_text(summary["latency"])
    return record


def _headline_metrics(result: ExperimentResult, every: Mapping[str, float]) -> tuple[dict[str, float], pd.DataFrame]:
    """Headline columns: the measures and the operational few (up to HEADLINE_METRICS, measures
    first); every other figure (parent level, context diagnostics, p50, timings…) as the rows of
    tables/more_metrics, kept whole rather than dropped."""
    measures = {metric_key(m) for m in result.evaluation.aggregates.index}
    headline = [k for k in every if k in measures or k in OPERATIONAL_METRICS or k.startswith(OPERATIONAL_PREFIXES)]
    metrics = {k: every[k] for k in headline[:HEADLINE_METRICS]}
    more = [k for k in every if k not in metrics]
    return metrics, pd.DataFrame({"metric": more, "value": [every[k] for k in more]})


def _queries_table(result: ExperimentResult) -> pd.DataFrame:
    """One row per case of the run's split: its slices, whether answerable, its context tokens,
    whether it failed, and its diagnostics and context evidence where measured."""
    cases = {c.queryId: c for c in result.benchmark.cases_for(result.config.split)}
    failed = set(result.failures["query_id"])
    queries = pd.DataFrame(
        {
            "query_id": list(cases),
            "slices": [list(c.slice) for c in cases.values()],
            "answerable": [c.answerable for c in cases.values()],
            "context_tokens": [int(result.context_tokens.get(q, 0)) for q in cases],
            "failed": [q in failed for q in cases],
        }
    )
    if result.diagnostics is not None and not result.diagnostics.empty:
        extra = result.diagnostics.drop(columns="context_tokens").reindex(list(cases))
        queries = queries.join(extra, on="query_id")
    if result.context_evidence is not None:
        evidence = result.context_evidence.drop(columns="context_tokens").reindex(list(cases))
        queries = queries.join(evidence, on="query_id")
    return queries


def _summary(result: ExperimentResult, every: Mapping[str, float]) -> dict[str, Any]:
    """metrics.json: the run's measures, definitions, aggregates per level, evidence means, warnings,
    skipped and missing queries, counts, and what its recorded latency means."""
    evaluation = result.evaluation
    summary = {
        "level": result.level,
        "measures": {m.key: m.text for m in evaluation.measures},
        "definitions": evaluation.definitions(),
        "aggregates": {m: (None if pd.isna(v) else float(v)) for m, v in evaluation.aggregates.items()},
        "levels": {
            level: {m: (None if pd.isna(v) else float(v)) for m, v in measured.aggregates.items()}
            for level, measured in result.levels.items()
        },
        "evidence": {str(k): (None if pd.isna(v) else float(v)) for k, v in result.evidence_means().items()},
        "warnings": list(result.warnings),
        "skipped_queries": list(evaluation.skipped),
        "missing_queries": list(evaluation.missing),
        "counts": result.counts(),
    }
    # The p95 is no metric column (a "latency/" chart section would open the chart view, and a bare
    # number hides its clock and load): it is a row of tables/more_metrics and the tag rageval.latency.
    summary["latency"] = latency_context(every.get("latency/total/p95_ms"))
    return summary


# What a run's recorded latency means: its clock and the machine's load when it was recorded (the tag
# LATENCY_TAG, defined beside RunInfo, which the comparison reads).
LATENCY_CLOCK = "wall (time.perf_counter), each query in turn, in the evaluating process"


def latency_context(p95_ms: float | None) -> dict[str, Any]:
    """The recorded p95 with the clock it was read on and the load it ran under (the 1-minute load
    average when the result is recorded, right after the queries ran, against the usable CPUs): a
    figure timed beside other work is noise, and says so. A gate times a pair interleaved instead."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 0)
    load = round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None
    return {"p95_ms": p95_ms, "clock": LATENCY_CLOCK, "load_1min": load, "cpus": cpus}


def latency_text(context: Mapping[str, Any]) -> str:
    """``p95 14.6 ms, wall clock, load 0.3 on 8 CPUs`` (``busy`` when the load is above the CPUs)."""
    p95 = context.get("p95_ms")
    load, cpus = context.get("load_1min"), context.get("cpus") or 0
    shown = "no latency recorded" if p95 is None else f"p95 {p95:.1f} ms"
    busy = load is not None and cpus and load > cpus
    where = "load unknown" if load is None else f"load {load:g} on {cpus} CPUs" + (" (busy: noisy)" if busy else "")
    return f"{shown}, wall clock, {where}"


def read_evaluation(info: RunInfo, root: Path) -> RunArtifacts:
    """A sealed evaluation run's configuration and per-query tables, from its downloaded artifacts."""
    from rageval.errors import TrackingError

    missing = [name for name in EVALUATION_ARTIFACTS if not (root / name).is_file()]
    if missing:
        raise TrackingError(f"run {info.run_id} is not an evaluation run: it lacks {', '.join(missing)}")
    return RunArtifacts(
        info=info,
        config_yaml=(root / "config.yaml").read_text(encoding="utf-8"),
        per_query=pd.read_parquet(root / "per_query_metrics.parquet"),
        queries=pd.read_parquet(root / "queries.parquet"),
        rankings=pd.read_parquet(root / "rankings.parquet"),
        latency=pd.read_parquet(root / "latency.parquet"),
        stages=pd.read_parquet(root / "stages.parquet") if (root / "stages.parquet").is_file() else None,
        # The contract record every evaluation run holds (older runs may lack it).
        contract=json.loads((root / "metric_contract.json").read_text(encoding="utf-8"))
        if (root / "metric_contract.json").is_file()
        else None,
    )


# --------------------------------------------------------------------------- a comparison run


def comparison_record(comparison: Comparison, figures: Mapping[str, Figure]) -> Record:
    """A comparison's tables (CSV and parquet), per-query diffs, figures and headline metrics."""
    files = {
        "comparison.parquet": parquet(comparison.table),
        "comparison.csv": csv(comparison.table),
        "overall.csv": csv(comparison.overall),
        "slices.csv": csv(comparison.slices),
        "per_query_deltas.parquet": parquet(comparison.per_query),
        "per_query_diff.csv": csv(comparison.diffs),
        "recall_at_k.csv": csv(comparison.recall),
        # The results table to paste: rounded, significance marked, latency and context beside.
        **{name: render(comparison, form).encode() for form, name in RESULT_FILES.items()},
        "results.csv": csv(results_table(comparison), index=True),
    }
    if not comparison.stages.empty:
        files["stages.csv"] = csv(comparison.stages)
    if not comparison.frontier.empty:
        files["frontier.csv"] = csv(comparison.frontier)
    files["comparison.json"] = as_json(
        {
            "baseline": comparison.baseline_run_id,
            "candidates": comparison.candidates,
            "measures": comparison.measures,
            "settings": comparison.settings,
            "differences": comparison.differences,
            "warnings": comparison.warnings,
        }
    )
    from rageval.analysis.plots import png

    for name, figure in figures.items():
        files[f"figures/{name}"] = png(figure)
    # Every candidate × measure's delta and p-value is one table, not two metric keys each.
    return Record(files=files, metrics=comparison.metrics(), tables={"deltas": comparison.deltas()})


# --------------------------------------------------------------------------- the environment
