"""``rageval run``: configuration → MLflow run → executed notebook → sealed run.

Order matters for honesty: everything that can be checked is checked before a run exists
(configuration, overrides, notebook parameters, the benchmark and its hashes). The notebook then
logs results into the run; the executed notebook is attached; the run is sealed last. A notebook
error ends the run FAILED (never sealed); a killed process leaves a RUNNING, unsealed run that
nothing treats as a result.
"""

from __future__ import annotations

import json
import platform
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from rageval import __version__
from rageval.benchmark import Benchmark, load_benchmark
from rageval.chunking import config_hash
from rageval.config import dump_config, flatten, load_config
from rageval.errors import NotebookExecutionError
from rageval.metrics import CONTRACT, parse_measures
from rageval.notebooks import check_parameters, execute_notebook
from rageval.schema import RunConfig
from rageval.tracking import Tracker, environment, project_root

# What rageval passes to every evaluation notebook; its parameters cell must declare them.
RUN_PARAMETERS = ("config_yaml", "run_id", "tracking_uri")


def default_notebook() -> Path:
    return project_root() / "notebooks" / "evaluate.ipynb"


@dataclass(frozen=True)
class RunOutcome:
    run_id: str
    experiment: str
    sealed: str  # the manifest's sha256
    metrics: dict[str, float]
    measures: dict[str, str]  # MLflow key → measure string
    seconds: dict[str, float]


def git_state(path: Path) -> dict[str, str]:
    """Commit and dirtiness of the git checkout holding ``path`` ('unknown' outside git)."""
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=path, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {"rageval.git.commit": "unknown", "rageval.git.dirty": "unknown"}
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return {"rageval.git.commit": commit, "rageval.git.dirty": str(bool(dirty)).lower(), "mlflow.source.git.commit": commit}


def run_tags(config: RunConfig, benchmark: Benchmark, config_file: Path) -> dict[str, str]:
    level = benchmark.spec.relevanceUnit if config.evaluation.level == "auto" else config.evaluation.level
    return {
        **git_state(config_file.resolve().parent),
        "rageval.version": __version__,
        "rageval.config.name": config.name,
        "rageval.config.file": str(config_file),
        "rageval.benchmark.name": benchmark.spec.name,
        "rageval.benchmark.version": benchmark.spec.version,
        "rageval.benchmark.corpus_version": benchmark.spec.corpusVersion,
        "rageval.hash.corpus": benchmark.hashes["corpus"],
        "rageval.hash.cases": benchmark.hashes["cases"],
        "rageval.hash.qrels": benchmark.hashes["qrels"],
        "rageval.chunking.hash": config_hash(config.chunking),
        "rageval.split": config.split,
        "rageval.level": level,
        "rageval.python": platform.python_version(),
        "rageval.platform": platform.platform(),
    }


def run_params(config: RunConfig, overrides: Sequence[str]) -> dict[str, Any]:
    params = flatten(config.model_dump(mode="json"))
    for measure in parse_measures(config.evaluation.measures):
        params[f"measure.{measure.key}"] = measure.text
        params[f"measure_definition.{measure.key}"] = measure.definition
    params["rageval.overrides"] = list(overrides)
    params["metrics.contract"] = CONTRACT
    return params


def cases_frame(benchmark: Benchmark, split: str) -> pd.DataFrame:
    rows = [case.model_dump(mode="json", exclude_none=True) for case in benchmark.cases_for(split)]
    return pd.DataFrame(
        {
            "queryId": [r["queryId"] for r in rows],
            "query": [r["query"] for r in rows],
            "slice": [",".join(r.get("slice", [])) for r in rows],
            "relevant": [json.dumps(r["relevant"]) for r in rows],
            "split": [r["split"] for r in rows],
        }
    )


def execute_run(
    config_file: str | Path,
    *,
    overrides: Sequence[str] = (),
    benchmark: str | Path | None = None,
    split: str | None = None,
    tracking_uri: str | None = None,
    experiment: str | None = None,
    notebook: str | Path | None = None,
    notebook_parameters: Mapping[str, Any] | None = None,
    timeout: int | None = None,
) -> RunOutcome:
    """Run one configuration through the evaluation notebook and seal the MLflow run."""
    started = time.perf_counter()
    config_file = Path(config_file)
    config = load_config(config_file, overrides, benchmark=benchmark, split=split)
    notebook = Path(notebook) if notebook else default_notebook()
    extra = dict(notebook_parameters or {})
    check_parameters(notebook, extra, required=RUN_PARAMETERS)
    bench = load_benchmark(config.benchmark)
    bench.cases_for(config.split)  # an undeclared split fails here, before a run exists

    recorded_overrides = [*overrides]
    if benchmark is not None:
        recorded_overrides.append(f"benchmark={config.benchmark}")
    if split is not None:
        recorded_overrides.append(f"split={split}")
    tracker = Tracker(tracking_uri)
    experiment = experiment or bench.spec.name
    config_yaml = dump_config(config)
    run_id = tracker.create_run(
        experiment,
        f"{config.name}@{config.split}",
        params=run_params(config, recorded_overrides),
        tags=run_tags(config, bench, config_file),
        files={"config.yaml": config_yaml.encode(), "environment.txt": environment().encode()},
        dataset=cases_frame(bench, config.split),
        dataset_name=f"{bench.spec.name}-{bench.spec.version}-{config.split}",
        dataset_source=str(bench.path),
        dataset_digest=bench.hashes["cases"][:16],
        dataset_context=config.split,
    )
    prepared = time.perf_counter()

    with tempfile.TemporaryDirectory(prefix="rageval-run-") as tmp:
        executed = Path(tmp) / notebook.name
        parameters = {**extra, "config_yaml": config_yaml, "run_id": run_id, "tracking_uri": tracker.uri}
        try:
            execute_notebook(notebook, executed, parameters, timeout=timeout)
        except BaseException as exc:  # a cell error, a timeout, or Ctrl-C: the run ends FAILED
            message = f"{type(exc).__name__}: {exc}"
            tracker.fail(run_id, message, executed if executed.exists() else None)
            if isinstance(exc, Exception):
                raise NotebookExecutionError(f"run {run_id} FAILED: {message}", run_id=run_id) from exc
            raise
        executed_at = time.perf_counter()
        try:
            timings = notebook_timings(executed)
            tracker.log_file(run_id, f"notebook/{notebook.name}", executed)
            timings["prepare"] = prepared - started
            timings["notebook"] = executed_at - prepared
            tracker.log_metrics(run_id, {f"time_s/{k}": v for k, v in timings.items()})
            digest = tracker.seal(run_id)
        except Exception as exc:
            tracker.fail(run_id, f"sealing failed: {type(exc).__name__}: {exc}")
            raise
    timings["seal"] = time.perf_counter() - executed_at
    info = tracker.run(run_id)
    measures = {m.key: m.text for m in parse_measures(config.evaluation.measures)}
    return RunOutcome(run_id, experiment, digest, info.metrics, measures, timings)


def notebook_timings(path: Path) -> dict[str, float]:
    """Kernel start-up: from papermill's start to the first cell's start."""
    import nbformat

    notebook = nbformat.read(path, as_version=4)
    start = notebook.metadata.get("papermill", {}).get("start_time")
    cells = [c.metadata.get("papermill", {}).get("start_time") for c in notebook.cells if c.cell_type == "code"]
    cells = [c for c in cells if c]
    if not start or not cells:
        return {}
    first = min(datetime.fromisoformat(c) for c in cells)
    return {"kernel_start": (first - datetime.fromisoformat(start)).total_seconds()}
