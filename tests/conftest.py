"""Shared fixtures: a tiny inline benchmark, the real-data folder, an isolated MLflow store."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from servers import mlflow_server  # noqa: F401  (the session's real tracking server, for any test)

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "datasets"
DEMO = ROOT / "rageval" / "demo"

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")


def shared(*parts: str) -> Path:
    """A path under ../shared/datasets; skips the test with the reason where it is absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"real-data test: {path} is absent (CI has ../shared/datasets beside the checkout)")
    return path


DOCS = [
    {
        "id": "alpha",
        "title": "Alpha",
        "text": "# Alpha\n\nAlpha retries the publish after a cache failure.\n\n## Limits\n\nAt most three retries.",
    },
    {"id": "beta", "title": "Beta", "text": "Beta explains webhooks and signing secrets.", "acl": ["security"]},
    {"id": "gamma", "title": "Gamma", "text": "Gamma is about billing plans and invoices."},
]
CASES = [
    {
        "queryId": "q1",
        "query": "publish retry cache",
        "corpusVersion": "tiny-1",
        "relevant": [{"documentId": "alpha", "grade": 3, "start": 9, "end": 57}],
        "slice": ["frequent"],
        "split": "dev",
    },
    {
        "queryId": "q2",
        "query": "webhook signing",
        "corpusVersion": "tiny-1",
        "relevant": [{"documentId": "beta", "grade": 2}, {"documentId": "gamma", "grade": 0}],
        "slice": ["long-tail"],
        "split": "dev",
        "principal": ["security"],
    },
    {
        "queryId": "q3",
        "query": "quantum teleport",
        "corpusVersion": "tiny-1",
        "relevant": [],
        "slice": ["unanswerable"],
        "split": "release",
    },
]


def write_tiny(
    root: Path,
    documents=DOCS,
    cases=CASES,
    spec_overrides=None,
    raw_docs: str | None = None,
    raw_cases: str | None = None,
) -> Path:
    """Write a small passage-unit benchmark and record its hashes (then tests may corrupt it)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "documents.jsonl").write_text(
        raw_docs if raw_docs is not None else "".join(json.dumps(d) + "\n" for d in documents)
    )
    (root / "cases.jsonl").write_text(
        raw_cases if raw_cases is not None else "".join(json.dumps(c) + "\n" for c in cases)
    )
    write_spec(root, spec_overrides)
    return root


def write_spec(root: Path, spec_overrides=None) -> None:
    """The tiny benchmark's benchmark.yaml, recording the data files' current hashes (so that a
    data file a test or the fuzzer mutated is read, not refused for its hash)."""
    from rageval.benchmark.loading import hash_files

    spec = {
        "name": "tiny",
        "version": "1.0.0",
        "corpusVersion": "tiny-1",
        "relevanceUnit": "passage",
        "splits": ["dev", "release"],
        "files": hash_files(root),
        **(spec_overrides or {}),
    }
    (root / "benchmark.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))


# The slowest files, first: the demo's file, whose long test (114 s) nothing can split, then by summed test
# time (the mean of three runs of the suite on 2026-12-03: 146 s for test_faults down to 52 s for
# test_release). With xdist's own reordering off, it hands a worker whole files in collection order:
# the long ones start first and the short ones fill the end, where xdist's order (most tests first)
# put the two-test demo file near the end.
SLOWEST_FIRST = [
    "test_demo.py",
    "test_faults.py",
    "test_tamper.py",
    "test_registry.py",
    "test_server.py",
    "test_distributed.py",
    "test_judge_llm.py",
    "test_papermill_door.py",
    "test_kill.py",
    "test_attacks.py",
    "test_faults_outage.py",
    "test_reproduce.py",
    "test_experience.py",
    "test_frameworks.py",
    "test_release.py",
]


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist is loaded (not with -p no:xdist)
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: place for place, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: a file's tests stay together


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    return write_tiny(tmp_path / "tiny")


@pytest.fixture(scope="session", autouse=True)
def isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Tests never read or fill the user's content-addressed cache (notebook kernels inherit this)."""
    folder = tmp_path_factory.mktemp("rageval-cache")
    os.environ["RAGEVAL_CACHE"] = str(folder)
    return folder


@pytest.fixture(scope="session")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One sqlite tracking store for the session (creating one costs seconds)."""
    return f"sqlite:///{tmp_path_factory.mktemp('mlruns') / 'mlflow.db'}"
