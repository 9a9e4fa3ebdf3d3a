"""A fork server for a sweep's notebook kernels: one process imports the kernel's stack once (IPython,
ipykernel, pandas, matplotlib, the retrieval and evaluation code, the members' stages), then forks a
fresh kernel per notebook.

A kernel started from scratch spends about 2 s of CPU on imports before it runs a cell; a forked
one is ready in about 0.4 s (measured on the 2-core demo machine), and a sweep starts one per
member. Each forked kernel is a new process with its own connection file, working directory and
environment, and the notebook's namespace is empty as in any new kernel: the server never runs a
cell, it only has modules imported. POSIX only (``os.fork``); elsewhere kernels start as usual.

The server reads one JSON request per line on stdin and answers each with the new kernel's PID on
stdout. When stdin closes (its owner is done, or died) it kills the kernels it started and exits.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from rageval.execution.preload import preload as import_modules

FORK_SERVER = "rageval.execution.forkserver"  # the server's module: in its command line and its kernels'
LAUNCHER = ["-m", "ipykernel_launcher"]  # how a kernelspec's argv starts ipykernel (after the interpreter)


def available() -> bool:
    return hasattr(os, "fork")


class ForkServer:
    """The server process; :meth:`fork` starts a kernel from it (thread-safe), :meth:`close` stops it
    and the kernels it started."""

    def __init__(self, preload: Sequence[str]) -> None:
        self._lock = threading.Lock()
        self._process = subprocess.Popen(
            [sys.executable, "-m", FORK_SERVER, *preload],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def fork(self, argv: Sequence[str], env: Mapping[str, str], cwd: str) -> int:
        """A new kernel running ipykernel with ``argv`` (what follows ``-m ipykernel_launcher``);
        its PID. Raises :class:`RuntimeError` when the server has died."""
        request = json.dumps({"argv": list(argv), "env": dict(env), "cwd": cwd}) + "\n"
        with self._lock:
            try:
                assert self._process.stdin is not None and self._process.stdout is not None
                self._process.stdin.write(request)
                self._process.stdin.flush()
                reply = self._process.stdout.readline()
            except (BrokenPipeError, ValueError):
                reply = ""
        if not reply:
            raise RuntimeError(f"the kernel fork server has exited (status {self._process.poll()})")
        return int(json.loads(reply)["pid"])

    @property
    def pid(self) -> int:
        return self._process.pid

    def close(self) -> None:
        with self._lock:
            if self._process.stdin is not None and not self._process.stdin.closed:
                try:
                    self._process.stdin.close()
                except BrokenPipeError:
                    pass
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()


class Forked:
    """What jupyter_client's local provisioner needs of a ``Popen``, for a kernel the fork server
    started: a child of the server, not of this process (the server reaps it; gone, or no longer
    the server's child — its PID taken again — means ended, and is never signalled)."""

    stdin = stdout = stderr = None

    def __init__(self, pid: int, server_pid: int) -> None:
        self.pid, self.server_pid = pid, server_pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            import psutil

            try:
                ours = psutil.Process(self.pid).ppid() == self.server_pid
            except psutil.NoSuchProcess:
                ours = False
            if not ours:
                self.returncode = -signal.SIGKILL  # its status went to the server
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"kernel {self.pid}", timeout or 0.0)
            time.sleep(0.02)
        return self.returncode  # type: ignore[return-value]

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, signum)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


def serve(preload: Sequence[str]) -> None:
    """The server's loop (``python -m rageval.execution.forkserver MODULE ...``)."""
    import ipykernel.kernelapp  # noqa: F401 - imported once, here, for every kernel

    with warnings.catch_warnings():  # import-time notices (tqdm's "IProgress not found") are no kernel's output
        warnings.simplefilter("ignore")
        import_modules(preload)  # also freezes what is imported: the forked kernels share those pages
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # ended kernels are reaped at once: gone means ended
    started: list[int] = []
    server = os.getpid()
    try:
        for line in sys.stdin:
            request = json.loads(line)
            pid = os.fork()
            if pid == 0:
                _kernel(request, server)
            started.append(pid)
            # An owner that died while this kernel started makes this write fail (BrokenPipeError):
            # the kernel it asked for must not outlive it either, hence the finally.
            print(json.dumps({"pid": pid}), flush=True)
    finally:
        for pid in started:  # our owner is done, or died: no kernel outlives it
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue


def _kernel(request: dict[str, Any], server: int) -> None:
    """In the forked child of ``server`` (its PID): become the kernel (never returns)."""
    status = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()  # its own process group: jupyter_client signals the group, never the server
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)  # the server's stdout carries its replies; stderr stays shared, as a kernel's is
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        import ipykernel_launcher
        from ipykernel.kernelapp import IPKernelApp

        # The kernel ends when the server does, however it ends: a server SIGKILLed (stop_kernels
        # races a fork) runs no clean-up, and an orphaned kernel held a finished sweep's stderr open.
        # ipykernel watches its parent when told whose child it is, as jupyter_client tells the
        # kernels it launches (JPY_PARENT_PID, read when ipykernel was imported: here, in the server).
        argv = [*request["argv"], f"--IPKernelApp.parent_handle={server}"]
        sys.argv = [ipykernel_launcher.__file__, *argv]  # as a kernel started as usual sees it
        app = IPKernelApp.instance()
        app.initialize(argv)
        if os.getppid() != server:  # the server died while this kernel started: its watch would miss it
            return
        app.start()
        status = 0
    finally:
        os._exit(status)


if __name__ == "__main__":
    serve(sys.argv[1:])
