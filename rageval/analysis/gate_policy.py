"""The release gate's policy file (``params/gates/*.yaml``) as a strict model, and the rule result
every check of :func:`rageval.analysis.gate.decide` gives.

Loss rules, per measure and per critical slice (:data:`LOSS_RULES`, the one list of their names):

- ``tolerance`` (measures): the significance rule: a loss beyond it fails only when the paired
  randomization test, Holm-adjusted over the policy's measures, gives p < ``alpha``.
- ``max_loss``: the plain delta: a mean loss (baseline − candidate) beyond it fails, significant or not.
- ``ci_lower_above``: non-inferiority proper: the lower bound of the bootstrap interval of the mean
  delta (candidate − baseline) must lie above this value, minus the margin (e.g. ``-0.02``).

Every rule a measure or slice sets is checked on its own; the candidate passes only when all pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from pydantic import (
    Field,
    StrictInt,
    StrictStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from rageval.errors import MeasureError, PolicyError, Problem
from rageval.evaluation import parse_measures
from rageval.io import read_yaml
from rageval.validation import Strict, validated

# The most bootstrap resamples or randomization samples a policy may ask for: each costs a pass over
# every query's scores, and past this the estimate no longer changes.
MAX_RESAMPLES = 1_000_000

Verdict = Literal["pass", "fail", "warn", "info"]

# The loss rules by their policy keys; a decision's row for one is labelled "<measure or slice> <key>",
# except the significance rule, which keeps the bare "measure M" label decisions have always had.
NonInferiorityRule = Literal["max_loss", "ci_lower_above"]
NONINFERIORITY_RULES: tuple[NonInferiorityRule, ...] = get_args(NonInferiorityRule)
LOSS_RULES: tuple[str, ...] = ("tolerance", *NONINFERIORITY_RULES)


@dataclass(frozen=True)
class RuleResult:
    rule: str
    verdict: Verdict
    reason: str
    value: float | None = None
    limit: float | None = None


class NonInferiority(Strict):
    """The two non-inferiority rules a measure and a critical slice share (absolute, in the measure's units)."""

    max_loss: float | None = Field(
        default=None, ge=0, description="baseline minus candidate mean must be at most this, significant or not"
    )
    ci_lower_above: float | None = Field(
        default=None, description="the delta's interval must lie above this (minus the margin, e.g. -0.02)"
    )

    @field_validator("ci_lower_above")
    @classmethod
    def _minus_the_margin(cls, value: float | None) -> float | None:
        if value is not None and value > 0:
            raise ValueError(
                f"ci_lower_above is minus the margin, the lowest delta the interval may reach: for a margin of "
                f"{value:g} write {-value:g} ({value:g} would demand a significant gain)"
            )
        return value


class MeasureRule(NonInferiority):
    tolerance: float = Field(default=0.0, ge=0, description="a loss up to this much never fails the significance rule")


class SliceRule(NonInferiority):
    measure: StrictStr
    min: float | None = Field(default=None, description="the candidate's slice mean must be at least this")

    @model_validator(mode="after")
    def _some_limit(self) -> SliceRule:
        if self.min is None and all(getattr(self, key) is None for key in NONINFERIORITY_RULES):
            raise ValueError(f"give at least one of min, {', '.join(NONINFERIORITY_RULES)}")
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
    rounds: StrictInt = Field(
        default=5, ge=1, le=1000, description="times each query is timed per arm; its median counts"
    )
    warmup: StrictInt = Field(default=3, ge=0, description="untimed queries per arm after building it")
    confidence: float = Field(default=0.95, gt=0, lt=1, description="of the bootstrap interval of the ratio")
    resamples: StrictInt = Field(default=2000, ge=100, le=MAX_RESAMPLES, description="bootstrap resamples")


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
    confidence: float = Field(
        default=0.95, gt=0, lt=1, description="of the two-sided bootstrap interval of each delta (ci_lower_above)"
    )
    resamples: StrictInt = Field(
        default=10_000, ge=100, le=MAX_RESAMPLES, description="bootstrap resamples of each delta's interval"
    )
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
    samples: StrictInt = Field(default=10_000, ge=100, le=MAX_RESAMPLES, description="randomization test samples")
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
    return validated(*read_yaml(Path(path), PolicyError), str(path), GatePolicy, PolicyError, what="policy keys")


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
