"""``rageval sweep``: the members of a sweep file run under one parent run.

The sweep is a parent MLflow run; each member is a sealed child run (``mlflow.parentRunId``) made
by :func:`rageval.workflows.run.execute_run`, ``workers`` at a time on a
:class:`~rageval.workflows.executors.SweepExecutor`: threads of this process by default (each
notebook in its own kernel process), Dask worker processes with ``--cluster``
(:mod:`rageval.workflows.cluster`). This module is the one driver for both: :func:`check_sweep`
and :func:`start_sweep` before the members, the store watch and Ctrl-C / SIGTERM while they run,
:meth:`Started.finish` (the summary and the parent's end) after. A failing member ends FAILED and
the others go on. On Ctrl-C or SIGTERM the members not started are never created, running ones
have their kernels stopped and end KILLED, finished ones stay sealed; the parent records a summary
and ends KILLED (FAILED when a member failed, sealed when every member is).
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

import pandas as pd

from rageval.benchmark.loading import Benchmark, load_benchmark
from rageval.config.sweep import Sweep, load_sweep
from rageval.errors import SweepError, TrackingError
from rageval.evaluation import parse_measure
from rageval.execution.notebooks import check_parameters
from rageval.paths import default_notebook
from rageval.progress import Reporter
from rageval.safety import csv_bytes
from rageval.tracking.connect import unreachable
from rageval.tracking.records import NOTE_TAG, PARENT_TAG
from rageval.tracking.store import Tracker
from rageval.workflows.executors import Interrupted, LocalExecutor, SweepExecutor
from rageval.workflows.members import MEMBER_TAG, MemberJob, MemberResult, Progress
from rageval.workflows.provenance import RAGEVAL_VERSION, git_state
from rageval.workflows.run import RUN_PARAMETERS

# --------------------------------------------------------------------------- running


@dataclass(frozen=True)
class SweepOutcome:
    parent_run_id: str
    experiment: str
    members: list[MemberResult]
    wall_s: float
    interrupted: bool = False
    primary: tuple[str, str] = ("", "")  # the first measure: MLflow key, text
    parent_status: str = "sealed"  # sealed, FAILED, KILLED, or RUNNING when the store could not end it
    store_error: str = ""  # why the store stopped answering (the sweep then stopped starting members)

    @property
    def ok(self) -> bool:
        """Every member sealed and the parent sealed: the only outcome that exits 0."""
        return not self.failed and self.parent_status == "sealed" and not self.store_error

    @property
    def failed(self) -> list[MemberResult]:
        return [m for m in self.members if m.status != "sealed"]

    def check(self) -> None:
        """Raise :class:`~rageval.errors.SweepError` unless every member and the parent are sealed."""
        if self.ok:
            return
        names = [m.name for m in self.failed]
        what = "interrupted" if self.interrupted else f"{len(names)} of {len(self.members)} member(s) did not seal"
        if not names:
            what = f"ended with its parent {self.parent_status}" + (" (interrupted)" if self.interrupted else "")
        if self.store_error:
            what += f"; the store stopped answering: {self.store_error}"
        raise SweepError(
            f"sweep (parent run {self.parent_run_id}) {what}: "
            + "; ".join(f"{m.name}: {m.status}" + (f" ({m.error})" if m.error else "") for m in self.failed),
            parent_run_id=self.parent_run_id,
            failed=names,
            interrupted=self.interrupted,
        )


@dataclass
class Started:
    """A sweep validated and its parent run created: what either way of running it needs."""

    sweep: Sweep
    experiment: str
    parent: str
    jobs: list[MemberJob]
    results: dict[str, MemberResult]
    begun: float  # perf_counter at the start, for the wall time

    def finish(self, tracker: Tracker, interrupted: bool, store_error: str = "") -> SweepOutcome:
        members = list(self.results.values())
        for m in members:  # a run created before the store died: named from creation, not from the store
            if m.run_id is None:
                m.run_id = tracker.created_run({MEMBER_TAG: m.name, PARENT_TAG: self.parent})
        wall = time.perf_counter() - self.begun
        return _finish(tracker, self.parent, self.experiment, self.sweep, members, wall, interrupted, store_error)


@dataclass(frozen=True)
class SweepRequest:
    """One sweep to run: the file and what it runs with, as every entry point gives it (``rageval
    sweep``, the demo, the benchmarks). ``workers`` None: the sweep file's; ``release``: allow the
    frozen release split; ``notebook``: another evaluation notebook, with ``notebook_parameters``."""

    path: str | Path
    workers: int | None = None
    release: bool = False
    experiment: str | None = None
    notebook: str | Path | None = None
    notebook_parameters: dict[str, Any] | None = None
    timeout: int | None = None


def check_sweep(request: SweepRequest) -> tuple[Sweep, Path, Benchmark]:
    """Load and check a sweep before anything exists (no run, no cluster): its members and the
    notebook's parameters. Returns it, the notebook and the benchmark."""
    sweep = load_sweep(request.path, release=request.release)
    notebook = Path(request.notebook).resolve() if request.notebook else default_notebook()
    check_parameters(notebook, dict(request.notebook_parameters or {}), required=RUN_PARAMETERS)
    bench = load_benchmark(sweep.members[0].config.benchmark)
    for m in sweep.members:  # before the parent exists: a member whose split is undeclared would fail after it
        bench.cases_for(m.config.split)
    return sweep, notebook, bench


def start_sweep(
    request: SweepRequest,
    sweep: Sweep,
    notebook: Path,
    bench: Benchmark,
    *,
    workers: int,
    tracker: Tracker,
    params: dict[str, Any] | None = None,
) -> Started:
    """Create the experiment (once, here: parallel workers creating it race) and the parent run;
    the members' jobs name both. ``params``: more parent params (the cluster's address)."""
    experiment, notebook_parameters, timeout = request.experiment, request.notebook_parameters, request.timeout
    started = time.perf_counter()
    experiment = experiment or bench.spec.name
    tracker.reap()
    family = (
        sweep.members[0].config.name
        if all(m.config.name == sweep.members[0].config.name for m in sweep.members)
        else None
    )
    plan = [{"name": m.name, "overrides": list(m.overrides)} for m in sweep.members]
    parent = tracker.create_run(
        experiment,
        f"sweep {sweep.spec.name}@{sweep.split}",
        # Few params: each key is a runs-table column of the experiment; the split is the tag
        # rageval.split (as the members'), the name the run's, the file and its sha256 sweep.yaml and
        # summary.json, the plan members.json (its length the member count).
        params={"workers": workers, **(params or {})},
        tags=_parent_tags(sweep, bench),
        files={"sweep.yaml": sweep.path.read_bytes(), "members.json": json.dumps(plan, indent=2).encode()},
    )
    jobs = [
        MemberJob(
            name=m.name,
            overrides=m.overrides,
            base=sweep.base,
            benchmark=sweep.benchmark,
            split=sweep.spec.split,
            split_label=sweep.split,
            sweep=sweep.spec.name,
            experiment=experiment,
            parent=parent,
            family=family,
            notebook=notebook,
            notebook_parameters=notebook_parameters,
            timeout=timeout,
        )
        for m in sweep.members
    ]
    results = {m.name: MemberResult(m.name, m.overrides) for m in sweep.members}
    return Started(sweep, experiment, parent, jobs, results, started)


def _parent_tags(sweep: Sweep, bench: Benchmark) -> dict[str, str]:
    return {
        **git_state(sweep.path.resolve().parent),
        "rageval.version": RAGEVAL_VERSION,
        "rageval.kind": "sweep",
        # the sweep's name is the run's name (sweep NAME@split) and summary.json's; a member's, its run name
        "rageval.split": sweep.split,  # release or not: the split says (--release is required for it)
        "rageval.benchmark.name": bench.spec.name,
        "rageval.benchmark.version": bench.spec.version,
    }


def split_progress(progress: TextIO | Reporter | None) -> tuple[Reporter | None, TextIO | None]:
    return (progress, None) if isinstance(progress, Reporter) else (None, progress)


def run_sweep(
    request: SweepRequest,
    *,
    tracker: Tracker,
    progress: TextIO | Reporter | None = None,
    on_parent: Callable[[str], None] | None = None,
    executor: SweepExecutor | None = None,
) -> SweepOutcome:
    """Validate a sweep, then run its members ``request.workers`` at a time under a parent run, on
    ``executor`` (default: a :class:`~rageval.workflows.executors.LocalExecutor`, threads of this
    process; a :class:`~rageval.workflows.cluster.DaskExecutor` runs them on a Dask cluster).
    Returns once every member has ended, failed or not; :meth:`SweepOutcome.check` raises for
    failures. ``progress``: a stream for the sweep's count lines (default stderr), or a
    :class:`~rageval.progress.Reporter` that gets every member's steps too (labelled by member);
    ``on_parent``: called with the parent run's ID once it exists."""
    executor = executor if executor is not None else LocalExecutor()
    sweep, notebook, bench = check_sweep(request)
    slots, params = executor.open(sweep, notebook, request.workers)
    try:
        run = start_sweep(request, sweep, notebook, bench, workers=slots, tracker=tracker, params=params)
        if on_parent is not None:
            on_parent(run.parent)
        reporter, stream = split_progress(progress)
        signals = _Signals()
        store_error = _run_members(executor, run, tracker, Progress(len(run.jobs), slots, stream, reporter), signals)
        signals.finishing = True  # a SIGTERM now waits for the (bounded) record of the sweep's end
        executor.settle(tracker, run.parent, run.results)
    finally:
        executor.close()
    try:
        return run.finish(tracker, signals.interrupted, store_error)
    finally:
        signals.restore()


def _run_members(executor: SweepExecutor, run: Started, tracker: Tracker, bar: Progress, signals: _Signals) -> str:
    """Every member through ``executor``, its result in ``run.results``; on Ctrl-C or SIGTERM the
    executor stops them all (``signals.interrupted``). Returns why the store stopped answering, or ""."""
    down = _StoreWatch(tracker, executor.cancel)
    try:
        for result in executor.map(run.jobs, tracker, bar):
            run.results[result.name] = result
            if result.status != "sealed":
                down.check()
    except (KeyboardInterrupt, Interrupted):
        signals.interrupted = True
        run.results.update((result.name, result) for result in executor.stop())
    finally:
        bar.close()
    return down.error


class _Signals:
    """SIGTERM raises :class:`~rageval.workflows.executors.Interrupted` in the main thread while
    members run; once the sweep records its end it is only noted, so that the parent is ended (or
    named as left) before exit."""

    def __init__(self) -> None:
        self.interrupted = self.finishing = False
        self.previous: Any = None
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGTERM, self.on_term)

    def on_term(self, signum: int, frame: Any) -> None:
        if not self.finishing:
            raise Interrupted()
        self.interrupted = True

    def restore(self) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGTERM, self.previous)


class _StoreWatch:
    """After a member fails: whether the store still answers. When it does not, no member starts
    any more and running ones are stopped (nothing they make could be recorded); ``error`` says why."""

    def __init__(self, tracker: Tracker, cancel: Callable[[], None]) -> None:
        self.tracker, self.cancel = tracker, cancel
        self.error = ""

    def check(self) -> None:
        if self.error:
            return
        why = self.tracker.unanswered()
        if why:
            self.error = why
            self.cancel()


def _finish(
    tracker: Any,
    parent: str,
    experiment: str,
    sweep: Sweep,
    members: list[MemberResult],
    wall: float,
    interrupted: bool,
    store_error: str = "",
) -> SweepOutcome:
    """Record the sweep's end in its parent: a summary, then sealed, FAILED or KILLED. A store that
    does not answer leaves the parent RUNNING, said so in the outcome (its owner, this process, is
    gone by the next command, which reaps it)."""
    first = parse_measure(sweep.members[0].config.evaluation.measures[0])
    outcome = SweepOutcome(
        parent, experiment, members, wall, interrupted, (first.key, first.text), store_error=store_error
    )
    try:
        return replace(outcome, parent_status=_record_end(tracker, sweep, outcome))
    except Exception as exc:
        if not (isinstance(exc, TrackingError) or unreachable(exc)):
            raise
        why = store_error or " ".join(str(exc).split())[:300]
        return replace(outcome, parent_status="RUNNING", store_error=why)


def _record_end(tracker: Any, sweep: Sweep, outcome: SweepOutcome) -> str:
    parent, members, interrupted = outcome.parent_run_id, outcome.members, outcome.interrupted
    counts = {
        status: sum(m.status == status for m in members) for status in ("sealed", "FAILED", "KILLED", "not started")
    }
    summary = {
        "sweep": sweep.spec.name,
        "file": str(sweep.path),
        "sha256": sweep.sha256,
        "interrupted": interrupted,
        "store_error": outcome.store_error,
        "wall_s": outcome.wall_s,
        "counts": counts,
        "members": [m.__dict__ | {"overrides": list(m.overrides)} for m in members],
    }
    table = pd.DataFrame(
        [
            {
                **{k: v for k, v in m.__dict__.items() if k not in ("metrics", "attempts")},
                "overrides": " ".join(m.overrides),
            }
            for m in members
        ]
    )
    tracker.log_bytes(parent, "summary.json", json.dumps(summary, indent=2, default=str).encode())
    tracker.log_bytes(parent, "summary.csv", csv_bytes(table))
    # No metric: the counts are summary.json's, and a failure is the parent's status and its error
    # ("1 of 3 members did not seal: …"); a members_failed column said 0 on every sealed sweep.
    failed = [m.name for m in outcome.failed]
    if interrupted:
        tracker.kill(
            parent,
            f"interrupted: {counts['sealed']} sealed, {counts['KILLED']} killed, "
            f"{counts['FAILED']} failed, {counts['not started']} never started",
        )
        return "KILLED"
    if failed or outcome.store_error:
        lost = f"; the store stopped answering ({outcome.store_error})" if outcome.store_error else ""
        tracker.fail(parent, f"{len(failed)} of {len(members)} members did not seal: {', '.join(failed)}{lost}")
        return "FAILED"
    names = ", ".join(f"`{m.name}`" for m in members[:20]) + (
        f" and {len(members) - 20} more" if len(members) > 20 else ""
    )
    tracker.set_tags(
        parent,
        {
            NOTE_TAG: (
                f"Sweep **{sweep.spec.name}** of `{sweep.base}` on split `{sweep.split}`: {len(members)} member "
                f"evaluation runs, nested below ({names}), all sealed. Members and their overrides are in "
                "summary.csv; compare them with `rageval compare --sweep` this run's ID."
            )
        },
    )
    tracker.seal(parent)
    return "sealed"
