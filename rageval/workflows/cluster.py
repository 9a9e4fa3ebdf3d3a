"""``rageval sweep --cluster``: a sweep's members as tasks on Dask distributed workers.

:class:`DaskExecutor` is the :class:`~rageval.workflows.executors.SweepExecutor` the sweep's one
driver (:func:`~rageval.workflows.sweep.run_sweep`) runs them on. The driver (this process)
validates the sweep, creates the experiment and the parent run once,
and submits one task per member; each task runs on a worker process, opens its own
:class:`~rageval.tracking.store.Tracker` on the driver's tracking URI, points the content-addressed
cache at the driver's cache folder, and runs the very :meth:`~rageval.workflows.members.MemberJob.run`
the thread path runs. Progress comes back as Dask events: a worker reports each member's start
(and, for a view that shows them, its steps) on a topic the driver subscribes to; the end comes
from the member's future (``distributed.as_completed``).

A worker that dies (SIGKILL, out of memory) mid-member: Dask reschedules the task on another
worker by itself (the scheduler's ``distributed.scheduler.allowed-failures``, default 3; a task's
``retries`` only cover exceptions). rageval allows one retry: an attempt first looks in the store
for this member's earlier runs under the parent — a sealed one is the result (the worker died after
sealing), two earlier ones mean the member is recorded FAILED without a third. The dead attempt's
run, left RUNNING, is ended KILLED (by the retry's reap on the same host, else by the driver once
the member's future is done), so it is never half-sealed; the summary lists every attempt.
``--cluster local`` starts a ``LocalCluster`` of worker processes on 127.0.0.1 with
allowed-failures 1, so Dask itself stops after one retry.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from rageval.config.sweep import Sweep
from rageval.errors import ConfigError, Problem
from rageval.paths import default_cache_dir
from rageval.progress import Event, Reporter
from rageval.tracking.store import Tracker
from rageval.workflows.executors import Interrupted
from rageval.workflows.members import MEMBER_TAG, MemberJob, MemberResult, Progress, progress_kind, stop_kernels

MAX_ATTEMPTS = 2  # a member is tried again once after its worker died
ATTEMPT_TAG = "rageval.sweep.attempt"
WORKER_TAG = "rageval.dask.worker"
LOCAL = "local"


# --------------------------------------------------------------------------- on the worker

_trackers: dict[str, Tracker] = {}
_trackers_lock = threading.Lock()


def _tracker(uri: str) -> Tracker:
    """One Tracker per tracking URI and worker process (opening one imports mlflow: seconds)."""
    with _trackers_lock:
        if uri not in _trackers:
            _trackers[uri] = Tracker(uri)
        return _trackers[uri]


class _Forward(Reporter):
    """A member's steps, sent from the worker to the driver as Dask events on ``topic``."""

    enabled = True

    def __init__(self, send: Callable[[str, Any], None], topic: str, member: str) -> None:
        self.send, self.topic, self.name = send, topic, member

    def emit(self, event: Event) -> None:
        self.send(self.topic, {"member": self.name, "event": dict(event)})


def member_task(job: MemberJob, tracking_uri: str, cache_dir: str, topic: str, steps: bool) -> MemberResult:
    """One member on a Dask worker: the driver's store and cache, then :meth:`MemberJob.run`."""
    from distributed import Event as DaskEvent
    from distributed import get_client, get_worker

    worker = get_worker()
    # Every kernel this worker starts reads the driver's cache (the kernel inherits the environment).
    os.environ["RAGEVAL_CACHE"] = cache_dir
    tracker = _tracker(tracking_uri)
    stop = DaskEvent(f"{topic}-cancel", client=get_client())
    if stop.is_set():
        return MemberResult(job.name, job.overrides)  # interrupted before it started: never created
    earlier = [r for r in tracker.children(job.parent) if r.tags.get(MEMBER_TAG) == job.name]
    for info in earlier:
        if info.sealed:  # an earlier attempt sealed, then its worker died before reporting it
            return MemberResult(job.name, job.overrides, "sealed", info.run_id, metrics=dict(info.metrics))
    if len(earlier) >= MAX_ATTEMPTS:
        tracker.reap()  # the dead attempts' runs end KILLED now (the driver ends those owned elsewhere)
        runs = ", ".join(r.run_id for r in earlier)
        message = f"not tried again: the workers of its {len(earlier)} attempts died (runs {runs}, KILLED)"
        return MemberResult(job.name, job.overrides, "FAILED", error=message)
    attempt = len(earlier) + 1
    worker.log_event(
        topic, {"member": job.name, "status": "start", "attempt": attempt, "worker": worker.address, "pid": os.getpid()}
    )
    cancel = threading.Event()
    done = threading.Event()

    def watch() -> None:  # the driver was interrupted: stop this member's kernel, its run ends KILLED
        while not done.is_set():
            try:
                if stop.wait(timeout=0.5):
                    cancel.set()
                    while not done.wait(0.5):
                        stop_kernels()
                    return
            except Exception:  # noqa: BLE001 - the scheduler went away: nothing left to cancel for
                return

    watcher = threading.Thread(target=watch, name="rageval-cancel", daemon=True)
    watcher.start()
    try:
        return job.run(
            tracker,
            cancel=cancel,
            reporter=_Forward(worker.log_event, topic, job.name) if steps else None,
            tags={ATTEMPT_TAG: str(attempt), WORKER_TAG: worker.address},
        )
    finally:
        done.set()


# --------------------------------------------------------------------------- on the driver


def _connect(cluster: str, workers: int, stack: ExitStack) -> Any:
    """A Dask client of ``cluster`` (``local``: a new LocalCluster of ``workers`` processes on 127.0.0.1)."""
    import dask
    from distributed import Client, LocalCluster

    if cluster == LOCAL:
        # Read by the scheduler LocalCluster starts in this process: one retry after a worker dies.
        with dask.config.set({"distributed.scheduler.allowed-failures": MAX_ATTEMPTS - 1}):
            local = stack.enter_context(
                LocalCluster(
                    n_workers=workers,
                    threads_per_worker=1,
                    processes=True,
                    host="127.0.0.1",
                    dashboard_address=None,
                    worker_dashboard_address=None,
                )
            )
        return stack.enter_context(Client(local))
    if not cluster.startswith(("tcp://", "tls://")):
        raise ConfigError(
            Problem(
                file="--cluster",
                message=f"not a Dask scheduler address: {cluster!r}",
                fix="give tcp://HOST:PORT (as `dask scheduler` prints it) or `local`",
            )
        )
    try:
        return stack.enter_context(Client(cluster, timeout=10))
    except OSError as exc:
        raise ConfigError(
            Problem(
                file="--cluster",
                message=f"no Dask scheduler answers at {cluster}: {exc}",
                fix="start one (`dask scheduler --host 127.0.0.1`) or check the address",
            )
        ) from None


class DaskExecutor:
    """The members as tasks on the Dask cluster at ``cluster`` (``tcp://HOST:PORT``, or ``local``
    for a LocalCluster of ``workers`` processes on 127.0.0.1): a
    :class:`~rageval.workflows.executors.SweepExecutor` for :func:`~rageval.workflows.sweep.run_sweep`.
    The workers need this checkout (params, benchmark, notebook) and ``cache_dir`` (default: this
    process's cache folder) at the same paths, and must reach the tracking store."""

    def __init__(self, cluster: str, cache_dir: str | Path | None = None) -> None:
        self.cluster = cluster
        self.cache = str(Path(cache_dir).resolve() if cache_dir else default_cache_dir().resolve())
        self.stack = ExitStack()
        self.client: Any = None
        self.topic = ""
        self.futures: dict[Any, MemberJob] = {}
        self.starts: dict[str, int] = {}  # start events seen per member: more than one is a retry
        self.ended: set[str] = set()
        self.lock = threading.Lock()

    def open(self, sweep: Sweep, notebook: Path, workers: int | None) -> tuple[int, dict[str, Any]]:
        if self.cluster != LOCAL and workers is not None:
            raise ConfigError(
                Problem(
                    file="--workers",
                    message=f"a running cluster's workers decide how many members run at once (--cluster {self.cluster})",
                    fix="leave --workers out, or use --cluster local --workers N",
                )
            )
        workers = workers or sweep.spec.workers
        if workers < 1:
            raise ConfigError(Problem(file="--workers", message=f"workers must be at least 1 (got {workers})"))
        self.client = _connect(self.cluster, workers, self.stack)
        slots = sum(w.get("nthreads", 1) for w in self.client.scheduler_info()["workers"].values()) or workers
        return slots, {"sweep.cluster": self.cluster if self.cluster == LOCAL else self.client.scheduler.address}

    def map(self, jobs: Sequence[MemberJob], tracker: Tracker, bar: Progress) -> Iterator[MemberResult]:
        from distributed import as_completed

        self.topic = f"rageval-sweep-{jobs[0].parent}-{uuid.uuid4().hex[:8]}"
        self.client.subscribe_topic(self.topic, lambda event: self._on_event(event, bar))
        self.futures = {
            self.client.submit(
                member_task,
                job,
                tracker.uri,
                self.cache,
                self.topic,
                bar.reporter is not None,
                key=f"rageval-member-{i}-{job.parent[:8]}",
                pure=False,
            ): job
            for i, job in enumerate(jobs)
        }
        for future in as_completed(list(self.futures)):
            job = self.futures[future]
            result = _result_of(future, job)
            if result.status != "not started":
                if job.name not in self.starts:  # ended before its start event arrived
                    self._started(job.name, bar)
                with self.lock:
                    self.ended.add(job.name)
                bar.event(progress_kind(result), job.name)
            yield result

    def _started(self, name: str, bar: Progress) -> None:
        """A member's start, reported once; a later start is its retry."""
        with self.lock:
            if name in self.ended:
                return
            self.starts[name] = self.starts.get(name, 0) + 1
            first = self.starts[name] == 1
        bar.event("start" if first else "retry", name)

    def _on_event(self, event: tuple[float, Any], bar: Progress) -> None:
        message = event[1]
        if not isinstance(message, dict) or "member" not in message:
            return
        if message.get("status") == "start":
            self._started(str(message["member"]), bar)
        elif (
            bar.reporter is not None and isinstance(message.get("event"), dict) and message["member"] not in self.ended
        ):
            bar.reporter.member(str(message["member"])).emit(message["event"])

    def cancel(self) -> None:
        from distributed import Event as DaskEvent

        DaskEvent(f"{self.topic}-cancel", client=self.client).set()

    def stop(self) -> list[MemberResult]:
        """Tell every task to stop (running members end KILLED, the rest never start) and wait for
        them; a second Ctrl-C does not cut this short."""
        from distributed import wait

        self.cancel()
        while True:
            try:
                wait(list(self.futures), timeout=None)
                break
            except (KeyboardInterrupt, Interrupted):
                continue
            except Exception:  # noqa: BLE001 - dask's TimeoutError or a lost scheduler: results decide below
                break
        return [
            _result_of(future, job) if future.done() else MemberResult(job.name, job.overrides)
            for future, job in self.futures.items()
        ]

    def settle(self, tracker: Tracker, parent: str, results: dict[str, MemberResult]) -> None:
        _settle_attempts(tracker, parent, results, self.starts)

    def close(self) -> None:
        try:
            if self.client is not None and self.topic:
                self.client.unsubscribe_topic(self.topic)
        finally:
            self.stack.close()


def _result_of(future: Any, job: MemberJob) -> MemberResult:
    """The member's result; a task that raised (a worker died too often: KilledWorker) is FAILED."""
    try:
        result: MemberResult = future.result()
        return result
    except Exception as exc:  # noqa: BLE001 - recorded in the summary
        return MemberResult(job.name, job.overrides, "FAILED", error=f"{type(exc).__name__}: {exc}")


def _settle_attempts(tracker: Tracker, parent: str, results: dict[str, MemberResult], starts: dict[str, int]) -> None:
    """Every member's task has ended: a member run still RUNNING was left by a worker that died
    (or was lost to the scheduler). End it KILLED, never sealed, and list each member's attempts."""
    from rageval.tracking.owners import owner_of

    tracker.reap()  # owners on this host whose process is gone
    for info in tracker.children(parent):
        result = results.get(info.tags.get(MEMBER_TAG, ""))
        if result is None:
            continue
        note = ""
        if info.status == "RUNNING" and not info.sealed:
            owner = owner_of(info.tags)
            note = f"its Dask worker {info.tags.get(WORKER_TAG, '?')} was lost while running it ({owner.reason})"
            tracker.kill(info.run_id, f"{note}; the run never sealed")
            info = tracker.run(info.run_id)
        elif info.status == "KILLED" and info.run_id != result.run_id:
            note = info.tags.get("rageval.error", "")
        result.attempts.append(
            {"run_id": info.run_id, "attempt": info.tags.get(ATTEMPT_TAG, ""), "status": info.status, "note": note}
        )
    for result in results.values():  # attempts seen starting or in the store, whichever is more
        result.retries = max(starts.get(result.name, 0), len(result.attempts), 1) - 1
