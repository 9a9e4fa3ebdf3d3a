"""``rageval gate``: decide whether a candidate may replace the baseline under a policy, and record
the decision as a sealed gate run. A policy with latency rules has both runs' pipelines rebuilt
from their recorded configurations and timed here side by side (:mod:`rageval.experiment.latency`);
the timing table is recorded with the decision."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from rageval.analysis import (
    CONTRACT_TAGS,
    Decision,
    check_comparable,
    check_policy_against,
    decide,
    load_policy,
    query_slices,
    require_release,
    total_p95_ms,
    wide_scores,
)
from rageval.analysis.comparison import refuse_failed_queries
from rageval.analysis.gate import GateEvidence, GatePolicy, LatencyEvidence, LatencyRule
from rageval.analysis.records import RunArtifacts, RunInfo
from rageval.benchmark.loading import load_benchmark
from rageval.benchmark.schema import RELEASE_SPLIT
from rageval.config.load import config_from_yaml
from rageval.config.schema import RunConfig
from rageval.errors import ComparisonError
from rageval.experiment.latency import PairedTimings, TimingRequest, machine, per_query_ms, sample_queries, time_paired
from rageval.hashing import sha256_bytes
from rageval.paths import project_root
from rageval.release.marks import POLICY_TAG, VERDICT_TAG
from rageval.safety import csv_bytes
from rageval.tracking.notes import gate_note
from rageval.tracking.records import NOTE_TAG, PARENT_TAG, RELEASE_EXPERIMENT, role_tags, sweep_parent
from rageval.tracking.store import Tracker
from rageval.workflows.guards import sealed_and_intact
from rageval.workflows.provenance import RAGEVAL_VERSION, git_state


@dataclass(frozen=True)
class GateOutcome:
    run_id: str
    experiment: str
    sealed: str
    decision: Decision


@dataclass(frozen=True)
class _Gate:
    """What a gate decided, and from what: everything its record is made of."""

    policy: GatePolicy
    policy_file: Path
    policy_bytes: bytes
    infos: dict[str, RunInfo]  # baseline, candidate
    base: RunArtifacts
    cand: RunArtifacts
    decision: Decision
    count: int  # release evaluations of the candidate's family
    recorded: dict[str, Any]  # each run's recorded latency p95
    timings: PairedTimings | None
    evidence: LatencyEvidence | None

    @property
    def baseline(self) -> str:
        return self.infos["baseline"].run_id

    @property
    def candidate(self) -> str:
        return self.infos["candidate"].run_id


def execute_gate(
    baseline: str,
    candidate: str,
    policy_file: str | Path,
    *,
    tracker: Tracker,
    experiment: str | None = None,
) -> GateOutcome:
    """Decide whether ``candidate`` may replace ``baseline`` under a policy; record the decision
    as a sealed run. Only sealed, intact, comparable runs on the release split are accepted."""
    gate = _decide(tracker, baseline, candidate, Path(policy_file))
    name = experiment or RELEASE_EXPERIMENT  # the release path together; the tags name both runs
    decision, infos = gate.decision, gate.infos
    run_id = tracker.create_run(
        name,
        f"gate {gate.policy.name}: {infos['candidate'].name} vs {infos['baseline'].name} → {decision.verdict}",
        # No params: the runs are the tags rageval.baseline / rageval.candidates, the policy's name
        # rageval.policy, the policy whole policy.yaml (sealed; its sha256 in decision.json).
        params={},
        tags=_gate_tags(gate),
        files={
            "decision.json": json.dumps(_decision_record(gate), indent=2, default=_plain).encode(),
            "rules.csv": csv_bytes(decision.table()),
            "results.md": results_markdown(gate).encode(),
            "largest_losses.csv": csv_bytes(decision.largest_losses),
            "policy.yaml": gate.policy_bytes,
            "baseline_config.yaml": gate.base.config_yaml.encode(),
            "candidate_config.yaml": gate.cand.config_yaml.encode(),
        },
    )
    try:
        if gate.timings is not None and gate.evidence is not None:
            tracker.log_tables(
                run_id,
                {
                    "latency_timings": gate.timings.calls,
                    "latency_per_query": gate.evidence.per_query.rename_axis("query_id").reset_index(),
                },
            )
        tracker.log_metrics(run_id, _gate_metrics(gate))
        digest = tracker.seal(run_id)
    except Exception as exc:
        tracker.fail(run_id, f"sealing failed: {type(exc).__name__}: {exc}")
        raise
    return GateOutcome(run_id, name, digest, decision)


def _decide(tracker: Tracker, baseline: str, candidate: str, policy_file: Path) -> _Gate:
    """Check both runs and the policy against them, time the pipelines when a latency rule asks,
    and decide."""
    policy = load_policy(policy_file)
    # Intact first: a run's tags (its split among them) are read only once its seal vouches for them.
    infos = {
        role: sealed_and_intact(tracker, run_id) for role, run_id in (("baseline", baseline), ("candidate", candidate))
    }
    for role, info in infos.items():
        require_release(info.tags, info.run_id, role)
    check_comparable(infos["baseline"], [infos["candidate"]])
    base, cand = tracker.run_artifacts(baseline), tracker.run_artifacts(candidate)
    refuse_failed_queries([("baseline", base.info, base.queries), ("candidate", cand.info, cand.queries)])
    before, after = wide_scores(base.per_query), wide_scores(cand.per_query)
    slices = query_slices(base.queries)
    check_policy_against(
        policy,
        [m for m in before.columns if m in after.columns],
        sorted({s for v in slices.values() for s in v}),
        str(policy_file),
    )
    metrics = {
        "permission_leaks": cand.info.metrics.get("permission_leaks"),
        "context_tokens_mean": cand.info.metrics.get("context_tokens_mean", float("nan")),
    }
    recorded = {
        role: run.info.metrics.get("latency/total/p95_ms", total_p95_ms(run.latency))
        for role, run in (("baseline", base), ("candidate", cand))
    }
    timings, evidence = measure_latency(policy, base, cand)
    tags = cand.info.tags
    family = tags.get("rageval.config.family") or tags.get("rageval.config.name", "")
    count = tracker.count_release_evaluations(
        tags.get("rageval.benchmark.name", ""), tags.get("rageval.benchmark.version", ""), family
    )
    weighed = GateEvidence(
        before,
        after,
        slices,
        metrics,
        baseline_run_id=baseline,
        candidate_run_id=candidate,
        release_evaluations=count,
        family=family,
        latency=evidence,
        recorded_latency=recorded,
    )
    decision = decide(policy, weighed)
    return _Gate(
        policy, policy_file, policy_file.read_bytes(), infos, base, cand, decision, count, recorded, timings, evidence
    )


def _rollback(gate: _Gate) -> dict[str, str]:
    """The baseline, to keep or restore: its run and its configuration (baseline_config.yaml)."""
    return {
        "run_id": gate.baseline,
        "run_name": gate.infos["baseline"].name,
        "config_name": gate.infos["baseline"].tags.get("rageval.config.name", ""),
        "config": "baseline_config.yaml",
    }


PAIRED_RULE = "latency p95 ratio"  # the rule that reads the pair timed here, interleaved


def results_markdown(gate: _Gate) -> str:
    """results.md: the verdict and every rule (as the run's description), then the latency a reader
    should quote: the pair timed here, interleaved (the comparison's results.md shows each run's
    recorded figure and points here), beside the recorded figures, which are not compared."""
    decision = gate.decision
    paired = [r.reason for r in decision.rules if r.rule == PAIRED_RULE]
    recorded = ", ".join(f"{arm} {_ms(gate.recorded.get(arm))}" for arm in ("baseline", "candidate"))
    lines = [
        gate_note(gate.infos["candidate"].name, gate.infos["baseline"].name, decision.verdict, decision.table()),
        "",
        "## Latency",
        "",
        f"- **Paired** (this gate, both arms timed interleaved on one machine): {paired[0]}"
        if paired
        else "- **Paired**: not timed (the policy has no latency rule, or it was not measured on this machine)",
        f"- Recorded by each run where and when it ran (noise beside other work, not compared): {recorded}",
        "",
    ]
    return "\n".join(lines)


def _ms(value: Any) -> str:
    return "unknown" if not isinstance(value, int | float) else f"{value:.1f} ms"


def _decision_record(gate: _Gate) -> dict[str, Any]:
    """decision.json: the verdict, the policy, both runs, every rule, the latency evidence."""
    decision, evidence, timings, tags = gate.decision, gate.evidence, gate.timings, gate.cand.info.tags
    rollback = _rollback(gate)
    return {
        "verdict": decision.verdict,
        "policy": {"name": gate.policy.name, "file": str(gate.policy_file), "sha256": sha256_bytes(gate.policy_bytes)},
        "baseline": rollback,
        "candidate": {
            "run_id": gate.candidate,
            "run_name": gate.infos["candidate"].name,
            "config_name": tags.get("rageval.config.label") or tags.get("rageval.config.name", ""),
        },
        "rules": [r.__dict__ for r in decision.rules],
        "largest_losses": decision.largest_losses.to_dict(orient="records"),
        "release_evaluations": gate.count,
        "latency": None
        if evidence is None
        else {
            "clock": evidence.clock,
            # each arm's p95 over the per-query medians; the ratio with its interval is the rule's
            "p95_ms": {arm: float(evidence.per_query[arm].quantile(0.95)) for arm in ("baseline", "candidate")}
            if len(evidence.per_query)
            else {},
            "machine": dict(evidence.machine),
            "same_stages": evidence.same_stages,
            "queries": len(evidence.per_query),
            "rounds": evidence.rounds,
            "warmup_queries": timings.warmup_queries if timings else 0,
            "build_and_warmup_s": timings.build_s if timings else {},
            "tables": ["tables/latency_timings.json", "tables/latency_per_query.json"] if timings else [],
        },
        "recorded_latency_p95_ms": gate.recorded,
        "warnings": decision.warnings,
        "rollback": f"keep or restore the baseline: run {gate.baseline} ({rollback['config_name']}), configuration in baseline_config.yaml",
    }


def _gate_tags(gate: _Gate) -> dict[str, str]:
    baseline, candidate, decision, tags = gate.baseline, gate.candidate, gate.decision, gate.cand.info.tags
    return {
        **git_state(project_root()),
        "rageval.version": RAGEVAL_VERSION,
        "rageval.kind": "gate",
        VERDICT_TAG: decision.verdict,
        POLICY_TAG: gate.policy.name,
        **role_tags(baseline, [candidate]),
        NOTE_TAG: gate_note(
            gate.infos["candidate"].name, gate.infos["baseline"].name, decision.verdict, decision.table()
        ),
        **({PARENT_TAG: parent} if (parent := sweep_parent(tags)) else {}),
        "rageval.benchmark.name": tags.get("rageval.benchmark.name", ""),
        "rageval.benchmark.version": tags.get("rageval.benchmark.version", ""),
        **({"rageval.warning.release": "\n".join(decision.warnings)[:4000]} if decision.warnings else {}),
    }


def _gate_metrics(gate: _Gate) -> dict[str, float]:
    decision, evidence = gate.decision, gate.evidence
    return {
        "passed": float(decision.passed),
        "rules_failed": sum(r.verdict == "fail" for r in decision.rules),
        "rules_warned": sum(r.verdict == "warn" for r in decision.rules),
        "release_evaluations": gate.count,
        # the paired p95 ratio only (no "/": the chart view's one section); each arm's p95 is in
        # decision.json's latency, every timed call in tables/latency_timings
        **{
            f"p95_{evidence.clock}_ratio": r.value
            for r in decision.rules
            if evidence is not None and r.rule == "latency p95 ratio" and r.value is not None
        },
    }


def stage_signature(config: RunConfig) -> list[tuple[str, str | None]]:
    """What a pipeline runs, parameters aside: each stage's type and model."""
    return [(stage.type, getattr(stage, "model", None)) for stage in config.retrieval.stages]


def measure_latency(
    policy: GatePolicy, base: RunArtifacts, cand: RunArtifacts
) -> tuple[PairedTimings | None, LatencyEvidence | None]:
    """Time both runs' pipelines here when a latency rule needs it (the ratio, or the absolute
    budget on its declared hardware); the evidence carries the machine either way."""
    if policy.latency is None and policy.latency_p95_ms is None:
        return None, None
    here = machine()
    base_config, cand_config = config_from_yaml(base.config_yaml), config_from_yaml(cand.config_yaml)
    same = stage_signature(base_config) == stage_signature(cand_config)
    budget_applies = policy.hardware is not None and not policy.hardware.differences(here)
    if policy.latency is None and not budget_applies:
        return None, LatencyEvidence(pd.DataFrame(columns=["baseline", "candidate"]), same, here, 0)
    rule = policy.latency or LatencyRule()
    benchmark = load_benchmark(base_config.benchmark)
    changed = [
        CONTRACT_TAGS[tag]
        for tag in ("rageval.hash.corpus", "rageval.hash.cases")
        if base.info.tags.get(tag) != benchmark.hashes[tag.rsplit(".", 1)[1]]
    ]
    if changed:
        raise ComparisonError(
            f"the benchmark at {benchmark.path} is not the version run {base.info.run_id} used "
            f"({', '.join(changed)} differ): the gate times both pipelines on it; check out that version"
        )
    queries = sample_queries(benchmark, RELEASE_SPLIT, rule.queries, policy.seed)
    request = TimingRequest(
        base_config,
        cand_config,
        benchmark,
        queries,
        rounds=rule.rounds,
        warmup=rule.warmup,
        seed=policy.seed,
        threads=rule.threads,
    )
    timings = time_paired(request)
    return timings, LatencyEvidence(
        per_query_ms(timings.calls, rule.clock),
        same,
        timings.machine,
        rule.rounds,
        rule.clock,
        per_query_ms(timings.calls, "wall"),
    )


def _plain(value: Any) -> Any:
    """JSON for numpy scalars in decision records."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")
