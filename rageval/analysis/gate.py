"""The release gate: the decision a policy (:mod:`rageval.analysis.gate_policy`) gives, rule by rule.

:func:`decide` is pure: per-query scores and metrics in, a :class:`Decision` out, each rule with a
verdict (pass, fail, or warn) and the reason in words. Recording the decision is the runner's job.

Rules:

- ``measures``: per measure, every loss rule it sets (a measure fails when one fails):
  ``tolerance``, no statistically significant regression beyond it (the paired randomization test,
  Holm-adjusted over the policy's measures, gives p < ``alpha``); ``max_loss``, no mean loss beyond
  it, significant or not; ``ci_lower_above``, the delta's bootstrap interval lies above it
  (non-inferiority, :mod:`rageval.analysis.noninferiority`).
- ``critical_slices``: a slice's mean must reach ``min``, and the slice passes the same
  ``max_loss`` and ``ci_lower_above`` rules.
- ``permission_leaks``: at most this many chunks the asker may not see (default 0).
- ``latency``, ``latency_p95_ms``: the candidate's p95 against the baseline's, both timed by the
  gate, and an absolute budget on declared hardware (:mod:`rageval.analysis.gate_latency`);
  ``context_tokens_mean``: a budget on the candidate.
- ``max_release_evaluations``: past this many release evaluations of the candidate's configuration
  family, the decision warns that the release set is becoming training data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field

import numpy as np
import pandas as pd

from rageval.analysis.comparability import SPLIT_TAG
from rageval.analysis.gate_latency import LatencyEvidence, latency_rules, p95_ratio
from rageval.analysis.gate_policy import (
    LOSS_RULES,
    NONINFERIORITY_RULES,
    GatePolicy,
    Hardware,
    LatencyRule,
    MeasureRule,
    RuleResult,
    SliceRule,
    Verdict,
    check_policy_against,
    load_policy,
)
from rageval.analysis.noninferiority import noninferiority_rules
from rageval.analysis.paired import in_slice, paired, paired_deltas, paired_tests
from rageval.benchmark.schema import RELEASE_SPLIT
from rageval.errors import ComparisonError

# The policy's names stay importable from here, where callers have always found them.
__all__ = [
    "LOSS_RULES",
    "NONINFERIORITY_RULES",
    "RELEASE_SPLIT",
    "Decision",
    "GatePolicy",
    "Hardware",
    "LatencyEvidence",
    "LatencyRule",
    "MeasureRule",
    "RuleResult",
    "SliceRule",
    "Verdict",
    "check_policy_against",
    "decide",
    "load_policy",
    "p95_ratio",
    "release_warning",
    "require_release",
]


def require_release(tags: Mapping[str, str], run_id: str, role: str) -> None:
    """The gate decides on the frozen release split only."""
    split = tags.get(SPLIT_TAG)
    if split != RELEASE_SPLIT:
        raise ComparisonError(
            f"the gate accepts only runs on the '{RELEASE_SPLIT}' split; the {role} run {run_id} is on "
            f"'{split}'. Tune on dev, then evaluate the chosen configuration with --split {RELEASE_SPLIT}"
        )


@dataclass(frozen=True)
class Decision:
    policy: str
    baseline_run_id: str
    candidate_run_id: str
    rules: list[RuleResult]
    largest_losses: pd.DataFrame  # query_id, baseline, candidate, delta on the first measure
    warnings: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(r.verdict != "fail" for r in self.rules)

    @property
    def verdict(self) -> str:
        return "pass" if self.passed else "fail"

    def table(self) -> pd.DataFrame:
        return pd.DataFrame([r.__dict__ for r in self.rules], columns=["rule", "verdict", "reason", "value", "limit"])


def _measure_rules(policy: GatePolicy, baseline: pd.DataFrame, candidate: pd.DataFrame) -> list[RuleResult]:
    """Per measure: no significant loss beyond its tolerance (Holm over the policy's measures), then
    the non-inferiority rules it sets."""
    names = list(policy.measures)
    pairs = [paired(baseline, candidate, name) for name in names]
    tests = paired_tests(pairs, samples=policy.samples, seed=policy.seed)
    rules = []
    for name, pair, test in zip(names, pairs, tests, strict=True):
        a, b = test.baseline, test.candidate
        label, rule = f"measure {name}", policy.measures[name]
        if not a.size:
            rules.append(RuleResult(label, "fail", "no query was evaluated by both runs"))
            continue
        delta, tolerance = float((b - a).mean()), rule.tolerance
        tested = f"p {test.p_value:.4f}, Holm {test.p_holm:.4f}"
        said = f"{a.mean():.4f} → {b.mean():.4f} (Δ {delta:+.4f}, n={a.size}), {tested}"
        verdict: Verdict
        if delta < -tolerance and test.p_holm < policy.alpha:
            verdict, why = "fail", f"a significant loss beyond the tolerance {tolerance}"
        elif delta < -tolerance:
            verdict = "pass"
            why = f"a loss beyond the tolerance {tolerance}, but not significant at alpha {policy.alpha}"
        else:
            verdict, why = "pass", f"within the tolerance {tolerance}"
        rules.append(RuleResult(label, verdict, f"{said}: {why}", delta, -tolerance))
        rules += noninferiority_rules(
            label, pair, rule, confidence=policy.confidence, resamples=policy.resamples, seed=policy.seed, tested=tested
        )
    return rules


def _slice_rules(
    policy: GatePolicy, baseline: pd.DataFrame, candidate: pd.DataFrame, slices: Mapping[str, Sequence[str]]
) -> list[RuleResult]:
    """Each critical slice's minimum and non-inferiority rules, over the queries both runs evaluated."""
    common = baseline.index.intersection(candidate.index)
    rules = []
    for slice_, rule in policy.critical_slices.items():
        pair = paired(baseline, candidate, rule.measure, in_slice(common, slice_, slices))
        label = f"slice {slice_} {rule.measure}"
        if pair.empty:
            rules.append(
                RuleResult(label, "fail", f"no evaluated query carries slice '{slice_}': it cannot be checked")
            )
            continue
        if rule.min is not None:
            before, after = float(pair["baseline"].mean()), float(pair["candidate"].mean())
            ok = after >= rule.min
            rules.append(
                RuleResult(
                    f"{label} min",
                    "pass" if ok else "fail",
                    f"{before:.4f} → {after:.4f} over {len(pair)} queries: "
                    f"{'at least' if ok else 'below'} the minimum {rule.min}",
                    after,
                    rule.min,
                )
            )
        rules += noninferiority_rules(
            label, pair, rule, confidence=policy.confidence, resamples=policy.resamples, seed=policy.seed
        )
    return rules


def _budget_rules(policy: GatePolicy, metrics: Mapping[str, float]) -> list[RuleResult]:
    """Permission leaks and context tokens of the candidate; an absent metric fails."""
    rules = []
    leaks = metrics.get("permission_leaks")
    if leaks is None or np.isnan(leaks):
        rules.append(
            RuleResult(
                "permission leaks",
                "fail",
                "the candidate run records no permission_leaks: it cannot be checked",
                None,
                policy.permission_leaks,
            )
        )
    else:
        ok = leaks <= policy.permission_leaks
        rules.append(
            RuleResult(
                "permission leaks",
                "pass" if ok else "fail",
                f"{int(leaks)} retrieved chunk(s) the asker may not see (allowed: {policy.permission_leaks})",
                float(leaks),
                float(policy.permission_leaks),
            )
        )
    for rule_name, key, budget, unit in (
        ("context tokens", "context_tokens_mean", policy.context_tokens_mean, "tokens (mean)"),
    ):
        if budget is None:
            continue
        value = metrics.get(key)
        if value is None or np.isnan(value):
            rules.append(
                RuleResult(
                    rule_name, "fail", f"the candidate run records no {key}: the budget cannot be checked", None, budget
                )
            )
        else:
            ok = value <= budget
            rules.append(
                RuleResult(
                    rule_name,
                    "pass" if ok else "fail",
                    f"{value:.1f} {unit} {'within' if ok else 'over'} the budget {budget:g}",
                    float(value),
                    budget,
                )
            )
    return rules


def _release_rule(policy: GatePolicy, release_evaluations: int, family: str) -> RuleResult:
    """A warning, never a failure, past ``max_release_evaluations``."""
    over = release_evaluations > policy.max_release_evaluations
    reason = (
        f"{release_evaluations} release evaluation(s) of family '{family}' so far (warning past {policy.max_release_evaluations})"
        + (": the release set is becoming training data; add fresh cases in a new benchmark version" if over else "")
    )
    return RuleResult(
        "release evaluations",
        "warn" if over else "pass",
        reason,
        float(release_evaluations),
        float(policy.max_release_evaluations),
    )


@dataclass(frozen=True)
class GateEvidence:
    """What :func:`decide` weighs. ``baseline``/``candidate``: wide per-query scores (rows:
    queries); ``slices``: each query's slices; ``metrics``: the candidate's ``permission_leaks`` and
    ``context_tokens_mean`` (absent ones fail their rule when the policy sets a budget);
    ``latency``: both arms timed by the gate (needed when the policy has ``latency``, or
    ``latency_p95_ms`` on its declared hardware); ``recorded_latency``: each run's recorded p95 in
    ms, reported as information."""

    baseline: pd.DataFrame
    candidate: pd.DataFrame
    slices: Mapping[str, Sequence[str]]
    metrics: Mapping[str, float]
    _: KW_ONLY
    baseline_run_id: str
    candidate_run_id: str
    release_evaluations: int
    family: str = ""
    latency: LatencyEvidence | None = None
    recorded_latency: Mapping[str, float | None] | None = None


def decide(policy: GatePolicy, evidence: GateEvidence) -> Decision:
    """Apply every rule of ``policy`` to ``evidence``; the largest losses on its first measure."""
    e = evidence
    release = _release_rule(policy, e.release_evaluations, e.family)
    rules = [
        *_measure_rules(policy, e.baseline, e.candidate),
        *_slice_rules(policy, e.baseline, e.candidate, e.slices),
        *_budget_rules(policy, e.metrics),
        *latency_rules(policy, e.latency, e.recorded_latency or {}),
        release,
    ]
    warnings = [release.reason] if release.verdict == "warn" else []
    first = next(iter(policy.measures))
    deltas = paired_deltas(e.baseline, e.candidate, first).assign(measure=first)
    losses = (
        deltas[deltas["delta"] < 0]
        .sort_values(["delta", "query_id"])
        .head(policy.largest_losses)
        .reset_index(drop=True)
    )
    return Decision(policy.name, e.baseline_run_id, e.candidate_run_id, rules, losses, warnings)


def release_warning(count: int, limit: int, family: str, run_id: str) -> str | None:
    """The warning ``compare`` and ``gate`` give past ``limit`` release evaluations, else None."""
    if count <= limit:
        return None
    return (
        f"run {run_id} was chosen after {count} release evaluations of family '{family}' (more than {limit}): "
        "the release set is becoming training data"
    )
