"""The gate's non-inferiority rules: max_loss on the plain delta (fails a loss the test does not call
significant), ci_lower_above on the delta's bootstrap interval, how they combine with the
significance rule, their strict configuration, and the one list of their names."""

from __future__ import annotations

from typing import get_args

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT

from rageval.analysis import significance_table
from rageval.analysis.gate import LOSS_RULES, NONINFERIORITY_RULES, GateEvidence, GatePolicy, decide, load_policy
from rageval.analysis.gate_policy import MeasureRule, NonInferiorityRule, SliceRule
from rageval.analysis.noninferiority import CHECKS
from rageval.errors import PolicyError
from rageval.evaluation.stats import bootstrap_ci

M = "nDCG@10"
CLEAN = {"permission_leaks": 0.0, "context_tokens_mean": 500.0}
# 20 queries: six lose 0.3, four gain 0.25, ten stay; mean delta -0.04. The randomization test
# (10,000 sign patterns, seed 0) gives p 0.3513: a real loss, far from significant. Baseline mean
# 13.95 / 20 = 0.6975, candidate 0.6975 - 0.04 = 0.6575.
BASE = [0.9, 0.8, 0.7, 0.85, 0.6, 0.75, 0.5, 0.65, 0.8, 0.7, 0.9, 0.55, 0.6, 0.7, 0.8, 0.45, 0.75, 0.6, 0.7, 0.65]
DELTA = [-0.3] * 6 + [0.25] * 4 + [0.0] * 10


def frame(values, column: str = M) -> pd.DataFrame:
    return pd.DataFrame({column: values}, index=[f"q{i:02d}" for i in range(len(values))])


def policy(rule: dict, **changes) -> GatePolicy:
    return GatePolicy.model_validate({"version": 1, "name": "t", "measures": {M: rule}, **changes})


def rules(gate: GatePolicy, before: pd.DataFrame, after: pd.DataFrame, slices=None):
    decision = decide(
        gate,
        GateEvidence(
            before, after, slices or {}, CLEAN, baseline_run_id="b", candidate_run_id="c", release_evaluations=1
        ),
    )
    return decision, {r.rule: r for r in decision.rules}


def twenty() -> tuple[pd.DataFrame, pd.DataFrame]:
    base = np.array(BASE)
    return frame(base), frame(base + np.array(DELTA))


# --------------------------------------------------------------------------- max_loss: the plain delta


def test_a_real_loss_that_is_not_significant_but_exceeds_the_margin_fails():
    before, after = twenty()
    decision, found = rules(policy({"tolerance": 0.01, "max_loss": 0.02}), before, after)
    significance, margin = found[f"measure {M}"], found[f"measure {M} max_loss"]
    # The significance rule alone would pass it ...
    assert significance.verdict == "pass" and "not significant at alpha 0.05" in significance.reason
    assert "p 0.3513, Holm 0.3513" in significance.reason
    # ... the margin does not, and the decision fails.
    low, high = bootstrap_ci(np.array(DELTA), confidence=0.95, resamples=10_000, seed=0)
    assert margin.verdict == "fail" and not decision.passed
    assert margin.reason == (
        f"0.6975 → 0.6575 (Δ -0.0400, 95% CI {low:+.4f} to {high:+.4f}, n=20): loss +0.0400 beyond the max_loss "
        "0.02, which fails it significant or not (p 0.3513, Holm 0.3513)"
    )
    assert margin.value == pytest.approx(0.04) and margin.limit == 0.02


def test_a_loss_within_the_margin_passes():
    before, after = twenty()
    decision, found = rules(policy({"tolerance": 0.01, "max_loss": 0.05}), before, after)
    margin = found[f"measure {M} max_loss"]
    assert margin.verdict == "pass" and "loss +0.0400 within the max_loss 0.05" in margin.reason
    assert decision.passed


def test_a_gain_is_no_loss():
    _, found = rules(policy({"max_loss": 0.02}), frame([0.5, 0.6]), frame([0.6, 0.6]))
    rule = found[f"measure {M} max_loss"]
    assert rule.verdict == "pass" and rule.reason.endswith("n=2): no loss (max_loss 0.02)")
    assert rule.value == pytest.approx(-0.05)


def test_a_loss_equal_to_the_margin_passes_despite_rounding():
    # 0.6 - 0.55 is 0.04999999999999993 in floating point, 0.7 - 0.65 is 0.05000000000000004
    decision, found = rules(policy({"max_loss": 0.05}), frame([0.6, 0.7]), frame([0.55, 0.65]))
    assert found[f"measure {M} max_loss"].verdict == "pass" and decision.passed


def test_both_rules_configured_each_is_checked_and_any_failure_fails():
    # Every query loses 0.015: significant (exact p = 2/2^12 over 12 queries) and beyond the tolerance
    # 0.01, yet within the margin 0.02: the significance rule fails the candidate on its own.
    before = frame([0.8] * 12)
    decision, found = rules(policy({"tolerance": 0.01, "max_loss": 0.02}), before, before - 0.015)
    assert found[f"measure {M}"].verdict == "fail" and "a significant loss beyond the tolerance 0.01" in (
        found[f"measure {M}"].reason
    )
    assert found[f"measure {M} max_loss"].verdict == "pass" and not decision.passed


# --------------------------------------------------------------------------- ci_lower_above: non-inferiority


def test_the_interval_rule_on_constant_deltas():
    # Every query's delta equal: the bootstrap interval is that one value.
    before = frame([0.6] * 10)
    _, found = rules(policy({"ci_lower_above": -0.02}), before, before - 0.01)
    rule = found[f"measure {M} ci_lower_above"]
    assert rule.verdict == "pass" and rule.value == pytest.approx(-0.01) and rule.limit == -0.02
    assert "95% CI -0.0100 to -0.0100, n=10" in rule.reason
    assert "lower bound -0.0100 lies above -0.02: non-inferiority within the margin 0.02 shown" in rule.reason
    decision, found = rules(policy({"ci_lower_above": -0.02}), before, before - 0.03)
    rule = found[f"measure {M} ci_lower_above"]
    assert rule.verdict == "fail" and not decision.passed
    assert "lower bound -0.0300 is not above -0.02: non-inferiority within the margin 0.02 not shown" in rule.reason


def test_the_interval_rule_asks_for_evidence_where_the_plain_delta_does_not():
    # The 20-query case: a mean loss of 0.04 is within a margin of 0.1, but the interval reaches
    # below -0.1 (20 queries with losses of 0.3 are too few to show it is not worse than that).
    before, after = twenty()
    decision, found = rules(policy({"max_loss": 0.1, "ci_lower_above": -0.1}), before, after)
    low, _ = bootstrap_ci(np.array(DELTA), confidence=0.95, resamples=10_000, seed=0)
    assert low < -0.1
    assert found[f"measure {M} max_loss"].verdict == "pass"
    rule = found[f"measure {M} ci_lower_above"]
    assert rule.verdict == "fail" and rule.value == low and f"lower bound {low:+.4f} is not above -0.1" in rule.reason
    assert not decision.passed


def test_the_gate_reads_the_interval_the_comparison_prints():
    # Same queries, confidence, resamples and seed: the gate's interval is the comparison's delta CI.
    before, after = twenty()
    _, found = rules(policy({"ci_lower_above": -0.2}, resamples=2000, seed=3), before, after)
    table = significance_table({"b": before, "c": after}, "b", {}, [M], samples=1000, resamples=2000, seed=3)
    row = table[(table["run"] == "c") & (table["slice"] == "all")].iloc[0]
    assert found[f"measure {M} ci_lower_above"].value == row["delta_ci_low"]
    assert f"to {row['delta_ci_high']:+.4f}, n=20" in found[f"measure {M} ci_lower_above"].reason


def test_a_critical_slice_takes_the_interval_rule():
    # rare: q02 and q03, deltas +0.1 and -0.3; the bootstrap means of two values are -0.3, -0.1 and
    # +0.1, so the 95% interval runs from -0.3 to +0.1.
    gate = policy({"tolerance": 0.05}, critical_slices={"rare": {"measure": M, "ci_lower_above": -0.2}})
    before, after = frame([0.9, 0.8, 0.4, 0.4]), frame([0.9, 0.8, 0.5, 0.1])
    _, found = rules(gate, before, after, slices={"q02": ["rare"], "q03": ["rare"]})
    rule = found[f"slice rare {M} ci_lower_above"]
    assert rule.verdict == "fail" and rule.value == pytest.approx(-0.3)
    assert rule.reason.startswith("0.4000 → 0.3000 (Δ -0.1000, 95% CI -0.3000 to +0.1000, n=2)")


# --------------------------------------------------------------------------- configuration


def write(tmp_path, text: str):
    path = tmp_path / "gate.yaml"
    path.write_text(text)
    return path


def problems(path) -> str:
    with pytest.raises(PolicyError) as raised:
        load_policy(path)
    return str(raised.value)


def test_an_unknown_rule_key_names_the_field_and_line(tmp_path):
    path = write(tmp_path, "version: 1\nname: t\nmeasures:\n  nDCG@10: {tolerance: 0.01, margin: 0.02}\n")
    assert "gate.yaml:4: measures.nDCG@10.margin: unknown key 'margin'" in problems(path)


def test_a_positive_ci_lower_above_is_refused_with_the_fix(tmp_path):
    path = write(tmp_path, "version: 1\nname: t\nmeasures:\n  nDCG@10:\n    ci_lower_above: 0.02\n")
    text = problems(path)
    assert "gate.yaml:5: measures.nDCG@10.ci_lower_above:" in text
    assert "for a margin of 0.02 write -0.02" in text


def test_negative_margins_and_bad_intervals_are_refused(tmp_path):
    path = write(
        tmp_path,
        "version: 1\nname: t\nconfidence: 1.5\nmeasures:\n  nDCG@10: {max_loss: -0.01}\n"
        "critical_slices:\n  rare: {measure: nDCG@10}\n",
    )
    text = problems(path)
    assert "3 problems" in text
    assert "gate.yaml:3: confidence:" in text and "gate.yaml:5: measures.nDCG@10.max_loss:" in text
    assert "critical_slices.rare: give at least one of min, max_loss, ci_lower_above" in text


def test_one_list_of_rule_names():
    assert NONINFERIORITY_RULES == get_args(NonInferiorityRule) and LOSS_RULES == ("tolerance", *NONINFERIORITY_RULES)
    assert set(CHECKS) == set(NONINFERIORITY_RULES)
    assert set(LOSS_RULES) <= set(MeasureRule.model_fields)
    assert set(NONINFERIORITY_RULES) <= set(SliceRule.model_fields)
    docs = (ROOT / "docs" / "comparison.md").read_text()
    shipped = load_policy(ROOT / "params" / "gates" / "release.yaml")
    for name in LOSS_RULES:
        assert f"`{name}`" in docs, name
        assert any(getattr(rule, name) is not None for rule in shipped.measures.values()), name
