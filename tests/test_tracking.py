"""Sealed runs are immutable: logging is refused, and any later change makes verify fail."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml
from conftest import ROOT

from rageval.config.load import load_config
from rageval.errors import RunSealedError, TrackingError, VerificationError
from rageval.experiment.run import run_experiment
from rageval.tracking.records import SEAL_TAG, metric_names
from rageval.tracking.store import Tracker


@pytest.fixture
def result(tiny, tmp_path):
    data = yaml.safe_load((ROOT / "params" / "bm25.yaml").read_text())
    data.update(benchmark=str(tiny), split="dev")
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(data))
    return run_experiment(load_config(path))


def sealed_run(store, result) -> tuple[Tracker, str]:
    tracker = Tracker(store)
    run_id = tracker.create_run(
        "tracking-tests", "tiny", params={"a": 1}, tags={"rageval.split": "dev"}, files={"config.yaml": b"x: 1\n"}
    )
    tracker.log_result(run_id, result)
    tracker.seal(run_id)
    return tracker, run_id


def artifact_file(tracker: Tracker, run_id: str, name: str) -> Path:
    return Path(urlparse(tracker.run(run_id).artifact_uri).path) / name


def test_a_sealed_run_verifies_and_records_its_result(store, result):
    tracker, run_id = sealed_run(store, result)
    info = tracker.run(run_id)
    assert info.status == "FINISHED" and info.sealed
    assert tracker.verify(run_id) == []
    assert info.metrics["nDCG_at_10"] == pytest.approx(result.evaluation.aggregates["nDCG@10"])
    assert info.metrics["queries_evaluated"] == 2 and info.metrics["queries_skipped"] == 0
    assert metric_names(result).keys() <= info.metrics.keys()
    rankings = tracker.rankings(run_id)
    assert list(rankings.columns) == ["query_id", "rank", "chunk_id", "parent_id", "score", "stage"]
    manifest = json.loads(artifact_file(tracker, run_id, "manifest.json").read_text())
    assert {"rankings.parquet", "per_query_metrics.parquet", "failures.json", "config.yaml", "metrics.json"} <= set(
        manifest["artifacts"]
    )


def test_logging_into_a_sealed_run_is_refused(store, result):
    tracker, run_id = sealed_run(store, result)
    for attempt in (
        lambda: tracker.log_metrics(run_id, {"nDCG_at_10": 1.0}),
        lambda: tracker.log_params(run_id, {"late": 1}),
        lambda: tracker.set_tags(run_id, {"late": "yes"}),
        lambda: tracker.log_bytes(run_id, "late.txt", b"late"),
        lambda: tracker.log_result(run_id, result),
        lambda: tracker.seal(run_id),
        lambda: tracker.fail(run_id, "late failure"),
    ):
        with pytest.raises(RunSealedError, match="sealed"):
            attempt()
    assert tracker.verify(run_id) == []


def test_editing_an_artifact_after_sealing_fails_verify(store, result):
    tracker, run_id = sealed_run(store, result)
    path = artifact_file(tracker, run_id, "failures.json")
    path.write_text('[{"query_id": "q1", "message": "edited"}]')
    changes = tracker.verify(run_id)
    assert len(changes) == 1 and "artifact 'failures.json': content changed" in changes[0]
    with pytest.raises(VerificationError) as raised:
        tracker.verify_or_raise(run_id)
    assert raised.value.changes == changes and raised.value.run_id == run_id


def test_changes_made_behind_rageval_are_named(store, result):
    tracker, run_id = sealed_run(store, result)
    tracker.client.log_metric(run_id, "nDCG_at_10", 0.99)  # MLflow itself allows this
    tracker.client.log_metric(run_id, "invented", 1.0)
    tracker.client.set_tag(run_id, "rageval.split", "release")
    (artifact_file(tracker, run_id, "config.yaml")).unlink()
    changes = "\n".join(tracker.verify(run_id))
    for expected in (
        "metric 'nDCG_at_10': value changed",
        "metric 'invented' was added after sealing",
        "tag 'rageval.split': value changed",
        "artifact 'config.yaml' was removed",
    ):
        assert expected in changes


def test_a_tampered_seal_is_detected(store, result):
    tracker, run_id = sealed_run(store, result)
    tracker.client.set_tag(run_id, SEAL_TAG, "0" * 64)
    assert any("manifest.json changed" in c for c in tracker.verify(run_id))


def test_a_failed_run_is_never_a_result(store, result, tmp_path):
    tracker = Tracker(store)
    run_id = tracker.create_run("tracking-tests", "tiny", params={}, tags={})
    notebook = tmp_path / "partial.ipynb"
    notebook.write_text("{}")
    tracker.fail(run_id, "RuntimeError: boom", notebook)
    info = tracker.run(run_id)
    assert info.status == "FAILED" and not info.sealed and info.tags["rageval.error"] == "RuntimeError: boom"
    assert artifact_file(tracker, run_id, "notebook/partial.ipynb").is_file()
    with pytest.raises(TrackingError, match="not sealed"):
        tracker.verify(run_id)
    with pytest.raises(TrackingError, match="not sealed"):
        tracker.rankings(run_id)
    with pytest.raises(TrackingError, match="FAILED"):
        tracker.seal(run_id)


def test_default_store_is_absolute_inside_the_project(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    tracker_uri = __import__("rageval.tracking.store", fromlist=["resolve_tracking_uri"]).resolve_tracking_uri()
    assert tracker_uri == f"sqlite:///{ROOT / 'mlruns' / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")
    assert __import__("rageval.tracking.store", fromlist=["x"]).resolve_tracking_uri() == "http://127.0.0.1:9"
