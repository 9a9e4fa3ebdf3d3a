"""Rolling a release slot back: the previous champion's bundle re-checked against its evaluation
run's rankings on a sample, then the aliases moved back (``rageval registry rollback``), recorded
as a sealed rollback run."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pandas as pd

from rageval.errors import TrackingError
from rageval.paths import project_root
from rageval.release.marks import VERDICT_TAG
from rageval.safety import csv_bytes
from rageval.tracking.records import RELEASE_EXPERIMENT
from rageval.tracking.registry import CHAMPION, HISTORY_TAG, PREVIOUS, Registry, Version
from rageval.tracking.store import Tracker
from rageval.workflows.provenance import RAGEVAL_VERSION, git_state
from rageval.workflows.release.registry import Check, verify_version


@dataclass(frozen=True)
class RollbackOutcome:
    run_id: str
    model: str
    passed: bool
    restored: Version
    rolled_back: Version
    check: Check


def _rollback_pair(registry: Registry, family: str) -> tuple[Version, Version, list[str]]:
    """The champion, the previous champion and the history a rollback moves between: refused when
    there is no previous one, or when the aliases were moved outside rageval."""
    registry.settle(family)
    history = registry.history(family)
    champion, previous = registry.alias(family, CHAMPION), registry.alias(family, PREVIOUS)
    if champion is None or previous is None or len(history) < 2:
        raise TrackingError(f"registered model {family!r} has no previous champion to roll back to")
    if (champion.version, previous.version) != (history[-1], history[-2]):
        raise TrackingError(
            f"registered model {family!r}: champion v{champion.version} and previous v{previous.version} are not "
            f"the top of its {HISTORY_TAG} {history}: the aliases were moved outside rageval; set them back "
            "(or promote a release) before rolling back"
        )
    return champion, previous, history


def execute_rollback(
    family: str, *, tracker: Tracker, sample: int = 20, seed: int = 0, experiment: str | None = None
) -> RollbackOutcome:
    """Move ``champion`` back to ``previous`` once that version's bundle, from the artifact store,
    reproduces its evaluation run's rankings on a sample; record a sealed rollback run (FAILED, the
    aliases untouched, when it does not)."""
    registry = Registry(tracker)
    champion, previous, history = _rollback_pair(registry, family)
    check = verify_version(tracker, previous, sample=sample, seed=seed)
    name = experiment or RELEASE_EXPERIMENT
    record = {
        "model": family,
        "from": champion.__dict__,
        "to": previous.__dict__,
        "history_before": history,
        "passed": check.passed,
        "problem": check.problem,
        "sample": {"asked": sample, "queries": check.queries, "seed": seed}
        | {"identical": check.identical, "differing": check.differing},
        "cache_hits": check.cache_hits,
    }
    sample_table = pd.DataFrame({"query_id": check.queries, "identical": [q in check.identical for q in check.queries]})
    run_id = tracker.create_run(
        name,
        f"rollback {family} v{champion.version} → v{previous.version}",
        params={},  # the slot is the tag rageval.registry.model, the sample and seed rollback.json
        tags={
            **git_state(project_root()),
            "rageval.version": RAGEVAL_VERSION,
            "rageval.kind": "rollback",
            "rageval.registry.model": family,
            "rageval.registry.from": champion.version,
            "rageval.registry.to": previous.version,
            # what the release checklist's last item looks for: the release it rolls back, the run restored
            "rageval.promotion.release": champion.tags.get("rageval.promotion.release", ""),
            "rageval.rollback.restored_run": previous.evaluation_run,
            VERDICT_TAG: "pass" if check.passed else "fail",
        },
        files={"rollback.json": json.dumps(record, indent=2).encode(), "sample.csv": csv_bytes(sample_table)},
    )
    try:
        tracker.log_metrics(run_id, {"sample_queries": len(check.queries), "identical": len(check.identical)})
    except Exception as exc:
        tracker.fail(run_id, f"recording failed: {type(exc).__name__}: {exc}")
        raise
    if not check.passed:
        reason = check.problem or f"rankings differ on {len(check.differing)} of {len(check.queries)} sampled queries"
        tracker.fail(run_id, f"rollback refused, aliases not moved: {reason}")
        return RollbackOutcome(run_id, family, False, previous, champion, check)
    try:  # sealed before any alias moves; a kill half way is finished by the next promote or rollback
        registry.move_champions(
            family, history[:-1], run_id, version_tags={champion.version: {"rageval.rolled_back_by": run_id}}
        )
    except Exception as exc:
        registry.fail_unsealed(run_id, f"rollback failed: {type(exc).__name__}: {exc}")
        raise
    return RollbackOutcome(run_id, family, True, previous, champion, check)
