"""Issue 28 item 9: multi-step registry and pool operations are crash-consistent. A process is
really killed (SIGKILL, through the documented test hook RAGEVAL_TEST_CRASH_AT, read when a step is
reached) at each step of moving the champion aliases; the next command finds what was left, names
it, and finishes it (its record sealed) or drops it (never sealed: nothing had moved). Aliases never
stand moved without a sealed record. A pool killed while it was written is not taken for a pool."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from conftest import ROOT

from rageval.errors import TrackingError
from rageval.tracking.registry import CHAMPION, CRASH_AT_VARIABLE, INTENT_TAG, PREVIOUS, Registry, crash_point
from rageval.tracking.store import Tracker

STEPS_BEFORE_SEAL = ["intent"]
STEPS_AFTER_SEAL = ["sealed", "history", "champion", "tags"]

ROLLBACK = """
import sys
from rageval.tracking.registry import Registry
from rageval.tracking.store import Tracker
store, family, run = sys.argv[1:4]
Registry(Tracker(store)).move_champions(family, ["1"], run, version_tags={"2": {"rageval.rolled_back_by": run}})
print("moved")
"""


def two_champions(tracker: Tracker, family: str) -> str:
    """A registered model with versions 1 and 2 (2 champion, 1 previous) and an unsealed rollback
    record run, as ``execute_rollback`` has them when it starts moving the aliases."""
    registry = Registry(tracker)
    registry.ensure_model(family, "crash tests")
    for n in (1, 2):
        run = tracker.create_run("crash", f"{family}-eval-{n}", params={}, tags={})
        tracker.seal(run)
        registry.register(family, run, {})
    registry.set_champions(family, ["1", "2"])
    return tracker.create_run("crash", f"rollback {family}", params={}, tags={"rageval.kind": "rollback"})


def rollback_killed_at(store: str, family: str, run: str, step: str | None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(CRASH_AT_VARIABLE, None)
    if step:
        env[CRASH_AT_VARIABLE] = step
    return subprocess.run(
        [sys.executable, "-c", ROLLBACK, store, family, run], env=env, capture_output=True, text=True, timeout=120
    )


def state(registry: Registry, family: str) -> tuple[list[str], str | None, str | None, bool]:
    champion, previous = registry.alias(family, CHAMPION), registry.alias(family, PREVIOUS)
    pending = INTENT_TAG in registry.client.get_registered_model(family).tags
    return (
        registry.history(family),
        champion.version if champion else None,
        previous.version if previous else None,
        pending,
    )


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('crash') / 'mlflow.db'}"


@pytest.mark.e2e
@pytest.mark.parametrize("step", STEPS_BEFORE_SEAL + STEPS_AFTER_SEAL + ["previous-not-reached", None])
def test_a_rollback_killed_at_any_step_is_finished_or_dropped_by_the_next_command(store, step):
    tracker = Tracker(store)
    registry = Registry(tracker)
    family = f"crash-{step or 'none'}"
    run = two_champions(tracker, family)
    done = rollback_killed_at(store, family, run, step)
    if step is None or step == "previous-not-reached":  # no kill: the move completes in one go
        assert done.returncode == 0 and "moved" in done.stdout, done.stderr
        assert state(registry, family) == (["1"], "1", None, False) and tracker.run(run).sealed
        assert registry.resume(family) is None
        return
    assert done.returncode == -signal.SIGKILL, done.stderr
    sealed = tracker.run(run).sealed
    history, champion, previous, pending = state(registry, family)
    assert pending  # the intent names what was under way
    # Aliases never stand moved without a sealed record.
    assert sealed or (history, champion, previous) == (["1", "2"], "2", "1")
    assert sealed == (step in STEPS_AFTER_SEAL)

    with pytest.raises(TrackingError) as raised:
        registry.settle(family)  # what promote and rollback call first
    text = str(raised.value)
    assert "Nothing else was done; run the command again" in text and run in text
    if sealed:
        assert "is completed now (champion v1" in text
        assert state(registry, family) == (["1"], "1", None, False)
        assert registry.get(family, "2").tags["rageval.rolled_back_by"] == run
    else:
        assert "no alias had moved" in text
        assert state(registry, family) == (["1", "2"], "2", "1", False)
    registry.settle(family)  # settled: the next command goes ahead


def test_the_crash_hook_is_inert_unless_it_names_the_step(monkeypatch):
    monkeypatch.delenv(CRASH_AT_VARIABLE, raising=False)
    crash_point("intent")
    monkeypatch.setenv(CRASH_AT_VARIABLE, "another-step")
    crash_point("intent")  # still alive
    source = (ROOT / "rageval" / "tracking" / "registry.py").read_text()
    assert source.count("os.environ.get(CRASH_AT_VARIABLE)") == 1  # read in crash_point only, at call time


# --------------------------------------------------------------------------- judge pool


POOL = """
import sys
from rageval.judging import sheets
from rageval.judging.schema import PoolManifest
from pathlib import Path
import json
manifest = PoolManifest.model_validate(json.loads(Path(sys.argv[2]).read_text()))
real = sheets.sheet_csv
def die_after_csv(rows):
    data = real(rows)
    if sys.argv[3] == "kill":
        import os, signal
        os.kill(os.getpid(), signal.SIGKILL)
    return data
sheets.sheet_csv = die_after_csv
from rageval.judging.pooling import Pool
sheets.write_pool(Pool(manifest, []), sys.argv[1])
print("written")
"""


def test_a_pool_killed_while_written_is_no_pool_and_a_rerun_writes_it(tmp_path):
    manifest = {
        "benchmark": "demo",
        "version": "1.0.0",
        "cases": "0" * 64,
        "path": "x",
        "relevanceUnit": "document",
        "split": "dev",
        "depth": 3,
        "seed": 0,
        "created": "2026-01-01",
        "runs": ["r1"],
        "rubric": {"0": "no", "1": "yes"},
        "items": [],
    }
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    out = tmp_path / "pool"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [sys.executable, "-c", POOL, str(out), str(tmp_path / "manifest.json")]
    killed = subprocess.run([*args, "kill"], env=env, capture_output=True, text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not (out / "pool.json").exists()  # the manifest is written last: a half-written pool is none
    again = subprocess.run([*args, "ok"], env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "written" in again.stdout, again.stderr
    assert json.loads((out / "pool.json").read_text())["runs"] == ["r1"]
    assert (out / "sheet.csv").is_file() and (out / "sheet.jsonl").is_file()
    leftovers = [p.name for p in out.iterdir() if p.name not in {"pool.json", "sheet.csv", "sheet.jsonl"}]
    assert leftovers == []
