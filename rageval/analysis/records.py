"""A recorded run as analysis sees it: its metadata (:class:`RunInfo`) and the tables a sealed
evaluation run holds (:class:`RunArtifacts`). :mod:`rageval.tracking` reads them back from the store;
everything in :mod:`rageval.analysis` works on these values, never on the store."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

# What a run's recorded latency means (an evaluation run's tag): its p95, the clock it was read on and
# the machine's load then, e.g. "p95 14.6 ms, wall clock, load 0.3 on 8 CPUs".
LATENCY_TAG = "rageval.latency"


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    name: str
    experiment_id: str
    status: str
    sealed: bool
    params: dict[str, str]
    metrics: dict[str, float]
    tags: dict[str, str]
    artifact_uri: str


@dataclass(frozen=True)
class RunArtifacts:
    """What a sealed evaluation run recorded, read back for comparing and gating."""

    info: RunInfo
    config_yaml: str
    per_query: pd.DataFrame  # long: query_id, measure, value
    queries: pd.DataFrame  # query_id, slices, answerable, context_tokens, failed, ...
    rankings: pd.DataFrame
    latency: pd.DataFrame  # query_id, stage, seconds
    stages: pd.DataFrame | None = None  # query_id, stage, measure, value (runs that record stages)
    contract: dict[str, Any] | None = None  # contract.json, where recorded
