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
    echo,
    input_file,
    open_tracker,
    output_file,
    parse_notebook_parameters,
)


@app.command("run")
def run(  # long: a typer command: its options are its parameters, typer's only way to declare them
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
    from rageval.execution.kernels import WarmKernel
    from rageval.paths import default_notebook

    # Started first: the kernel comes up (and imports what the notebook needs) while this process
    # imports its own and opens the store. execute_run closes it.
    kernel = WarmKernel((notebook or default_notebook()).parent)
    try:
        from rageval.cli.progress import RunView
        from rageval.workflows.run import RunRequest, execute_run

        tracker = open_tracker(tracking_uri)
        input_file(config, "CONFIG", "give a params file, e.g. params/bm25.yaml")
        with RunView() as view:  # the steps on stderr as they go; the summary below on stdout
            request = RunRequest(
                config,
                overrides=tuple(set_),
                benchmark=benchmark,
                split=split,
                experiment=experiment,
                notebook=notebook or default_notebook(),
                timeout=timeout,
                notebook_parameters=parse_notebook_parameters(parameter),
            )
            outcome = execute_run(
                request,
                tracker,
                reporter=view,
                warn=lambda text: echo(text, err=True),
                kernel=kernel,
            )
    finally:
        kernel.close()
    for run_id, reason in outcome.reaped:
        echo(f"reaped {run_id}: now KILLED ({reason})", err=True)
    echo(f"run {outcome.run_id} sealed (experiment {outcome.experiment}, manifest sha256 {outcome.sealed[:12]}…)")
    m = outcome.metrics
    echo(
        f"queries: {int(m.get('queries_evaluated', 0))} evaluated, {int(m.get('queries_skipped', 0))} skipped "
        f"(no relevant item), {int(m.get('queries_failed', 0))} failed"
    )
    width = max(len(text) for text in outcome.measures.values())
    for key, text in outcome.measures.items():
        echo(f"  {text:<{width}}  {m.get(key, float('nan')):.4f}")
    echo(f"  {'context tokens (mean)':<{width}}  {m.get('context_tokens_mean', float('nan')):.1f}")
    echo(f"verify: rageval verify {outcome.run_id}" + (f" --tracking-uri {tracking_uri}" if tracking_uri else ""))
    echo(f"browse: rageval ui  (store: {tracker.uri})")


@app.command("verify")
def verify(run_id: Annotated[str, typer.Argument()], tracking_uri: TrackingUri = None) -> None:
    """Recompute every hash of a sealed run and check its keyed seal; exit 1 naming what changed."""
    from rageval.errors import VerificationError

    result = open_tracker(tracking_uri).verification(run_id)
    if not result.intact:
        raise VerificationError(run_id, result.changes)
    covered = "artifact, param, metric and its history, tag, input, status and lifecycle"
    seal = (
        "keyed seal checked" if result.key_checked else ("keyed seal NOT checked" if result.keyed else "unkeyed seal")
    )
    echo(f"run {run_id}: intact ({seal}; every {covered} matches its manifest)")
    for note in result.notes:
        echo(f"note: {note}")


@app.command("runs")
def runs(
    experiment: Annotated[str | None, typer.Option(help="one experiment [default: all]")] = None,
    reap: Annotated[
        bool, typer.Option("--reap", help="end as KILLED the unsealed runs whose owner process has died")
    ] = False,
    tracking_uri: TrackingUri = None,
) -> None:
    """List runs, newest first, with their status and whether they are sealed. A RUNNING run whose
    owner process is gone shows as KILLED; --reap records that in the store."""

    tracker = open_tracker(tracking_uri)
    if reap:
        for run_id, reason in tracker.reap():
            echo(f"reaped {run_id}: now KILLED ({reason})")
    for info in tracker.runs(experiment):
        state = "sealed" if info.sealed else "UNSEALED"
        status, note = info.status, ""
        if info.status == "RUNNING" and not info.sealed:
            owner = tracker.owner(info)
            if owner.state == "dead":
                status, note = "KILLED", f"  ({owner.reason}; still RUNNING in the store: `rageval runs --reap`)"
            else:
                note = f"  ({owner.reason})"
        echo(f"{info.run_id}  {status:<8}  {state:<8}  {info.name}{note}")


@app.command("export-run")
def export_run(
    run_id: Annotated[str, typer.Argument()],
    out: Annotated[Path, typer.Option(help="TREC run file to write")],
    level: Annotated[Level, typer.Option(help="document: parent IDs; passage: chunk IDs")] = Level["document"],
    tracking_uri: TrackingUri = None,
) -> None:
    """Write a sealed, intact run's rankings as a TREC run file."""
    from rageval.benchmark.trec import write_run
    from rageval.experiment.run import level_run

    output_file(out, "--out")
    tracker = open_tracker(tracking_uri)
    tracker.verify_or_raise(run_id)
    frame = level_run(tracker.rankings(run_id), level.value)
    write_run(frame, out, tag=run_id[:12])
    echo(f"wrote {out}: {frame['query_id'].nunique()} queries")


@app.command("diff-notebooks")
def diff_notebooks(
    run_a: Annotated[str, typer.Argument(help="run ID, or a local .ipynb file")],
    run_b: Annotated[str, typer.Argument(help="run ID, or a local .ipynb file")],
    full: Annotated[
        bool, typer.Option("--full", help="nbdime's complete diff (every output line, images as digests)")
    ] = False,
    metadata: Annotated[
        bool, typer.Option("--metadata", help="nbdime's complete diff with metadata, IDs and details")
    ] = False,
    max_lines: Annotated[int, typer.Option(help="lines shown per change (0: all)", min=0)] = 40,
    tracking_uri: TrackingUri = None,
) -> None:
    """Show what differs between two runs' executed notebooks (or a run's and a local .ipynb, or two
    local ones): parameters (the configuration as YAML lines) and outputs as text, without timings,
    counts or IDs; --full for nbdime's complete diff."""
    import tempfile

    from rageval.workflows.notebook_diff import (
        diff_notebook_files,
        download_notebooks,
        is_notebook_file,
        nbdime_diff,
    )

    names = (run_a, run_b)
    with tempfile.TemporaryDirectory(prefix="rageval-nbdiff-") as tmp:
        tracker = None if all(is_notebook_file(n) for n in names) else open_tracker(tracking_uri)
        old, new = download_notebooks(tracker, names, Path(tmp))
        labels = tuple(n if is_notebook_file(n) else f"{n}:{p.name}" for n, p in zip(names, (old, new), strict=True))
        if not (full or metadata):
            echo(diff_notebook_files(old, new, labels, max_lines).rstrip("\n") or "no parameter or output differences")
            return
        done = nbdime_diff(old, new, metadata=metadata, color=sys.stdout.isatty())
        output = done.stdout.replace(str(old), labels[0]).replace(str(new), labels[1])
        echo(output if output.strip() else "no parameter or output differences")
        if done.returncode != 0:
            echo(done.stderr, err=True)
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

    result = reproduce(run_id, tracker=open_tracker(tracking_uri), allow_dirty=allow_dirty)
    echo(f"original {result.original} → reproduction {result.reproduction} (record {result.record})")
    echo(result.table().to_string(index=False))
    worst = max(result.metric_differences.values(), default=0.0)
    echo(f"largest metric difference: {worst:.3g}")
    echo(f"verdict: {result.verdict}")
    raise typer.Exit(0 if result.reproduced else 1)


@app.command("ui")
def ui(
    port: Annotated[int, typer.Option(help="port on 127.0.0.1")] = 5000,
    tracking_uri: TrackingUri = None,
) -> None:
    """Start the MLflow UI on loopback over the project's store (one worker, job execution off).

    The server runs in a process group of its own; Ctrl-C or SIGTERM stops the whole group
    (``mlflow server`` starts worker processes that would otherwise keep serving)."""
    import signal
    import time
    import urllib.request

    from rageval.tracking.records import ui_link
    from rageval.tracking.store import resolve_tracking_uri

    _refuse_busy_port(port)
    uri = resolve_tracking_uri(tracking_uri)
    command = _ui_command(uri, port)
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", "MLFLOW_DISABLE_TELEMETRY": "true"}
    server = subprocess.Popen(command, env=env, process_group=0)

    stopped: list[int] = []

    def forward(signum: int, frame: object) -> None:
        stopped.append(signum)
        _signal_group(server.pid, signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        url = f"http://127.0.0.1:{port}"
        while server.poll() is None:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2):
                    break
            except OSError:
                time.sleep(0.5)
        if server.poll() is None:
            # MLflow 3.17's UI opens in its GenAI mode (traces) unless the URL asks for model training (runs).
            echo(f"MLflow UI: {ui_link(base=url)}  (store: {uri}; Ctrl-C stops it)")
        code = server.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _stop_group(server.pid)
    if code != 0 and not stopped:
        echo(f"error: mlflow server exited with {code} (store: {uri}, port {port})", err=True)
        raise typer.Exit(1)


def _refuse_busy_port(port: int) -> None:
    """Exit 1 when ``port`` on 127.0.0.1 is taken: its URL would show another server's runs."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds: TIME_WAIT is no conflict
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            echo(
                f"error: port {port} on 127.0.0.1 is busy ({exc.strerror}): another server is using it, and its "
                f"URL would show that server's runs, not this store's. Choose another port: rageval ui --port {port + 1}",
                err=True,
            )
            raise typer.Exit(1) from None


def _ui_command(uri: str, port: int) -> list[str]:
    """``mlflow server`` over the store at ``uri`` on 127.0.0.1:``port``, one worker."""
    from rageval.paths import artifact_root_for

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
    return command


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        pass


def _stop_group(pgid: int, grace: float = 10.0) -> None:
    """Terminate what is left of the server's process group; kill it after ``grace`` seconds."""
    import signal
    import time

    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    _signal_group(pgid, signal.SIGKILL)
