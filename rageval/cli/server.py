"""``rageval server``: a shared tracking server (PostgreSQL + ``mlflow server``) on loopback."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer

from rageval.cli.common import app, echo
from rageval.errors import TrackingError


class _Stop(BaseException):
    """Ctrl-C or SIGTERM, raised in the main thread."""


def _on_signal(signum: int, frame: FrameType | None) -> None:
    # Once: a second Ctrl-C must not cut short the stopping of what was started.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise _Stop


@app.command("server")
def server(
    dir_: Annotated[
        Path, typer.Option("--dir", help="folder of the PostgreSQL cluster, the artifacts and the log (kept)")
    ],
    port: Annotated[int, typer.Option(help="the tracking server's port on 127.0.0.1")] = 5000,
    backend_store_uri: Annotated[
        str | None,
        typer.Option(
            help="an existing PostgreSQL database (postgresql+psycopg2://USER:PASSWORD@HOST:PORT/DB) "
            "instead of starting a cluster in --dir",
            envvar="RAGEVAL_BACKEND_STORE_URI",
            show_envvar=False,
        ),
    ] = None,
    pg_user: Annotated[
        str | None, typer.Option(help="as root: the unprivileged user PostgreSQL runs as [default: postgres]")
    ] = None,
    pg_bindir: Annotated[
        Path | None, typer.Option(help="folder of initdb and pg_ctl [default: PATH, pg_config, /usr/lib/postgresql]")
    ] = None,
) -> None:
    """Start PostgreSQL and an MLflow tracking server with proxied artifacts on 127.0.0.1 for a team;
    print the tracking URI; stop both on Ctrl-C or SIGTERM."""
    from rageval.execution.server import tracking_server

    previous = {signum: signal.signal(signum, _on_signal) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        with tracking_server(
            dir_, port=port, backend_store_uri=backend_store_uri, pg_user=pg_user, pg_bindir=pg_bindir
        ) as running:
            database = "its own PostgreSQL" if running.postgres else "the given PostgreSQL"
            where = f" in {running.postgres.data_dir}" if running.postgres else ""
            echo(f"tracking server on {running.tracking_uri} ({database}{where}; artifacts {running.mlflow.artifacts})")
            echo(f"use it: rageval run params/bm25.yaml --tracking-uri {running.tracking_uri}")
            echo(f"    or: export MLFLOW_TRACKING_URI={running.tracking_uri}")
            echo(f"log: {running.mlflow.log}; started in {running.started_s:.1f} s; Ctrl-C stops it")
            while True:
                time.sleep(1.0)
                # A server that died is not left looking alive.
                if not _alive(running.pids):
                    raise TrackingError(f"the tracking server stopped by itself; see {running.mlflow.log}")
    except _Stop:
        echo("stopped", err=True)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _alive(pids: list[int]) -> bool:
    import psutil

    try:
        return all(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in pids)
    except psutil.NoSuchProcess:
        return False
