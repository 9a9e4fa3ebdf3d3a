"""The tamper matrix: every way of changing a sealed run behind rageval's back — through MLflow's
own client, on the artifact files, or by SQL on the sqlite store — is named by ``verify``, and
compare and gate refuse the run before they create one. Then the keyed seal: a manifest and seal
tag rewritten together pass the unkeyed check and fail the keyed one.

Runs are made in process (no notebook), each into a real sqlite store of this module's own.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlparse

import pytest
from conftest import ROOT

from rageval.analysis.plots import evaluation_pngs
from rageval.benchmark.loading import Benchmark, load_benchmark
from rageval.config.load import dump_config, load_config
from rageval.config.schema import RunConfig
from rageval.errors import ComparisonError, TrackingError, VerificationError
from rageval.experiment.run import ExperimentResult, run_experiment
from rageval.hashing import sha256_bytes
from rageval.keys import KEY_ENV, KEY_FILE_ENV, seal_key
from rageval.tracking.seal import HMAC_TAG, UNKEYED_NOTE, encode
from rageval.tracking.store import Tracker
from rageval.workflows.compare import ComparisonRequest, execute_comparison
from rageval.workflows.gate import execute_gate
from rageval.workflows.guards import sealed_and_intact
from rageval.workflows.readback import candidate_ids
from rageval.workflows.run import cases_dataset, run_params, run_tags

BM25 = ROOT / "params" / "bm25.yaml"
POLICY = ROOT / "params" / "gates" / "release.yaml"


@dataclass(frozen=True)
class World:
    tracker: Tracker
    db: Path
    config: RunConfig
    bench: Benchmark
    result: ExperimentResult
    figures: dict[str, bytes]  # the result's PNGs, drawn once: each run records the same bytes
    baseline: str = ""
    parents: list[str] = field(default_factory=list)  # sealed runs standing in for sweep parents


@pytest.fixture(autouse=True)
def no_seal_key(monkeypatch):
    """A key in the developer's environment must not change what these tests see."""
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.delenv(KEY_FILE_ENV, raising=False)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    db = tmp_path_factory.mktemp("tamper") / "mlflow.db"
    config = load_config(BM25, split="release")
    bench = load_benchmark(config.benchmark)
    result = run_experiment(config, bench)
    world = World(Tracker(f"sqlite:///{db}"), db, config, bench, result, evaluation_pngs(result))
    world = replace(world, baseline=sealed_run(world, "baseline"))
    world.parents.extend(sealed_run(world, f"parent-{n}") for n in (1, 2))
    return world


def sealed_run(world: World, name: str, tags: dict[str, str] | None = None) -> str:
    """A sealed release evaluation with a dataset input, as ``rageval run`` records one."""
    config, bench, tracker = world.config, world.bench, world.tracker
    run_id = tracker.create_run(
        "tamper-tests",
        name,
        params=run_params(config, []),
        tags={**run_tags(config, bench, BM25), **(tags or {})},
        files={"config.yaml": dump_config(config).encode()},
        dataset=cases_dataset(bench, config.split),
    )
    tracker.log_result(run_id, world.result, world.figures)
    tracker.seal(run_id)
    return run_id


def artifact(world: World, run_id: str, name: str) -> Path:
    return Path(urlparse(world.tracker.run(run_id).artifact_uri).path) / name


def sql(world: World, statement: str, *args: object) -> None:
    """Edit the store's database directly, as anyone who can write the file can."""
    with sqlite3.connect(world.db) as connection:
        changed = connection.execute(statement, args).rowcount
    assert changed >= 1, f"the edit changed nothing: {statement}"


def said_by_verify(tracker: Tracker, run_id: str) -> str:
    try:
        return "\n".join(tracker.verify(run_id))
    except TrackingError as refused:
        return str(refused)


def run_count(world: World) -> int:
    with sqlite3.connect(world.db) as connection:
        return connection.execute("SELECT count(*) FROM runs").fetchone()[0]


# --------------------------------------------------------------------------- the cases


@dataclass(frozen=True)
class Case:
    id: str
    tamper: Callable[[World, str], object]
    expected: tuple[str, ...]  # each in what verify says; the first also in compare's and gate's refusal
    parent: bool = False  # sealed as a member of a (stand-in) sweep parent


def _copy_manifest(w: World, r: str) -> None:
    shutil.copy(artifact(w, w.baseline, "manifest.json"), artifact(w, r, "manifest.json"))
    w.tracker.client.set_tag(r, "rageval.seal", w.tracker.run(w.baseline).tags["rageval.seal"])


def _reseal_malformed(w: World, r: str) -> None:
    data = json.dumps({"format": 2, "run_id": r, "params": 5}).encode()
    artifact(w, r, "manifest.json").write_bytes(data)
    w.tracker.client.set_tag(r, "rageval.seal", sha256_bytes(data))


def _new_experiment(w: World) -> str:
    return w.tracker.experiment_id("tamper-elsewhere")


NDCG = "nDCG_at_10"
CASES = [
    # ---- the run itself, through MLflow's client
    Case(
        "status-set-failed",
        lambda w, r: w.tracker.client.set_terminated(r, "FAILED"),
        ("status changed: 'FINISHED' → 'FAILED'",),
    ),
    Case(
        "run-deleted",
        lambda w, r: w.tracker.client.delete_run(r),
        ("lifecycle stage changed: 'active' → 'deleted' (the run was deleted)",),
    ),
    Case(
        "run-renamed",
        lambda w, r: w.tracker.client.update_run(r, name="better"),
        ("run name changed: 'run-renamed' → 'better'", "tag 'mlflow.runName': value changed"),
    ),
    # ---- tags MLflow's semantics depend on
    Case(
        "parent-run-id-added",
        lambda w, r: w.tracker.client.set_tag(r, "mlflow.parentRunId", w.parents[0]),
        ("tag 'mlflow.parentRunId' was added after sealing; it decides sweep membership",),
    ),
    Case(
        "parent-run-id-changed",
        lambda w, r: w.tracker.client.set_tag(r, "mlflow.parentRunId", w.parents[1]),
        ("tag 'mlflow.parentRunId': value changed",),
        parent=True,
    ),
    Case(
        "parent-run-id-removed",
        lambda w, r: w.tracker.client.delete_tag(r, "mlflow.parentRunId"),
        ("tag 'mlflow.parentRunId' was removed",),
        parent=True,
    ),
    Case(
        "mlflow-tag-added",
        lambda w, r: w.tracker.client.set_tag(r, "mlflow.note.content", "fine"),
        ("tag 'mlflow.note.content' was added after sealing",),
    ),
    Case(
        "mlflow-tag-changed",
        lambda w, r: w.tracker.client.set_tag(r, "mlflow.runName", "other"),
        ("tag 'mlflow.runName': value changed",),
    ),
    # ---- rageval's tags, params and metrics
    Case(
        "tag-changed",
        lambda w, r: w.tracker.client.set_tag(r, "rageval.split", "dev"),
        ("tag 'rageval.split': value changed ('release' → 'dev')",),
    ),
    Case(
        "tag-added",
        lambda w, r: w.tracker.client.set_tag(r, "rageval.reviewed", "yes"),
        ("tag 'rageval.reviewed' was added after sealing",),
    ),
    Case(
        "tag-removed",
        lambda w, r: w.tracker.client.delete_tag(r, "rageval.hash.qrels"),
        ("tag 'rageval.hash.qrels' was removed",),
    ),
    Case(
        "param-added",
        lambda w, r: w.tracker.client.log_param(r, "late", "1"),
        ("param 'late' was added after sealing",),
    ),
    Case(
        "metric-changed",
        lambda w, r: w.tracker.client.log_metric(r, NDCG, 0.99),
        (f"metric '{NDCG}': value changed", f"metric '{NDCG}': history changed: added 0.99 at step 0"),
    ),
    Case(
        "metric-added",
        lambda w, r: w.tracker.client.log_metric(r, "invented", 1.0),
        ("metric 'invented' was added after sealing",),
    ),
    Case(
        "metric-at-older-step",
        lambda w, r: w.tracker.client.log_metric(r, NDCG, 0.99, step=-1),
        (f"metric '{NDCG}': history changed: added 0.99 at step -1",),
    ),
    Case(
        "metric-at-older-time",
        lambda w, r: w.tracker.client.log_metric(r, NDCG, 0.99, timestamp=1, step=0),
        (f"metric '{NDCG}': history changed: added 0.99 at step 0 (timestamp 1)",),
    ),
    # ---- artifacts
    Case(
        "artifact-edited",
        lambda w, r: artifact(w, r, "failures.json").write_text("[{}]"),
        ("artifact 'failures.json': content changed",),
    ),
    Case(
        "artifact-deleted", lambda w, r: artifact(w, r, "config.yaml").unlink(), ("artifact 'config.yaml' was removed",)
    ),
    Case(
        "artifact-added-on-disk",
        lambda w, r: artifact(w, r, "extra.txt").write_text("x"),
        ("artifact 'extra.txt' was added after sealing",),
    ),
    Case(
        "artifact-logged",
        lambda w, r: w.tracker.client.log_artifact(r, str(BM25), "late"),
        ("artifact 'late/bm25.yaml' was added after sealing",),
    ),
    # ---- the seal
    Case(
        "manifest-edited",
        lambda w, r: artifact(w, r, "manifest.json").write_text("{}"),
        ("manifest.json changed: its sha256 no longer matches the rageval.seal tag",),
    ),
    Case("manifest-deleted", lambda w, r: artifact(w, r, "manifest.json").unlink(), ("manifest.json is missing",)),
    Case(
        "seal-tag-replaced",
        lambda w, r: w.tracker.client.set_tag(r, "rageval.seal", "0" * 64),
        ("manifest.json changed: its sha256 no longer matches",),
    ),
    Case(
        "seal-tag-removed",
        lambda w, r: w.tracker.client.delete_tag(r, "rageval.seal"),
        ("not sealed: only sealed runs are results; it holds a manifest.json, so its rageval.seal tag was removed",),
    ),
    Case("manifest-copied-from-another-run", _copy_manifest, ("manifest.json belongs to run",)),
    Case("manifest-malformed-and-resealed", _reseal_malformed, ("manifest.json is malformed",)),
    # ---- SQL on the sqlite store
    Case(
        "sql-runs-status",
        lambda w, r: sql(w, "UPDATE runs SET status = 'RUNNING' WHERE run_uuid = ?", r),
        ("status changed: 'FINISHED' → 'RUNNING'",),
    ),
    Case(
        "sql-runs-lifecycle",
        lambda w, r: sql(w, "UPDATE runs SET lifecycle_stage = 'deleted' WHERE run_uuid = ?", r),
        ("lifecycle stage changed: 'active' → 'deleted'",),
    ),
    Case(
        "sql-runs-start-time",
        lambda w, r: sql(w, "UPDATE runs SET start_time = start_time - 86400000 WHERE run_uuid = ?", r),
        ("start time changed",),
    ),
    Case(
        "sql-runs-experiment",
        lambda w, r: sql(w, "UPDATE runs SET experiment_id = ? WHERE run_uuid = ?", _new_experiment(w), r),
        ("experiment changed",),
    ),
    Case(
        "sql-tags-value",
        lambda w, r: sql(w, "UPDATE tags SET value = 'x' WHERE run_uuid = ? AND key = 'rageval.hash.qrels'", r),
        ("tag 'rageval.hash.qrels': value changed",),
    ),
    Case(
        "sql-tags-parent-inserted",
        lambda w, r: sql(
            w, "INSERT INTO tags (key, value, run_uuid) VALUES ('mlflow.parentRunId', ?, ?)", w.parents[0], r
        ),
        ("tag 'mlflow.parentRunId' was added after sealing",),
    ),
    Case(
        "sql-metrics-history-value",
        lambda w, r: sql(w, f"UPDATE metrics SET value = 0.99 WHERE run_uuid = ? AND key = '{NDCG}'", r),
        (f"metric '{NDCG}': history changed: added 0.99 at step 0",),
    ),
    Case(
        "sql-latest-metrics-value",
        lambda w, r: sql(w, f"UPDATE latest_metrics SET value = 0.99 WHERE run_uuid = ? AND key = '{NDCG}'", r),
        (f"metric '{NDCG}': value changed",),
    ),
    Case(
        "sql-metric-deleted",
        lambda w, r: (
            sql(w, f"DELETE FROM metrics WHERE run_uuid = ? AND key = '{NDCG}'", r),
            sql(w, f"DELETE FROM latest_metrics WHERE run_uuid = ? AND key = '{NDCG}'", r),
        ),
        (f"metric '{NDCG}' was removed", f"metric '{NDCG}': history changed: removed"),
    ),
    Case(
        "sql-params-value",
        lambda w, r: sql(w, "UPDATE params SET value = 'x' WHERE run_uuid = ? AND key = 'metrics.contract'", r),
        ("param 'metrics.contract': value changed",),
    ),
    Case(
        "sql-params-deleted",
        lambda w, r: sql(w, "DELETE FROM params WHERE run_uuid = ? AND key = 'evaluation'", r),
        ("param 'evaluation' was removed",),
    ),
    Case(
        "sql-inputs-deleted", lambda w, r: sql(w, "DELETE FROM inputs WHERE destination_id = ?", r), ("inputs changed",)
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_tampering_is_named_by_verify_and_refused_by_compare_and_gate(world: World, case: Case):
    tags = {"mlflow.parentRunId": world.parents[0]} if case.parent else {}
    run_id = sealed_run(world, case.id, tags)  # a fresh sealed run verifies (tests/test_tracking.py)
    tracker = world.tracker

    case.tamper(world, run_id)

    said = said_by_verify(tracker, run_id)
    for expected in case.expected:
        assert expected in said, said
    before = run_count(world)
    with pytest.raises((VerificationError, ComparisonError)) as refused:
        sealed_and_intact(tracker, run_id)
    assert case.expected[0] in str(refused.value)
    with pytest.raises((VerificationError, ComparisonError)) as compared:
        execute_comparison(ComparisonRequest(world.baseline, [run_id]), tracker=tracker)
    assert case.expected[0] in str(compared.value)
    with pytest.raises((VerificationError, ComparisonError)) as gated:
        execute_gate(world.baseline, run_id, POLICY, tracker=tracker)
    assert case.expected[0] in str(gated.value)
    assert run_count(world) == before  # refused before a comparison or gate run exists


# --------------------------------------------------------------------------- sweep membership


def sealed_sweep(world: World, members: list[str], listed: list[str] | None = None) -> tuple[str, dict[str, str]]:
    """A sweep parent with sealed members (created in that order) and the summary.json a sweep
    writes when it ends, listing them in the sweep file's order ``listed`` (default: ``members``)."""
    tracker = world.tracker
    parent = tracker.create_run("tamper-tests", "sweep", params={}, tags={"rageval.kind": "sweep"})
    ids = {name: sealed_run(world, name, {"mlflow.parentRunId": parent}) for name in members}
    summary = {"members": [{"name": n, "run_id": ids[n], "status": "sealed"} for n in listed or members]}
    tracker.log_bytes(parent, "summary.json", json.dumps(summary).encode())
    tracker.seal(parent)
    return parent, ids


def test_an_intact_sweep_offers_its_sealed_members(world: World):
    parent, ids = sealed_sweep(world, ["m-a", "m-b"])
    found, members, left_out = candidate_ids(world.tracker, world.baseline, [], parent)
    assert found == members == [ids["m-a"], ids["m-b"]] and left_out == []


def test_a_sweeps_members_come_in_the_sweep_files_order_whichever_run_was_created_first(world: World):
    """Parallel workers race to create their runs; a comparison's rows keep the sweep's order."""
    parent, ids = sealed_sweep(world, ["late", "early"], listed=["early", "late"])
    found, members, _ = candidate_ids(world.tracker, world.baseline, [], parent)
    assert found == members == [ids["early"], ids["late"]]


def test_a_run_tagged_into_a_sweep_is_refused(world: World):
    parent, ids = sealed_sweep(world, ["in-a"])
    intruder = sealed_run(world, "intruder")
    world.tracker.client.set_tag(intruder, "mlflow.parentRunId", parent)
    with pytest.raises(ComparisonError) as refused:
        execute_comparison(ComparisonRequest(world.baseline, sweep=parent), tracker=world.tracker)
    assert (
        f"run {intruder} (intruder) has mlflow.parentRunId = {parent}, but the sweep's summary.json does not list it"
        in str(refused.value)
    )


def test_a_member_untagged_from_its_sweep_is_refused(world: World):
    parent, ids = sealed_sweep(world, ["out-a", "out-b"])
    world.tracker.client.delete_tag(ids["out-b"], "mlflow.parentRunId")
    with pytest.raises(ComparisonError) as refused:
        execute_comparison(ComparisonRequest(world.baseline, sweep=parent), tracker=world.tracker)
    assert (
        f"sweep member out-b (run {ids['out-b']}) is listed in the sweep's summary.json but no longer has "
        f"mlflow.parentRunId = {parent}"
    ) in str(refused.value)


def test_a_tampered_sweep_parent_is_refused(world: World):
    parent, _ = sealed_sweep(world, ["p-a"])
    artifact(world, parent, "summary.json").write_text('{"members": []}')
    with pytest.raises(VerificationError, match="artifact 'summary.json': content changed"):
        candidate_ids(world.tracker, world.baseline, [], parent)


# --------------------------------------------------------------------------- the keyed seal


def forge(world: World, run_id: str, *, strip_key: bool = False) -> None:
    """Rewrite a metric, then the manifest and the seal tag to match: what anyone who can write
    the store can do. ``strip_key`` also removes the keyed seal and its declaration."""
    tracker = world.tracker
    sql(world, f"UPDATE latest_metrics SET value = 0.99 WHERE run_uuid = ? AND key = '{NDCG}'", run_id)
    sql(world, f"UPDATE metrics SET value = 0.99 WHERE run_uuid = ? AND key = '{NDCG}'", run_id)
    path = artifact(world, run_id, "manifest.json")
    manifest = json.loads(path.read_text())
    manifest["metrics"][NDCG] = 0.99
    manifest["metric_history"][NDCG] = [
        [step, timestamp, 0.99] for step, timestamp, _ in manifest["metric_history"][NDCG]
    ]
    if strip_key:
        manifest["seal"] = {"keyed": False}
        tracker.client.delete_tag(run_id, HMAC_TAG)
    data = encode(manifest)
    path.write_bytes(data)
    tracker.client.set_tag(run_id, "rageval.seal", sha256_bytes(data))


@pytest.mark.parametrize("strip_key", [False, True], ids=["keyed-seal-kept", "keyed-seal-stripped"])
def test_a_forged_manifest_and_seal_pass_the_unkeyed_check_but_fail_the_keyed_one(world, monkeypatch, strip_key):
    monkeypatch.setenv(KEY_ENV, "a key only the evaluation team holds")
    baseline = sealed_run(world, "keyed-baseline")
    run_id = sealed_run(world, "keyed")
    tracker = world.tracker
    assert tracker.run(run_id).tags[HMAC_TAG]
    sealed = tracker.verification(run_id)
    assert sealed.intact and sealed.keyed and sealed.key_checked and sealed.notes == []

    forge(world, run_id, strip_key=strip_key)

    monkeypatch.delenv(KEY_ENV)
    unkeyed = tracker.verification(run_id)
    assert unkeyed.intact and tracker.run(run_id).metrics[NDCG] == 0.99  # the forgery is consistent
    if strip_key:
        assert unkeyed.notes == [UNKEYED_NOTE]
    else:
        assert (
            not unkeyed.key_checked and "keyed seal (key id" in unkeyed.notes[0] and "not checked" in unkeyed.notes[0]
        )

    monkeypatch.setenv(KEY_ENV, "a key only the evaluation team holds")
    expected = "no keyed seal: a seal key is configured" if strip_key else "keyed seal does not match"
    assert any(expected in change for change in tracker.verify(run_id))
    with pytest.raises(VerificationError, match=expected):
        execute_gate(baseline, run_id, POLICY, tracker=tracker)
    # Unkeyed runs (the module's baseline) cannot be vouched for by a key holder either.
    assert any("no keyed seal" in change for change in tracker.verify(world.baseline))


def test_a_keyed_seal_checked_with_another_key_names_both_keys(world, monkeypatch, tmp_path):
    key_file = tmp_path / "seal.key"
    key_file.write_text("the right key\n")
    monkeypatch.setenv(KEY_FILE_ENV, str(key_file))
    right = seal_key()
    run_id = sealed_run(world, "keyed-file")
    assert world.tracker.verify(run_id) == []
    monkeypatch.delenv(KEY_FILE_ENV)
    monkeypatch.setenv(KEY_ENV, "the wrong key")
    (change,) = world.tracker.verify(run_id)
    assert f"sealed with key id {right.key_id}, the configured key is {seal_key().key_id}" in change


def test_seal_keys_are_read_strictly(monkeypatch, tmp_path):
    assert seal_key({}) is None
    assert seal_key({KEY_ENV: " k \n"}).secret == b"k"
    (tmp_path / "k").write_bytes(b"file key\n")
    assert seal_key({KEY_FILE_ENV: str(tmp_path / "k")}).secret == b"file key"
    with pytest.raises(TrackingError, match="set one of them"):
        seal_key({KEY_ENV: "a", KEY_FILE_ENV: str(tmp_path / "k")})
    with pytest.raises(TrackingError, match="cannot be read"):
        seal_key({KEY_FILE_ENV: str(tmp_path / "absent")})
    (tmp_path / "empty").write_bytes(b"\n")
    with pytest.raises(TrackingError, match="the seal key is empty"):
        seal_key({KEY_FILE_ENV: str(tmp_path / "empty")})
    assert "hunter2" not in repr(seal_key({KEY_ENV: "hunter2"}))


def test_the_verify_command_says_what_the_seal_proves_and_what_changed(world, monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from rageval.cli import app

    store = world.tracker.uri
    intact = CliRunner().invoke(app, ["verify", world.baseline, "--tracking-uri", store])
    assert intact.exit_code == 0, intact.output
    assert f"run {world.baseline}: intact (unkeyed seal; every artifact, param, metric and its history" in intact.output
    assert f"note: {UNKEYED_NOTE}" in intact.output
    monkeypatch.setenv(KEY_ENV, "team key")
    keyed = sealed_run(world, "keyed-cli")
    checked = CliRunner().invoke(app, ["verify", keyed, "--tracking-uri", store])
    assert checked.exit_code == 0 and "intact (keyed seal checked;" in checked.output and "note:" not in checked.output
    monkeypatch.delenv(KEY_ENV)
    unchecked = CliRunner().invoke(app, ["verify", keyed, "--tracking-uri", store])
    assert unchecked.exit_code == 0 and "intact (keyed seal NOT checked;" in unchecked.output
    world.tracker.client.set_terminated(keyed, "KILLED")
    tampered = CliRunner().invoke(app, ["verify", keyed, "--tracking-uri", store])
    assert tampered.exit_code == 1
    assert f"run {keyed} was altered after sealing:\n- status changed: 'FINISHED' → 'KILLED'" in tampered.output
    out = tmp_path / "run.txt"
    exported = CliRunner().invoke(app, ["export-run", keyed, "--out", str(out), "--tracking-uri", store])
    assert exported.exit_code == 1 and "altered after sealing" in exported.output and not out.exists()
