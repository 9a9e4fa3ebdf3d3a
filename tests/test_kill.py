"""Processes that die: a run's owner is recorded, a dead owner's run shows and ends KILLED, never
RUNNING for ever and never a result; a SIGKILLed ``rageval run`` and ``rageval sweep`` leave an
intact store; ``rageval ui`` refuses a busy port and takes its server's processes down with it."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import nbformat
import psutil
import pytest
import yaml
from conftest import ROOT
from typer.testing import CliRunner

from rageval.cli import app
from rageval.tracking.owners import HOST_TAG, OWNER_TAG, PID_TAG, STARTED_TAG, owner_fields, owner_of, owner_tags
from rageval.tracking.store import Tracker

BM25 = ROOT / "params" / "bm25.yaml"
CLI = [sys.executable, "-c", "from rageval.cli import app; app()"]
T = TypeVar("T")


def exited_process() -> tuple[psutil.Process, float]:
    """A process that has run and been waited for: its PID names nobody now (or someone else)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    handle = psutil.Process(child.pid)
    started = handle.create_time()
    child.wait()
    return handle, started


def test_owner_tags_name_this_process_and_it_is_alive():
    tags = owner_tags()
    assert list(tags) == [OWNER_TAG]  # one column, not one per field
    assert owner_fields(tags)["host"] == socket.gethostname() and owner_fields(tags)["pid"] == str(os.getpid())
    assert set(json.loads(tags[OWNER_TAG])) >= {"host", "pid", "started"}
    assert owner_of(tags).state == "alive"


def test_a_dead_owner_is_told_from_a_live_one_and_a_reused_pid():
    handle, started = exited_process()
    dead = owner_of({HOST_TAG: socket.gethostname(), PID_TAG: str(handle.pid), STARTED_TAG: repr(started)})
    assert dead.state == "dead" and f"process {handle.pid} on {socket.gethostname()} has exited" in dead.reason
    # Our own PID with a start time an hour earlier: the PID was given to another process since.
    reused = owner_of({**owner_tags(), STARTED_TAG: repr(psutil.Process().create_time() - 3600)})
    assert reused.state == "dead" and "now belongs to another process" in reused.reason
    assert owner_of({**owner_tags(), HOST_TAG: "elsewhere.example"}).state == "elsewhere"
    assert owner_of({}).state == "unknown" and owner_of({HOST_TAG: "h", PID_TAG: "x"}).state == "unknown"


def test_a_zombie_owner_is_dead():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    handle = psutil.Process(child.pid)
    tags = {HOST_TAG: socket.gethostname(), PID_TAG: str(child.pid), STARTED_TAG: repr(handle.create_time())}
    deadline = time.time() + 30
    while handle.status() != psutil.STATUS_ZOMBIE and time.time() < deadline:
        time.sleep(0.05)
    assert owner_of(tags).state == "dead"
    child.wait()


def test_runs_shows_a_dead_owners_run_killed_and_reap_records_it(tmp_path):
    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    tracker = Tracker(store)
    handle, started = exited_process()
    dead = {PID_TAG: str(handle.pid), STARTED_TAG: repr(started)}
    orphan = tracker.create_run("kill-tests", "orphan", params={}, tags={})
    for key, value in dead.items():  # as if a process now gone had made it
        tracker.client.set_tag(orphan, key, value)
    mine = tracker.create_run("kill-tests", "mine", params={}, tags={})
    elsewhere = tracker.create_run("kill-tests", "elsewhere", params={}, tags={})
    tracker.client.set_tag(elsewhere, HOST_TAG, "elsewhere.example")
    sealed = tracker.create_run("kill-tests", "sealed", params={}, tags={})
    tracker.seal(sealed)
    tracker.client.set_tag(sealed, PID_TAG, str(handle.pid))  # a tampered sealed run is verify's business

    listed = CliRunner().invoke(app, ["runs", "--tracking-uri", store])
    assert listed.exit_code == 0, listed.output
    line = next(line for line in listed.output.splitlines() if line.startswith(orphan))
    assert "KILLED" in line and "has exited" in line and "--reap" in line
    assert tracker.run(orphan).status == "RUNNING"  # shown as what it is; the store is not changed by listing

    reaped = CliRunner().invoke(app, ["runs", "--reap", "--tracking-uri", store])
    assert reaped.exit_code == 0, reaped.output
    assert f"reaped {orphan}: now KILLED (reaped: owner process {handle.pid}" in reaped.output
    info = tracker.run(orphan)
    assert info.status == "KILLED" and not info.sealed and info.tags["rageval.error"].startswith("reaped: owner")
    assert {tracker.run(r).status for r in (mine, elsewhere)} == {"RUNNING"}
    assert tracker.run(sealed).status == "FINISHED"
    assert tracker.reap() == []  # nothing left to reap


def test_ui_on_a_busy_port_fails_naming_the_port_and_the_way_out(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        started = time.perf_counter()
        result = CliRunner().invoke(
            app, ["ui", "--port", str(port), "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"]
        )
    assert result.exit_code == 1
    assert f"error: port {port} on 127.0.0.1 is busy" in result.output
    assert f"Choose another port: rageval ui --port {port + 1}" in result.output
    assert "MLflow UI: http" not in result.output  # no URL that would show another server's runs
    assert time.perf_counter() - started < 5  # refused before any server is started


# --------------------------------------------------------------------------- real processes, SIGKILL


def sleepy_notebook(tmp_path: Path) -> Path:
    """The evaluation notebook, sleeping right after it has logged its results into the run. Without
    its ``handoff`` parameter the kernel logs the results itself (as a custom notebook does), so
    they are in the run while the notebook still runs."""
    notebook = nbformat.read(ROOT / "notebooks" / "evaluate.ipynb", as_version=4)
    parameters = next(c for c in notebook.cells if "parameters" in c.metadata.get("tags", []))
    parameters.source = "\n".join(line for line in parameters.source.splitlines() if not line.startswith("handoff"))
    at = next(i for i, c in enumerate(notebook.cells) if "log_result" in c.source) + 1
    notebook.cells.insert(at, nbformat.v4.new_code_cell("import time\ntime.sleep(600)"))
    path = tmp_path / "sleepy.ipynb"
    nbformat.write(notebook, path)
    return path


def wait_for(what: str, found: Callable[[], T | None], timeout: float = 120) -> T:
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = found()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def sigkill(process: subprocess.Popen) -> None:
    """SIGKILL the rageval process alone, as the OOM killer would; then clear up what it started
    (its notebook kernel runs in a session of its own and exits once its parent is gone)."""
    family = psutil.Process(process.pid).children(recursive=True)
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    _, alive = psutil.wait_procs(family, timeout=15)
    for leftover in alive:
        leftover.kill()


def integrity(db: Path) -> str:
    with sqlite3.connect(db) as connection:
        return connection.execute("PRAGMA integrity_check").fetchone()[0]


def statuses(db: Path) -> dict[str, str]:
    with sqlite3.connect(db) as connection:
        return dict(connection.execute("SELECT run_uuid, status FROM runs").fetchall())


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300)


@pytest.mark.e2e
def test_a_sigkilled_run_and_sweep_end_killed_and_the_next_run_seals(tmp_path):
    db = tmp_path / "store" / "mlflow.db"
    store = f"sqlite:///{db}"
    notebook = sleepy_notebook(tmp_path)

    def logged(parent: str | None = None) -> str | None:
        """A run that has logged its results (into a sweep ``parent``, if given)."""
        for info in Tracker(store).runs():
            if "nDCG_at_10" in info.metrics and (parent is None or info.tags.get("mlflow.parentRunId") == parent):
                return info.run_id
        return None

    # A run killed after its notebook logged its results, before it could seal.
    run = subprocess.Popen(
        [*CLI, "run", str(BM25), "--tracking-uri", store, "--notebook", str(notebook)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        killed_run = wait_for("the run to log its results", logged)
    finally:
        sigkill(run)
    assert integrity(db) == "ok"
    assert statuses(db)[killed_run] == "RUNNING"
    # Listed and reaped in this process (the owner is judged by its PID; a new process proves no more).
    listed = CliRunner().invoke(app, ["runs", "--tracking-uri", store])
    line = next(line for line in listed.stdout.splitlines() if line.startswith(killed_run))
    assert "KILLED" in line and f"process {run.pid}" in line and "has exited" in line
    reaped = CliRunner().invoke(app, ["runs", "--reap", "--tracking-uri", store])
    assert f"reaped {killed_run}: now KILLED" in reaped.stdout, reaped.stderr
    assert statuses(db)[killed_run] == "KILLED" and not Tracker(store).run(killed_run).sealed

    # A sweep killed while its first member sleeps; the second member never starts.
    sweep = tmp_path / "sweep.yaml"
    variants = [{"name": "one", "set": {}}, {"name": "two", "set": {"retrieval.stages.0.k1": 1.2}}]
    sweep.write_text(yaml.safe_dump({"version": 1, "name": "k", "base": str(BM25), "workers": 1, "variants": variants}))
    swept = subprocess.Popen(
        [*CLI, "sweep", str(sweep), "--tracking-uri", store, "--notebook", str(notebook)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        parent = wait_for(
            "the sweep's parent run",
            lambda: next((r.run_id for r in Tracker(store).runs() if r.tags.get("rageval.kind") == "sweep"), None),
        )
        member = wait_for("the first member to log its results", lambda: logged(parent))
    finally:
        sigkill(swept)
    assert integrity(db) == "ok"
    assert statuses(db)[parent] == statuses(db)[member] == "RUNNING"

    # The next run ends the sweep's runs KILLED, then runs and seals.
    again = cli("run", str(BM25), "--tracking-uri", store)
    assert again.returncode == 0, again.stderr
    assert f"reaped {parent}: now KILLED" in again.stderr and f"reaped {member}: now KILLED" in again.stderr
    new = again.stdout.split()[1]
    verified = CliRunner().invoke(app, ["verify", new, "--tracking-uri", store])
    assert verified.exit_code == 0 and f"run {new}: intact" in verified.stdout, verified.stderr

    assert integrity(db) == "ok"
    final = statuses(db)
    assert final == {killed_run: "KILLED", parent: "KILLED", member: "KILLED", new: "FINISHED"}
    tracker = Tracker(store)
    assert [r.run_id for r in tracker.runs() if r.sealed] == [new]
    assert "owner process" in tracker.run(member).tags["rageval.error"]
