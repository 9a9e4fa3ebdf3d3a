"""The release gate: a policy file (``params/gates/*.yaml``) and the decision it gives, rule by rule.

:func:`decide` is pure: per-query scores and metrics in, a :class:`Decision` out, each rule with a
verdict (pass, fail, or warn) and the reason in words. Recording the decision is the runner's job.

Rules:

- ``measures``: no statistically significant regression beyond a tolerance: a measure fails when
  the candidate's mean is lower than the baseline's by more than ``tolerance`` *and* the paired
  randomization test, Holm-adjusted over the policy's measures, gives p < ``alpha``.
- ``critical_slices``: a slice's mean must reach ``min`` and/or lose at most ``max_loss``.
- ``permission_leaks``: at most this many chunks the asker may not see (default 0).
- ``latency_p95_ms`` and ``context_tokens_mean``: budgets on the candidate.
- ``max_release_evaluations``: past this many release evaluations of the candidate's configuration
  family, the decision warns that the release set is becoming training data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
from pydantic import Field, StrictInt, StrictStr, ValidationError, field_validator, model_validator

from rageval.analysis.comparability import SPLIT_TAG
from rageval.analysis.paired import in_slice, paired, paired_deltas, paired_tests
from rageval.benchmark.schema import RELEASE_SPLIT
from rageval.errors import ComparisonError, MeasureError, PolicyError, Problem
from rageval.evaluation import parse_measures
from rageval.io import read_yaml
from rageval.validation import Strict, problems_from_validation

Verdict = Literal["pass", "fail", "warn"]


class MeasureRule(Strict):
    tolerance: float = Field(default=0.0, ge=0, description="a loss up to this much never fails")


class SliceRule(Strict):
    measure: StrictStr
    min: float | None = Field(default=None, description="the candidate's slice mean must be at least this")
    max_loss: float | None = Field(default=None, ge=0, description="baseline minus candidate must be at most this")

    @model_validator(mode="after")
    def _some_limit(self) -> SliceRule:
        if self.min is None and self.max_loss is None:
            raise ValueError("give min, max_loss or both")
        return self


class GatePolicy(Strict):
    """``params/gates/*.yaml``: what a candidate must show to replace the baseline."""

    version: Literal[1]
    name: StrictStr
    description: StrictStr | None = None
    measures: dict[StrictStr, MeasureRule] = Field(min_length=1)
    alpha: float = Field(default=0.05, gt=0, lt=1)
    critical_slices: dict[StrictStr, SliceRule] = Field(default_factory=dict)
    permission_leaks: StrictInt = Field(default=0, ge=0, description="most chunks allowed that the asker may not see")
    latency_p95_ms: float | None = Field(default=None, gt=0, description="budget on the p95 of per-query total latency")
    context_tokens_mean: float | None = Field(default=None, gt=0, description="budget on mean context tokens")
    max_release_evaluations: StrictInt = Field(default=5, ge=1)
    largest_losses: StrictInt = Field(default=10, ge=0, description="query IDs listed with the largest losses")
    samples: StrictInt = Field(default=10_000, ge=100, description="randomization test samples")
    seed: StrictInt = 0

    @field_validator("measures")
    @classmethod
    def _parseable(cls, value: dict[str, MeasureRule]) -> dict[str, MeasureRule]:
        try:
            parse_measures(value)
        except MeasureError as exc:
            raise ValueError("; ".join(p.message for p in exc.problems)) from None
        return value


def load_policy(path: str | Path) -> GatePolicy:
    """Read and validate a policy file; errors name the file, line and key."""
    path = Path(path)
    data, lines = read_yaml(path, PolicyError)
    if not isinstance(data, dict):
        raise PolicyError(Problem(file=str(path), line=1, message="expected a mapping of policy keys"))
    try:
        return GatePolicy.model_validate(data)
    except ValidationError as exc:
        raise PolicyError(problems_from_validation(exc, file=str(path), model=GatePolicy, lines=lines)) from None


def require_release(tags: Mapping[str, str], run_id: str, role: str) -> None:
    """The gate decides on the frozen release split only."""
    split = tags.get(SPLIT_TAG)
    if split != RELEASE_SPLIT:
        raise ComparisonError(
            f"the gate accepts only runs on the '{RELEASE_SPLIT}' split; the {role} run {run_id} is on "
            f"'{split}'. Tune on dev, then evaluate the chosen configuration with --split {RELEASE_SPLIT}"
        )


@dataclass(frozen=True)
class RuleResult:
    rule: str
    verdict: Verdict
    reason: str
    value: float | None = None
    limit: float | None = None


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


def _policy_problem(policy_file: str, key: str, message: str, fix: str) -> Problem:
    return Problem(file=policy_file, field=key, message=message, fix=fix)


def check_policy_against(
    policy: GatePolicy, measures: Sequence[str], slices: Sequence[str], policy_file: str = "<policy>"
) -> None:
    """Refuse a policy naming measures or slices the runs do not have (a typo must not pass)."""
    problems = [
        _policy_problem(
            policy_file, f"measures.{m}", "the runs did not record this measure", f"recorded: {', '.join(measures)}"
        )
        for m in policy.measures
        if m not in measures
    ]
    for name, rule in policy.critical_slices.items():
        if name not in slices:
            problems.append(
                _policy_problem(
                    policy_file,
                    f"critical_slices.{name}",
                    "no case of the runs' split carries this slice",
                    f"slices: {', '.join(slices)}",
                )
            )
        if rule.measure not in measures:
            problems.append(
                _policy_problem(
                    policy_file,
                    f"critical_slices.{name}.measure",
                    f"the runs did not record {rule.measure}",
                    f"recorded: {', '.join(measures)}",
                )
            )
    if problems:
        raise PolicyError(problems)


def _measure_rules(policy: GatePolicy, baseline: pd.DataFrame, candidate: pd.DataFrame) -> list[RuleResult]:
    """No significant loss beyond each measure's tolerance; Holm over the policy's measures."""
    names = list(policy.measures)
    pairs = [paired(baseline, candidate, name) for name in names]
    rules = []
    for name, test in zip(names, paired_tests(pairs, samples=policy.samples, seed=policy.seed), strict=True):
        a, b = test.baseline, test.candidate
        label, tolerance = f"measure {name}", policy.measures[name].tolerance
        if not a.size:
            rules.append(RuleResult(label, "fail", "no query was evaluated by both runs"))
            continue
        delta = float((b - a).mean())
        said = f"{a.mean():.4f} → {b.mean():.4f} (Δ {delta:+.4f}, n={a.size}), p {test.p_value:.4f}, Holm {test.p_holm:.4f}"
        verdict: Verdict
        if delta < -tolerance and test.p_holm < policy.alpha:
            verdict, why = "fail", f"a significant loss beyond the tolerance {tolerance}"
        elif delta < -tolerance:
            verdict = "pass"
            why = f"a loss beyond the tolerance {tolerance}, but not significant at alpha {policy.alpha}"
        else:
            verdict, why = "pass", f"within the tolerance {tolerance}"
        rules.append(RuleResult(label, verdict, f"{said}: {why}", delta, -tolerance))
    return rules


def _slice_rules(
    policy: GatePolicy, baseline: pd.DataFrame, candidate: pd.DataFrame, slices: Mapping[str, Sequence[str]]
) -> list[RuleResult]:
    """Each critical slice's minimum and largest allowed loss, over the queries both runs evaluated."""
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
        before, after = float(pair["baseline"].mean()), float(pair["candidate"].mean())
        said = f"{before:.4f} → {after:.4f} over {len(pair)} queries"
        if rule.min is not None:
            ok = after >= rule.min
            rules.append(
                RuleResult(
                    f"{label} min",
                    "pass" if ok else "fail",
                    f"{said}: {'at least' if ok else 'below'} the minimum {rule.min}",
                    after,
                    rule.min,
                )
            )
        if rule.max_loss is not None:
            loss = before - after
            ok = loss <= rule.max_loss + 1e-12  # a loss equal to the limit passes despite float rounding
            rules.append(
                RuleResult(
                    f"{label} max_loss",
                    "pass" if ok else "fail",
                    f"{said}: loss {loss:+.4f} {'within' if ok else 'beyond'} the allowed {rule.max_loss}",
                    loss,
                    rule.max_loss,
                )
            )
    return rules


def _budget_rules(policy: GatePolicy, metrics: Mapping[str, float]) -> list[RuleResult]:
    """Permission leaks, p95 latency and context tokens of the candidate; an absent metric fails."""
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
        ("p95 latency", "latency/total/p95_ms", policy.latency_p95_ms, "ms"),
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


def decide(
    policy: GatePolicy,
    baseline: pd.DataFrame,
    candidate: pd.DataFrame,
    slices: Mapping[str, Sequence[str]],
    metrics: Mapping[str, float],
    *,
    baseline_run_id: str,
    candidate_run_id: str,
    release_evaluations: int,
    family: str = "",
) -> Decision:
    """Apply every rule. ``baseline``/``candidate``: wide per-query scores (rows: queries);
    ``metrics``: the candidate's ``permission_leaks``, ``latency/total/p95_ms`` and
    ``context_tokens_mean`` (absent ones fail their rule when the policy sets a budget)."""
    release = _release_rule(policy, release_evaluations, family)
    rules = [
        *_measure_rules(policy, baseline, candidate),
        *_slice_rules(policy, baseline, candidate, slices),
        *_budget_rules(policy, metrics),
        release,
    ]
    warnings = [release.reason] if release.verdict == "warn" else []
    first = next(iter(policy.measures))
    deltas = paired_deltas(baseline, candidate, first).assign(measure=first)
    losses = (
        deltas[deltas["delta"] < 0]
        .sort_values(["delta", "query_id"])
        .head(policy.largest_losses)
        .reset_index(drop=True)
    )
    return Decision(policy.name, baseline_run_id, candidate_run_id, rules, losses, warnings)


def release_warning(count: int, limit: int, family: str, run_id: str) -> str | None:
    """The warning ``compare`` and ``gate`` give past ``limit`` release evaluations, else None."""
    if count <= limit:
        return None
    return (
        f"run {run_id} was chosen after {count} release evaluations of family '{family}' (more than {limit}): "
        "the release set is becoming training data"
    )
