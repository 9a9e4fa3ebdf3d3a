"""The release gate: a policy file (``params/gates/*.yaml``) and the decision it gives, rule by rule.

:func:`decide` is pure: per-query scores and metrics in, a :class:`Decision` out, each rule with a
verdict (pass, fail, or warn) and the reason in words. Recording the decision is the runner's job.

Rules:

- ``measures``: no statistically significant regression beyond a tolerance: a measure fails when
  the candidate's mean is lower than the baseline's by more than ``tolerance`` *and* the paired
  randomization test, Holm-adjusted over the policy's measures, gives p < ``alpha``.
- ``critical_slices``: a slice's mean must reach ``min`` and/or lose at most ``max_loss``.
- ``permission_leaks``: at most this many chunks the asker may not see (default 0).
- ``latency``: the candidate's p95 latency as a multiple of the baseline's, both timed by the gate
  in one process on one machine (see :mod:`rageval.experiment.latency`): a candidate fails when the
  ratio is over its limit *and* the paired bootstrap interval of the ratio lies above 1. The limit
  is ``max_p95_ratio`` when the candidate runs the baseline's stages (types and models: a tuning
  change), ``max_p95_ratio_changed_stages`` when it runs others (a new retriever or reranker).
- ``latency_p95_ms``: an absolute budget on the candidate's p95 wall time measured so, applied only on the ``hardware`` the
  policy declares (elsewhere: "not applied"); ``context_tokens_mean``: a budget on the candidate.
  The runs' recorded p95 latencies are reported as information.
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
from pydantic import (
    Field,
    StrictInt,
    StrictStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from rageval.analysis.comparability import SPLIT_TAG
from rageval.analysis.paired import in_slice, paired, paired_deltas, paired_tests
from rageval.benchmark.schema import RELEASE_SPLIT
from rageval.errors import ComparisonError, MeasureError, PolicyError, Problem
from rageval.evaluation import parse_measures
from rageval.io import read_yaml
from rageval.validation import Strict, problems_from_validation

Verdict = Literal["pass", "fail", "warn", "info"]


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


class LatencyRule(Strict):
    """How the gate times both arms, and the ratio it allows (absent limits: the ratio is reported only)."""

    max_p95_ratio: float | None = Field(
        default=None, ge=1, description="candidate p95 / baseline p95 when the candidate runs the baseline's stages"
    )
    max_p95_ratio_changed_stages: float | None = Field(
        default=None, ge=1, description="the same ratio when the candidate's stage types or models differ"
    )
    clock: Literal["cpu", "wall"] = Field(
        default="cpu",
        description="cpu: CPU time of the querying thread (a neighbour changes it little); wall: wall time",
    )
    threads: StrictInt = Field(default=1, ge=1, description="torch intra-op threads while timing")
    queries: StrictInt = Field(default=50, ge=5, description="release-split queries timed (all when fewer)")
    rounds: StrictInt = Field(default=5, ge=1, description="times each query is timed per arm; its median counts")
    warmup: StrictInt = Field(default=3, ge=0, description="untimed queries per arm after building it")
    confidence: float = Field(default=0.95, gt=0, lt=1, description="of the bootstrap interval of the ratio")
    resamples: StrictInt = Field(default=2000, ge=100, description="bootstrap resamples")


class Hardware(Strict):
    """The machine an absolute budget was set on; every given field must match this machine."""

    name: StrictStr | None = Field(default=None, description="a label for people, never matched")
    cpus: StrictInt | None = Field(default=None, ge=1, description="usable CPUs, exactly")
    cpu_model: StrictStr | None = Field(default=None, description="contained in the CPU model name (any case)")
    memory_gb: float | None = Field(default=None, gt=0, description="at least this much memory")
    architecture: StrictStr | None = Field(default=None, description="e.g. x86_64, exactly")

    @model_validator(mode="after")
    def _something(self) -> Hardware:
        if all(getattr(self, k) is None for k in ("cpus", "cpu_model", "memory_gb", "architecture")):
            raise ValueError("declare at least one of cpus, cpu_model, memory_gb, architecture")
        return self

    def differences(self, machine: Mapping[str, object]) -> list[str]:
        """How ``machine`` (see :func:`rageval.experiment.latency.machine`) differs from this declaration."""
        out = []
        if self.cpus is not None and machine.get("cpus") != self.cpus:
            out.append(f"{machine.get('cpus')} CPUs, not {self.cpus}")
        if self.cpu_model is not None and self.cpu_model.lower() not in str(machine.get("cpu_model", "")).lower():
            out.append(f"CPU '{machine.get('cpu_model')}', not '{self.cpu_model}'")
        memory = machine.get("memory_gb")
        if self.memory_gb is not None and not (isinstance(memory, int | float) and memory >= self.memory_gb):
            out.append(f"{memory} GB of memory, under {self.memory_gb:g}")
        if self.architecture is not None and machine.get("architecture") != self.architecture:
            out.append(f"architecture {machine.get('architecture')}, not {self.architecture}")
        return out


class GatePolicy(Strict):
    """``params/gates/*.yaml``: what a candidate must show to replace the baseline."""

    version: Literal[1]
    name: StrictStr
    description: StrictStr | None = None
    measures: dict[StrictStr, MeasureRule] = Field(min_length=1)
    alpha: float = Field(default=0.05, gt=0, lt=1)
    critical_slices: dict[StrictStr, SliceRule] = Field(default_factory=dict)
    permission_leaks: StrictInt = Field(default=0, ge=0, description="most chunks allowed that the asker may not see")
    latency: LatencyRule | None = Field(default=None, description="time both arms here and compare them")
    hardware: Hardware | None = Field(default=None, description="the machine latency_p95_ms holds for")
    latency_p95_ms: float | None = Field(
        default=None, gt=0, description="budget on the candidate's measured p95, on the declared hardware only"
    )
    context_tokens_mean: float | None = Field(default=None, gt=0, description="budget on mean context tokens")
    max_release_evaluations: StrictInt = Field(default=5, ge=1)
    largest_losses: StrictInt = Field(default=10, ge=0, description="query IDs listed with the largest losses")
    samples: StrictInt = Field(default=10_000, ge=100, description="randomization test samples")
    seed: StrictInt = 0

    @field_validator("latency_p95_ms")
    @classmethod
    def _budget_has_hardware(cls, value: float | None, info: ValidationInfo) -> float | None:
        if value is not None and "hardware" in info.data and info.data["hardware"] is None:
            raise ValueError(
                "latency_p95_ms needs hardware: the machine the budget was set on (e.g. hardware: {cpus: 8, "
                "cpu_model: EPYC}); on any other machine a budget in milliseconds judges the machine, so compare "
                "with the baseline instead (latency: {max_p95_ratio: ...})"
            )
        return value

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


def _latency_rules(
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
    latency: LatencyEvidence | None = None,
    recorded_latency: Mapping[str, float | None] | None = None,
) -> Decision:
    """Apply every rule. ``baseline``/``candidate``: wide per-query scores (rows: queries);
    ``metrics``: the candidate's ``permission_leaks`` and ``context_tokens_mean`` (absent ones
    fail their rule when the policy sets a budget); ``latency``: both arms timed by the gate
    (needed when the policy has ``latency``, or ``latency_p95_ms`` on its declared hardware);
    ``recorded_latency``: each run's recorded p95 in ms, reported as information."""
    release = _release_rule(policy, release_evaluations, family)
    rules = [
        *_measure_rules(policy, baseline, candidate),
        *_slice_rules(policy, baseline, candidate, slices),
        *_budget_rules(policy, metrics),
        *_latency_rules(policy, latency, recorded_latency or {}),
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
