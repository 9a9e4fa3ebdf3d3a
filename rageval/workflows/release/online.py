"""``rageval online``: read an A/B cohort's log under its import policy, analyse it under the metrics
file, and record the decision as a sealed online run (``rageval.kind=online``); and
``rageval online simulate``: a simulated log from two sealed runs and their benchmark.

What reaches the store: aggregates per arm and metric, the decision, both policy files and the log's
sha256 — never the log's units (they fall under the retention date, the run does not) and never query
text (the log holds none: :class:`rageval.release.online.OnlineEvent` refuses it)."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from rageval.benchmark.loading import load_benchmark
from rageval.config.load import config_from_yaml
from rageval.errors import ComparisonError
from rageval.hashing import sha256_file, sha256_text
from rageval.io import make_folder
from rageval.paths import project_root
from rageval.release.marks import POLICY_TAG, VERDICT_TAG
from rageval.release.online import (
    ImportPolicy,
    MetricsPolicy,
    OnlineEvent,
    analyze,
    events_frame,
    load_events,
    load_import_policy,
    load_metrics_policy,
    sample_ratio,
)
from rageval.release.online_decision import OnlineDecision, decide_online
from rageval.release.simulate_online import Simulation, simulate
from rageval.safety import csv_bytes
from rageval.tracking.records import NOTE_TAG, RELEASE_EXPERIMENT, role_tags
from rageval.tracking.store import RunInfo, Tracker
from rageval.workflows.guards import sealed_and_intact, today_override
from rageval.workflows.provenance import RAGEVAL_VERSION, git_state

EXPERIMENT = RELEASE_EXPERIMENT  # with the rest of the release path


@dataclass(frozen=True)
class OnlineOutcome:
    run_id: str
    experiment: str
    sealed: str
    decision: OnlineDecision
    simulated: bool


def _config_name(info: RunInfo) -> str:
    return info.tags.get("rageval.config.label") or info.tags.get("rageval.config.name", "")


@dataclass(frozen=True)
class _Cohort:
    """An A/B cohort read under its policies and decided: everything its online run is made of."""

    log: Path
    policy_file: Path
    metrics_file: Path
    policy: ImportPolicy
    metrics: MetricsPolicy
    events: list[OnlineEvent]
    arms: dict[str, RunInfo]  # baseline, candidate: both or neither
    decision: OnlineDecision
    summary: dict[str, Any]  # the log's units, arms, time span, segments, sha256

    @property
    def simulated(self) -> bool:
        return bool(self.events[0].simulated)


def execute_online(
    log: str | Path,
    policy_file: str | Path,
    metrics_file: str | Path,
    *,
    tracker: Tracker,
    baseline: str | None = None,
    candidate: str | None = None,
    experiment: str | None = None,
    today: dt.date | None = None,
) -> OnlineOutcome:
    """Analyse the cohort in ``log`` and record a sealed online run. ``baseline``/``candidate`` name
    the sealed evaluation runs of the two arms' configurations (checked sealed and intact), so that a
    release can check that this evidence concerns the configurations it promotes."""
    log, policy_file, metrics_file = Path(log), Path(policy_file), Path(metrics_file)
    policy = load_import_policy(policy_file, today or dt.date.today())  # first: no unit is read without its policy
    metrics = load_metrics_policy(metrics_file)
    events = load_events(log)
    arms = {
        role: sealed_and_intact(tracker, run) for role, run in (("baseline", baseline), ("candidate", candidate)) if run
    }
    if len(arms) == 1:
        raise ComparisonError("give both --baseline and --candidate runs, or neither")
    frame = events_frame(events)
    decision = decide_online(analyze(frame, metrics), sample_ratio(frame, metrics), metrics)
    summary = _log_summary(log, events, frame, decision)
    cohort = _Cohort(log, policy_file, metrics_file, policy, metrics, events, arms, decision, summary)
    name = experiment or EXPERIMENT
    run_id = tracker.create_run(
        name,
        f"online {metrics.name}: {decision.verdict}" + (" (simulated)" if cohort.simulated else ""),
        # No params: the metrics policy is metrics.yaml (its name the tag rageval.policy), the import
        # policy import_policy.yaml, the log's units and sha256 decision.json (docs/records.md).
        params={},
        tags=_online_tags(cohort, today_override(today)),
        files={
            "decision.json": json.dumps(_online_record(cohort), indent=2, default=str).encode(),
            "results.csv": csv_bytes(decision.table()),
            "metrics.yaml": metrics_file.read_bytes(),
            "import_policy.yaml": policy_file.read_bytes(),
        },
    )
    try:
        tracker.log_tables(run_id, {"online_results": decision.table()})  # results.csv as a table the UI shows
        tracker.log_metrics(run_id, _online_metrics(cohort))
        digest = tracker.seal(run_id)
    except Exception as exc:
        tracker.fail(run_id, f"sealing failed: {type(exc).__name__}: {exc}")
        raise
    return OnlineOutcome(run_id, name, digest, decision, cohort.simulated)


def _log_summary(log: Path, events: list[OnlineEvent], frame: pd.DataFrame, decision: OnlineDecision) -> dict[str, Any]:
    """What decision.json says of the log: its units per arm, time span, segments, sha256."""
    return {
        "units": len(events),
        "per_arm": decision.sample_ratio.counts,
        "first": frame["time"].min().isoformat(),
        "last": frame["time"].max().isoformat(),
        "segments": sorted({e.segment for e in events if e.segment}),
        "sha256": sha256_file(log),
        "simulated": bool(events[0].simulated),
    }


def _online_record(cohort: _Cohort) -> dict[str, Any]:
    """decision.json: the verdict and its reasons, every metric, the log, both policies, the arms."""
    decision, policy, metrics = cohort.decision, cohort.policy, cohort.metrics
    return {
        "verdict": decision.verdict,
        "reasons": decision.reasons,
        "sequential": decision.sequential,
        "sample_ratio": asdict(decision.sample_ratio),
        "metrics": [{**asdict(r), **asdict(v)} for r, v in zip(decision.results, decision.verdicts, strict=True)],
        "log": {"file": cohort.log.name, **cohort.summary},
        "import_policy": {
            "file": str(cohort.policy_file),
            "sha256": sha256_file(cohort.policy_file),
            "authorization": policy.authorization,
            "redaction": policy.redaction.model_dump(),
            "retention": policy.retention.isoformat(),
        },
        "metrics_policy": {
            "name": metrics.name,
            "file": str(cohort.metrics_file),
            "sha256": sha256_file(cohort.metrics_file),
        },
        "arms": {
            role: {"run_id": info.run_id, "config_name": _config_name(info)} for role, info in cohort.arms.items()
        },
    }


def _online_tags(cohort: _Cohort, overridden: dict[str, str]) -> dict[str, Any]:
    decision, metrics, arms, simulated = (
        cohort.decision,
        cohort.metrics,
        cohort.arms,
        cohort.simulated,
    )
    label = "simulated online cohort" if simulated else "online cohort"
    note = (
        f"{'SIMULATED (synthetic units, not real users). ' if simulated else ''}{label} under {metrics.name}: "
        f"{decision.verdict.upper()}. " + " ".join(decision.reasons)
    )
    tags = {
        **git_state(project_root()),
        "rageval.version": RAGEVAL_VERSION,
        "rageval.kind": "online",
        "rageval.simulated": str(simulated).lower(),
        **overridden,
        VERDICT_TAG: decision.verdict,
        POLICY_TAG: metrics.name,
        NOTE_TAG: note[:4000],
    }
    if arms:
        tags |= role_tags(arms["baseline"].run_id, [arms["candidate"].run_id])
        cand_tags = arms["candidate"].tags
        tags |= {k: cand_tags[k] for k in ("rageval.benchmark.name", "rageval.benchmark.version") if k in cand_tags}
    return tags


def _online_metrics(cohort: _Cohort) -> dict[str, float]:
    decision = cohort.decision
    values = {
        "passed": float(decision.passed),
        "units": float(len(cohort.events)),
        "srm_p_value": decision.sample_ratio.p_value,
        "rules_failed": float(sum(v.verdict == "fail" for v in decision.verdicts)),
    }
    # Per arm its units, per metric its difference, interval, p-value and verdict: the rows of
    # results.csv and decision.json (tables/online_results), not metric keys: the runs table stays
    # readable (docs/records.md).
    return values


def simulate_log(
    baseline: str, candidate: str, out: str | Path, simulation: Simulation, *, tracker: Tracker
) -> tuple[Path, int]:
    """Write a simulated cohort's log (JSONL, every unit ``simulated: true``) from two sealed runs'
    rankings and their benchmark's judgments; returns the path and the number of units."""
    infos = {role: sealed_and_intact(tracker, run) for role, run in (("baseline", baseline), ("candidate", candidate))}
    rankings = {}
    config_yaml = ""
    for role, info in infos.items():
        artifacts = tracker.run_artifacts(info.run_id)
        config_yaml = config_yaml or artifacts.config_yaml
        frame = artifacts.rankings.sort_values(["query_id", "rank"], kind="stable")
        # The documents in order of their best chunk: a user sees a document once.
        rankings[role] = {
            str(q): list(dict.fromkeys(group["parent_id"].astype(str))) for q, group in frame.groupby("query_id")
        }
    benchmark = load_benchmark(config_from_yaml(config_yaml).benchmark)
    grades: dict[str, dict[str, int]] = {}
    hashes = {}
    for case in benchmark.cases:
        hashes[case.queryId] = sha256_text(case.query)
        for judgment in case.relevant:
            best = grades.setdefault(case.queryId, {})
            best[judgment.documentId] = max(best.get(judgment.documentId, 0), judgment.grade)
    records = simulate(rankings, grades, hashes, simulation)
    out = Path(out)
    make_folder(out.parent)
    text = "".join(json.dumps({k: v for k, v in r.items() if v is not None}) + "\n" for r in records)
    out.write_text(text, encoding="utf-8")
    # The knobs beside the log, so that the synthetic cohort can be told apart and regenerated.
    knobs = {"simulated": True, "baseline": baseline, "candidate": candidate, **simulation.model_dump(mode="json")}
    out.with_name(out.name + ".simulation.json").write_text(json.dumps(knobs, indent=2) + "\n")
    return out, len(records)
