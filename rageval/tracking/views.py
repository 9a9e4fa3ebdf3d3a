"""The evaluations' saved view "Headline first": MLflow 3.17's own mechanism for a stored view of an
experiment (the runs table's "Saved views" menu; the UI keeps each as the experiment tag
``mlflow.sharedViewState.<id>`` and opens it from ``?viewStateShareKey=<id>``).

MLflow's default chart view sorts every chart by its metric key, capitals first, so the headline
``nDCG_at_10`` comes after ``AP``, ``Hit_at_5``, … and the chart order cannot be given any other way
(the experiment tag ``mlflow.experiment.primaryMetric.name`` is sorted with the rest). The saved view
holds the charts in the run's own order — the configured measures as the params file lists them,
the headline first, then the operational few — with its section marked reordered, so that metrics a
later run adds are put after them, and adds the measures as columns of the runs table. rageval sets
it once per experiment, from the first evaluation run recorded into it (experiment tags are not
part of any run's seal); the experiment's description links to it (docs/records.md)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rageval.tracking.records import NOTE_TAG, ui_link

if TYPE_CHECKING:
    from mlflow import MlflowClient

VIEW_ID = "headline"
VIEW_NAME = "Headline first"
VIEW_TAG = f"mlflow.sharedViewState.{VIEW_ID}"
# The runs table's default columns in MLflow 3.17 (its ``getDefaultSelectedColumns``).
_DEFAULT_COLUMNS = ["attributes.`Source`", "attributes.`Models`", "attributes.`Dataset`"]
_MODEL_SECTION, _SYSTEM_SECTION = "Model metrics", "System metrics"


def view_state(charts: Sequence[str], columns: Sequence[str]) -> dict[str, Any]:
    """The UI state of the view: one bar chart per key of ``charts`` in that order, in the model
    metrics section (reordered: a key not listed is added after them), and ``columns`` (metric keys)
    shown in the runs table after MLflow's defaults."""
    sections = [
        {"uuid": "rageval-model", "name": _MODEL_SECTION, "display": True, "isReordered": True, "deleted": False},
        {"uuid": "rageval-system", "name": _SYSTEM_SECTION, "display": True, "isReordered": False, "deleted": False},
    ]
    cards = [
        {
            "uuid": f"rageval-chart-{i}",
            "type": "BAR",
            "runsCountToCompare": 10,
            "metricSectionId": "rageval-model",
            "deleted": False,
            "isGenerated": True,
            "displayName": key,
            "metricKey": key,
        }
        for i, key in enumerate(charts)
    ]
    return {
        "selectedColumns": [*_DEFAULT_COLUMNS, *(f"metrics.`{key}`" for key in columns)],
        "compareRunCharts": cards,
        "compareRunSections": sections,
        "isAccordionReordered": False,
        "hideEmptyCharts": True,
    }


def view_tag(charts: Sequence[str], columns: Sequence[str], *, now_ms: int | None = None) -> str:
    """The tag's value: MLflow's saved-view envelope (name, created, updated, the state as a JSON string)."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    state = json.dumps(view_state(charts, columns), separators=(",", ":"))
    return json.dumps({"name": VIEW_NAME, "createdAt": now_ms, "updatedAt": now_ms, "state": state})


def view_link(experiment_id: str, *, charts: bool = True) -> str:
    """The UI address that opens the view (the chart view when ``charts``), in model-training mode."""
    mode = "&compareRunsMode=CHART" if charts else ""
    return ui_link(experiment_id, view=f"viewStateShareKey={VIEW_ID}{mode}")


def ensure_headline_view(
    client: MlflowClient, experiment_id: str, charts: Sequence[str], columns: Sequence[str]
) -> bool:
    """Set the view on the experiment unless it has one (True: set now); and where the experiment's
    description is rageval's own, add the view's link to it. Runs recorded at once into a new
    experiment (a sweep's members) all find it without one: the store refuses every insert of the
    tag but the first (sqlite: a UNIQUE constraint), and a run whose view was set meanwhile by
    another goes on without it."""
    from mlflow.exceptions import MlflowException

    experiment = client.get_experiment(experiment_id)
    if VIEW_TAG in experiment.tags:
        return False
    try:
        client.set_experiment_tag(experiment_id, VIEW_TAG, view_tag(charts, columns))
    except MlflowException:
        if VIEW_TAG in client.get_experiment(experiment_id).tags:
            return False  # another run set it first
        raise
    note = experiment.tags.get(NOTE_TAG, "")
    if note and "viewStateShareKey" not in note:
        line = (
            f"Headline first: [the chart view with the measures in their configured order]({view_link(experiment_id)})."
        )
        client.set_experiment_tag(experiment_id, NOTE_TAG, f"{note}\n\n{line}")
    return True
