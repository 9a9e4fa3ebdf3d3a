"""Warm notebook kernels: started ahead of need, the evaluation notebook's imports done.

A kernel takes about 2 s on a 2-core machine to start and import what the evaluation notebook needs
(IPython, pandas, matplotlib, the retrieval and evaluation code) — longer than the whole retrieval
and evaluation of the demo. :class:`WarmKernel` starts one on a thread while this process does what
it must do anyway (its own imports, opening the MLflow store, the pre-run checks); a sweep's
:class:`KernelPool` keeps one ready per worker, replacing each as it is taken, so a member's kernel
starts while the member before it runs. A warm kernel is used once: every notebook still gets a
fresh kernel, exactly as papermill would start it, only earlier.

Importing this module costs nothing: jupyter_client is imported when a kernel is made.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rageval.execution.forkserver import LAUNCHER, Forked, ForkServer, available
from rageval.execution.preload import PRELOAD


def _preload_line(modules: Sequence[str]) -> str:
    """What the kernel runs at start-up (IPython's exec_lines), binding no name in the notebook's namespace."""
    return f"__import__('rageval.execution.preload', fromlist=['preload']).preload({tuple(modules)!r})"


class WarmKernel:
    """One notebook kernel (IPC sockets in a folder of its own), starting on a thread from creation.

    ``cwd`` is the kernel's working directory (papermill's: the notebook's folder). The kernel's
    progress channel (:mod:`rageval.progress`) is fixed at start, as its environment is:
    :attr:`channel`. ``preload``: the modules it imports before it reports ready (none: a plain
    kernel). ``server``: a fork server to start it from (its imports done already), else it starts
    as papermill would start it. :meth:`manager` waits for the start and hands the kernel manager over (once);
    :meth:`close` kills the kernel if it is still running and removes its files.
    """

    def __init__(self, cwd: str | Path, *, preload: Sequence[str] = PRELOAD, server: ForkServer | None = None) -> None:
        self.cwd = Path(cwd)
        self._server = server
        self._folder = Path(tempfile.mkdtemp(prefix="rageval-warm-"))
        self.channel = self._folder / "events.jsonl"
        self.channel.touch()
        self._preload = tuple(preload)
        self._manager: Any = None
        self._error: BaseException | None = None
        self._taken = False
        self._lock = threading.Lock()
        # Everything that imports (jupyter_client, the kernelspec lookup, which imports IPython) runs
        # here, in the caller's thread: two threads importing the same modules can see one another's
        # half-initialised modules. The thread only launches the kernel (or waits on the fork server).
        from rageval.progress import ENV_VAR

        self._manager = ipc_kernel_manager({ENV_VAR: str(self.channel)}, server)(kernel_name="python3")
        self._manager.kernel_spec  # noqa: B018 - resolved (and its imports done) now, not on the thread
        self._thread = threading.Thread(target=self._start, name="rageval-kernel-start", daemon=True)
        self._thread.start()

    def _start(self) -> None:
        import asyncio

        loop = asyncio.new_event_loop()
        try:
            extra = [f"--IPKernelApp.exec_lines={_preload_line(self._preload)}"] if self._preload else []
            loop.run_until_complete(self._manager.start_kernel(cwd=str(self.cwd), extra_arguments=extra))
        except BaseException as exc:  # noqa: BLE001 - handed to whoever takes the kernel
            self._error = exc
        finally:
            loop.close()

    def manager(self) -> Any:
        """The started kernel's manager (an ``AsyncKernelManager``), for one notebook execution.
        Raises what the start raised; a second call is a :class:`RuntimeError`."""
        self._thread.join()
        if self._taken:
            raise RuntimeError("a warm kernel executes one notebook")
        self._taken = True
        if self._error is not None:
            raise self._error
        return self._manager

    def close(self) -> None:
        """Kill the kernel (whether it ran a notebook or not) and remove its files; idempotent."""
        self._thread.join()
        with self._lock:
            manager, self._manager = self._manager, None
        if manager is not None:
            _kill(manager)
        shutil.rmtree(self._folder, ignore_errors=True)

    def __enter__(self) -> WarmKernel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def ipc_kernel_manager(env: Mapping[str, str] | None = None, server: ForkServer | None = None) -> type:
    """A kernel manager class for one execution; ``env`` is added to that kernel's environment only
    (parallel runs are threads of one process, so ``os.environ`` is no place for it); ``server``:
    the fork server that starts its kernel."""
    from jupyter_client import AsyncKernelManager

    extra_env = dict(env or {})

    class IPCKernelManager(AsyncKernelManager):
        """A kernel on IPC sockets in a folder of its own: no TCP warning, and parallel runs never
        share a socket path."""

        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self._socket_dir = tempfile.mkdtemp(prefix="rageval-kernel-")
            self.transport = "ipc"
            self.ip = str(Path(self._socket_dir) / "kernel")

        async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
            if extra_env:  # the provisioner has built the kernel's environment by now
                kw["env"] = {**kw.get("env", {}), **extra_env}
            if server is None or kernel_cmd[1:3] != LAUNCHER:
                await super()._async_launch_kernel(kernel_cmd, **kw)
                return
            # jupyter_client's documented hook for launching differently: the provisioner gets
            # the forked kernel in place of the process it would have started.
            try:
                pid = server.fork(kernel_cmd[3:], kw.get("env") or dict(os.environ), str(kw.get("cwd") or os.getcwd()))
            except RuntimeError:  # the server is gone (killed with the sweep's kernels): start as usual
                await super()._async_launch_kernel(kernel_cmd, **kw)
                return
            provisioner = self.provisioner
            provisioner.process, provisioner.pid, provisioner.pgid = Forked(pid, server.pid), pid, pid
            self._reconcile_connection_info(provisioner.connection_info)

        async def _async_cleanup_resources(self, restart: bool = False) -> None:
            await super()._async_cleanup_resources(restart=restart)
            if not restart:
                shutil.rmtree(self._socket_dir, ignore_errors=True)

        # jupyter_client binds the public name to its own method, not to an override: without this
        # a kernel cleaned up by name (a killed warm kernel) left its socket folder in /tmp.
        cleanup_resources = _async_cleanup_resources

    return IPCKernelManager


def _kill(manager: Any) -> None:
    """SIGKILL the kernel, reap it and remove its files (a kernel that ran its notebook has nothing
    left to do; jupyter_client's shutdown would interrupt it, then poll for its end every 0.1 s)."""
    import asyncio
    import subprocess

    process = getattr(manager.provisioner, "process", None)
    if process is not None:
        process.kill()
        try:
            process.wait(timeout=5)  # milliseconds: a killed process ends at once
        except subprocess.TimeoutExpired:
            pass

    def cleanup() -> None:
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(manager.cleanup_resources())
        except Exception:  # noqa: BLE001, S110 - already cleaned up: nothing left to remove
            pass
        finally:
            loop.close()

    try:
        asyncio.get_running_loop()
    except RuntimeError:  # no loop runs here (the CLI): clean up in this thread
        cleanup()
        return
    # A loop runs in this thread (a notebook's kernel: papermill's door records from one), and a
    # thread runs one loop at a time: the cleanup runs on a thread of its own, or it would never run
    # ("coroutine … was never awaited") and the kernel's socket folder would stay in /tmp.
    helper = threading.Thread(target=cleanup, name="rageval-kernel-cleanup")
    helper.start()
    helper.join()


class KernelPool:
    """Up to ``size`` warm kernels for notebooks in ``cwd``, ``total`` in all (a sweep's member
    count: no kernel is started that no member will take), forked from one fork server where the
    OS can (``fork``); :meth:`take` hands one over and starts its replacement at once. Thread-safe (a sweep's workers take from one pool); :meth:`close` kills
    the ones never taken."""

    def __init__(
        self,
        cwd: str | Path,
        size: int,
        total: int | None = None,
        *,
        preload: Sequence[str] = PRELOAD,
        fork: bool = True,
    ) -> None:
        self.cwd, self._preload = Path(cwd), tuple(preload)
        # One process imports the kernels' stack once and forks each kernel (POSIX).
        self._server = ForkServer(self._preload) if fork and available() and total != 0 else None
        self._lock = threading.Lock()
        self._closed = False
        self._left = total if total is not None else -1  # kernels still to start; -1: no limit
        self._ready: list[WarmKernel] = []
        for _ in range(max(size, 0)):
            self._start_one()

    def _start_one(self) -> None:
        if self._left != 0:
            self._ready.append(WarmKernel(self.cwd, preload=self._preload, server=self._server))
            self._left -= 1 if self._left > 0 else 0

    def take(self) -> WarmKernel | None:
        """A warm kernel (the caller closes it); None once the pool is closed or spent (the caller
        then lets papermill start a kernel as usual)."""
        with self._lock:
            if self._closed or not self._ready:
                return None
            kernel = self._ready.pop(0)
            self._start_one()
            return kernel

    def close(self) -> None:
        with self._lock:
            self._closed = True
            left, self._ready = self._ready, []
        for kernel in left:
            kernel.close()
        if self._server is not None:
            self._server.close()  # and with it any kernel still running

    def __enter__(self) -> KernelPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
