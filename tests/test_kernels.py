"""Warm kernels, the kernel pool and its fork server, and the early logging of a handed-back result:
the ways a run's kernel comes up earlier must leave what the notebook computes unchanged."""

from __future__ import annotations

import json
import os
import pickle
import threading
import time
from pathlib import Path
from queue import Empty

import nbformat
import pytest
from nbclient.exceptions import CellTimeoutError

from rageval.config.load import dump_config, load_config
from rageval.execution.forkserver import Forked, ForkServer, available
from rageval.execution.handoff import EarlyLog
from rageval.execution.kernels import KernelPool, WarmKernel
from rageval.execution.notebooks import execute_notebook
from rageval.execution.preload import PRELOAD
from rageval.experiment.run import run_experiment
from rageval.paths import project_root

IPYTHON = ("In", "Out", "get_ipython", "exit", "quit", "open", "os", "sys", "json_dump")
PROBE = [
    "import os, sys\n"
    "print(json_dump := __import__('json').dumps({"
    "'cwd': os.getcwd(), 'pid': os.getpid(), 'channel': os.environ.get('RAGEVAL_PROGRESS'),"
    f"'preloaded': sorted(m for m in {PRELOAD!r} if m in sys.modules),"
    f"'names': sorted(n for n in globals() if not n.startswith('_') and n not in {IPYTHON!r})}}))"
]


def probe_notebook(folder: Path) -> Path:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell("# parameters\nx = 1")]
    notebook.cells[0].metadata["tags"] = ["parameters"]
    notebook.cells += [nbformat.v4.new_code_cell(source) for source in PROBE]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = folder / "probe.ipynb"
    nbformat.write(notebook, path)
    return path


def probe(executed: Path) -> dict:
    cell = nbformat.read(executed, as_version=4).cells[-1]
    return json.loads("".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream"))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (ended, not yet reaped) counts as ended.
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "State:\tZ" in status.read_text())


def test_a_warm_kernel_runs_the_notebook_in_its_folder_with_the_modules_imported_and_no_names_bound(tmp_path):
    notebook = probe_notebook(tmp_path)
    kernel = WarmKernel(tmp_path)
    execute_notebook(notebook, tmp_path / "out.ipynb", {"x": 2}, kernel=kernel)
    seen = probe(tmp_path / "out.ipynb")
    assert seen["cwd"] == str(tmp_path)
    assert seen["channel"] == str(kernel.channel)
    assert seen["preloaded"] == sorted(PRELOAD)
    assert seen["names"] == ["x"]  # the parameter only: the preload bound nothing in the namespace
    kernel.close()
    time.sleep(0.2)
    assert not alive(seen["pid"])
    with pytest.raises(RuntimeError, match="one notebook"):
        kernel.manager()


def test_a_warm_kernel_execution_writes_the_notebook_once_and_keeps_the_cells_run_before_a_timeout(tmp_path):
    # papermill wrote the whole notebook at each cell's start and end; the warm engine writes it
    # once, after the last cell, or as far as it ran when the execution fails (here a timeout).
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell("# parameters\noutput = ''")]
    notebook.cells[0].metadata["tags"] = ["parameters"]
    notebook.cells += [
        nbformat.v4.new_code_cell("import os\nprint('written yet:', os.path.exists(output))"),
        nbformat.v4.new_code_cell("import time\ntime.sleep(60)"),
    ]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, tmp_path / "slow.ipynb")
    executed = tmp_path / "out.ipynb"
    with WarmKernel(tmp_path, preload=()) as kernel, pytest.raises(CellTimeoutError, match="timed out"):
        execute_notebook(tmp_path / "slow.ipynb", executed, {"output": str(executed)}, timeout=3, kernel=kernel)
    cells = nbformat.read(executed, as_version=4).cells
    assert [o.get("text") for o in cells[2].outputs] == ["written yet: False\n"]  # no write while cells ran
    assert cells[2].metadata.papermill.status == "completed"
    assert cells[3].metadata.papermill.start_time and not cells[3].outputs  # the cell the timeout stopped


def test_a_warm_kernel_given_a_working_directory_or_channel_as_well_is_refused(tmp_path):
    with WarmKernel(tmp_path, preload=()) as kernel, pytest.raises(ValueError, match="warm kernel"):
        execute_notebook(probe_notebook(tmp_path), tmp_path / "out.ipynb", {}, cwd=tmp_path, kernel=kernel)


def started_kernel(server: ForkServer, folder: Path) -> int:
    """A kernel forked by ``server``, once it has written its connection file (it is up)."""
    pid = server.fork(["-f", str(folder / "kernel.json")], dict(os.environ), str(folder))
    deadline = time.monotonic() + 30
    while not (folder / "kernel.json").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert alive(pid)
    return pid


def test_closing_an_untaken_warm_kernel_kills_it(tmp_path):
    kernel = WarmKernel(tmp_path, preload=())
    kernel._thread.join()
    pid = kernel._manager.provisioner.pid
    assert alive(pid)
    kernel.close()
    time.sleep(0.2)
    assert not alive(pid)


@pytest.mark.skipif(not available(), reason="the fork server needs os.fork")
def test_forked_kernels_are_fresh_processes_with_their_own_folder_and_channel(tmp_path):
    notebook = probe_notebook(tmp_path)
    pool = KernelPool(tmp_path, size=1, total=2)
    seen = []
    for index in range(2):
        kernel = pool.take()
        assert kernel is not None
        execute_notebook(notebook, tmp_path / f"out{index}.ipynb", {"x": index}, kernel=kernel)
        seen.append(probe(tmp_path / f"out{index}.ipynb"))
        kernel.close()
    assert pool.take() is None  # total reached: no kernel is started that nobody takes
    pool.close()
    assert seen[0]["pid"] != seen[1]["pid"]
    assert seen[0]["channel"] != seen[1]["channel"]
    assert all(s["cwd"] == str(tmp_path) and s["names"] == ["x"] for s in seen)
    assert all(s["preloaded"] == sorted(PRELOAD) for s in seen)
    assert not any(alive(s["pid"]) for s in seen)


@pytest.mark.skipif(not available(), reason="the fork server needs os.fork")
def test_closing_the_fork_server_kills_the_kernels_it_started(tmp_path):
    server = ForkServer(())
    pid = started_kernel(server, tmp_path)
    forked = Forked(pid, server.pid)
    assert forked.poll() is None
    server.close()
    assert forked.wait(timeout=10) == forked.returncode
    assert forked.returncode is not None
    assert Forked(os.getpid(), server.pid).poll() is not None  # not the server's child: never signalled
    with pytest.raises(RuntimeError, match="fork server has exited"):
        server.fork([], {}, str(tmp_path))


@pytest.mark.skipif(not available(), reason="the fork server needs os.fork")
def test_a_kernel_ends_when_its_fork_server_is_killed_without_its_clean_up(tmp_path):
    """SIGKILL leaves the server no chance to kill its kernels; each kernel watches its parent
    instead (a kernel orphaned this way held a finished sweep's stderr open, and the CI test reading
    that stderr waited past its 120 s)."""
    import signal

    server = ForkServer(())
    pid = started_kernel(server, tmp_path)
    os.kill(server.pid, signal.SIGKILL)
    deadline = time.monotonic() + 15
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    ended = not alive(pid)
    if not ended:
        os.kill(pid, signal.SIGKILL)
    server.close()
    assert ended


@pytest.mark.skipif(not available(), reason="the fork server needs os.fork")
def test_a_kernel_of_a_dead_fork_server_starts_as_usual(tmp_path):
    notebook = probe_notebook(tmp_path)
    server = ForkServer(())
    server.close()
    kernel = WarmKernel(tmp_path, preload=(), server=server)
    execute_notebook(notebook, tmp_path / "out.ipynb", {"x": 3}, kernel=kernel)
    assert probe(tmp_path / "out.ipynb")["cwd"] == str(tmp_path)
    kernel.close()


@pytest.mark.skipif(not available(), reason="the fork server needs os.fork")
def test_the_evaluation_notebook_hands_back_the_same_result_from_a_forked_and_a_cold_kernel(tmp_path):
    """The baseline is exactly preserved whichever way its kernel started."""
    config = load_config(project_root() / "params" / "bm25.yaml")
    notebook = project_root() / "notebooks" / "evaluate.ipynb"
    results = {}
    pool = KernelPool(notebook.parent, size=1, total=1)
    for how, kernel in (("forked", pool.take()), ("cold", None)):
        handoff = tmp_path / f"{how}.pickle"
        parameters = {"config_yaml": dump_config(config), "run_id": "not-logged", "handoff": str(handoff)}
        execute_notebook(notebook, tmp_path / f"{how}.ipynb", parameters, kernel=kernel)
        if kernel is not None:
            kernel.close()
        results[how] = pickle.loads(handoff.read_bytes())
    pool.close()
    alone = run_experiment(config)
    for result in results.values():
        assert result.evaluation.per_query.equals(alone.evaluation.per_query)
        columns = ["query_id", "rank", "chunk_id", "score"]
        assert result.rankings[columns].equals(alone.rankings[columns])


def test_early_log_logs_the_handed_back_result_while_the_notebook_still_runs(tmp_path):
    handoff = tmp_path / "result.pickle"
    logged = threading.Event()
    got = []
    early = EarlyLog(handoff, lambda result: (got.append(result), logged.set()), interval=0.01)
    partial = handoff.with_name(handoff.name + ".part")
    partial.write_bytes(pickle.dumps({"measure": 0.5}))
    assert not logged.wait(0.1)  # a file still being written is not picked up
    partial.replace(handoff)
    assert logged.wait(5)  # before the notebook has ended
    assert early.finish() == {"measure": 0.5}
    assert got == [{"measure": 0.5}]


def test_early_log_raises_what_logging_raised_and_is_quiet_without_a_result(tmp_path):
    handoff = tmp_path / "result.pickle"

    def refuse(result):
        raise OSError("store unreachable")

    early = EarlyLog(handoff, refuse, interval=0.01)
    handoff.write_bytes(pickle.dumps(1))
    with pytest.raises(OSError, match="unreachable"):
        early.finish()
    nothing = EarlyLog(tmp_path / "never.pickle", refuse, interval=0.01)
    assert nothing.finish() is None
    nothing.abandon()


def test_a_prompt_client_is_ready_only_once_iopub_delivers_and_then_loses_no_output(tmp_path):
    """The client a warm kernel's notebook runs with asks for kernel_info again after 20 ms without
    IOPub's status, not 0.2 s: ready must still mean subscribed. Where ZMQ loses the first statuses
    (the subscription not yet through: here the first two are dropped as it would drop them), it asks
    until one arrives; and the first cell's output is all there."""
    import asyncio

    from rageval.execution.warm_engine import PromptKernelClient

    class LosesTwoStatuses(PromptKernelClient):
        asked = 0

        def kernel_info(self) -> str:
            LosesTwoStatuses.asked += 1
            return super().kernel_info()

        @property
        def iopub_channel(self):
            channel = super().iopub_channel
            if LosesTwoStatuses.asked > 2:
                return channel

            class Dropping:  # the status arrives, and is lost, as before the subscription reaches the kernel
                def __getattr__(self, name):
                    return getattr(channel, name)

                async def get_msg(self, timeout=None):
                    await channel.get_msg(timeout=timeout)
                    raise Empty

            return Dropping()

    async def first_cell(manager, client_class) -> list[str]:
        manager.client_factory = client_class
        client = manager.client()
        client.start_channels()
        try:
            await client.wait_for_ready(timeout=60)
            msg_id = client.execute("print('first'); print('output')")
            texts, state = [], None
            while state != "idle":
                msg = await client.get_iopub_msg(timeout=30)
                if msg["parent_header"].get("msg_id") != msg_id:
                    continue
                if msg["msg_type"] == "stream":
                    texts.append(msg["content"]["text"])
                state = msg["content"].get("execution_state", state)
            return texts
        finally:
            client.stop_channels()

    for client_class in (PromptKernelClient, PromptKernelClient, LosesTwoStatuses):
        with WarmKernel(tmp_path, preload=()) as kernel:  # a fresh kernel, a fresh subscription
            assert "".join(asyncio.run(first_cell(kernel.manager(), client_class))) == "first\noutput\n"
    assert LosesTwoStatuses.asked >= 3  # asked again after each lost status (more, were a real one lost too)


@pytest.mark.skipif(not available(), reason="the fork server is POSIX-only (os.fork)")
def test_no_kernel_outlives_a_fork_server_whose_owner_died_while_the_kernel_started(tmp_path):
    """The owner asks for a kernel and dies before the reply (its end of the pipe closed): the
    server's reply fails, and the kernel it forked must still be killed as the server ends — an
    orphan kernel held a dead sweep's stderr open."""
    import subprocess
    import sys

    import psutil

    from rageval.execution.forkserver import FORK_SERVER

    marker = f"rageval-orphan-check-{os.getpid()}-{time.time_ns()}"
    env = {**os.environ, "RAGEVAL_TEST_MARKER": marker}  # a forked kernel keeps the server's /proc environ
    server = subprocess.Popen(
        [sys.executable, "-m", FORK_SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True
    )
    assert server.stdin is not None and server.stdout is not None
    request = {"argv": ["-f", str(tmp_path / "kernel.json")], "env": env, "cwd": str(tmp_path)}
    server.stdin.write(json.dumps(request) + "\n")
    server.stdin.flush()
    server.stdout.close()  # the owner stops listening, as one that died would
    server.stdin.close()
    server.wait(timeout=120)

    def marked() -> list[int]:
        found = []
        for process in psutil.process_iter():
            try:
                if process.environ().get("RAGEVAL_TEST_MARKER") == marker:
                    found.append(process.pid)
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        return found

    deadline = time.monotonic() + 10
    while marked() and time.monotonic() < deadline:
        time.sleep(0.2)
    left = marked()
    for pid in left:
        os.kill(pid, 9)
    assert left == []
