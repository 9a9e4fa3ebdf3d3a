"""Where a sweep's members run: the :class:`SweepExecutor` interface and its local implementation.

One driver, :func:`rageval.workflows.sweep.run_sweep`, plans a sweep, records its parent run,
watches the store, handles Ctrl-C / SIGTERM and records the summary; an executor only runs the
members it is handed and reports each one's end. Two implement it: :class:`LocalExecutor` (threads
of this process, each notebook in its own kernel; the default) and
:class:`rageval.workflows.cluster.DaskExecutor` (tasks on Dask worker processes). Both run every
member through :meth:`~rageval.workflows.members.MemberJob.run`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, Protocol

from rageval.config.sweep import MAX_WORKERS, Sweep
from rageval.errors import ConfigError, Problem
from rageval.execution.kernels import PRELOAD, KernelPool
from rageval.execution.slots import NotebookSlot, NotebookSlots
from rageval.retrieval.pipeline import stage_module
from rageval.tracking.store import Tracker
from rageval.workflows.members import MemberJob, MemberResult, Progress, progress_kind, stop_kernels


class Interrupted(BaseException):
    """SIGTERM, raised in the main thread like Ctrl-C's KeyboardInterrupt."""


class SweepExecutor(Protocol):
    """Runs a sweep's members for the driver. The driver calls :meth:`open` before the parent run
    exists, :meth:`map` once, :meth:`cancel` when the store stops answering, :meth:`stop` on
    Ctrl-C / SIGTERM, :meth:`settle` after every member ended, and :meth:`close` always."""

    def open(self, sweep: Sweep, notebook: Path, workers: int | None) -> tuple[int, dict[str, Any]]:
        """Check ``workers`` (None: the sweep file's) and start what the members run on; return how
        many members run at once and more params for the parent run. Raises ConfigError."""
        ...

    def map(self, jobs: Sequence[MemberJob], tracker: Tracker, bar: Progress) -> Iterator[MemberResult]:
        """Run every job, reporting starts and ends to ``bar``; yield each result as its member ends."""
        ...

    def cancel(self) -> None:
        """No member starts any more; running ones are stopped (their runs end KILLED)."""
        ...

    def stop(self) -> list[MemberResult]:
        """:meth:`cancel`, then wait for every member to end (a second Ctrl-C does not cut this
        short); the results of those that ended."""
        ...

    def settle(self, tracker: Tracker, parent: str, results: dict[str, MemberResult]) -> None:
        """Every member has ended: reconcile the store with ``results`` (runs left by dead workers)."""
        ...

    def close(self) -> None:
        """Release what :meth:`open` started."""
        ...


class LocalExecutor:
    """The members in threads of this process, ``workers`` notebooks at a time, each in a warm
    kernel of its own taken from a :class:`~rageval.execution.kernels.KernelPool`."""

    def __init__(self) -> None:
        self.cancelled = threading.Event()
        self.kernels: KernelPool | None = None
        self.workers = 0
        self.futures: list[Future[MemberResult | None]] = []
        self.pool: ThreadPoolExecutor | None = None

    def open(self, sweep: Sweep, notebook: Path, workers: int | None) -> tuple[int, dict[str, Any]]:
        workers = workers or sweep.spec.workers
        if not 1 <= workers <= MAX_WORKERS:
            raise ConfigError(
                Problem(
                    file="--workers",
                    message=f"workers must be between 1 and {MAX_WORKERS} (got {workers})",
                    fix=f"give --workers 1 to {MAX_WORKERS}: each worker is a notebook kernel of its own",
                )
            )
        # One warm kernel per worker, each replaced as a member takes it: a member's kernel starts
        # (and imports its stages) while the members before it run.
        self.kernels = KernelPool(notebook.parent, workers, total=len(sweep.members), preload=sweep_preload(sweep))
        self.workers = workers
        return workers, {}

    def map(self, jobs: Sequence[MemberJob], tracker: Tracker, bar: Progress) -> Iterator[MemberResult]:
        if self.kernels is None:
            raise RuntimeError("LocalExecutor.map before open")
        kernels, reporter = self.kernels, bar.reporter
        # ``workers`` notebooks at a time; one thread more, so that a member's checks, and the
        # logging and seal of the member before it, overlap a running notebook.
        slots = NotebookSlots(self.workers)

        def member(ticket: int, job: MemberJob) -> MemberResult | None:
            if self.cancelled.is_set():
                return None
            bar.event("start", job.name)
            result = job.run(
                tracker,
                cancel=self.cancelled,
                reporter=reporter.member(job.name) if reporter is not None else None,
                kernel=kernels.take(),
                notebook_slot=NotebookSlot(slots, ticket),
            )
            bar.event(progress_kind(result), job.name)
            return result

        # Shut down by close(): on Ctrl-C, stop() must cancel the members before anything waits for them.
        self.pool = ThreadPoolExecutor(max_workers=self.workers + 1, thread_name_prefix="rageval-sweep")
        self.futures = [self.pool.submit(member, ticket, job) for ticket, job in enumerate(jobs)]
        pending = set(self.futures)
        while pending:
            finished, pending = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
            yield from _results(finished)

    def cancel(self) -> None:
        self.cancelled.set()
        stop_kernels()

    def stop(self) -> list[MemberResult]:
        self.cancelled.set()
        for future in self.futures:
            future.cancel()
        while not all(f.done() for f in self.futures):  # stop running kernels until every member ended
            try:
                stop_kernels()
                wait([f for f in self.futures if not f.done()], timeout=0.5)
            except (KeyboardInterrupt, Interrupted):
                continue
        return list(_results(self.futures))

    def settle(self, tracker: Tracker, parent: str, results: dict[str, MemberResult]) -> None:
        """Nothing to reconcile: a member's thread ends its run before it returns."""

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True)
        if self.kernels is not None:
            self.kernels.close()


def _results(futures: Any) -> Iterator[MemberResult]:
    """The results of members that ran (a cancelled future, or one that never started, has none)."""
    for future in futures:
        if future.done() and not future.cancelled() and future.exception() is None:
            result = future.result()
            if result is not None:
                yield result


def sweep_preload(sweep: Sweep) -> tuple[str, ...]:
    """What its members' kernels import ahead: the notebook's modules and the members' stages."""
    stages = {stage_module(stage.type) for m in sweep.members for stage in m.config.retrieval.stages}
    return (*PRELOAD, *sorted(stages - set(PRELOAD)))
