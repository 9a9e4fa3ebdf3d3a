"""A tracking server that dies mid-sweep: the sweep stops starting members, names every run it
created (from creation, not from the dead store), says the parent is left RUNNING, exits non-zero,
all within a minute — a real ``mlflow server`` process on 127.0.0.1, killed with SIGKILL."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from rageval.execution.server import free_port
from rageval.tracking.connect import STORE_RETRIES, bound_store_retries

BM25 = ROOT / "params" / "bm25.yaml"
CLI = [sys.executable, "-c", "from rageval.cli import main; main()"]


@contextlib.contextmanager
def sqlite_server(folder: Path) -> Iterator[tuple[subprocess.Popen[bytes], str, Path]]:
    """A real ``mlflow server`` over a sqlite file (no PostgreSQL needed to kill a server)."""
    db = folder / "server.db"
    port = free_port()
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", "MLFLOW_DISABLE_TELEMETRY": "true"}
    command = [
        sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
        "--backend-store-uri", f"sqlite:///{db}", "--artifacts-destination", str(folder / "artifacts"),
    ]  # fmt: skip
    with (folder / "server.log").open("ab") as log:
        server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"{url}/health", timeout=2) as reply:
                    if reply.status == 200:
                        break
            assert server.poll() is None and time.monotonic() < deadline, (folder / "server.log").read_text()[-2000:]
            time.sleep(0.25)
        yield server, url, db
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=30)


def rows(db: Path, query: str) -> list[tuple]:
    with contextlib.closing(sqlite3.connect(db, timeout=30)) as connection:
        return connection.execute(query).fetchall()


def test_bounded_retries_are_set_for_the_command_only_and_a_users_own_win():
    environ = {"MLFLOW_HTTP_REQUEST_TIMEOUT": "300"}
    chosen = bound_store_retries(environ)
    assert environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "300" and "MLFLOW_HTTP_REQUEST_TIMEOUT" not in chosen
    assert environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == STORE_RETRIES["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "2"
    # Importing rageval set none of them in this (the test) process.
    assert not any(key in os.environ for key in STORE_RETRIES)


@pytest.mark.e2e
def test_a_sweep_whose_server_dies_ends_within_a_minute_naming_every_run(tmp_path):
    sweep = tmp_path / "sweep.yaml"
    grid = {"retrieval.stages.0.k1": [round(0.5 + 0.1 * i, 1) for i in range(12)]}
    sweep.write_text(yaml.safe_dump({"version": 1, "name": "outage", "base": str(BM25), "workers": 1, "grid": grid}))
    with sqlite_server(tmp_path) as (server, url, db):
        begun = time.perf_counter()
        swept = subprocess.Popen(
            [*CLI, "sweep", str(sweep), "--tracking-uri", url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 240
            sealed: list[tuple] = []
            while not sealed:  # the first member sealed: the sweep is under way
                assert swept.poll() is None, swept.communicate()
                assert time.monotonic() < deadline, "no member sealed within 240 s"
                time.sleep(0.5)
                with contextlib.suppress(sqlite3.Error):
                    sealed = rows(db, "SELECT run_uuid FROM tags WHERE key = 'rageval.seal'")
            os.killpg(server.pid, signal.SIGKILL)
            killed = time.perf_counter()
            out, err = swept.communicate(timeout=120)
        finally:
            if swept.poll() is None:
                swept.kill()
                swept.wait()
        ended = time.perf_counter()
    after_kill, total = ended - killed, ended - begun
    print(f"\noutage: 12 members, server SIGKILLed {killed - begun:.1f}s in; sweep exited {after_kill:.1f}s later")
    created = {run_id for (run_id,) in rows(db, "SELECT run_uuid FROM runs")}
    parent = {r for (r,) in rows(db, "SELECT run_uuid FROM tags WHERE key = 'rageval.kind' AND value = 'sweep'")}
    assert swept.returncode == 1, (out, err)
    assert after_kill < 60, (after_kill, out, err)
    assert len(created) >= 2 and len(parent) == 1
    # Every run the sweep created is named in its output; members after the outage never started.
    text = out + err
    assert all(run_id in text for run_id in created), (created, text)
    assert "not started" in out and len(created) < 13
    (parent_id,) = parent
    assert f"parent run {parent_id} is left RUNNING; the next command that reaches the store reaps it" in err
    assert "the store stopped answering" in err and "no run" not in err
    assert rows(db, f"SELECT status FROM runs WHERE run_uuid = '{parent_id}'") == [("RUNNING",)]
    assert total < 240


@pytest.mark.e2e
def test_postgresql_killed_then_sigterm_ends_a_sweep_promptly_naming_its_parent(tmp_path):
    """PostgreSQL SIGKILLed behind a real ``mlflow server``, then SIGTERM to the sweep (before: still
    alive 552 s later, parent RUNNING)."""
    from servers import require_services, service_folder

    from rageval.execution.server import tracking_server
    from rageval.tracking.store import Tracker

    require_services()
    sweep = tmp_path / "sweep.yaml"
    grid = {"retrieval.stages.0.k1": [round(0.5 + 0.1 * i, 1) for i in range(12)]}
    sweep.write_text(yaml.safe_dump({"version": 1, "name": "pgdown", "base": str(BM25), "workers": 1, "grid": grid}))
    folder = service_folder()
    try:
        with tracking_server(folder) as server:
            assert server.postgres is not None
            swept = subprocess.Popen(
                [*CLI, "sweep", str(sweep), "--tracking-uri", server.tracking_uri],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            try:
                tracker, deadline = Tracker(server.tracking_uri), time.monotonic() + 240
                while not any(r.sealed and r.tags.get("mlflow.parentRunId") for r in tracker.runs()):
                    assert swept.poll() is None and time.monotonic() < deadline, "no member sealed"
                    time.sleep(0.5)
                parent = next(r.run_id for r in tracker.runs() if r.tags.get("rageval.kind") == "sweep")
                os.kill(server.postgres.pid, signal.SIGKILL)
                time.sleep(1.0)
                swept.send_signal(signal.SIGTERM)
                termed = time.perf_counter()
                out, err = swept.communicate(timeout=120)
                after = time.perf_counter() - termed
            finally:
                if swept.poll() is None:
                    swept.kill()
                    swept.wait()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"\nPostgreSQL killed, SIGTERM: the sweep exited {after:.1f}s later with {swept.returncode}")
    assert after < 60 and swept.returncode not in (0, None), (after, out, err)
    assert f"parent run {parent}" in out + err
    assert "left RUNNING" in err or f"parent run {parent} is KILLED" in err or "KILLED" in out, (out, err)
