"""Run names that stay unique in an experiment, whatever the clocks of the machines that made them.

A run is created under the name it asks for and then numbered (``name #2``, ``name #3``, …) from
what the store holds: the runs already given that name (their :data:`NAME_TAG`, deleted runs too).
Two clients naming runs at once would both count the runs before either existed and take the same
number, so the count is of runs created *before* this one — by (start time, run ID) — plus every
run of that name that has already ended (an ended run cannot be racing with this one, whatever
its start time says: a machine whose clock is a day behind still counts it). Last, a number some
other run's name holds already is skipped: a name is never given twice. On one machine, runs are
created one at a time (:func:`rageval.tracking.connect.creation_lock`), each in a later millisecond,
so a run created before another is always in the store when the other counts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rageval.tracking.records import NAME_TAG

if TYPE_CHECKING:
    from mlflow import MlflowClient


def numbered(name: str, n: int) -> str:
    return name if n <= 1 else f"{name} #{n}"


def unique_name(client: MlflowClient, experiment_id: str, name: str, *, me: tuple[int, str] | None = None) -> str:
    """``name`` or ``name #n`` for a run in ``experiment_id``; ``me``: the run being named (its start
    time and ID), which is then left out of the count; ``None`` names a run not yet created."""
    same = [r for r in _all_runs(client, experiment_id) if r.data.tags.get(NAME_TAG, r.info.run_name) == name]
    counted = [
        r
        for r in same
        if me is None
        or (r.info.run_id != me[1] and (r.info.status != "RUNNING" or (r.info.start_time, r.info.run_id) < me))
    ]
    held = {r.info.run_name for r in counted}
    n = len(counted) + 1
    while numbered(name, n) in held:
        n += 1
    return numbered(name, n)


def _all_runs(client: MlflowClient, experiment_id: str) -> list[Any]:
    from mlflow.entities import ViewType

    found: list[Any] = []
    token = None
    while True:
        page = client.search_runs([experiment_id], run_view_type=ViewType.ALL, max_results=1000, page_token=token)
        found.extend(page)
        token = page.token
        if not token:
            return found
