"""The gate's latency rules: the candidate's p95 as a multiple of the baseline's, both timed by the
gate in one process on one machine (see :mod:`rageval.experiment.latency`), and an absolute budget
applied only on the hardware the policy declares.

- ``latency``: a candidate fails when the ratio is over its limit *and* the paired bootstrap
  interval of the ratio lies above 1. The limit is ``max_p95_ratio`` when the candidate runs the
  baseline's stages (types and models: a tuning change), ``max_p95_ratio_changed_stages`` when it
  runs others (a new retriever or reranker).
- ``latency_p95_ms``: a budget on the candidate's p95 wall time measured so, on the declared
  ``hardware`` only (elsewhere: "not applied").
- The runs' recorded p95 latencies are reported as information.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rageval.analysis.gate_policy import GatePolicy, Hardware, LatencyRule, RuleResult, Verdict


@dataclass(frozen=True)
class LatencyEvidence:
    """Both arms timed by the gate: per query (index), each arm's median over the rounds in ms
    (columns ``baseline``, ``candidate``); whether the candidate runs the baseline's stages; the
    machine (see :func:`rageval.experiment.latency.machine`); and the rounds."""

    per_query: pd.DataFrame
    same_stages: bool
    machine: Mapping[str, object]
    rounds: int
    clock: str = "cpu"
    wall: pd.DataFrame | None = None  # the same medians by the wall clock, for the absolute budget


def p95_ratio(
    baseline: np.ndarray, candidate: np.ndarray, *, confidence: float, resamples: int, seed: int
) -> tuple[float, float, float]:
    """Candidate p95 / baseline p95 and its paired percentile bootstrap interval (queries resampled
    together, so each query's two times stay a pair)."""
    from scipy import stats

    def ratio(b: np.ndarray, c: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.percentile(c, 95, axis=axis) / np.percentile(b, 95, axis=axis)

    found = stats.bootstrap(
        (baseline, candidate),
        ratio,
        paired=True,
        vectorized=True,
        confidence_level=confidence,
        n_resamples=resamples,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    return (
        float(ratio(baseline, candidate)),
        float(found.confidence_interval.low),
        float(found.confidence_interval.high),
    )


def latency_rules(
    policy: GatePolicy, evidence: LatencyEvidence | None, recorded: Mapping[str, float | None]
) -> list[RuleResult]:
    """The measured ratio, the absolute budget where the hardware is the declared one, and the
    runs' recorded p95 (information: measured where and when each run ran)."""
    rules = []
    if policy.latency is not None:
        rules.append(_ratio_rule(policy.latency, evidence, policy.seed))
    if policy.latency_p95_ms is not None and policy.hardware is not None:
        rules.append(_ms_budget_rule(policy.latency_p95_ms, policy.hardware, evidence))
    shown = {arm: value for arm, value in recorded.items() if value is not None and not np.isnan(value)}
    if shown:
        rules.append(
            RuleResult(
                "recorded p95 latency",
                "info",
                "as the runs recorded it, where and when each ran (not compared): "
                + ", ".join(f"{arm} {value:.1f} ms" for arm, value in shown.items()),
                shown.get("candidate"),
                None,
            )
        )
    return rules


def _ratio_rule(rule: LatencyRule, evidence: LatencyEvidence | None, seed: int) -> RuleResult:
    """Candidate p95 / baseline p95: fails over the limit when the interval lies above 1."""
    same = evidence is None or evidence.same_stages
    kind = "max_p95_ratio" if same else "max_p95_ratio_changed_stages"
    limit = rule.max_p95_ratio if same else rule.max_p95_ratio_changed_stages
    if evidence is None or not len(evidence.per_query):
        return RuleResult("latency p95 ratio", "fail", "no query was timed: the ratio cannot be checked", None, limit)
    frame, here = evidence.per_query, evidence.machine
    before, after = (float(np.percentile(frame[arm], 95)) for arm in ("baseline", "candidate"))
    value, low, high = p95_ratio(
        frame["baseline"].to_numpy(),
        frame["candidate"].to_numpy(),
        confidence=rule.confidence,
        resamples=rule.resamples,
        seed=seed,
    )
    said = (
        f"p95 {before:.2f} → {after:.2f} ms, ratio {value:.2f} ({rule.confidence:.0%} CI {low:.2f}–{high:.2f}); "
        f"median paired difference {float((frame['candidate'] - frame['baseline']).median()):+.2f} ms; "
        f"{len(frame)} queries × {evidence.rounds} rounds, timed here interleaved, {evidence.clock} clock "
        f"({here.get('cpus')} CPUs, load {here.get('load_1min')})"
    )
    stages = "the baseline's stages" if same else "other stages than the baseline"
    verdict: Verdict
    if limit is None:
        verdict, why = "info", f"no {kind} set for a candidate with {stages}"
    elif value > limit and low > 1:
        verdict, why = "fail", f"over the {kind} {limit:g} (candidate with {stages}), and slower beyond noise"
    elif value > limit:
        verdict, why = "pass", f"over the {kind} {limit:g}, but the interval reaches 1: not slower beyond noise"
    else:
        verdict, why = "pass", f"within the {kind} {limit:g} (candidate with {stages})"
    return RuleResult("latency p95 ratio", verdict, f"{said}: {why}", value, limit)


def _ms_budget_rule(budget: float, hardware: Hardware, evidence: LatencyEvidence | None) -> RuleResult:
    """The candidate's p95 wall time against ``latency_p95_ms``, on the declared hardware only."""
    label = hardware.name or "the declared hardware"
    differs = hardware.differences(evidence.machine) if evidence is not None else []
    wall = evidence.wall if evidence is not None else None
    p95 = float(np.percentile(wall["candidate"], 95)) if wall is not None and len(wall) else None
    if differs:
        reason = f"not applied: this machine is not the declared hardware ({label}: {'; '.join(differs)})"
        return RuleResult("p95 latency budget", "info", reason, p95, budget)
    if p95 is None:
        return RuleResult(
            "p95 latency budget", "fail", "no query was timed: the budget cannot be checked", None, budget
        )
    ok = p95 <= budget
    reason = f"{p95:.1f} ms p95 wall time measured here on {label} {'within' if ok else 'over'} the budget {budget:g}"
    return RuleResult("p95 latency budget", "pass" if ok else "fail", reason, p95, budget)
