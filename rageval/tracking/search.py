"""Finding things in a store: an experiment by name (made when missing), every run matching a
filter, the runs whose owner is gone, and a run's whole state for sealing and verifying.

Lookups over an ``MlflowClient``; :class:`~rageval.tracking.store.Tracker` does the writing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rageval.paths import artifact_root_for
from rageval.tracking.notes import experiment_note
from rageval.tracking.owners import owner_of
from rageval.tracking.records import BASELINE_TAG, CANDIDATES_TAG, EXPERIMENT_KIND, NOTE_TAG, SEAL_TAG
from rageval.tracking.seal import RunState

if TYPE_CHECKING:
    from mlflow import MlflowClient


def search_all(client: MlflowClient, filter_string: str) -> list[Any]:
    """Every run (deleted ones too) of every experiment matching an MLflow filter, oldest first."""
    from mlflow.entities import ViewType

    experiments = [e.experiment_id for e in client.search_experiments(view_type=ViewType.ALL)]
    found: list[Any] = []
    token = None
    while experiments:
        page = client.search_runs(
            experiments,
            filter_string,
            run_view_type=ViewType.ALL,
            max_results=1000,
            order_by=["attributes.start_time ASC"],
            page_token=token,
        )
        found.extend(page)
        token = page.token
        if not token:
            break
    return found


def runs_concerning(client: MlflowClient, experiment_ids: Sequence[str], run_id: str) -> dict[str, str]:
    """Run ID → role (``baseline`` or ``candidate``) of every run in ``experiment_ids`` that names the
    evaluation run ``run_id`` in its :func:`~rageval.tracking.records.role_tags`."""
    found = {
        r.info.run_id: "baseline" for r in client.search_runs(experiment_ids, f"tags.`{BASELINE_TAG}` = '{run_id}'")
    }
    for run in client.search_runs(experiment_ids, f"tags.`{CANDIDATES_TAG}` LIKE '%{run_id}%'"):
        if run_id in run.data.tags[CANDIDATES_TAG].split(","):
            found.setdefault(run.info.run_id, "candidate")
    return found


def reapable(client: MlflowClient) -> list[tuple[str, str, str]]:
    """(run ID, status, reason) of every unsealed run whose owner provably died: a RUNNING one, and
    a FINISHED one whose process died between ending it and writing its seal tag (the last write)."""
    running = search_all(client, "attributes.status = 'RUNNING'")
    unsealed = search_all(client, f"attributes.status = 'FINISHED' and tags.`{SEAL_TAG}` IS NULL")
    found = []
    for run in [*running, *unsealed]:
        owner = owner_of(run.data.tags)
        if SEAL_TAG in run.data.tags or owner.state != "dead":
            continue
        when = "before sealing" if run.info.status == "RUNNING" else "between ending FINISHED and its seal tag"
        found.append((run.info.run_id, run.info.status, f"reaped: {owner.reason} {when}; the run never sealed"))
    return found


def ensure_experiment(client: MlflowClient, uri: str, name: str) -> str:
    """The ID of the experiment called ``name``, created (artifacts beside a sqlite store, with its
    note) when the store has none."""
    from mlflow.exceptions import MlflowException

    existing = client.get_experiment_by_name(name)
    if existing is not None:
        return str(existing.experiment_id)
    try:
        return client.create_experiment(
            name, artifact_location=artifact_root_for(uri), tags={NOTE_TAG: experiment_note(name), **EXPERIMENT_KIND}
        )
    except MlflowException:
        # A parallel run created it first.
        existing = client.get_experiment_by_name(name)
        if existing is None:
            raise
        return str(existing.experiment_id)


def run_state(
    client: MlflowClient, run_id: str, artifacts: Mapping[str, str], history_of: Sequence[str] = ()
) -> RunState:
    """The run as it is now, with the full history of each of its metrics (and of ``history_of``:
    metrics a manifest names that the run may no longer show)."""
    run = client.get_run(run_id)
    inputs = [f"{d.dataset.name}:{d.dataset.digest}" for d in (run.inputs.dataset_inputs if run.inputs else [])]
    history = {}
    for key in sorted({*run.data.metrics, *history_of}):
        entries = sorted([m.step, m.timestamp, m.value] for m in client.get_metric_history(run_id, key))
        if entries:
            history[key] = entries
    return RunState(
        run_id=run.info.run_id,
        name=run.info.run_name,
        experiment_id=run.info.experiment_id,
        status=run.info.status,
        lifecycle_stage=run.info.lifecycle_stage,
        start_time=run.info.start_time,
        end_time=run.info.end_time,
        artifacts=dict(artifacts),
        params=dict(run.data.params),
        metrics=dict(run.data.metrics),
        history=history,
        tags=dict(run.data.tags),
        inputs=inputs,
    )
