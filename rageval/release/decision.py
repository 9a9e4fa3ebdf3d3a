"""The release decision: a release policy (``params/release/*.yaml``, strict like the gate's) says
which evidence layers a release needs and what each must show; :func:`decide_release` reads the
layers' recorded runs (as :class:`Evidence`, gathered by :mod:`rageval.workflows.release.record`) and gives
PASS or FAIL per layer and overall, with a reason for each.

The matching rule (one baseline and one candidate across all layers): the reference pair is the gate's
``rageval.baseline`` / ``rageval.candidates`` run IDs (without a gate layer, the first of review, shadow,
online that names run IDs). A layer matches a role when it names that role's run ID and it is the
reference's; a layer that names no run ID for a role (a shadow or online run recorded without
``--baseline/--candidate``) matches on its ``rageval.baseline.config`` / ``rageval.candidate.config``
tag, which must equal the reference run's
configuration name (``rageval.config.label`` or ``rageval.config.name``) or its run ID. A review must
also name the gate run it reviewed (``rageval.review.gate``)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pandas as pd
from pydantic import Field, StrictBool, StrictStr

from rageval.errors import PolicyError
from rageval.io import read_yaml
from rageval.release.marks import (
    BASELINE_CONFIG_TAG,
    CANDIDATE_CONFIG_TAG,
    SIMULATED_TAG,
    VERDICT_TAG,
    named_pair,
)
from rageval.release.shadow_rules import ShadowDecision, ShadowRules
from rageval.validation import Strict, validated

LAYERS: tuple[str, ...] = ("gate", "review", "shadow", "online")
KINDS = {layer: layer for layer in LAYERS}  # the rageval.kind each layer's run carries
# The tags naming a layer's baseline and candidate: run IDs, and configuration names where recorded.


class LayerRule(Strict):
    required: StrictBool = Field(default=True, description="a release without this layer fails")


class Layers(Strict):
    gate: LayerRule = LayerRule()
    review: LayerRule = LayerRule()
    shadow: LayerRule = LayerRule()
    online: LayerRule = LayerRule()


class ReleasePolicy(Strict):
    """What a release needs (``params/release/policy.yaml``). Each layer's own verdict must be pass;
    a review must be complete with no open rejection; an optional layer, when given, must pass too."""

    version: Literal[1] = 1
    name: StrictStr = "release"
    description: StrictStr | None = None
    layers: Layers = Layers()
    max_age_days: float | None = Field(default=None, gt=0, description="evidence older than this fails")
    shadow: ShadowRules | None = Field(
        default=None, description="shadow rules re-applied to the shadow run's recorded figures"
    )


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out |= _flat(item, f"{prefix}{key}.")
        return out
    return {prefix.rstrip("."): value}


def policy_overrides(policy: ReleasePolicy, shipped: ReleasePolicy | None) -> list[str]:
    """How ``policy`` is weaker than the shipped one, or may be: each optional layer, and each limit it
    sets otherwise than the shipped policy (``shipped`` None: only the optional layers)."""
    out = [f"release policy {policy.name!r} makes the {layer} layer optional" for layer in LAYERS
           if not getattr(policy.layers, layer).required]  # fmt: skip
    if shipped is None:
        return out
    mine, theirs = _flat(policy.model_dump(mode="json")), _flat(shipped.model_dump(mode="json"))
    for key in sorted(set(mine) | set(theirs)):
        if key.split(".")[0] in ("name", "description", "version", "layers") or key.endswith(".name"):
            continue
        if mine.get(key) != theirs.get(key):
            out.append(
                f"release policy {policy.name!r} sets {key} {mine.get(key)!r} where the shipped "
                f"{shipped.name!r} sets {theirs.get(key)!r}"
            )
    return out


def load_release_policy(path: str | Path) -> ReleasePolicy:
    """Read and validate a release policy; errors name the file, line and key."""
    return validated(
        *read_yaml(Path(path), PolicyError), str(path), ReleasePolicy, PolicyError, what="release policy keys"
    )


@dataclass(frozen=True)
class Evidence:
    """A layer's run as the decision sees it. ``problem``: why it cannot count (not sealed, tampered,
    of another kind); ``record``: its decision.json; ``recheck``: the policy's shadow rules re-applied."""

    layer: str
    run_id: str
    tags: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    started_ms: int = 0
    record: dict[str, Any] = field(default_factory=dict)
    problem: str | None = None
    recheck: ShadowDecision | None = None

    @property
    def simulated(self) -> bool:
        return self.tags.get(SIMULATED_TAG) == "true"


@dataclass(frozen=True)
class Pair:
    """The baseline and candidate a release is about: evaluation run IDs and configuration names."""

    baseline: str
    candidate: str
    baseline_config: str = ""
    candidate_config: str = ""


@dataclass(frozen=True)
class LayerResult:
    layer: str
    required: bool
    run_id: str
    verdict: Literal["pass", "fail", "absent"]
    reason: str
    simulated: bool = False


@dataclass(frozen=True)
class ReleaseDecision:
    verdict: Literal["pass", "fail"]
    layers: list[LayerResult]
    reasons: list[str]  # every reason the release fails
    pair: Pair | None

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    def table(self) -> pd.DataFrame:
        return pd.DataFrame([r.__dict__ for r in self.layers], columns=list(LayerResult.__dataclass_fields__))


def named_runs(evidence: Evidence) -> tuple[str | None, str | None]:
    """The baseline and candidate run IDs a layer's run names (None where it names none)."""
    return named_pair(evidence.tags)


def reference_runs(evidence: dict[str, Evidence]) -> tuple[str, str] | None:
    """The run IDs of the reference pair: the gate's, else the first layer naming both."""
    for layer in LAYERS:
        if layer in evidence and evidence[layer].problem is None:
            baseline, candidate = named_runs(evidence[layer])
            if baseline and candidate:
                return baseline, candidate
    return None


def mismatches(evidence: Evidence, pair: Pair, gate_run: str | None) -> list[str]:
    """Why a layer's run does not concern the release's baseline and candidate (empty: it does)."""
    out = []
    runs = dict(zip(("baseline", "candidate"), named_runs(evidence), strict=True))
    for role, want_run, want_config in (
        ("baseline", pair.baseline, pair.baseline_config),
        ("candidate", pair.candidate, pair.candidate_config),
    ):
        named = runs[role]
        config = evidence.tags.get(BASELINE_CONFIG_TAG if role == "baseline" else CANDIDATE_CONFIG_TAG, "")
        if named:
            if named != want_run:
                out.append(f"its {role} is run {named}, the release's is {want_run}")
        elif config:
            if config not in (want_config, want_run):
                out.append(f"its {role} configuration is '{config}', the release's is '{want_config}' (run {want_run})")
        else:
            out.append(f"it names no {role} (neither a run ID nor a configuration)")
    if evidence.layer == "review" and gate_run is not None:
        reviewed = evidence.tags.get("rageval.review.gate", "")
        if reviewed != gate_run:
            out.append(f"it reviews gate run {reviewed or '(none)'}, the release's gate is {gate_run}")
    return out


def _layer_verdict(evidence: Evidence) -> tuple[bool, str]:
    """Whether a layer's own evidence passes, and why."""
    tags = evidence.tags
    if evidence.layer == "review":
        status = tags.get("rageval.review.status", "")
        raw = tags.get("rageval.review.open_rejections", "")
        try:
            open_rejections = int(raw)
        except ValueError:
            return False, f"rageval.review.open_rejections is {raw!r}, not a count"
        reviewers = tags.get("rageval.review.reviewers", "") or "no reviewer named"
        if status != "complete":
            return False, f"review is {status or 'without a status'}, not complete (reviewers: {reviewers})"
        if open_rejections:
            return False, f"review has {open_rejections} open rejection(s): resolve them and record the review again"
        return True, f"review complete, 0 open rejections (reviewers: {reviewers})"
    verdict = tags.get(VERDICT_TAG, "")
    details = [str(r) for r in evidence.record.get("reasons", [])]  # online records its reasons
    details += [f"{r['rule']}: {r['reason']}" for r in evidence.record.get("rules", []) if r.get("verdict") == "fail"]
    recheck = evidence.recheck
    failing: list[str] = []
    if verdict != "pass" and not (verdict == "none" and recheck is not None):
        why = "; ".join(details) if details else "no rules were applied" if verdict == "none" else ""
        failing.append(f"{evidence.layer} verdict is {verdict or '(none)'}" + (f": {why}" if why else ""))
    if recheck is not None and not recheck.passed:
        failed = [f"{r.rule}: {r.reason}" for r in recheck.rules if r.verdict == "fail"]
        failing.append("the release policy's shadow rules fail on the recorded figures: " + "; ".join(failed))
    if failing:
        return False, "; ".join(failing)
    if verdict == "none":
        return True, "recorded without rules; the release policy's shadow rules pass on its figures"
    extra = " and the release policy's shadow rules" if recheck is not None else ""
    return True, f"{evidence.layer} verdict pass{extra}"


def decide_release(
    policy: ReleasePolicy,
    evidence: dict[str, Evidence],
    pair: Pair | None,
    *,
    now: dt.datetime,
    pair_problems: list[str] | None = None,
) -> ReleaseDecision:
    """PASS when every required layer is present, every given layer passes and is fresh enough, and
    all concern the same baseline and candidate (``pair``; ``pair_problems``: why the evaluation runs
    themselves cannot be read). An optional layer that is given and fails fails the release too:
    evidence against a candidate is not ignored because it was not asked for."""
    results: list[LayerResult] = []
    reasons: list[str] = [*(pair_problems or [])]
    if pair is None and not reasons:
        reasons.append("no layer names the baseline and candidate evaluation runs: give a gate run")
    gate = evidence.get("gate")
    gate_run = gate.run_id if gate is not None else None
    for layer in LAYERS:
        rule: LayerRule = getattr(policy.layers, layer)
        item = evidence.get(layer)
        if item is None:
            reason = f"no {layer} run given" + (" (required by the policy)" if rule.required else " (optional)")
            results.append(LayerResult(layer, rule.required, "", "absent", reason))
            if rule.required:
                reasons.append(f"{layer}: {reason}")
            continue
        problems = [item.problem] if item.problem else []
        if not problems:
            ok, why = _layer_verdict(item)
            if not ok:
                problems.append(why)
            if pair is not None:
                problems += [f"mismatch: {m}" for m in mismatches(item, pair, gate_run)]
            if policy.max_age_days is not None:
                age = (now.timestamp() * 1000 - item.started_ms) / 86_400_000
                if age > policy.max_age_days:
                    problems.append(f"the run is {age:.1f} days old, more than max_age_days {policy.max_age_days:g}")
        label = " (SIMULATED evidence)" if item.simulated else ""
        if problems:
            reason = "; ".join(problems) + label
            results.append(LayerResult(layer, rule.required, item.run_id, "fail", reason, item.simulated))
            reasons.append(f"{layer} run {item.run_id}: {reason}")
        else:
            results.append(LayerResult(layer, rule.required, item.run_id, "pass", why + label, item.simulated))
    return ReleaseDecision("fail" if reasons else "pass", results, reasons, pair)
