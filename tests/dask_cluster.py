"""A real Dask cluster for the tests: ``dask scheduler`` and ``dask worker`` processes on 127.0.0.1.

Each process runs in a process group of its own, so stopping the cluster also stops what it
started (the nanny's worker process, its notebook kernels). The workers get this checkout on
``PYTHONPATH`` and a *wrong* ``RAGEVAL_CACHE`` (``worker_cache``): a sweep must hand them the
driver's cache folder explicitly, and a test can check the wrong one stays empty.

    from dask_cluster import dask_cluster  # noqa: F401 - the fixture, module-scoped
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[1]
DASK = Path(sys.executable).parent / "dask"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class DaskCluster:
    address: str
    scheduler: subprocess.Popen[bytes]
    workers: list[subprocess.Popen[bytes]]
    worker_cache: Path
    logs: Path
    env: dict[str, str] = field(default_factory=dict)

    def processes(self) -> list[psutil.Process]:
        """Every live process of the cluster: scheduler, worker launchers, nannies' workers, kernels."""
        found = []
        for popen in (self.scheduler, *self.workers):
            try:
                top = psutil.Process(popen.pid)
                found += [top, *top.children(recursive=True)]
            except psutil.NoSuchProcess:
                continue
        return found

    def worker_pids(self) -> set[int]:
        """The processes that run tasks: each nanny's spawned worker (not its resource tracker, not kernels)."""
        pids = set()
        for popen in self.workers:
            try:
                children = psutil.Process(popen.pid).children(recursive=False)
            except psutil.NoSuchProcess:
                continue
            pids |= {c.pid for c in children if any("spawn_main" in part for part in c.cmdline())}
        return pids

    def listeners(self) -> list[tuple[int, str, int]]:
        """(pid, address, port) of every TCP socket the cluster's processes listen on."""
        pids = {p.pid for p in self.processes()}
        return [
            (c.pid, c.laddr.ip, c.laddr.port)
            for c in psutil.net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN and c.pid in pids
        ]

    def stop(self) -> None:
        for popen in (*self.workers, self.scheduler):
            _stop_group(popen)

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(
            f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
            for log in sorted(self.logs.glob("*.log"))
        )


def _stop_group(popen: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """SIGTERM the process group, SIGKILL what is left after ``grace`` seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(popen.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            popen.poll()  # reaps the leader once it exits
            try:
                os.killpg(popen.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)
    popen.wait()


def start_cluster(tmp: Path, workers: int = 2, timeout: float = 90.0) -> DaskCluster:
    """A scheduler and ``workers`` single-threaded workers on 127.0.0.1, all registered."""
    from distributed import Client

    tmp.mkdir(parents=True, exist_ok=True)
    logs = tmp / "logs"
    logs.mkdir(exist_ok=True)
    worker_cache = tmp / "worker-default-cache"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        "RAGEVAL_CACHE": str(worker_cache),
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
    }
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"

    def spawn(name: str, command: list[str]) -> subprocess.Popen[bytes]:
        with (logs / f"{name}.log").open("wb") as log:  # the child keeps its own descriptor
            return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, process_group=0, cwd=tmp)

    scheduler = spawn(
        "scheduler",
        [
            str(DASK),
            "scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--dashboard-address",
            f"127.0.0.1:{free_port()}",
        ],
    )
    cluster = DaskCluster(address, scheduler, [], worker_cache, logs, env)
    try:
        for i in range(workers):
            folder = tmp / f"worker-{i}"
            folder.mkdir(exist_ok=True)
            cluster.workers.append(
                spawn(
                    f"worker-{i}",
                    [
                        str(DASK),
                        "worker",
                        address,
                        "--host",
                        "127.0.0.1",
                        "--nthreads",
                        "1",
                        "--nworkers",
                        "1",
                        "--dashboard-address",
                        "127.0.0.1:0",
                        "--local-directory",
                        str(folder),
                        "--name",
                        f"worker-{i}",
                    ],
                )
            )
        with Client(address, timeout=timeout) as client:
            client.wait_for_workers(workers, timeout=timeout)
    except BaseException:
        cluster.stop()
        raise
    return cluster


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaskCluster]:
    cluster = start_cluster(tmp_path_factory.mktemp("dask"))
    try:
        yield cluster
    finally:
        started = cluster.processes()
        cluster.stop()
    left = [p for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not left, f"cluster processes left running: {left}"
