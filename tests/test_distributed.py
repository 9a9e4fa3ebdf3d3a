"""Sweeps on a real Dask cluster: a ``dask scheduler`` and two ``dask worker`` processes on 127.0.0.1
(tests/dask_cluster.py), members sealed into one store, a worker SIGKILLed mid-member, the cache
shared, and ``--cluster local`` once."""

from __future__ import annotations

import io
import json
import os
import signal
import threading
import time
from pathlib import Path

import nbformat
import psutil
import pytest
import yaml
from conftest import ROOT
from dask_cluster import DaskCluster, dask_cluster  # noqa: F401 - the fixture
from typer.testing import CliRunner

from rageval.tracking.owners import PID_TAG, owner_fields
from rageval.tracking.store import Tracker
from rageval.workflows.cluster import ATTEMPT_TAG, WORKER_TAG, DaskExecutor
from rageval.workflows.members import MEMBER_TAG
from rageval.workflows.sweep import SweepRequest, run_sweep

pytestmark = pytest.mark.distributed

BM25 = ROOT / "params" / "bm25.yaml"
SLOW = 4  # seconds the victim's notebook sleeps: time to find and kill its worker


@pytest.fixture(scope="module")
def tracking_uri(mlflow_server) -> str:
    """Where the sweeps record: the PostgreSQL-backed ``mlflow server`` of tests/servers.py, as a team's
    cluster would (experiments and the parent created by the driver, members written by the workers)."""
    return mlflow_server.tracking_uri


def sweep_file(folder: Path, variants: list[dict]) -> Path:
    path = folder / "sweep.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "name": "d", "base": str(BM25), "variants": variants}))
    return path


def slow_notebook(folder: Path) -> Path:
    """The evaluation notebook, sleeping first for a config whose description says slow-victim."""
    notebook = nbformat.read(ROOT / "notebooks" / "evaluate.ipynb", as_version=4)
    at = next(i for i, c in enumerate(notebook.cells) if "parameters" in c.metadata.get("tags", [])) + 1
    cell = f'import time\nif "slow-victim" in config_yaml:\n    time.sleep({SLOW})'
    notebook.cells.insert(at, nbformat.v4.new_code_cell(cell))
    path = folder / "slow.ipynb"
    nbformat.write(notebook, path)
    return path


def kill_victims_worker(tracking_uri: str, parent: list[str], cluster: DaskCluster, done: threading.Event) -> dict:
    """Wait for the victim's first run to be RUNNING, then SIGKILL the worker process owning it."""
    tracker = Tracker(tracking_uri)
    while not done.is_set():
        if parent:
            for info in tracker.children(parent[0]):
                if info.tags.get(MEMBER_TAG) == "victim" and info.status == "RUNNING":
                    pid = int(owner_fields(info.tags)["pid"])
                    assert pid in cluster.worker_pids(), "the run's owner is a Dask worker process"
                    os.kill(pid, signal.SIGKILL)
                    return {"run_id": info.run_id, "pid": pid, "worker": info.tags[WORKER_TAG]}
        time.sleep(0.2)
    return {}


@pytest.fixture(scope="module")
def killed_sweep(dask_cluster, tracking_uri, tmp_path_factory):  # noqa: F811 - the imported fixture
    """Four members sharing one BM25 index on the two workers; the victim's worker SIGKILLed mid-run."""
    tmp = tmp_path_factory.mktemp("killed-sweep")
    path = sweep_file(
        tmp,
        [
            {"name": "baseline", "set": {}},
            {"name": "victim", "set": {"description": "slow-victim"}},
            {"name": "k3", "set": {"final_k": 3}},
            {"name": "c50", "set": {"retrieval.stages.0.candidates": 50}},
        ],
    )
    cache = tmp / "driver-cache"
    parent: list[str] = []
    done = threading.Event()
    killed: dict = {}
    killer = threading.Thread(
        target=lambda: killed.update(kill_victims_worker(tracking_uri, parent, dask_cluster, done)), daemon=True
    )
    killer.start()
    progress = io.StringIO()
    try:
        outcome = run_sweep(
            SweepRequest(path, experiment="dask-tests", notebook=slow_notebook(tmp)),
            tracker=Tracker(tracking_uri),
            progress=progress,
            on_parent=parent.append,
            executor=DaskExecutor(dask_cluster.address, cache_dir=cache),
        )
    finally:
        done.set()
        killer.join()
    return outcome, killed, cache, progress.getvalue()


def test_every_listener_binds_loopback(dask_cluster):  # noqa: F811
    listeners = dask_cluster.listeners()
    assert len(listeners) >= 5  # scheduler + its http, and per worker: nanny, worker, http
    assert {ip for _, ip, _ in listeners} == {"127.0.0.1"}, listeners


def test_members_seal_and_verify_and_the_parent_seals(killed_sweep, tracking_uri, dask_cluster):  # noqa: F811
    outcome, killed, _, progress = killed_sweep
    tracker = Tracker(tracking_uri)
    assert {m.name: m.status for m in outcome.members} == dict.fromkeys(["baseline", "victim", "k3", "c50"], "sealed")
    for m in outcome.members:
        assert tracker.verify(m.run_id) == [], m.name
        info = tracker.run(m.run_id)
        assert info.tags["mlflow.parentRunId"] == outcome.parent_run_id and info.experiment_id == tracker.experiment_id(
            "dask-tests"
        )
        assert info.tags[WORKER_TAG].startswith("tcp://127.0.0.1:")
    parent = tracker.run(outcome.parent_run_id)
    assert parent.sealed and tracker.verify(outcome.parent_run_id) == []
    assert parent.params["sweep.cluster"] == dask_cluster.address and parent.params["workers"] == "2"
    # every member's end, and the victim's retry, in the progress lines
    for name in ("baseline", "k3", "c50", "victim"):
        assert f"{name}: sealed | sweep:" in progress
    assert "victim: retry | sweep:" in progress


def test_the_killed_members_dead_attempt_ends_killed_and_the_retry_seals(killed_sweep, tracking_uri, tmp_path):
    outcome, killed, _, _ = killed_sweep
    assert killed, "the victim's run was never seen RUNNING"
    tracker = Tracker(tracking_uri)
    dead = tracker.run(killed["run_id"])
    assert dead.status == "KILLED" and not dead.sealed
    assert f"process {killed['pid']}" in dead.tags["rageval.error"] and "never sealed" in dead.tags["rageval.error"]
    victim = next(m for m in outcome.members if m.name == "victim")
    assert victim.retries == 1 and victim.run_id != killed["run_id"]
    retry = tracker.run(victim.run_id)
    assert retry.sealed and retry.tags[ATTEMPT_TAG] == "2" and dead.tags[ATTEMPT_TAG] == "1"
    assert retry.tags[WORKER_TAG] != killed["worker"]  # another worker (or the nanny's fresh one)
    runs = [r for r in tracker.children(outcome.parent_run_id) if r.tags[MEMBER_TAG] == "victim"]
    assert {r.run_id for r in runs} == {killed["run_id"], victim.run_id}  # no third attempt
    # the parent's summary says which member was retried and what became of the dead attempt
    local = tracker.download(outcome.parent_run_id, "summary.json", tmp_path)
    summary = {m["name"]: m for m in json.loads(Path(local).read_text())["members"]}
    assert summary["victim"]["retries"] == 1 and summary["baseline"]["retries"] == 0
    attempts = {a["run_id"]: a for a in summary["victim"]["attempts"]}
    assert attempts[killed["run_id"]]["status"] == "KILLED" and "never sealed" in attempts[killed["run_id"]]["note"]
    assert attempts[victim.run_id]["status"] == "FINISHED"
    # the dead worker's notebook kernel did not outlive it
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and _kernels_of(killed["pid"]):
        time.sleep(0.2)
    assert not _kernels_of(killed["pid"])


def _kernels_of(pid: int) -> list[psutil.Process]:
    kernels = []
    for process in psutil.process_iter(["cmdline", "environ"]):
        try:
            if any("ipykernel" in part for part in process.info["cmdline"] or []) and (
                (process.info["environ"] or {}).get("JPY_PARENT_PID") == str(pid)
            ):
                kernels.append(process)
        except psutil.Error:
            continue
    return kernels


def test_the_bm25_index_is_built_once_per_cluster_in_the_drivers_cache(killed_sweep, tracking_uri, dask_cluster):  # noqa: F811
    outcome, _, cache, _ = killed_sweep
    tracker = Tracker(tracking_uri)
    states = [tracker.run(m.run_id).tags["rageval.cache"].removeprefix("bm25 ") for m in outcome.members]
    assert sorted(states) == ["hit", "hit", "hit", "miss"]  # four members, one index, two workers
    assert len([p for p in (cache / "bm25").iterdir() if not p.name.startswith(".")]) == 1
    assert not dask_cluster.worker_cache.exists()  # the workers' own default was never used


def test_two_workers_needing_one_cache_entry_at_once_build_it_once(dask_cluster, tmp_path):  # noqa: F811
    """The cache's file lock across worker processes: both ask at once, one builds, one reads."""
    from distributed import Client

    root, log = tmp_path / "cache", tmp_path / "builds.log"

    def get(root: str, log: str) -> tuple[bool, int]:  # nested: pickled by value to the workers
        import os
        import time

        from rageval.retrieval.cache import Cache

        def build(folder: Path) -> None:
            with open(log, "a") as out:
                out.write(f"{os.getpid()}\n")
            time.sleep(1.5)  # long enough that the other worker asks while this one builds
            (folder / "index.bin").write_bytes(b"index")

        return Cache(root).get_or_build("bm25", {"corpus": "one"}, build).hit, os.getpid()

    with Client(dask_cluster.address, timeout=30) as client:
        client.wait_for_workers(2, timeout=60)
        workers = sorted(client.scheduler_info()["workers"])
        futures = [client.submit(get, str(root), str(log), workers=[w], pure=False) for w in workers]
        results = client.gather(futures)
    assert sorted(hit for hit, _ in results) == [False, True]
    assert len({pid for _, pid in results}) == 2  # two processes
    assert len(log.read_text().splitlines()) == 1  # one build
    assert len([p for p in (root / "bm25").iterdir() if not p.name.startswith(".")]) == 1


def test_cluster_local_runs_a_sweep_on_loopback_worker_processes(tmp_path, tracking_uri):
    from rageval.cli import app

    path = sweep_file(tmp_path, [{"name": "baseline", "set": {}}, {"name": "k3", "set": {"final_k": 3}}])
    result = CliRunner().invoke(
        app,
        [
            "sweep",
            str(path),
            "--cluster",
            "local",
            "--workers",
            "2",
            "--tracking-uri",
            tracking_uri,
            "--experiment",
            "dask-local",
        ],
    )
    assert result.exit_code == 0, result.output
    # each member's steps, forwarded from its worker, and its end, from its future
    for name in ("baseline", "k3"):
        assert f"[{name}] create run (" in result.stderr and f"[{name}] kernel start (" in result.stderr
        assert f"{name}: sealed | sweep:" in result.stderr
    tracker = Tracker(tracking_uri)
    (parent,) = [r for r in tracker.runs("dask-local") if r.tags.get("rageval.kind") == "sweep"]
    assert parent.sealed and parent.params["sweep.cluster"] == "local" and parent.params["workers"] == "2"
    children = tracker.children(parent.run_id)
    assert len(children) == 2 and all(c.sealed and tracker.verify(c.run_id) == [] for c in children)
    assert {owner_fields(c.tags)["pid"] for c in children}.isdisjoint({str(os.getpid())})  # ran in worker processes


def test_workers_with_a_cluster_address_are_refused_before_any_run(tmp_path, tracking_uri, dask_cluster):  # noqa: F811
    from rageval.errors import ConfigError

    path = sweep_file(tmp_path, [{"name": "baseline", "set": {}}])
    with pytest.raises(ConfigError, match="a running cluster's workers decide"):
        run_sweep(
            SweepRequest(path, workers=3), tracker=Tracker(tracking_uri), executor=DaskExecutor(dask_cluster.address)
        )
    with pytest.raises(ConfigError, match="not a Dask scheduler address"):
        run_sweep(SweepRequest(path), tracker=Tracker(tracking_uri), executor=DaskExecutor("127.0.0.1:1"))


def test_sigterm_to_the_driver_kills_running_members_and_never_starts_the_rest(dask_cluster, tmp_path, tracking_uri):  # noqa: F811
    import subprocess
    import sys

    notebook = nbformat.read(ROOT / "notebooks" / "evaluate.ipynb", as_version=4)
    at = next(i for i, c in enumerate(notebook.cells) if "parameters" in c.metadata.get("tags", [])) + 1
    notebook.cells.insert(at, nbformat.v4.new_code_cell("import time\ntime.sleep(120)"))
    nbformat.write(notebook, tmp_path / "sleepy.ipynb")
    path = sweep_file(tmp_path, [{"name": f"m{i}", "set": {"final_k": 3 + i}} for i in range(4)])
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = ["sweep", str(path), "--cluster", dask_cluster.address, "--tracking-uri", tracking_uri]
    command += ["--experiment", "dask-interrupt", "--notebook", str(tmp_path / "sleepy.ipynb")]
    driver = subprocess.Popen(
        [sys.executable, "-c", "from rageval.cli import app; app()", *command],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    tracker = Tracker(tracking_uri)
    deadline = time.monotonic() + 120
    running: list = []
    while time.monotonic() < deadline and len(running) < 2:
        sweeps = [r for r in tracker.runs("dask-interrupt") if r.tags.get("rageval.kind") == "sweep"]
        running = [c for s in sweeps for c in tracker.children(s.run_id) if c.status == "RUNNING"]
        time.sleep(0.3)
    assert len(running) == 2, "two members never ran at once"
    time.sleep(2)  # their kernels are in the sleeping cell
    driver.send_signal(signal.SIGTERM)
    output, _ = driver.communicate(timeout=120)
    assert driver.returncode == 130, output.decode()
    (parent,) = [r for r in tracker.runs("dask-interrupt") if r.tags.get("rageval.kind") == "sweep"]
    assert parent.status == "KILLED" and not parent.sealed
    children = tracker.children(parent.run_id)
    assert sorted(c.status for c in children) == ["KILLED", "KILLED"] and not any(c.sealed for c in children)
    assert all("interrupted" in c.tags["rageval.error"] for c in children)
    local = tracker.download(parent.run_id, "summary.json", tmp_path)
    counts = sorted(m["status"] for m in json.loads(Path(local).read_text())["members"])
    assert counts == ["KILLED", "KILLED", "not started", "not started"]


def test_after_two_dead_attempts_a_member_fails_and_a_sealed_attempt_is_its_result(
    dask_cluster,  # noqa: F811 - the imported fixture
    tracking_uri,
    tmp_path,
):
    """What a task finds in the store decides: two earlier runs of dead workers, no third; a sealed one, no rerun."""
    import subprocess
    import sys
    from dataclasses import replace

    from distributed import Client

    from rageval.tracking.owners import STARTED_TAG
    from rageval.workflows.cluster import member_task
    from rageval.workflows.members import MemberJob

    tracker = Tracker(tracking_uri)
    parent = tracker.create_run("dask-attempts", "parent", params={}, tags={})
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    started = psutil.Process(gone.pid).create_time()
    gone.wait()
    dead = []
    for attempt in ("1", "2"):
        tags = {MEMBER_TAG: "twice", "mlflow.parentRunId": parent, ATTEMPT_TAG: attempt}
        dead.append(tracker.create_run("dask-attempts", f"twice-{attempt}", params={}, tags=tags))
        tracker.client.set_tag(dead[-1], PID_TAG, str(gone.pid))  # as if a worker now gone had made it
        tracker.client.set_tag(dead[-1], STARTED_TAG, repr(started))
    sealed = tracker.create_run(
        "dask-attempts", "done", params={}, tags={MEMBER_TAG: "done", "mlflow.parentRunId": parent}
    )
    tracker.seal(sealed)
    job = MemberJob("twice", (), BM25, None, None, "dev", "d", "dask-attempts", parent, None, BM25, None, None)
    with Client(dask_cluster.address, timeout=30) as client:
        futures = [
            client.submit(member_task, replace(job, name=n), tracking_uri, str(tmp_path), "t", False, pure=False)
            for n in ("twice", "done")
        ]
        twice, done = client.gather(futures)
    assert twice.status == "FAILED" and "not tried again: the workers of its 2 attempts died" in twice.error
    assert [c.run_id for c in tracker.children(parent) if c.tags[MEMBER_TAG] == "twice"] == dead  # no third run
    assert {tracker.run(r).status for r in dead} == {"KILLED"}
    assert done.status == "sealed" and done.run_id == sealed
    assert len(tracker.children(parent)) == 3
