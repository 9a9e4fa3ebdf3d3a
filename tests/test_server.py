"""The shared tracking server: a real PostgreSQL and a real ``mlflow server`` on 127.0.0.1 (the
session's ``mlflow_server`` fixture, tests/servers.py), and rageval's commands unchanged against it."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time

import psutil
import pytest
import yaml
from conftest import ROOT
from servers import fresh_experiment, require_services, service_folder
from typer.testing import CliRunner

from rageval.cli import app
from rageval.execution.server import free_port
from rageval.tracking.store import Tracker

pytestmark = pytest.mark.server
BM25 = ROOT / "params" / "bm25.yaml"
POLICY = ROOT / "params" / "gates" / "release.yaml"
runner = CliRunner()


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def rageval(*args: object) -> subprocess.Popen[str]:
    """``rageval ARGS`` in a process of its own (as a second user of the server would run it)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", "from rageval.cli import main; main()", *map(str, args)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def listeners(pid: int) -> set[tuple[str, int | str]]:
    """(address, port) of every TCP listener of a process and its children, and ("unix", path) of
    every unix socket they bound."""
    process = psutil.Process(pid)
    found: set[tuple[str, int | str]] = set()
    for member in [process, *process.children(recursive=True)]:
        for conn in member.net_connections(kind="inet"):
            if conn.status == psutil.CONN_LISTEN:
                found.add((conn.laddr.ip, conn.laddr.port))
        found.update(("unix", conn.laddr) for conn in member.net_connections(kind="unix") if conn.laddr)
    return found


def test_every_listener_binds_loopback_only(mlflow_server):
    server, database = listeners(mlflow_server.mlflow.pid), listeners(mlflow_server.postgres.pid)
    assert server == {("127.0.0.1", mlflow_server.mlflow.port)}
    # TCP on loopback only, and no unix socket (unix_socket_directories is empty).
    assert database == {("127.0.0.1", mlflow_server.postgres.port)}
    assert mlflow_server.backend_store_uri.startswith("postgresql+psycopg2://rageval:")
    assert f"@127.0.0.1:{mlflow_server.postgres.port}/mlflow" in mlflow_server.backend_store_uri


def test_bad_uris_taken_ports_and_missing_binaries_are_clear_errors(mlflow_server, tmp_path):
    plain = invoke("server", "--dir", tmp_path, "--backend-store-uri", "postgresql://me:pw@127.0.0.1:5432/mlflow")
    assert plain.exit_code == 2
    assert "--backend-store-uri: postgresql:// lets SQLAlchemy pick psycopg 3" in plain.output
    assert "name the driver: postgresql+psycopg2://me:***@127.0.0.1:5432/mlflow" in plain.output

    taken = invoke("server", "--dir", tmp_path, "--port", mlflow_server.mlflow.port)
    assert taken.exit_code == 1
    assert f"port {mlflow_server.mlflow.port} on 127.0.0.1 is taken" in taken.output
    assert "give another --port" in taken.output

    absent = invoke("server", "--dir", tmp_path, "--port", free_port(), "--pg-bindir", tmp_path / "no-such-bin")
    assert absent.exit_code == 1 and "apt-get install -y postgresql" in absent.output
    assert not (tmp_path / "postgres").exists()


def test_experiments_created_at_once_by_several_processes_are_one(mlflow_server):
    """The trap: processes creating one new experiment at once; each loser must find the winner's,
    never fall back to Default."""
    name = fresh_experiment("race")
    # Each process imports mlflow and opens its client first, says so, and creates on the word "go"
    # (a clock barrier is not one: on a loaded machine imports take longer than any fixed wait).
    code = (
        "import sys; from rageval.tracking.store import Tracker; t = Tracker(sys.argv[1]);"
        "t.client.search_experiments(max_results=1); print('ready', flush=True); sys.stdin.readline();"
        "print(t.experiment_id(sys.argv[2]), flush=True)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", code, mlflow_server.tracking_uri, name],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    for process in processes:
        assert process.stdout is not None and process.stdout.readline() == "ready\n"
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    outputs = [p.communicate(timeout=120) for p in processes]
    assert [p.returncode for p in processes] == [0] * 3, [err for _, err in outputs]
    ids = {out.strip() for out, _ in outputs}
    client = Tracker(mlflow_server.tracking_uri).client
    matching = client.search_experiments(filter_string=f"name = '{name}'")
    assert len(ids) == 1 and [e.experiment_id for e in matching] == list(ids)
    assert ids != {"0"}


def run_id_of(output: str) -> str:
    found = re.search(r"^run ([0-9a-f]{32}) sealed", output, re.MULTILINE)
    assert found, output
    return found.group(1)


def test_run_verify_compare_and_gate_against_the_server(mlflow_server):
    uri, experiment = mlflow_server.tracking_uri, fresh_experiment("gate")
    common = ["--split", "release", "--tracking-uri", uri, "--experiment", experiment]
    baseline = invoke("run", BM25, *common)
    assert baseline.exit_code == 0, baseline.output
    candidate = invoke("run", BM25, *common, "--set", "retrieval.stages.0.k1=1.2")
    assert candidate.exit_code == 0, candidate.output
    base_id, cand_id = run_id_of(baseline.output), run_id_of(candidate.output)

    tracker = Tracker(uri)
    info = tracker.run(base_id)
    assert info.sealed and info.status == "FINISHED" and tracker.experiment_name(info.experiment_id) == experiment
    # Artifacts went through the server's proxy into its artifacts folder, not to a local path.
    assert info.artifact_uri.startswith("mlflow-artifacts:")
    stored = list(mlflow_server.mlflow.artifacts.rglob("manifest.json"))
    assert any(base_id in p.parts for p in stored) and any(cand_id in p.parts for p in stored)

    verified = invoke("verify", base_id, "--tracking-uri", uri)
    assert verified.exit_code == 0 and f"run {base_id}: intact" in verified.output

    compared = invoke("compare", "--baseline", base_id, "--candidate", cand_id, "--tracking-uri", uri)
    assert compared.exit_code == 0, compared.output
    comparison = re.search(r"comparison run ([0-9a-f]{32}) sealed", compared.output)
    assert comparison and tracker.verify(comparison.group(1)) == []

    gated = invoke("gate", "--baseline", base_id, "--candidate", cand_id, "--policy", POLICY, "--tracking-uri", uri)
    decision = re.search(r"^decision run ([0-9a-f]{32}) sealed: (PASS|FAIL)$", gated.output, re.MULTILINE)
    assert decision, gated.output
    assert gated.exit_code == (0 if decision.group(2) == "PASS" else 1)  # the policy's verdict, recorded either way
    record = tracker.run(decision.group(1))
    assert record.tags["rageval.kind"] == "gate" and record.tags["rageval.baseline"] == base_id
    assert tracker.verify(decision.group(1)) == []


def test_two_concurrent_sweeps_into_one_server_lose_nothing(mlflow_server, tmp_path):
    """Two teammates start the same four-member sweep into one new experiment at the same time."""
    uri, experiment = mlflow_server.tracking_uri, fresh_experiment("sweeps")
    grid = [0.6, 0.9, 1.2, 1.5]
    path = tmp_path / "sweep.yaml"
    body = {"version": 1, "name": "server", "base": str(BM25), "split": "dev", "workers": 2}
    path.write_text(yaml.safe_dump({**body, "grid": {"retrieval.stages.0.k1": grid}}, sort_keys=False))
    # Both drivers create the same new experiment, their parents and their members at once.
    processes = [rageval("sweep", path, "--tracking-uri", uri, "--experiment", experiment) for _ in range(2)]
    results = [p.communicate(timeout=600) for p in processes]
    for process, (out, err) in zip(processes, results, strict=True):
        assert process.returncode == 0, out + err
    found = [re.search(r"^parent run ([0-9a-f]{32})", out, re.MULTILINE) for out, _ in results]
    parents = [f.group(1) for f in found if f]
    assert len(parents) == 2, results

    tracker = Tracker(uri)
    (created,) = tracker.client.search_experiments(filter_string=f"name = '{experiment}'")
    runs = tracker.runs(experiment)
    assert len(runs) == 2 + 2 * len(grid)
    assert {r.run_id for r in runs if "mlflow.parentRunId" not in r.tags} == set(parents)
    for parent in parents:
        members = tracker.children(parent)
        assert len(members) == len(grid) and all(m.experiment_id == created.experiment_id for m in members)
        for info in [tracker.run(parent), *members]:
            assert info.sealed and info.status == "FINISHED", info
            assert tracker.verify(info.run_id) == [], info.run_id
    # Names stay unique although both clients named their runs at the same moment.
    assert sorted(r.name for r in runs) == sorted(
        [
            f"{name}{suffix}"
            for name in ["sweep server@dev", *(f"server/k1={k1}@dev" for k1 in grid)]
            for suffix in ("", " #2")
        ]
    )
    assert tracker.client.search_runs(["0"]) == []  # nothing fell into Default


def wait_for_line(process: subprocess.Popen[str], prefix: str, timeout_s: float = 180) -> str:
    deadline = time.monotonic() + timeout_s
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if line.startswith(prefix):
            return line
        if not line and process.poll() is not None:
            break
    process.kill()
    raise AssertionError(f"no {prefix!r} line; stderr: {process.communicate()[1]}")


@pytest.fixture(scope="module")
def server_folder():
    """The folder the two `rageval server` tests share (the second restarts the first one's cluster)."""
    folder = service_folder()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_rageval_server_stops_everything_it_started(stop, server_folder):
    """Ctrl-C (the first time, on a new folder) and SIGTERM (the second, restarting the same
    cluster: what the team recorded is still there) stop PostgreSQL and the mlflow server."""
    require_services()
    folder = server_folder
    restarted = (folder / "postgres").exists()
    port = free_port()
    process = rageval("server", "--dir", folder, "--port", port)
    line = wait_for_line(process, "tracking server on ")
    assert line.startswith(f"tracking server on http://127.0.0.1:{port} (its own PostgreSQL in {folder / 'postgres'}")
    started = [psutil.Process(process.pid), *psutil.Process(process.pid).children(recursive=True)]
    postmaster = int((folder / "postgres" / "postmaster.pid").read_text().split()[0])
    started.append(psutil.Process(postmaster))
    tracker = Tracker(f"http://127.0.0.1:{port}")
    if restarted:
        assert tracker.client.get_experiment_by_name("kept-across-restarts") is not None
    else:
        tracker.experiment_id("kept-across-restarts")
    process.send_signal(stop)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0 and "stopped" in err, out + err
    gone, alive = psutil.wait_procs(started, timeout=10)
    assert alive == [] and len(gone) >= 3  # the command, the server's worker, the postmaster
    assert not (folder / "postgres" / "postmaster.pid").exists()
