"""`rageval reproduce`: a sealed run re-executed at its commit gives identical rankings; tampered,
unsealed and not-reproducible runs are refused."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import ROOT

from rageval.errors import ReproductionError, TrackingError, VerificationError
from rageval.retrieval.schema import RetrievalConfig
from rageval.tracking.store import Tracker
from rageval.workflows.reproduce import compare_rankings, neural_stages, reproduce
from rageval.workflows.run import RunRequest, execute_run

pytestmark = pytest.mark.e2e


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A throwaway git checkout of this project's code, so runs record a commit it has."""
    repo = tmp_path_factory.mktemp("project")
    shutil.copytree(ROOT / "rageval", repo / "rageval", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "notebooks", repo / "notebooks")
    (repo / "params").mkdir()
    shutil.copy(ROOT / "params" / "bm25.yaml", repo / "params" / "bm25.yaml")
    shutil.copy(ROOT / "pyproject.toml", repo / "pyproject.toml")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-q", "-m", "snapshot")
    return repo


@pytest.fixture(scope="module")
def bm25_run(project, store) -> str:
    return execute_run(RunRequest(project / "params" / "bm25.yaml"), Tracker(store)).run_id


def test_a_bm25_run_reproduces_with_identical_rankings(bm25_run, project, store):
    result = reproduce(bm25_run, tracker=Tracker(store), repo=project)
    assert result.verdict == "identical" and result.reproduced
    assert [s.stage for s in result.stages] == ["bm25", "context"]
    assert all(s.identical and s.queries_changed == 0 and s.max_score_difference == 0.0 for s in result.stages)
    assert result.metric_differences["nDCG_at_10"] == 0.0
    tracker = Tracker(store)
    record = tracker.run(result.record)
    assert record.sealed and record.tags["rageval.reproduce.original"] == bm25_run
    assert (
        record.tags["rageval.reproduce.run"] == result.reproduction
        and record.tags["rageval.reproduce.verdict"] == "identical"
    )
    again = tracker.run(result.reproduction)
    assert again.sealed and again.tags["rageval.git.commit"] == tracker.run(bm25_run).tags["rageval.git.commit"]
    assert git(project, "worktree", "list").count("\n") == 0  # the temporary worktree is gone


def test_unsealed_and_tampered_runs_are_refused(bm25_run, store):
    tracker = Tracker(store)
    running = tracker.create_run("scratch", "unsealed", params={}, tags={})
    with pytest.raises(TrackingError, match="not sealed"):
        reproduce(running, tracker=Tracker(store))
    tampered = execute_run(RunRequest(ROOT / "params" / "bm25.yaml"), Tracker(store)).run_id
    tracker.client.log_param(tampered, "injected", "1")  # behind rageval's back
    with pytest.raises(VerificationError, match="injected"):
        reproduce(tampered, tracker=Tracker(store))


def test_a_commit_the_repository_lacks_is_refused(bm25_run, store, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q")
    git(other, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-q", "--allow-empty", "-m", "x")
    with pytest.raises(ReproductionError, match="is not in the repository"):
        reproduce(bm25_run, tracker=Tracker(store), repo=other)


def test_stage_comparison_reports_score_drift_of_neural_stages_only():
    import pandas as pd

    def ranking(stage, chunks, scores):
        return pd.DataFrame(
            {"query_id": "q", "rank": range(1, len(chunks) + 1), "chunk_id": chunks, "score": scores, "stage": stage}
        )

    before = pd.concat([ranking("bm25", ["a", "b"], [2.0, 1.0]), ranking("dense", ["a", "b"], [0.9, 0.5])])
    after = pd.concat([ranking("bm25", ["a", "b"], [2.0, 1.0]), ranking("dense", ["a", "b"], [0.90001, 0.5])])
    config = {
        "retrieval": {
            "stages": [
                {"type": "bm25"},
                {"type": "dense"},
                {"type": "fusion", "inputs": ["bm25", "dense"]},
                {"type": "dedup"},
            ]
        }
    }
    assert neural_stages(RetrievalConfig.model_validate(config["retrieval"]).stages) == {
        "dense",
        "fusion",
        "dedup",
        "context",
    }
    bm25, dense = compare_rankings(before, after, {"dense"})
    assert bm25.identical and bm25.deterministic
    assert not dense.identical and not dense.deterministic and dense.max_score_difference == pytest.approx(1e-5)


def test_a_run_from_a_dirty_tree_records_its_diff_and_reproduces_only_when_allowed(project, store):
    init = project / "rageval" / "__init__.py"
    original = init.read_text()
    init.write_text(original + "\n# a local, uncommitted change\n")
    try:
        run_id = execute_run(RunRequest(project / "params" / "bm25.yaml"), Tracker(store)).run_id
    finally:
        init.write_text(original)
    tracker = Tracker(store)
    assert tracker.run(run_id).tags["rageval.git.dirty"] == "true"
    with pytest.raises(ReproductionError, match="dirty working tree"):
        reproduce(run_id, tracker=Tracker(store), repo=project)
    result = reproduce(run_id, tracker=Tracker(store), repo=project, allow_dirty=True)
    assert result.verdict == "identical"
    record = tracker.run(result.record)
    assert record.tags["rageval.reproduce.dirty"] == "true"
    with tempfile.TemporaryDirectory() as tmp:
        patch = tracker.download_sealed(result.record, "git/diff.patch", Path(tmp)).read_text()
    assert "+# a local, uncommitted change" in patch


@pytest.mark.server
def test_a_run_on_the_shared_server_reproduces_identically(project, mlflow_server):
    from servers import fresh_experiment

    uri = mlflow_server.tracking_uri
    run = execute_run(RunRequest(project / "params" / "bm25.yaml", experiment=fresh_experiment("reproduce")), Tracker(uri)).run_id
    result = reproduce(run, tracker=Tracker(uri), repo=project)
    assert result.verdict == "identical" and result.reproduced
    tracker = Tracker(uri)
    for run_id in (result.record, result.reproduction):
        assert tracker.run(run_id).sealed and tracker.verify(run_id) == []
