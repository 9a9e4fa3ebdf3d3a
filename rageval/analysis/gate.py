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

from rageval.benchmark.schema import RELEASE_SPLIT
from rageval.errors import ComparisonError, MeasureError, PolicyError, Problem
from rageval.evaluation import parse_measures
from rageval.evaluation.stats import holm, paired_randomization
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
    split = tags.get("rageval.split")
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
    rules: list[RuleResult] = []
    common = baseline.index.intersection(candidate.index)
    names = list(policy.measures)
    tested = []
    for name in names:
        pair = pd.concat([baseline.loc[common, name], candidate.loc[common, name]], axis=1).dropna()
        a, b = pair.iloc[:, 0].to_numpy(), pair.iloc[:, 1].to_numpy()
        tested.append((a, b, paired_randomization(a, b, samples=policy.samples, seed=policy.seed)))
    adjusted = holm([p for _, _, p in tested])
    for name, (a, b, p), p_holm in zip(names, tested, adjusted, strict=True):
        tolerance = policy.measures[name].tolerance
        delta = float((b - a).mean()) if a.size else float("nan")
        said = (
            f"{a.mean():.4f} → {b.mean():.4f} (Δ {delta:+.4f}, n={a.size}), p {p:.4f}, Holm {p_holm:.4f}"
            if a.size
            else ""
        )
        if not a.size:
            rules.append(RuleResult(f"measure {name}", "fail", "no query was evaluated by both runs"))
        elif delta < -tolerance and p_holm < policy.alpha:
            rules.append(
                RuleResult(
                    f"measure {name}",
                    "fail",
                    f"{said}: a significant loss beyond the tolerance {tolerance}",
                    delta,
                    -tolerance,
                )
            )
        elif delta < -tolerance:
            rules.append(
                RuleResult(
                    f"measure {name}",
                    "pass",
                    f"{said}: a loss beyond the tolerance {tolerance}, but not significant at alpha {policy.alpha}",
                    delta,
                    -tolerance,
                )
            )
        else:
            rules.append(
                RuleResult(f"measure {name}", "pass", f"{said}: within the tolerance {tolerance}", delta, -tolerance)
            )

    for slice_, rule in policy.critical_slices.items():
        members = [q for q in common if slice_ in slices.get(q, ())]
        pair = pd.concat([baseline.loc[members, rule.measure], candidate.loc[members, rule.measure]], axis=1).dropna()
        label = f"slice {slice_} {rule.measure}"
        if pair.empty:
            rules.append(
                RuleResult(label, "fail", f"no evaluated query carries slice '{slice_}': it cannot be checked")
            )
            continue
        before, after = float(pair.iloc[:, 0].mean()), float(pair.iloc[:, 1].mean())
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
            ok = loss <= rule.max_loss + 1e-12
            rules.append(
                RuleResult(
                    f"{label} max_loss",
                    "pass" if ok else "fail",
                    f"{said}: loss {loss:+.4f} {'within' if ok else 'beyond'} the allowed {rule.max_loss}",
                    loss,
                    rule.max_loss,
                )
            )

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

    warnings = []
    over = release_evaluations > policy.max_release_evaluations
    reason = (
        f"{release_evaluations} release evaluation(s) of family '{family}' so far (warning past {policy.max_release_evaluations})"
        + (": the release set is becoming training data; add fresh cases in a new benchmark version" if over else "")
    )
    rules.append(
        RuleResult(
            "release evaluations",
            "warn" if over else "pass",
            reason,
            float(release_evaluations),
            float(policy.max_release_evaluations),
        )
    )
    if over:
        warnings.append(reason)

    first = names[0]
    deltas = pd.DataFrame({"baseline": baseline.loc[common, first], "candidate": candidate.loc[common, first]}).dropna()
    deltas = (
        deltas.assign(delta=deltas["candidate"] - deltas["baseline"], measure=first)
        .rename_axis("query_id")
        .reset_index()
    )
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
