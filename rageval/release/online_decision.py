"""The online layer's decision: each metric judged on its interval (a primary's improvement or
non-inferiority, a guardrail's margin) and the cohort's sample ratio — pure, over
:mod:`rageval.release.online`'s analysis."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Literal

import pandas as pd

from rageval.release.online import ARMS, MetricResult, MetricsPolicy, SampleRatio


@dataclass(frozen=True)
class MetricVerdict:
    metric: str
    role: str
    verdict: Literal["pass", "fail"]
    reason: str


@dataclass(frozen=True)
class OnlineDecision:
    policy: str
    sample_ratio: SampleRatio
    results: list[MetricResult]
    verdicts: list[MetricVerdict]
    sequential: bool

    @property
    def passed(self) -> bool:
        return self.sample_ratio.passed and all(v.verdict == "pass" for v in self.verdicts)

    @property
    def verdict(self) -> str:
        return "pass" if self.passed else "fail"

    @property
    def reasons(self) -> list[str]:
        """Why the decision failed, one line each (empty when it passed)."""
        out = [] if self.sample_ratio.passed else [_srm_reason(self.sample_ratio)]
        return out + [f"{v.metric}: {v.reason}" for v in self.verdicts if v.verdict == "fail"]

    def table(self) -> pd.DataFrame:
        """One row per metric: its evidence, verdict and reason."""
        by_metric = {v.metric: v for v in self.verdicts}
        rows = [{**asdict(r), "verdict": by_metric[r.metric].verdict, "reason": by_metric[r.metric].reason}
                for r in self.results]  # fmt: skip
        return pd.DataFrame(rows)


def _srm_reason(srm: SampleRatio) -> str:
    counts = ", ".join(f"{arm} {srm.counts[arm]} (planned {srm.expected[arm]:.0f})" for arm in ARMS)
    return (
        f"sample-ratio mismatch: {counts}, chi-square p = {srm.p_value:.2g}: the cohort is not trustworthy "
        "(assignment or logging lost units); find the cause before reading any metric"
    )


def _judge(result: MetricResult, sequential: bool, alpha: float) -> MetricVerdict:
    low, high = result.ci_low, result.ci_high
    if sequential and result.seq_ci_low is not None and result.seq_ci_high is not None:
        low, high = result.seq_ci_low, result.seq_ci_high
    interval = f"{'always-valid ' if sequential else ''}{100 * (1 - alpha):g}% interval [{low:+.4g}, {high:+.4g}]"
    # Signed so that a positive number is better for the candidate.
    sign = 1.0 if result.direction == "higher" else -1.0
    better_low = min(sign * low, sign * high)  # the worst case for the candidate
    better_high = max(sign * low, sign * high)
    delta = f"{result.baseline:.4g} → {result.candidate:.4g} ({result.diff:+.4g}, {interval})"
    if result.role == "primary" and result.claim == "improvement":
        if better_low > 0:
            return MetricVerdict(result.metric, result.role, "pass", f"improved: {delta}")
        worse = better_high < 0
        size = (
            ""
            if result.needed_per_arm is None
            else f"; detecting the mde {result.threshold:g} needs about {result.needed_per_arm} units per arm "
            f"(have {min(result.n_baseline, result.n_candidate)})"
        )
        what = "regressed" if worse else "no significant improvement"
        return MetricVerdict(result.metric, result.role, "fail", f"{what}: {delta}{size}")
    # A guardrail, or a non-inferiority primary: one rule, no worse than the margin.
    primary = result.role == "primary"
    if better_low >= -result.threshold:
        held = "non-inferior within the margin" if primary else "no regression beyond the margin"
        return MetricVerdict(result.metric, result.role, "pass", f"{held} {result.threshold:g}: {delta}")
    loss = f"the interval allows a loss of {-better_low:.4g}, beyond the margin {result.threshold:g}: {delta}"
    text = (
        f"non-inferiority not shown: {loss}; about {result.needed_per_arm} units per arm show that margin "
        f"(have {min(result.n_baseline, result.n_candidate)})"
        if primary
        else f"regression: {loss}"
    )
    return MetricVerdict(result.metric, result.role, "fail", text)


def decide_online(results: Sequence[MetricResult], srm: SampleRatio, policy: MetricsPolicy) -> OnlineDecision:
    """PASS only when the cohort's arm counts match the planned split, every primary metric shows its
    claim (improvement: its interval lies on the better side of 0; non-inferiority: its interval does
    not reach past its margin on the worse side) and no guardrail's interval reaches past its margin
    on the worse side."""
    verdicts = [_judge(r, policy.sequential, policy.alpha) for r in results]
    return OnlineDecision(policy.name, srm, list(results), verdicts, policy.sequential)
