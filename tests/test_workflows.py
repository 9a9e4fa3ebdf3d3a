"""Workflows receive their store: a Tracker object handed in, never a URI they resolve themselves."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import DEMO, ROOT

from rageval.benchmark.loading import load_benchmark
from rageval.benchmark.migration import migrate_labels
from rageval.benchmark.schema import ChunkingConfig
from rageval.config.load import dump_config, load_config
from rageval.experiment.run import run_experiment
from rageval.tracking.store import Tracker
from rageval.workflows.gate import execute_gate
from rageval.workflows.guards import record_release_evaluation
from rageval.workflows.run import run_params, run_tags

BM25 = ROOT / "params" / "bm25.yaml"
POLICY = ROOT / "params" / "gates" / "release.yaml"


def sealed_release_run(tracker: Tracker, overrides: list[str], name: str) -> str:
    """A sealed release evaluation made in process and logged through ``tracker`` (no notebook)."""
    config = load_config(BM25, overrides, split="release")
    bench = load_benchmark(config.benchmark)
    run_id = tracker.create_run(
        "workflow-tests",
        name,
        params=run_params(config, overrides),
        tags=run_tags(config, bench, BM25),
        files={"config.yaml": dump_config(config).encode()},
    )
    record_release_evaluation(tracker, run_id, bench, config.name)
    tracker.log_result(run_id, run_experiment(config, bench))
    tracker.seal(run_id)
    return run_id


def test_the_gate_workflow_runs_on_the_store_object_it_is_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    tracker = Tracker(f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}")
    # Were the workflow to resolve a store on its own, it would reach for this (nothing listens there).
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")
    baseline = sealed_release_run(tracker, [], "baseline")
    candidate = sealed_release_run(tracker, ["retrieval.stages.0.k1=1.2"], "candidate")

    outcome = execute_gate(baseline, candidate, POLICY, tracker=tracker)

    gate = tracker.run(outcome.run_id)
    assert gate.sealed and gate.tags["rageval.kind"] == "gate"
    assert gate.tags["rageval.baseline"] == baseline and gate.tags["rageval.candidates"] == candidate
    assert gate.tags["rageval.verdict"] == outcome.decision.verdict
    assert tracker.verify(outcome.run_id) == []
    # Browsable: the roles of the compared runs and a description holding the rule table.
    assert gate.tags["rageval.baseline"] == baseline
    assert gate.tags["rageval.candidates"] == candidate and not [k for k in gate.tags if k.startswith("rageval.role.")]
    description = gate.tags["mlflow.note.content"]
    assert outcome.decision.verdict.upper() in description.upper()
    assert all(rule.rule in description for rule in outcome.decision.rules)
    assert {r.run_id for r in tracker.runs()} == {baseline, candidate, outcome.run_id}


def test_passages_are_graded_on_spans_whatever_chunk_labels_a_migration_left(tmp_path: Path):
    """Under rageval-metrics/4 a passage-level run reads the judged spans, never a chunk-labels file:
    labels migrated to a smaller chunking and not reviewed change nothing, even on the release split."""
    demo = Path(shutil.copytree(DEMO, tmp_path / "demo"))
    smaller = ["chunking.size=100", "chunking.overlap=0"]
    before = run_experiment(load_config(BM25, smaller, benchmark=demo, split="release"), cache=False)
    migrate_labels(load_benchmark(demo), ChunkingConfig(size=200, overlap=30), ChunkingConfig(size=100, overlap=0))
    after = run_experiment(load_config(BM25, smaller, benchmark=demo, split="release"), cache=False)
    assert after.evaluation.per_query.equals(before.evaluation.per_query) and after.evaluation.evaluated > 0
