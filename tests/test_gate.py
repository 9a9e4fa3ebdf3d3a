"""The release gate: policy validation, every rule by hand, release-only, the release-evaluation
counter and its warning, and pass/fail decisions recorded as sealed runs."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import ROOT
from test_compare import record_run
from typer.testing import CliRunner

from rageval.analysis import (
    GatePolicy,
    check_policy_against,
    decide,
    load_policy,
    require_release,
    significance_table,
)
from rageval.analysis.gate import GateEvidence
from rageval.errors import ComparisonError, PolicyError
from rageval.tracking.store import Tracker

POLICY = ROOT / "params" / "gates" / "release.yaml"
M = "nDCG@10"
FILTERED = 'retrieval.stages=[{"type": "bm25", "k1": %s, "b": %s, "candidates": %s}, {"type": "filter"}]'


def policy(**changes) -> GatePolicy:
    data = {"version": 1, "name": "t", "measures": {M: {"tolerance": 0.05}}, "samples": 1000, **changes}
    return GatePolicy.model_validate(data)


def scores(values: list[float], column: str = "nDCG@10") -> pd.DataFrame:
    return pd.DataFrame({column: values}, index=[f"q{i:02d}" for i in range(len(values))])


CLEAN = {"permission_leaks": 0.0, "context_tokens_mean": 500.0}


def verdicts(decision) -> dict[str, tuple[str, str]]:
    return {r.rule: (r.verdict, r.reason) for r in decision.rules}


def run_decide(gate: GatePolicy, before: pd.DataFrame, after: pd.DataFrame, metrics=CLEAN, slices=None, evaluations=1):
    return decide(
        gate,
        GateEvidence(
            before,
            after,
            slices or {},
            metrics,
            baseline_run_id="b",
            candidate_run_id="c",
            release_evaluations=evaluations,
            family="fam",
        ),
    )


# --------------------------------------------------------------------------- rules by hand


def test_a_significant_loss_beyond_the_tolerance_fails():
    before, after = scores([0.9] * 12), scores([0.5] * 12)  # every query loses 0.4: exact p = 2/4096
    decision = run_decide(policy(), before, after)
    verdict, reason = verdicts(decision)["measure nDCG@10"]
    assert verdict == "fail" and not decision.passed and decision.verdict == "fail"
    assert "0.9000 → 0.5000 (Δ -0.4000, n=12)" in reason and "significant loss beyond the tolerance 0.05" in reason
    assert decision.largest_losses["query_id"].tolist()[:3] == ["q00", "q01", "q02"]


def test_a_loss_within_tolerance_or_not_significant_passes():
    within = run_decide(policy(), scores([0.9] * 12), scores([0.88] * 12))
    assert (
        verdicts(within)["measure nDCG@10"][0] == "pass"
        and "within the tolerance" in verdicts(within)["measure nDCG@10"][1]
    )
    # one query loses 0.8: mean −0.2 beyond tolerance, but a single loss is never significant (p = 1)
    noisy = run_decide(policy(), scores([0.9, 0.5, 0.5, 0.5]), scores([0.1, 0.5, 0.5, 0.5]))
    verdict, reason = verdicts(noisy)["measure nDCG@10"]
    assert verdict == "pass" and "not significant at alpha 0.05" in reason and noisy.passed


def test_critical_slices_min_and_max_loss():
    gate = policy(critical_slices={"rare": {"measure": M, "min": 0.6, "max_loss": 0.1}})
    before, after = scores([0.9, 0.8, 0.4, 0.4]), scores([0.9, 0.8, 0.5, 0.1])
    slices = {"q02": ["rare"], "q03": ["rare"]}
    rules = verdicts(run_decide(gate, before, after, slices=slices))
    # rare: 0.40 → 0.30 over 2 queries
    assert rules["slice rare nDCG@10 min"] == ("fail", "0.4000 → 0.3000 over 2 queries: below the minimum 0.6")
    # deltas +0.1 and -0.3: the bootstrap means of two values are -0.3, -0.1 and +0.1, so the 95% CI is -0.3 to +0.1
    assert rules["slice rare nDCG@10 max_loss"] == (
        "pass",
        "0.4000 → 0.3000 (Δ -0.1000, 95% CI -0.3000 to +0.1000, n=2): loss +0.1000 within the max_loss 0.1",
    )
    empty = verdicts(run_decide(gate, before, after, slices={}))
    assert empty["slice rare nDCG@10"][0] == "fail" and "cannot be checked" in empty["slice rare nDCG@10"][1]


def test_leaks_and_context_budgets():
    # The latency rules (measured by the gate, not read from the run) are tested in test_gate_latency.py.
    gate = policy(context_tokens_mean=400)
    same = scores([0.5, 0.6])
    rules = verdicts(run_decide(gate, same, same, metrics={**CLEAN, "permission_leaks": 2.0}))
    assert rules["permission leaks"] == ("fail", "2 retrieved chunk(s) the asker may not see (allowed: 0)")
    assert rules["context tokens"] == ("fail", "500.0 tokens (mean) over the budget 400")
    assert "p95 latency budget" not in rules and "latency p95 ratio" not in rules  # the policy sets neither
    missing = verdicts(run_decide(gate, same, same, metrics={}))
    assert all(missing[r][0] == "fail" for r in ("permission leaks", "context tokens"))
    assert "records no permission_leaks" in missing["permission leaks"][1]


def test_release_evaluations_past_the_limit_warn_without_failing():
    same = scores([0.5, 0.6])
    quiet = run_decide(policy(max_release_evaluations=3), same, same, evaluations=3)
    assert verdicts(quiet)["release evaluations"][0] == "pass" and quiet.warnings == []
    loud = run_decide(policy(max_release_evaluations=3), same, same, evaluations=4)
    verdict, reason = verdicts(loud)["release evaluations"]
    assert verdict == "warn" and loud.passed
    assert "4 release evaluation(s) of family 'fam'" in reason and "becoming training data" in reason
    assert loud.warnings == [reason]


def test_holm_runs_over_the_policy_measures():
    # two measures, both losing on every one of 6 queries: exact p = 2/64 each; Holm: 2 x 2/64 = 0.0625 > 0.05
    gate = policy(measures={M: {"tolerance": 0.0}, "R@20": {"tolerance": 0.0}})
    before = pd.concat([scores([0.9] * 6), scores([0.9] * 6, "R@20")], axis=1)
    after = pd.concat([scores([0.5] * 6), scores([0.5] * 6, "R@20")], axis=1)
    rules = verdicts(run_decide(gate, before, after))
    assert rules["measure nDCG@10"][0] == "pass" and "p 0.0312, Holm 0.0625" in rules["measure nDCG@10"][1]


def test_a_measure_no_query_pairs_fails_and_is_not_counted_in_the_holm_family():
    # R@20 has no query both runs scored: its rule fails, and it is no test, so nDCG@10 is a family of
    # one (Holm = p = 2/64), as the comparison's significance table counts an empty cell.
    gate = policy(measures={M: {"tolerance": 0.0}, "R@20": {"tolerance": 0.0}})
    before = pd.concat([scores([0.9] * 6), scores([float("nan")] * 6, "R@20")], axis=1)
    after = pd.concat([scores([0.5] * 6), scores([0.5] * 6, "R@20")], axis=1)
    rules = verdicts(run_decide(gate, before, after))
    assert rules["measure R@20"] == ("fail", "no query was evaluated by both runs")
    verdict, reason = rules["measure nDCG@10"]
    assert verdict == "fail" and "p 0.0312, Holm 0.0312" in reason


def test_the_gate_and_the_comparison_give_one_paired_test():
    # 14 queries: past exact enumeration at 1000 samples, so both read the same seeded Monte Carlo test
    before = scores([0.9, 0.7, 0.8, 0.6, 0.9, 0.4, 0.5, 0.3, 0.6, 0.7, 0.8, 0.2, 0.4, 0.9])
    after = scores([0.8, 0.7, 0.6, 0.6, 0.5, 0.5, 0.5, 0.1, 0.6, 0.4, 0.8, 0.1, 0.3, 0.9])
    reason = verdicts(run_decide(policy(), before, after))["measure nDCG@10"][1]
    table = significance_table({"b": before, "c": after}, "b", {}, [M], samples=1000, resamples=200)
    row = table[table["run"] == "c"].iloc[0]
    assert row["p_value"] == row["p_holm"] and 0 < row["p_value"] < 1
    assert f"(Δ {row['delta']:+.4f}, n=14), p {row['p_value']:.4f}, Holm {row['p_holm']:.4f}" in reason


# --------------------------------------------------------------------------- policy files


def test_the_shipped_policy_loads():
    loaded = load_policy(POLICY)
    assert loaded.name == "release" and loaded.permission_leaks == 0 and "nDCG@10" in loaded.measures


def test_a_bad_policy_names_file_line_and_key(tmp_path):
    data = yaml.safe_load(POLICY.read_text())
    data["critical_slices"]["negation"] = {"measure": "nDCG@10"}
    data["latency_budget"] = 100
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(PolicyError) as raised:
        load_policy(path)
    text = str(raised.value)
    assert "2 problems" in text and "bad.yaml:" in text
    assert "latency_budget: unknown key 'latency_budget'" in text and "allowed keys here:" in text
    assert "critical_slices.negation: give at least one of min, max_loss, ci_lower_above" in text


def test_a_policy_naming_what_the_runs_lack_is_refused():
    gate = policy(critical_slices={"nope": {"measure": "AP", "min": 0.1}})
    with pytest.raises(PolicyError) as raised:
        check_policy_against(gate, ["R@20"], ["rare"], "gate.yaml")
    fields = [p.field for p in raised.value.problems]
    assert fields == ["measures.nDCG@10", "critical_slices.nope", "critical_slices.nope.measure"]


def test_only_release_runs_are_gated():
    require_release({"rageval.split": "release"}, "r1", "candidate")
    with pytest.raises(ComparisonError, match="only runs on the 'release' split; the baseline run r2 is on 'dev'"):
        require_release({"rageval.split": "dev"}, "r2", "baseline")


# --------------------------------------------------------------------------- recorded decisions


@pytest.fixture(scope="module")
def release_runs(store):
    """A filtered BM25 baseline, a close candidate and a starved one (3 candidates), on release."""
    made = {}
    for key, values in (("baseline", (0.9, 0.4, 100)), ("close", (1.2, 0.75, 100)), ("starved", (0.9, 0.4, 3))):
        made[key] = record_run(
            store,
            split="release",
            overrides=[FILTERED % values],
            name=f"filtered-{key}",
            experiment="gate-tests",
            family="gate-tests-family",
        )
    return made


def test_the_release_counter_increases_and_warns_past_the_threshold(release_runs, store, tmp_path):
    from rageval.workflows.guards import release_warnings

    tracker = Tracker(store)
    counts = [
        tracker.run(release_runs[k]).tags["rageval.release.evaluations"] for k in ("baseline", "close", "starved")
    ]
    assert counts == ["1", "2", "3"]
    assert "release_evaluations" not in tracker.run(release_runs["starved"]).metrics  # the tag alone: one column
    info = tracker.run(release_runs["close"])
    assert release_warnings(tracker, [info], limit=3) == []
    (warning,) = release_warnings(tracker, [info], limit=2)
    assert (
        f"run {info.run_id} was chosen after 3 release evaluations of family 'gate-tests-family' (more than 2)"
        in warning
    )

    data = yaml.safe_load(POLICY.read_text()) | {"max_release_evaluations": 2}
    strict = tmp_path / "strict.yaml"
    strict.write_text(yaml.safe_dump(data))
    result = CliRunner().invoke(
        app(),
        [
            "gate",
            "--baseline",
            release_runs["baseline"],
            "--candidate",
            release_runs["close"],
            "--policy",
            str(strict),
            "--tracking-uri",
            store,
        ],
    )
    assert result.exit_code == 0, result.output
    assert (
        "WARN  release evaluations: 3 release evaluation(s)" in result.output
        and "becoming training data" in result.output
    )


def app():
    from rageval.cli import app

    return app


def test_gate_pass_is_recorded_with_reasons(release_runs, store):
    result = CliRunner().invoke(
        app(),
        [
            "gate",
            "--baseline",
            release_runs["baseline"],
            "--candidate",
            release_runs["close"],
            "--policy",
            str(POLICY),
            "--tracking-uri",
            store,
        ],
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert any(line.startswith("PASS  measure nDCG@10:") for line in lines)
    assert any(line.startswith("PASS  permission leaks: 0 retrieved chunk(s)") for line in lines)
    assert "decision run" in result.output and "sealed: PASS" in result.output
    decision_run = next(line.split()[2] for line in lines if line.startswith("decision run"))
    tracker = Tracker(store)
    info = tracker.run(decision_run)
    assert info.sealed and tracker.verify(decision_run) == []
    assert info.tags["rageval.kind"] == "gate" and info.tags["rageval.verdict"] == "pass"
    assert (
        info.tags["rageval.baseline"] == release_runs["baseline"]
        and info.tags["rageval.candidates"] in set(release_runs.values()) - {release_runs["baseline"]}
        and info.params == {}  # the policy's name is rageval.policy, the policy whole policy.yaml
    )
    assert "rageval.split" not in info.tags  # a decision is not a release evaluation
    root = Path(info.artifact_uri.removeprefix("file://"))
    record = json.loads((root / "decision.json").read_text())
    assert record["verdict"] == "pass" and record["baseline"]["run_id"] == release_runs["baseline"]
    assert (root / "baseline_config.yaml").read_text().startswith("version: 1")
    assert {r["rule"] for r in record["rules"]} >= {
        "measure nDCG@10",
        "permission leaks",
        "latency p95 ratio",
        "recorded p95 latency",
        "context tokens",
    }
    # Both filtered BM25 runs have the same stages: the tuning limit applies, and BM25 against BM25 is within it.
    assert any(line.startswith("PASS  latency p95 ratio:") and "max_p95_ratio 1.5" in line for line in lines)
    assert record["latency"]["same_stages"] is True and (root / "tables" / "latency_timings.csv").is_file()


def test_gate_fail_names_the_rules_and_the_largest_losses(release_runs, store):
    result = CliRunner().invoke(
        app(),
        [
            "gate",
            "--baseline",
            release_runs["baseline"],
            "--candidate",
            release_runs["starved"],
            "--policy",
            str(POLICY),
            "--tracking-uri",
            store,
        ],
    )
    assert result.exit_code == 1, result.output
    assert "FAIL  measure R@20:" in result.output and "a significant loss beyond the tolerance 0.02" in result.output
    assert "largest losses on nDCG@10: q-" in result.output and "sealed: FAIL" in result.output
    decision_run = next(line.split()[2] for line in result.output.splitlines() if line.startswith("decision run"))
    info = Tracker(store).run(decision_run)
    assert info.sealed and info.tags["rageval.verdict"] == "fail" and info.metrics["rules_failed"] >= 1


def test_a_gate_on_the_dev_split_is_refused(store, release_runs):
    dev = record_run(store, overrides=[FILTERED % (0.9, 0.4, 100)], name="filtered-dev", experiment="gate-tests")
    before = {r.run_id for r in Tracker(store).runs("gate-tests")}
    result = CliRunner().invoke(
        app(),
        [
            "gate",
            "--baseline",
            release_runs["baseline"],
            "--candidate",
            dev,
            "--policy",
            str(POLICY),
            "--tracking-uri",
            store,
        ],
    )
    assert result.exit_code == 1
    assert f"the candidate run {dev} is on 'dev'" in result.output
    assert {r.run_id for r in Tracker(store).runs("gate-tests")} == before
