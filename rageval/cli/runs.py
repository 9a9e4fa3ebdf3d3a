"""Runs: ``rageval run``, ``verify``, ``runs``, ``export-run``, ``diff-notebooks``, ``reproduce``, ``ui``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from rageval.cli.common import (
    EvaluateNotebook,
    Level,
    RunExperiment,
    Timeout,
    TrackingUri,
    app,
    fail,
    open_tracker,
    parse_pairs,
)
from rageval.errors import RagevalError, TrackingError


@app.command("run")
def run(
    config: Annotated[Path, typer.Argument(help="run configuration, e.g. params/bm25.yaml")],
    benchmark: Annotated[Path | None, typer.Option(help="benchmark folder [default: the config's]")] = None,
    split: Annotated[str | None, typer.Option(help="dev or release [default: the config's]")] = None,
    set_: Annotated[list[str], typer.Option("--set", help="override a config key: key.path=value (YAML value)")] = [],
    tracking_uri: TrackingUri = None,
    experiment: RunExperiment = None,
    notebook: EvaluateNotebook = None,
    parameter: Annotated[list[str], typer.Option("-p", "--parameter", help="extra notebook parameter NAME=VALUE")] = [],
    timeout: Timeout = None,
) -> None:
    """Evaluate a configuration through the notebook and record a sealed MLflow run."""
    import yaml

    from rageval.workflows.run import execute_run

    tracker = open_tracker(tracking_uri)
    try:
        outcome = execute_run(
            config,
            overrides=set_,
            benchmark=benchmark,
            split=split,
            tracker=tracker,
            experiment=experiment,
            notebook=notebook,
            timeout=timeout,
            notebook_parameters={k: yaml.safe_load(v) for k, v in parse_pairs(parameter, "-p").items()},
        )
    except RagevalError as error:
        fail(error)
    typer.echo(f"run {outcome.run_id} sealed (experiment {outcome.experiment}, manifest sha256 {outcome.sealed[:12]}…)")
    m = outcome.metrics
    typer.echo(
        f"queries: {int(m.get('queries_evaluated', 0))} evaluated, {int(m.get('queries_skipped', 0))} skipped "
        f"(no relevant item), {int(m.get('queries_failed', 0))} failed"
    )
    width = max(len(text) for text in outcome.measures.values())
    for key, text in outcome.measures.items():
        typer.echo(f"  {text:<{width}}  {m.get(key, float('nan')):.4f}")
    typer.echo(f"  {'context tokens (mean)':<{width}}  {m.get('context_tokens_mean', float('nan')):.1f}")
    typer.echo(f"verify: rageval verify {outcome.run_id}" + (f" --tracking-uri {tracking_uri}" if tracking_uri else ""))
    typer.echo(f"browse: rageval ui  (store: {tracker.uri})")


@app.command("verify")
def verify(run_id: Annotated[str, typer.Argument()], tracking_uri: TrackingUri = None) -> None:
    """Recompute every hash of a sealed run; exit 1 naming what changed."""

    try:
        open_tracker(tracking_uri).verify_or_raise(run_id)
    except RagevalError as error:
        fail(error)
    typer.echo(f"run {run_id}: intact (every artifact, param, metric and tag matches its manifest)")


@app.command("runs")
def runs(
    experiment: Annotated[str | None, typer.Option(help="one experiment [default: all]")] = None,
    tracking_uri: TrackingUri = None,
) -> None:
    """List runs, newest first, with their status and whether they are sealed."""

    for info in open_tracker(tracking_uri).runs(experiment):
        state = "sealed" if info.sealed else "UNSEALED"
        typer.echo(f"{info.run_id}  {info.status:<8}  {state:<8}  {info.name}")


@app.command("export-run")
def export_run(
    run_id: Annotated[str, typer.Argument()],
    out: Annotated[Path, typer.Option(help="TREC run file to write")],
    level: Annotated[Level, typer.Option(help="document: parent IDs; passage: chunk IDs")] = Level["document"],
    tracking_uri: TrackingUri = None,
) -> None:
    """Write a sealed run's rankings as a TREC run file."""
    from rageval.benchmark.trec import write_run
    from rageval.experiment.run import level_run

    try:
        frame = level_run(open_tracker(tracking_uri).rankings(run_id), level.value)
    except RagevalError as error:
        fail(error)
    write_run(frame, out, tag=run_id[:12])
    typer.echo(f"wrote {out}: {frame['query_id'].nunique()} queries")


@app.command("diff-notebooks")
def diff_notebooks(
    run_a: Annotated[str, typer.Argument(help="run ID")],
    run_b: Annotated[str, typer.Argument(help="run ID")],
    metadata: Annotated[bool, typer.Option("--metadata", help="also show metadata, IDs and details")] = False,
    tracking_uri: TrackingUri = None,
) -> None:
    """Show the parameter and output differences of two runs' executed notebooks (nbdime)."""
    import tempfile

    tracker = open_tracker(tracking_uri)
    with tempfile.TemporaryDirectory(prefix="rageval-nbdiff-") as tmp:
        paths = []
        try:
            for label, run_id in (("a", run_a), ("b", run_b)):
                folder = tracker.download(run_id, "notebook", Path(tmp) / label)
                found = sorted(folder.glob("*.ipynb"))
                if not found:
                    raise TrackingError(f"run {run_id} has no executed notebook under notebook/")
                paths.append(found[0])
        except RagevalError as error:
            fail(error)
        # -M -I -D: metadata, cell IDs and execution details are noise between two executions.
        command = [sys.executable, "-m", "nbdime", "diff", *([] if metadata else ["-M", "-I", "-D"])]
        if not sys.stdout.isatty():
            command.append("--no-color")
        done = subprocess.run([*command, str(paths[0]), str(paths[1])], capture_output=True, text=True)
        output = done.stdout.replace(str(paths[0]), f"{run_a}:{paths[0].name}").replace(
            str(paths[1]), f"{run_b}:{paths[1].name}"
        )
        typer.echo(output if output.strip() else "no parameter or output differences")
        if done.returncode != 0:
            typer.echo(done.stderr, err=True)
            raise typer.Exit(done.returncode)


@app.command("reproduce")
def reproduce_run(
    run_id: Annotated[str, typer.Argument(help="a sealed run")],
    allow_dirty: Annotated[
        bool,
        typer.Option("--allow-dirty", help="reproduce a run made from a dirty tree by re-applying its recorded diff"),
    ] = False,
    tracking_uri: TrackingUri = None,
) -> None:
    """Re-execute a sealed run at its commit and compare rankings stage by stage; exit 1 if they differ."""
    from rageval.workflows.reproduce import reproduce

    try:
        result = reproduce(run_id, tracker=open_tracker(tracking_uri), allow_dirty=allow_dirty)
    except RagevalError as error:
        fail(error)
    typer.echo(f"original {result.original} → reproduction {result.reproduction} (record {result.record})")
    typer.echo(result.table().to_string(index=False))
    worst = max(result.metric_differences.values(), default=0.0)
    typer.echo(f"largest metric difference: {worst:.3g}")
    typer.echo(f"verdict: {result.verdict}")
    raise typer.Exit(0 if result.reproduced else 1)


@app.command("ui")
def ui(
    port: Annotated[int, typer.Option(help="port on 127.0.0.1")] = 5000,
    tracking_uri: TrackingUri = None,
) -> None:
    """Start the MLflow UI on loopback over the project's store (one worker, job execution off)."""
    from rageval.paths import artifact_root_for
    from rageval.tracking.store import resolve_tracking_uri

    uri = resolve_tracking_uri(tracking_uri)
    command = [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        "--backend-store-uri",
        uri,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
    ]
    artifacts = artifact_root_for(uri)
    if artifacts:
        command += ["--default-artifact-root", artifacts]
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", "MLFLOW_DISABLE_TELEMETRY": "true"}
    typer.echo(f"MLflow UI: http://127.0.0.1:{port}  (store: {uri}; Ctrl-C stops it)")
    try:
        raise typer.Exit(subprocess.call(command, env=env))
    except KeyboardInterrupt:
        raise typer.Exit(0) from None
