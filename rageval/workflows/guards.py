"""Checks every workflow makes before it reads a run as a result: sealed and intact, and the
release-evaluation count."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from rageval.analysis import (
    release_warning,
)
from rageval.benchmark.loading import Benchmark
from rageval.benchmark.schema import RELEASE_SPLIT
from rageval.errors import ComparisonError
from rageval.release.marks import overrides_tag
from rageval.tracking.store import RunInfo, Tracker


def release_warnings(tracker: Tracker, infos: Sequence[RunInfo], limit: int) -> list[str]:
    """A warning per release-split run whose family has had more than ``limit`` release evaluations."""

    out = []
    for info in infos:
        if info.tags.get("rageval.split") != RELEASE_SPLIT:
            continue
        family = info.tags.get("rageval.config.family") or info.tags.get("rageval.config.name", "")
        count = tracker.count_release_evaluations(
            info.tags.get("rageval.benchmark.name", ""), info.tags.get("rageval.benchmark.version", ""), family
        )
        warning = release_warning(count, limit, family, info.run_id)
        if warning:
            out.append(warning)
    return out


def sealed_and_intact(tracker: Tracker, run_id: str) -> RunInfo:
    """A run a comparison or gate may read: sealed, and every hash still matching its manifest."""
    info = tracker.require_sealed(run_id, ComparisonError)
    tracker.verify_or_raise(run_id)
    return info


def record_release_evaluation(tracker: Tracker, run_id: str, bench: Benchmark, family: str) -> int:
    """Count this run among the release evaluations of its benchmark version and family, and
    show the count on the run (its tag)."""
    count = tracker.count_release_evaluations(
        bench.spec.name, bench.spec.version, family, until_ms=tracker.started_ms(run_id)
    )
    tracker.set_tags(run_id, {"rageval.release.evaluations": str(count)})  # one column: no metric repeats it
    return count


def today_override(today: dt.date | None) -> dict[str, str]:
    """The tags recording a ``--today`` that moved an import policy's retention check off the real
    date (empty when it was not given or is the real date)."""
    real = dt.date.today()
    if today is None or today == real:
        return {}
    text = f"--today {today.isoformat()}: the import policy's retention was checked against it, not {real.isoformat()}"
    return {"rageval.today": today.isoformat(), **overrides_tag([text])}
