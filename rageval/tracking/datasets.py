"""A run's dataset input: the cases it evaluated, as the MLflow UI's Dataset column shows them."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from rageval.hashing import sha256_bytes

if TYPE_CHECKING:
    from mlflow import MlflowClient


@dataclass(frozen=True)
class RunDataset:
    """The data a run used, logged as its MLflow dataset input (the runs table's Dataset column):
    the rows, the dataset's name, where it lives, its digest (None: of the rows) and the context
    (the split)."""

    frame: pd.DataFrame
    name: str = "cases"
    source: str = ""
    digest: str | None = None
    context: str = ""


def log_dataset(client: MlflowClient, run_id: str, dataset: RunDataset) -> None:
    """Log the cases as an MLflow dataset input (all columns are text), so the UI shows which
    data a run used. The entity is built directly: ``from_pandas`` warns on local paths."""
    from mlflow.entities import Dataset, DatasetInput, InputTag
    from mlflow.exceptions import MlflowException
    from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

    frame = dataset.frame
    schema = {"mlflow_colspec": [{"type": "string", "name": str(c), "required": True} for c in frame.columns]}
    entity = Dataset(
        name=dataset.name,
        digest=dataset.digest or sha256_bytes(frame.to_csv(index=False).encode())[:16],
        source_type="local",
        source=json.dumps({"uri": dataset.source}),
        schema=json.dumps(schema),
        profile=json.dumps({"num_rows": len(frame), "num_elements": int(frame.size)}),
    )
    inputs = [DatasetInput(entity, tags=[InputTag(MLFLOW_DATASET_CONTEXT, dataset.context)])]
    try:
        client.log_inputs(run_id, inputs)
    except MlflowException:
        # Two runs logging a new dataset at once race on its row; the second try finds it.
        time.sleep(0.2)
        client.log_inputs(run_id, inputs)
