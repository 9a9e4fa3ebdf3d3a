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
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from rageval import __version__
from rageval.benchmark import Benchmark, load_benchmark
from rageval.chunking import config_hash
from rageval.config import dump_config, flatten, load_config
from rageval.contract import CONTRACT_DIGEST
from rageval.errors import ComparisonError, NotebookExecutionError, TrackingError
from rageval.gate import RELEASE_SPLIT, Decision
from rageval.metrics import CONTRACT, metric_key, parse_measures
from rageval.notebooks import check_parameters, execute_notebook
from rageval.schema import RunConfig
from rageval.tracking import RunInfo, Tracker, environment, project_root, sha256_bytes

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
    return {
        "rageval.git.commit": commit,
        "rageval.git.dirty": str(bool(dirty)).lower(),
        "mlflow.source.git.commit": commit,
    }


def git_diff(path: Path) -> bytes:
    """The uncommitted changes to tracked files of the checkout holding ``path`` (``git diff
    HEAD``), recorded with a run made from a dirty tree so that it can be reproduced."""
    try:
        done = subprocess.run(["git", "diff", "HEAD", "--binary"], cwd=path, capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return b""
    return done.stdout if done.returncode == 0 else b""


def run_tags(config: RunConfig, benchmark: Benchmark, config_file: Path, family: str | None = None) -> dict[str, str]:
    level = benchmark.spec.relevanceUnit if config.evaluation.level == "auto" else config.evaluation.level
    return {
        **git_state(config_file.resolve().parent),
        "rageval.version": __version__,
        "rageval.config.name": config.name,
        # Release evaluations are counted per family: a sweep's members share their base's.
        "rageval.config.family": family or config.name,
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
    params["metrics.contract_digest"] = CONTRACT_DIGEST
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
    run_name: str | None = None,
    tags: Mapping[str, str] | None = None,
    family: str | None = None,
    cancel: threading.Event | None = None,
) -> RunOutcome:
    """Run one configuration through the evaluation notebook and seal the MLflow run.

    ``tags`` are added to the run's own (a sweep's parent link); ``family`` names the
    configuration family release evaluations are counted in (default: the config's name). When
    ``cancel`` is set while the notebook runs (a sweep was interrupted), the run ends KILLED.
    """
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
    all_tags = {**run_tags(config, bench, config_file, family), **(tags or {})}
    dirty = all_tags.get("rageval.git.dirty") == "true"
    run_id = tracker.create_run(
        experiment,
        run_name or f"{config.name}@{config.split}",
        params=run_params(config, recorded_overrides),
        tags=all_tags,
        files={
            "config.yaml": config_yaml.encode(),
            "environment.txt": environment().encode(),
            **({"git/diff.patch": git_diff(config_file.resolve().parent)} if dirty else {}),
        },
        dataset=cases_frame(bench, config.split),
        dataset_name=f"{bench.spec.name}-{bench.spec.version}-{config.split}",
        dataset_source=str(bench.path),
        dataset_digest=bench.hashes["cases"][:16],
        dataset_context=config.split,
    )
    if config.split == RELEASE_SPLIT:
        try:
            record_release_evaluation(tracker, run_id, bench, family or config.name)
        except Exception as exc:
            tracker.fail(run_id, f"counting the release evaluation failed: {type(exc).__name__}: {exc}")
            raise
    prepared = time.perf_counter()

    with tempfile.TemporaryDirectory(prefix="rageval-run-") as tmp:
        executed = Path(tmp) / notebook.name
        parameters = {**extra, "config_yaml": config_yaml, "run_id": run_id, "tracking_uri": tracker.uri}
        try:
            if cancel is not None and cancel.is_set():
                raise InterruptedError("the sweep was interrupted before this run's notebook started")
            execute_notebook(notebook, executed, parameters, timeout=timeout)
        except BaseException as exc:  # a cell error, a timeout, or Ctrl-C: the run ends FAILED (KILLED when cancelled)
            message = f"{type(exc).__name__}: {exc}"
            partial = executed if executed.exists() else None
            killed = cancel is not None and cancel.is_set()
            if killed:
                tracker.kill(run_id, f"interrupted: {message}", partial)
            else:
                tracker.fail(run_id, message, partial)
            if isinstance(exc, Exception):
                status = "KILLED" if killed else "FAILED"
                raise NotebookExecutionError(f"run {run_id} {status}: {message}", run_id=run_id) from exc
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


# --------------------------------------------------------------------------- release evaluations


def record_release_evaluation(tracker: Tracker, run_id: str, bench: Benchmark, family: str) -> int:
    """Count this run among the release evaluations of its benchmark version and family, and
    show the count on the run (tag and metric)."""
    count = tracker.count_release_evaluations(
        bench.spec.name, bench.spec.version, family, until_ms=tracker.started_ms(run_id)
    )
    tracker.set_tags(run_id, {"rageval.release.evaluations": str(count)})
    tracker.log_metrics(run_id, {"release_evaluations": count})
    return count


def release_warnings(tracker: Tracker, infos: Sequence[RunInfo], limit: int) -> list[str]:
    """A warning per release-split run whose family has had more than ``limit`` release evaluations."""
    from rageval.gate import release_warning

    out = []
    for info in infos:
        if info.tags.get("rageval.split") != RELEASE_SPLIT:
            continue
        family = info.tags.get("rageval.config.family") or info.tags.get("rageval.config.name", "")
        count = tracker.count_release_evaluations(
            info.tags.get("rageval.benchmark.name", ""), info.tags.get("rageval.benchmark.version", ""), family
        )
        warning = release_warning(count, limit, family, info.run_id)
        if warning:
            out.append(warning)
    return out


def _sealed_and_intact(tracker: Tracker, run_id: str) -> RunInfo:
    info = tracker.run(run_id)
    if not info.sealed:
        raise ComparisonError(f"run {run_id} is {info.status} and not sealed: only sealed runs are results")
    tracker.verify_or_raise(run_id)
    return info


def _execute_into(
    tracker: Tracker, run_id: str, notebook: Path, parameters: Mapping[str, Any], timeout: int | None
) -> None:
    """Execute ``notebook`` logging into ``run_id``, attach it and seal; FAILED on any error."""
    with tempfile.TemporaryDirectory(prefix="rageval-nb-") as tmp:
        executed = Path(tmp) / notebook.name
        try:
            execute_notebook(
                notebook, executed, {**parameters, "run_id": run_id, "tracking_uri": tracker.uri}, timeout=timeout
            )
            tracker.log_file(run_id, f"notebook/{notebook.name}", executed)
        except BaseException as exc:
            message = f"{type(exc).__name__}: {exc}"
            tracker.fail(run_id, message, executed if executed.exists() else None)
            if isinstance(exc, Exception):
                raise NotebookExecutionError(f"run {run_id} FAILED: {message}", run_id=run_id) from exc
            raise


# --------------------------------------------------------------------------- comparison

COMPARE_PARAMETERS = ("baseline", "candidates", "sweep", "allow_mismatch", "notes", "run_id", "tracking_uri")
DEFAULT_MAX_RELEASE_EVALUATIONS = 5


def default_compare_notebook() -> Path:
    return project_root() / "notebooks" / "compare.ipynb"


@dataclass(frozen=True)
class ComparisonOutcome:
    run_id: str
    experiment: str
    sealed: str
    baseline: str
    candidates: list[str]
    overall: pd.DataFrame
    differences: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def execute_comparison(
    baseline: str,
    candidates: Sequence[str] = (),
    *,
    sweep: str | None = None,
    allow_mismatch: bool = False,
    tracking_uri: str | None = None,
    experiment: str | None = None,
    notebook: str | Path | None = None,
    notebook_parameters: Mapping[str, Any] | None = None,
    timeout: int | None = None,
    max_release_evaluations: int = DEFAULT_MAX_RELEASE_EVALUATIONS,
) -> ComparisonOutcome:
    """Check the runs (sealed, intact, comparable), then execute the comparison notebook into a
    new comparison run and seal it."""
    from rageval.compare import check_comparable

    tracker = Tracker(tracking_uri)
    notebook = Path(notebook) if notebook else default_compare_notebook()
    extra = dict(notebook_parameters or {})
    check_parameters(notebook, extra, required=COMPARE_PARAMETERS)
    base = _sealed_and_intact(tracker, baseline)
    ids = list(dict.fromkeys(candidates))
    left_out = []
    if sweep is not None:
        parent = tracker.run(sweep)
        if parent.tags.get("rageval.kind") != "sweep":
            raise ComparisonError(f"run {sweep} is not a sweep's parent run (no rageval.kind=sweep tag)")
        for child in tracker.children(sweep):
            if not child.sealed:
                left_out.append(f"sweep member {child.name} ({child.run_id}) is {child.status}, not sealed: left out")
            elif child.run_id not in ids:
                ids.append(child.run_id)
    ids = [i for i in ids if i != baseline]
    if not ids:
        raise ComparisonError("nothing to compare: give --candidate RUN, or --sweep PARENT with sealed members")
    infos = [_sealed_and_intact(tracker, i) for i in ids]
    found = check_comparable(base, infos, allow_mismatch=allow_mismatch)
    release = release_warnings(tracker, infos, max_release_evaluations)
    warnings = left_out + release

    name = experiment or tracker.experiment_name(base.experiment_id)
    names = ", ".join(i.name for i in infos[:3]) + (f" and {len(infos) - 3} more" if len(infos) > 3 else "")
    tags = {
        **git_state(project_root()),
        "rageval.version": __version__,
        "rageval.kind": "comparison",
        "rageval.compare.baseline": baseline,
        "rageval.compare.candidates": ",".join(ids),
        "rageval.compare.split": base.tags.get("rageval.split", ""),
        "rageval.compare.allow_mismatch": str(allow_mismatch).lower(),
        "rageval.benchmark.name": base.tags.get("rageval.benchmark.name", ""),
        "rageval.benchmark.version": base.tags.get("rageval.benchmark.version", ""),
    }
    if sweep:
        tags["rageval.compare.sweep"] = sweep
    if found:
        tags["rageval.compare.mismatches"] = "\n".join(found)[:4000]
    if release:
        tags["rageval.warning.release"] = "\n".join(release)[:4000]
    if left_out:
        tags["rageval.compare.left_out"] = "\n".join(left_out)[:4000]
    params = {
        "baseline": baseline,
        "candidates": ids,
        "sweep": sweep or "",
        "allow_mismatch": allow_mismatch,
        "max_release_evaluations": max_release_evaluations,
        **{f"notebook.{k}": v for k, v in extra.items()},
    }
    run_id = tracker.create_run(name, f"compare {base.name} vs {names}", params=params, tags=tags)
    parameters = {
        **extra,
        "baseline": baseline,
        "candidates": ids,
        "sweep": sweep,
        "allow_mismatch": allow_mismatch,
        "notes": warnings,
    }
    _execute_into(tracker, run_id, notebook, parameters, timeout)
    with tempfile.TemporaryDirectory(prefix="rageval-read-") as tmp:
        try:
            logged = tracker.download(run_id, "overall.csv", Path(tmp))
        except TrackingError as exc:
            tracker.fail(
                run_id, "the comparison notebook ran but logged no overall.csv; it must call Tracker.log_comparison"
            )
            raise NotebookExecutionError(
                f"run {run_id} FAILED: the notebook logged no comparison", run_id=run_id
            ) from exc
        overall = pd.read_csv(logged)
    try:
        digest = tracker.seal(run_id)
    except Exception as exc:
        tracker.fail(run_id, f"sealing failed: {type(exc).__name__}: {exc}")
        raise
    return ComparisonOutcome(run_id, name, digest, baseline, ids, overall, found, warnings)


# --------------------------------------------------------------------------- release gate


@dataclass(frozen=True)
class GateOutcome:
    run_id: str
    experiment: str
    sealed: str
    decision: Decision


def execute_gate(
    baseline: str,
    candidate: str,
    policy_file: str | Path,
    *,
    tracking_uri: str | None = None,
    experiment: str | None = None,
) -> GateOutcome:
    """Decide whether ``candidate`` may replace ``baseline`` under a policy; record the decision
    as a sealed run. Only sealed, intact, comparable runs on the release split are accepted."""
    from rageval.compare import check_comparable, query_slices, total_p95_ms, wide_scores
    from rageval.gate import check_policy_against, decide, load_policy, require_release

    policy_file = Path(policy_file)
    policy = load_policy(policy_file)
    tracker = Tracker(tracking_uri)
    infos = {role: tracker.run(run_id) for role, run_id in (("baseline", baseline), ("candidate", candidate))}
    for role, info in infos.items():
        require_release(info.tags, info.run_id, role)
        _sealed_and_intact(tracker, info.run_id)
    check_comparable(infos["baseline"], [infos["candidate"]])
    base, cand = tracker.run_artifacts(baseline), tracker.run_artifacts(candidate)
    before, after = wide_scores(base.per_query), wide_scores(cand.per_query)
    slices = query_slices(base.queries)
    check_policy_against(
        policy,
        [m for m in before.columns if m in after.columns],
        sorted({s for v in slices.values() for s in v}),
        str(policy_file),
    )
    metrics = {
        "permission_leaks": cand.info.metrics.get("permission_leaks"),
        "latency/total/p95_ms": cand.info.metrics.get("latency/total/p95_ms", total_p95_ms(cand.latency)),
        "context_tokens_mean": cand.info.metrics.get("context_tokens_mean", float("nan")),
    }
    tags = cand.info.tags
    family = tags.get("rageval.config.family") or tags.get("rageval.config.name", "")
    count = tracker.count_release_evaluations(
        tags.get("rageval.benchmark.name", ""), tags.get("rageval.benchmark.version", ""), family
    )
    decision = decide(
        policy,
        before,
        after,
        slices,
        metrics,
        baseline_run_id=baseline,
        candidate_run_id=candidate,
        release_evaluations=count,
        family=family,
    )

    name = experiment or tracker.experiment_name(infos["candidate"].experiment_id)
    policy_bytes = policy_file.read_bytes()
    rollback = {
        "run_id": baseline,
        "run_name": infos["baseline"].name,
        "config_name": infos["baseline"].tags.get("rageval.config.name", ""),
        "config": "baseline_config.yaml",
    }
    record = {
        "verdict": decision.verdict,
        "policy": {"name": policy.name, "file": str(policy_file), "sha256": sha256_bytes(policy_bytes)},
        "baseline": rollback,
        "candidate": {
            "run_id": candidate,
            "run_name": infos["candidate"].name,
            "config_name": tags.get("rageval.config.name", ""),
        },
        "rules": [r.__dict__ for r in decision.rules],
        "largest_losses": decision.largest_losses.to_dict(orient="records"),
        "release_evaluations": count,
        "warnings": decision.warnings,
        "rollback": f"keep or restore the baseline: run {baseline} ({rollback['config_name']}), configuration in baseline_config.yaml",
    }
    run_id = tracker.create_run(
        name,
        f"gate {policy.name}: {infos['candidate'].name} vs {infos['baseline'].name} → {decision.verdict}",
        params={
            "policy": policy.name,
            "baseline": baseline,
            "candidate": candidate,
            **{f"policy.{metric_key(k)}": v for k, v in flatten(policy.model_dump(mode="json")).items()},
        },
        tags={
            **git_state(project_root()),
            "rageval.version": __version__,
            "rageval.kind": "gate",
            "rageval.gate.verdict": decision.verdict,
            "rageval.gate.policy": policy.name,
            "rageval.gate.baseline": baseline,
            "rageval.gate.baseline.config": rollback["config_name"],
            "rageval.gate.candidate": candidate,
            "rageval.gate.candidate.config": tags.get("rageval.config.name", ""),
            "rageval.benchmark.name": tags.get("rageval.benchmark.name", ""),
            "rageval.benchmark.version": tags.get("rageval.benchmark.version", ""),
            **({"rageval.warning.release": "\n".join(decision.warnings)[:4000]} if decision.warnings else {}),
        },
        files={
            "decision.json": json.dumps(record, indent=2, default=_plain).encode(),
            "rules.csv": decision.table().to_csv(index=False).encode(),
            "largest_losses.csv": decision.largest_losses.to_csv(index=False).encode(),
            "policy.yaml": policy_bytes,
            "baseline_config.yaml": base.config_yaml.encode(),
            "candidate_config.yaml": cand.config_yaml.encode(),
        },
    )
    try:
        tracker.log_metrics(
            run_id,
            {
                "passed": float(decision.passed),
                "rules_failed": sum(r.verdict == "fail" for r in decision.rules),
                "rules_warned": sum(r.verdict == "warn" for r in decision.rules),
                "release_evaluations": count,
            },
        )
        digest = tracker.seal(run_id)
    except Exception as exc:
        tracker.fail(run_id, f"sealing failed: {type(exc).__name__}: {exc}")
        raise
    return GateOutcome(run_id, name, digest, decision)


def _plain(value: Any) -> Any:
    """JSON for numpy scalars in decision records."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


# --------------------------------------------------------------------------- the demo loop


@dataclass(frozen=True)
class DemoOutcome:
    sweep: Any  # rageval.sweep.SweepOutcome
    comparison: ComparisonOutcome
    chosen: str  # the sweep member taken to the release split
    release_baseline: RunOutcome
    release_candidate: RunOutcome
    gate: GateOutcome


def execute_demo(
    sweep_file: str | Path | None = None,
    policy_file: str | Path | None = None,
    *,
    baseline: str = "baseline",
    workers: int | None = None,
    tracking_uri: str | None = None,
    progress: Any = None,
) -> DemoOutcome:
    """The whole loop on the demo: sweep on dev, compare every member with ``baseline``, take the
    member with the best primary measure to the release split (with the baseline: two release
    evaluations, counted), and gate it. Each step is a run of its own."""
    from rageval.sweep import load_sweep, run_sweep

    sweep_file = Path(sweep_file) if sweep_file else project_root() / "params" / "sweeps" / "demo.yaml"
    policy_file = Path(policy_file) if policy_file else project_root() / "params" / "gates" / "release.yaml"
    swept = run_sweep(sweep_file, workers=workers, tracking_uri=tracking_uri, progress=progress)
    swept.check()
    runs = {m.name: m for m in swept.members}
    if baseline not in runs:
        raise ComparisonError(
            f"the sweep has no member named {baseline!r} to serve as the baseline; members: {', '.join(runs)}"
        )
    comparison = execute_comparison(runs[baseline].run_id, sweep=swept.parent_run_id, tracking_uri=tracking_uri)
    key, _ = swept.primary
    chosen = max(
        (m for m in swept.members if m.name != baseline), key=lambda m: (m.metrics.get(key, float("-inf")), m.name)
    )
    spec = load_sweep(sweep_file)
    members = {m.name: m for m in spec.members}
    released = [
        execute_run(
            spec.base,
            overrides=members[name].overrides,
            benchmark=spec.benchmark,
            split=RELEASE_SPLIT,
            tracking_uri=tracking_uri,
            run_name=f"{spec.spec.name}/{name}@{RELEASE_SPLIT}",
        )
        for name in (baseline, chosen.name)
    ]
    gate = execute_gate(released[0].run_id, released[1].run_id, policy_file, tracking_uri=tracking_uri)
    return DemoOutcome(swept, comparison, chosen.name, released[0], released[1], gate)
