"""The record layout of rageval's runs, apart from the store that holds them: which artifacts,
metrics and tags an evaluation or a comparison becomes, and how a sealed evaluation run is read
back (what a seal covers and how it is checked: :mod:`rageval.tracking.seal`). Pure: no mlflow
here; :class:`~rageval.tracking.store.Tracker` performs the reads and writes.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from rageval.analysis.export import render, results_table
from rageval.analysis.formats import RESULT_FILES
from rageval.analysis.records import RunArtifacts, RunInfo
from rageval.evaluation import metric_key
from rageval.safety import csv_bytes

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from rageval.analysis import Comparison
    from rageval.experiment.run import ExperimentResult

SEAL_TAG = "rageval.seal"
ERROR_TAG = "rageval.error"
MANIFEST = "manifest.json"
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


def parquet(frame: pd.DataFrame) -> bytes:
    return frame.to_parquet(index=False)


def csv(frame: pd.DataFrame, *, index: bool = False) -> bytes:
    """CSV a spreadsheet opens safely: corpus and query text never becomes a live formula."""
    return csv_bytes(frame, index=index)


def as_json(value: Any) -> bytes:
    return json.dumps(value, indent=2, sort_keys=True).encode()


def png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    return buffer.getvalue()


# --------------------------------------------------------------------------- an evaluation run


def metric_names(result: ExperimentResult) -> dict[str, float]:
    """Every metric of a result under its MLflow key (see :func:`rageval.evaluation.metric_key`)."""
    out: dict[str, float] = {}
    for measure, value in result.evaluation.aggregates.items():
        out[metric_key(measure)] = value
    for label, row in result.slices.iterrows():
        out[f"slice/{metric_key(str(label))}/queries"] = row["queries"]
        for measure in result.evaluation.per_query.columns:
            out[f"slice/{metric_key(str(label))}/{metric_key(measure)}"] = row[measure]
    out.update(result.counts())
    for stage, row in result.latency_percentiles().iterrows():
        path = "/".join(metric_key(part) for part in str(stage).split(":"))  # dense:embed → dense/embed
        for name, value in row.items():
            out[f"latency/{path}/{name}"] = value
    for stage, row in result.stage_table().iterrows():
        for name, value in row.items():
            out[f"stage/{metric_key(str(stage))}/{metric_key(str(name))}"] = value
    if result.evidence is not None and not result.evidence.empty:
        lost = result.evidence["lost_at"].value_counts()
        for stage in [*result.stage_names, "context"]:
            out[f"evidence/lost_at/{metric_key(stage)}"] = int(lost.get(stage, 0))
        for status, n in result.evidence["status"].value_counts().items():
            out[f"evidence/{metric_key(str(status))}"] = int(n)
    for name, value in result.evaluation.diagnostic_means.items():
        out[f"diagnostic/{metric_key(str(name))}"] = value
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
    for stage, hit in result.cache_hits.items():
        out[f"cache/{metric_key(stage)}/hit"] = int(hit)
    for stage, calls in result.external_calls.items():
        out[f"external_calls/{metric_key(stage)}"] = calls
    for stage, seconds in result.timings.items():
        out[f"time_s/{stage}"] = seconds
    return {k: float(v) for k, v in out.items() if pd.notna(v)}


def evaluation_record(result: ExperimentResult) -> Record:
    """An experiment's metrics, per-query artifacts and tags, as a sealed evaluation run holds them."""
    evaluation = result.evaluation
    record = Record(metrics=metric_names(result))
    files = record.files
    files["rankings.parquet"] = parquet(result.rankings)
    files["per_query_metrics.parquet"] = parquet(evaluation.long())
    files["latency.parquet"] = parquet(result.latency)
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
        record.tags.update(
            {f"rageval.model.{stage}": f"{m['name']}@{m['sha256'][:12]}" for stage, m in result.models.items()}
        )
    record.tags.update({f"rageval.cache.{stage}": "hit" if hit else "miss" for stage, hit in result.cache_hits.items()})
    files["queries.parquet"] = parquet(queries)
    files["slices.csv"] = csv(result.slices, index=True)
    files["failures.json"] = json.dumps(result.failures.to_dict(orient="records"), indent=2).encode()
    summary = {
        "level": result.level,
        "measures": {m.key: m.text for m in evaluation.measures},
        "definitions": evaluation.definitions(),
        "aggregates": {m: (None if pd.isna(v) else float(v)) for m, v in evaluation.aggregates.items()},
        "skipped_queries": list(evaluation.skipped),
        "missing_queries": list(evaluation.missing),
        "counts": result.counts(),
    }
    files["metrics.json"] = as_json(summary)
    return record


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
        contract=json.loads((root / "contract.json").read_text()) if (root / "contract.json").is_file() else None,
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
    for name, figure in figures.items():
        files[f"figures/{name}"] = png(figure)
    return Record(files=files, metrics=comparison.metrics())


# --------------------------------------------------------------------------- the environment


def environment() -> str:
    """Installed distributions, one ``name==version`` a line: the run's environment."""
    from importlib.metadata import distributions

    names = sorted({f"{d.metadata['Name']}=={d.version}" for d in distributions() if d.metadata["Name"]}, key=str.lower)
    return "\n".join(names) + "\n"
