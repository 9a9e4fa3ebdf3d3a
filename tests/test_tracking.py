"""Sealed runs are immutable: logging is refused, and any later change makes verify fail."""

from __future__ import annotations

import json
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml
from conftest import ROOT

from rageval.config.load import load_config
from rageval.errors import RunSealedError, TrackingError, VerificationError
from rageval.experiment.run import run_experiment
from rageval.hashing import sha256_bytes
from rageval.keys import KEY_ENV, KEY_FILE_ENV
from rageval.tracking.records import MANIFEST, SEAL_TAG, metric_names
from rageval.tracking.seal import UNKEYED_NOTE
from rageval.tracking.store import Tracker


@pytest.fixture(autouse=True)
def no_seal_key(monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.delenv(KEY_FILE_ENV, raising=False)


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
    # The columns are the measures and the operational few; every other figure is in tables/more_metrics.
    from rageval.evaluation import metric_key
    from rageval.tracking.records import OPERATIONAL_METRICS, RUN_METRICS, all_metrics

    measures = {metric_key(m) for m in result.evaluation.aggregates.index}
    assert measures <= info.metrics.keys()
    assert info.metrics["queries_evaluated"] == 2 and info.metrics["queries_skipped"] == 0
    assert "time_s/experiment" not in info.metrics and "latency/total/p95_ms" not in info.metrics
    assert set(info.metrics) - measures <= {*OPERATIONAL_METRICS, *RUN_METRICS, "release_evaluations"}
    assert set(OPERATIONAL_METRICS) <= info.metrics.keys()
    every = all_metrics(info.metrics, tracker.sealed_frame(run_id, "tables/more_metrics.parquet"))
    assert every["time_s/experiment"] == pytest.approx(sum(result.timings.values()))
    assert every.keys() >= metric_names(result).keys()
    assert {k: every[k] for k in metric_names(result)} == pytest.approx(metric_names(result))
    rankings = tracker.rankings(run_id)
    assert list(rankings.columns) == ["query_id", "rank", "chunk_id", "parent_id", "start", "end", "score", "stage"]
    manifest = json.loads(artifact_file(tracker, run_id, "manifest.json").read_text())
    assert {"rankings.parquet", "per_query_metrics.parquet", "failures.json", "config.yaml", "metrics.json"} <= set(
        manifest["artifacts"]
    )
    # Format 2: the run's own fields as sealed, every tag (MLflow's too), each metric's history.
    run = tracker.client.get_run(run_id)
    assert manifest["format"] == 2 and manifest["seal"] == {"keyed": False}
    assert manifest["run"] == {
        "name": "tiny",
        "experiment_id": info.experiment_id,
        "status": "FINISHED",
        "lifecycle_stage": "active",
        "start_time": run.info.start_time,
        "end_time": run.info.end_time,
    }
    assert manifest["tags"]["mlflow.runName"] == "tiny" and SEAL_TAG not in manifest["tags"]
    from rageval.tracking.owners import OWNER_TAG, owner_fields

    assert OWNER_TAG in manifest["tags"] and not [k for k in manifest["tags"] if k.startswith("rageval.owner.")]
    assert {"host", "pid", "started"} <= owner_fields(manifest["tags"]).keys()
    (entry,) = manifest["metric_history"]["nDCG_at_10"]
    assert entry[0] == 0 and entry[2] == info.metrics["nDCG_at_10"]
    assert manifest["metric_history"].keys() == info.metrics.keys()
    result = tracker.verification(run_id)
    assert result.intact and result.format == 2 and result.notes == [UNKEYED_NOTE] and not result.keyed


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


def seal_as_format_1(tracker: Tracker, run_id: str) -> None:
    """Seal exactly as rageval did before manifest format 2 (that release's ``_snapshot``,
    ``manifest_of`` and ``seal``, copied): no ``format``, no run fields, no metric history, no
    ``mlflow.*`` tags."""
    import mlflow.artifacts

    with tempfile.TemporaryDirectory() as tmp:
        dst = Path(tmp)
        mlflow.artifacts.download_artifacts(run_id=run_id, dst_path=str(dst), tracking_uri=tracker.uri)
        artifacts = {
            p.relative_to(dst).as_posix(): sha256_bytes(p.read_bytes()) for p in sorted(dst.rglob("*")) if p.is_file()
        }
    run = tracker.client.get_run(run_id)
    inputs = [f"{d.dataset.name}:{d.dataset.digest}" for d in (run.inputs.dataset_inputs if run.inputs else [])]
    manifest = {
        "run_id": run_id,
        "artifacts": {path: value for path, value in sorted(artifacts.items()) if path != MANIFEST},
        "params": dict(sorted(run.data.params.items())),
        "metrics": dict(sorted(run.data.metrics.items())),
        "tags": {k: v for k, v in sorted(run.data.tags.items()) if not k.startswith("mlflow.") and k != SEAL_TAG},
        "inputs": sorted(inputs),
    }
    manifest["sealed_at"] = datetime.now(UTC).isoformat()
    data = json.dumps(manifest, indent=2, sort_keys=True).encode()
    tracker.log_bytes(run_id, MANIFEST, data)
    tracker.client.set_terminated(run_id, "FINISHED")
    tracker.client.set_tag(run_id, SEAL_TAG, sha256_bytes(data))


def test_a_run_sealed_in_format_1_is_refused_not_verified(store, result):
    """rageval 0.1.0 reads format 2 only: a manifest without ``format`` (the old layout) is not intact."""
    tracker = Tracker(store)
    run_id = tracker.create_run("tracking-tests", "old", params={"a": 1}, tags={"rageval.split": "dev"})
    tracker.log_result(run_id, result)
    seal_as_format_1(tracker, run_id)
    checked = tracker.verification(run_id)
    assert not checked.intact and checked.format is None
    assert checked.changes == [
        "manifest.json has no format (format 1, which rageval no longer reads); this rageval reads format 2 only"
    ]


def test_a_manifest_of_an_unknown_format_is_not_taken_as_verified(store, result):
    tracker, run_id = sealed_run(store, result)
    path = artifact_file(tracker, run_id, MANIFEST)
    manifest = json.loads(path.read_text())
    manifest["format"] = 3
    data = json.dumps(manifest).encode()
    path.write_bytes(data)
    tracker.client.set_tag(run_id, SEAL_TAG, sha256_bytes(data))
    assert tracker.verify(run_id) == ["manifest.json has format 3; this rageval reads format 2 only: upgrade rageval"]


def test_an_evaluation_run_shows_few_metrics_and_its_breakdowns_as_tables(store, result):
    import pandas as pd

    from rageval.tracking.records import MAX_METRICS, TABLES_TAG, read_table

    tracker, run_id = sealed_run(store, result)
    info = tracker.run(run_id)
    assert 0 < len(info.metrics) <= MAX_METRICS == 40
    assert not any(k.startswith(("slice/", "stage/", "evidence/", "diagnostic/")) for k in info.metrics)
    root = Path(urlparse(info.artifact_uri).path)
    listed = {entry["path"] for entry in json.loads(info.tags[TABLES_TAG])}
    assert {"tables/slices.json", "tables/latency.json", "tables/timings.json"} <= listed
    for path in listed:
        table = read_table((root / path).read_bytes())
        stored = pd.read_parquet(root / path.replace(".json", ".parquet"))
        pd.testing.assert_frame_equal(table, stored, check_dtype=False)
    slices = read_table((root / "tables/slices.json").read_bytes()).set_index("slice")
    assert slices["nDCG@10"].to_dict() == pytest.approx(result.slices["nDCG@10"].to_dict(), nan_ok=True)
    for name in ("distribution.png", "slices.png", "latency.png", "recall_at_k.png"):
        assert (root / "figures" / name).read_bytes().startswith(b"\x89PNG")
    assert tracker.verify(run_id) == []


def test_repeated_run_names_are_numbered(store):
    tracker = Tracker(store)
    ids = [tracker.create_run("names", "bm25-baseline@dev", params={}, tags={}) for _ in range(3)]
    assert [tracker.run(i).name for i in ids] == ["bm25-baseline@dev", "bm25-baseline@dev #2", "bm25-baseline@dev #3"]
    experiment = tracker.client.get_experiment_by_name("names")
    assert "rageval" in experiment.tags["mlflow.note.content"]
    # MLflow 3's UI opens an experiment of this kind on its runs, not on the GenAI traces page.
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"


def test_many_measures_keep_forty_headline_metrics_and_the_rest_in_a_table():
    from rageval.tracking.records import HEADLINE_METRICS, MAX_METRICS, RUN_METRICS, evaluation_record

    measures = [f"P@{k}" for k in range(1, 46)]
    config = load_config(ROOT / "params" / "bm25.yaml", [f"evaluation.measures={json.dumps(measures)}"])
    result = run_experiment(config)
    record = evaluation_record(result)
    # The metric logged beside the record (logging_time_s) fits in the same 40.
    assert len(record.metrics) == HEADLINE_METRICS == MAX_METRICS - len(RUN_METRICS) == 39
    assert list(record.metrics) == [f"P_at_{k}" for k in range(1, 40)]  # measures come first
    more = record.tables["more_metrics"]
    everything = metric_names(result)
    # Nothing is dropped: headline and table together are every metric, with the same values.
    assert {**record.metrics, **dict(zip(more["metric"], more["value"], strict=True))} == everything


def test_sealing_hashes_what_this_process_wrote_and_downloads_only_the_rest(store, result, monkeypatch):
    """Artifacts are hashed as they are written; the seal downloads only files another writer made
    (a notebook's kernel logging into the run) or that no longer have the size written."""
    tracker = Tracker(store)
    run_id = tracker.create_run("tracking-tests", "hashed", params={}, tags={}, files={"config.yaml": b"x: 1\n"})
    tracker.log_result(run_id, result)
    Tracker(store).log_bytes(run_id, "kernel/own.txt", b"written by another process's tracker")
    tracker.log_bytes(run_id, "notes/overwritten.txt", b"short")
    artifact_file(tracker, run_id, "notes/overwritten.txt").write_bytes(b"replaced behind this tracker's back")
    fetched = []
    download = tracker.client.download_artifacts
    monkeypatch.setattr(
        tracker.client, "download_artifacts", lambda rid, path, dst: fetched.append(path) or download(rid, path, dst)
    )
    tracker.seal(run_id)
    assert sorted(fetched) == ["kernel/own.txt", "notes/overwritten.txt"]
    manifest = json.loads(artifact_file(tracker, run_id, MANIFEST).read_bytes())
    on_disk = artifact_file(tracker, run_id, "notes/overwritten.txt").read_bytes()
    assert manifest["artifacts"]["notes/overwritten.txt"] == sha256_bytes(on_disk)  # what the store holds
    assert "config.yaml" in manifest["artifacts"] and len(manifest["artifacts"]) > 10
    assert Tracker(store).verify(run_id) == []  # a fresh tracker downloads everything: the seal holds


def test_runs_recorded_at_once_into_a_new_experiment_set_its_view_once_and_none_fails(store):
    """A sweep's members log into a new experiment at once: each finds it without the "Headline
    first" view, and the store takes only the first insert of the tag (the others failed their run
    with sqlite's UNIQUE constraint: 19 of 80 here without the fix)."""
    import threading

    from rageval.tracking.connect import open_client
    from rageval.tracking.views import VIEW_TAG, ensure_headline_view

    clients = [open_client(store) for _ in range(4)]
    for n in range(10):
        experiment = clients[0].create_experiment(f"view-race-{n}")
        start = threading.Barrier(len(clients))
        outcomes: list[bool | Exception] = []

        def log(client, experiment=experiment, start=start, outcomes=outcomes):
            start.wait()
            try:
                outcomes.append(ensure_headline_view(client, experiment, ["nDCG_at_10", "AP"], ["nDCG_at_10"]))
            except Exception as exc:  # noqa: BLE001 - what the test looks for
                outcomes.append(exc)

        threads = [threading.Thread(target=log, args=(client,)) for client in clients]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not [o for o in outcomes if isinstance(o, Exception)], outcomes
        assert outcomes.count(True) >= 1 and len(outcomes) == len(clients)
        assert json.loads(clients[0].get_experiment(experiment).tags[VIEW_TAG])["name"] == "Headline first"
