"""One sweep member's run, as the thread path (:mod:`rageval.workflows.sweep`) and the Dask path
(:mod:`rageval.workflows.cluster`) both run it: :class:`MemberJob` (plain values, picklable to a
worker process) and its :class:`MemberResult`; stopping the kernels members started; the sweep's
:class:`Progress` line."""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO

from rageval.errors import NotebookExecutionError
from rageval.execution.forkserver import FORK_SERVER
from rageval.execution.kernels import WarmKernel
from rageval.execution.slots import NotebookSlot
from rageval.progress import Reporter
from rageval.tracking.store import Tracker
from rageval.workflows.run import RunRequest, execute_run

MEMBER_TAG = "rageval.sweep.member"


@dataclass
class MemberResult:
    name: str
    overrides: tuple[str, ...]
    status: str = "not started"  # sealed, FAILED, KILLED, not started
    run_id: str | None = None
    seconds: float | None = None
    error: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    retries: int = 0  # attempts after the first (a Dask worker died running it)
    attempts: list[dict[str, str]] = field(default_factory=list)  # every run an attempt made: run_id, status, note


def stop_kernels() -> int:
    """Kill the notebook kernels this process started: its children running ipykernel, and its
    kernel fork server with the kernels forked from it."""
    import psutil

    stopped = 0
    for child in psutil.Process().children(recursive=True):
        try:
            if any("ipykernel" in part or FORK_SERVER in part for part in child.cmdline()):
                child.kill()
                stopped += 1
        except psutil.Error:
            continue
    return stopped


@dataclass(frozen=True)
class MemberJob:
    """One member's run, as plain values: the thread path runs it in this process, the Dask path
    (:mod:`rageval.workflows.cluster`) pickles it to a worker process. Both call :meth:`run`."""

    name: str
    overrides: tuple[str, ...]
    base: Path
    benchmark: Path | None
    split: str | None  # the sweep file's split (None: the base config's)
    split_label: str  # the split the members run on, for the run's name
    sweep: str
    experiment: str
    parent: str
    family: str | None
    notebook: Path
    notebook_parameters: dict[str, Any] | None
    timeout: int | None

    def request(self, tags: dict[str, str] | None = None) -> RunRequest:
        """The member's run: a child of the sweep's parent run, named after the sweep and member."""
        return RunRequest(
            self.base,
            overrides=self.overrides,
            benchmark=self.benchmark,
            split=self.split,
            experiment=self.experiment,
            notebook=self.notebook,
            notebook_parameters=self.notebook_parameters or {},
            timeout=self.timeout,
            run_name=f"{self.sweep}/{self.name}@{self.split_label}",
            label=f"{self.sweep}/{self.name}",
            family=self.family,
            tags={
                "mlflow.parentRunId": self.parent,  # the sweep (records.PARENT_TAG): one key, not two
                MEMBER_TAG: self.name,
                **(tags or {}),
            },
        )

    def run(
        self,
        tracker: Tracker,
        *,
        cancel: threading.Event | None = None,
        reporter: Reporter | None = None,
        tags: dict[str, str] | None = None,
        kernel: WarmKernel | None = None,
        notebook_slot: NotebookSlot | None = None,
    ) -> MemberResult:
        """Run the member through :func:`execute_run` into a sealed child of the parent; a failure
        is recorded in the result (FAILED, or KILLED when ``cancel`` was set), never raised.
        ``kernel``: a warm kernel for its notebook (closed here), else one is started."""
        result = MemberResult(self.name, self.overrides)
        begun = time.perf_counter()
        try:
            outcome = execute_run(
                self.request(tags),
                tracker,
                cancel=cancel,
                reporter=reporter,
                kernel=kernel,
                notebook_slot=notebook_slot,
            )
        except NotebookExecutionError as exc:
            result.run_id, result.error = exc.run_id, str(exc)
            result.status = "KILLED" if cancel is not None and cancel.is_set() else "FAILED"
        except InterruptedError as exc:  # the sweep was interrupted while it waited: it never started
            result.error = str(exc)
        except Exception as exc:  # noqa: BLE001 - any other error fails this member, recorded in the summary
            result.error, result.status = f"{type(exc).__name__}: {exc}", "FAILED"
        else:
            result.run_id, result.metrics, result.status = outcome.run_id, outcome.metrics, "sealed"
        finally:
            close_thread_loop()
        result.seconds = time.perf_counter() - begun
        return result


def progress_kind(result: MemberResult) -> Literal["sealed", "failed", "killed"]:
    # "not started": interrupted while it waited for a notebook slot, before its run was made.
    return (
        "sealed" if result.status == "sealed" else "killed" if result.status in ("KILLED", "not started") else "failed"
    )


def close_thread_loop() -> None:
    """papermill leaves an event loop in each thread it ran in; close it here rather than leave its
    sockets to the garbage collector (the next notebook in this thread opens a new one)."""
    import asyncio

    try:
        loop = asyncio.get_event_loop_policy().get_event_loop()
    except RuntimeError:
        return
    if not loop.is_running() and not loop.is_closed():
        loop.close()
    asyncio.set_event_loop(None)


class Progress:
    """configs done, failed, running, ETA: one rewritten line on a terminal, plain lines otherwise;
    or, given a ``reporter``, an event ``{"kind": "sweep", "member", "status", "line"}`` to it."""

    def __init__(
        self, total: int, workers: int, stream: TextIO | None = None, reporter: Reporter | None = None
    ) -> None:
        self.total, self.workers = total, workers
        self.stream = stream or sys.stderr
        self.reporter = reporter
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.started = time.perf_counter()
        self.done = self.failed = self.running = 0
        self.lock = threading.Lock()

    def line(self) -> str:
        finished = self.done + self.failed
        elapsed = time.perf_counter() - self.started
        eta = "?"
        if finished:
            per_wave = elapsed / finished * min(self.workers, self.total)
            eta = f"{per_wave * (self.total - finished) / min(self.workers, self.total):.0f}s"
        return f"sweep: {finished}/{self.total} configs, {self.done} sealed, {self.failed} failed, {self.running} running, {elapsed:.0f}s elapsed, ETA {eta}"

    def event(self, kind: Literal["start", "retry", "sealed", "failed", "killed"], name: str) -> None:
        """``retry``: a member started again after its worker died (Dask); it was counted running already."""
        with self.lock:
            if kind == "start":
                self.running += 1
            elif kind != "retry":
                self.running -= 1
                self.done += kind == "sealed"
                self.failed += kind in ("failed", "killed")
            if self.reporter is not None:
                status = "start" if kind == "retry" else kind  # a view shows a retried member running again
                self.reporter.emit({"kind": "sweep", "member": name, "status": status, "line": self.line()})
                return
            if self.tty:
                self.stream.write("\r\033[K" + self.line())
            elif kind != "start":
                self.stream.write(f"{name}: {kind} | {self.line()}\n")
            self.stream.flush()

    def close(self) -> None:
        if self.tty and self.reporter is None:
            self.stream.write("\n")
            self.stream.flush()
