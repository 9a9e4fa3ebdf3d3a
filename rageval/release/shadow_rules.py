"""The shadow layer's rules: what a release holds a shadow log's figures to (strict YAML, the
shadow section of a release policy), and :func:`decide_shadow`, PASS or FAIL with a reason per rule."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pandas as pd
from pydantic import Field, StrictInt, StrictStr

from rageval.analysis.gate_policy import RuleResult
from rageval.errors import PolicyError
from rageval.io import read_yaml
from rageval.release.shadow import ShadowAnalysis
from rageval.validation import Strict, validated


class ShadowRules(Strict):
    """What shadow evidence must show (``params/shadow/rules.yaml``, or the shadow section of a
    release policy). An absent rule is not checked; permission leaks are always."""

    version: Literal[1] = 1
    name: StrictStr = "shadow"
    min_requests: StrictInt = Field(default=1, ge=1, description="compared requests needed for any verdict")
    min_rbo: float | None = Field(default=None, ge=0, le=1, description="lowest mean RBO_ext allowed")
    max_top1_change: float | None = Field(default=None, ge=0, le=1, description="highest top-1 change rate")
    max_p95_ratio: float | None = Field(default=None, gt=0, description="candidate p95 / baseline p95 at most")
    max_p95_delta_ms: float | None = Field(default=None, description="candidate p95 − baseline p95 at most")
    latency_bound: Literal["estimate", "upper"] = Field(
        default="estimate", description="hold the point estimate, or the interval's upper bound, to the limit"
    )
    max_error_rate_delta: float | None = Field(default=None, ge=0, le=1, description="candidate − baseline")
    max_leaks: StrictInt = Field(default=0, ge=0, description="candidate results the asker may not see")


def load_rules(path: str | Path) -> ShadowRules:
    return validated(*read_yaml(Path(path), PolicyError), str(path), ShadowRules, PolicyError, what="rule keys")


@dataclass(frozen=True)
class ShadowDecision:
    verdict: Literal["pass", "fail"]
    rules: list[RuleResult]

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    def table(self) -> pd.DataFrame:
        return pd.DataFrame([r.__dict__ for r in self.rules], columns=["rule", "verdict", "reason", "value", "limit"])


def _bound(rule: str, value: float, limit: float, what: str, fmt: str = ".3f", at_least: bool = False) -> RuleResult:
    """``value`` held to ``limit`` (at most, or ``at_least``), the reason reading "what value ≤ limit"."""
    ok = bool(value >= limit if at_least else value <= limit)
    relation = ("≥" if ok else "<") if at_least else ("≤" if ok else ">")
    return RuleResult(rule, "pass" if ok else "fail", f"{what} {value:{fmt}} {relation} {limit:{fmt}}", value, limit)


def decide_shadow(rules: ShadowRules, analysis: ShadowAnalysis) -> ShadowDecision:
    """PASS when every rule the section sets holds overall, FAIL with each failing rule's reason."""
    o = analysis.overall
    compared = f"of {o['requests']} requests, those both arms answered:"
    out = [_bound("min requests", float(o["compared"]), rules.min_requests, compared, ".0f", at_least=True)]
    if rules.min_rbo is not None:
        what = f"mean RBO_ext (p={analysis.p})"
        out.append(_bound("min rbo", float(o["rbo_ext_mean"]), rules.min_rbo, what, at_least=True))
    if rules.max_top1_change is not None:
        out.append(_bound("max top-1 change", float(o["top1_change_rate"]), rules.max_top1_change, "top-1 change rate"))
    p95 = analysis.latency_row(0.95)
    for key, limit, label, unit in (
        ("ratio", rules.max_p95_ratio, "max p95 ratio", "×"),
        ("delta", rules.max_p95_delta_ms, "max p95 delta", " ms"),
    ):
        if limit is not None:
            estimate, low, high = (
                float(p95[f"{key}{end}"]) for end in ("_ms" if key == "delta" else "", "_low", "_high")
            )
            what = (
                f"p95 {key} {estimate:.3f}{unit} ({analysis.confidence:.0%} CI {low:.3f} to {high:.3f}); "
                f"the {rules.latency_bound}"
            )
            out.append(_bound(label, high if rules.latency_bound == "upper" else estimate, limit, what))
    if rules.max_error_rate_delta is not None:
        what = f"error rate {o['candidate_error_rate']:.3f} vs {o['baseline_error_rate']:.3f}: delta"
        out.append(_bound("max error-rate delta", float(o["error_rate_delta"]), rules.max_error_rate_delta, what))
    leaks = analysis.leaks
    # named by query hash: request IDs reach the store only where the import policy keeps them
    shown = ", ".join(
        f"query {h[:12]}… rank {k}" for h, k in zip(leaks["query_sha256"][:3], leaks["rank"][:3], strict=True)
    )
    what = "candidate results the asker may not see" + (f" ({shown})" if shown else ":")
    out.append(_bound("max leaks", float(o["candidate_leaks"]), rules.max_leaks, what, ".0f"))
    return ShadowDecision("pass" if all(r.verdict == "pass" for r in out) else "fail", out)
