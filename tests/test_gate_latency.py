"""The gate's latency rules: the ratio of candidate to baseline p95 timed side by side, the absolute
budget only on declared hardware, the policy's strictness, and one real gate on two BM25 runs that
records its timing table."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import ROOT
from test_workflows import sealed_release_run

from rageval.analysis.gate import GateEvidence, GatePolicy, LatencyEvidence, decide, load_policy
from rageval.errors import PolicyError
from rageval.experiment.latency import TIMING_COLUMNS, TimingRequest, machine, per_query_ms, sample_queries, time_paired
from rageval.tracking.store import Tracker
from rageval.workflows.gate import execute_gate

POLICY = ROOT / "params" / "gates" / "release.yaml"
HERE = {"cpus": 2, "cpu_model": "Example CPU 9000 @ 2.0GHz", "memory_gb": 16.0, "architecture": "x86_64"}
CLEAN = {"permission_leaks": 0.0, "context_tokens_mean": 500.0}


def gate(**changes) -> GatePolicy:
    data = {
        "version": 1,
        "name": "t",
        "measures": {"nDCG@10": {"tolerance": 0.05}},
        "samples": 1000,
        "latency": {"max_p95_ratio": 1.5, "max_p95_ratio_changed_stages": 100, "resamples": 500},
        **changes,
    }
    return GatePolicy.model_validate(data)


def timings(baseline: np.ndarray, candidate: np.ndarray, *, same: bool = True, here=HERE) -> LatencyEvidence:
    index = [f"q{i:02d}" for i in range(len(baseline))]
    frame = pd.DataFrame({"baseline": baseline, "candidate": candidate}, index=index)
    return LatencyEvidence(frame, same, here, rounds=5, clock="cpu", wall=frame * 2)


def rules(policy: GatePolicy, evidence: LatencyEvidence | None, recorded=None) -> dict[str, tuple[str, str]]:
    same = pd.DataFrame({"nDCG@10": [0.5, 0.6]}, index=["q00", "q01"])
    decision = decide(
        policy,
        GateEvidence(
            same,
            same,
            {},
            CLEAN,
            baseline_run_id="b",
            candidate_run_id="c",
            release_evaluations=1,
            latency=evidence,
            recorded_latency=recorded,
        ),
    )
    return {r.rule: (r.verdict, r.reason) for r in decision.rules}


BASE = np.random.default_rng(7).uniform(1.0, 2.0, size=30)  # ms per query, p95 about 1.95


# --------------------------------------------------------------------------- the ratio on constructed timings


def test_a_regressing_candidate_fails_naming_the_ratio():
    verdict, reason = rules(gate(), timings(BASE, BASE * 3))["latency p95 ratio"]
    assert verdict == "fail"
    assert "ratio 3.00 (95% CI 3.00–3.00)" in reason and "over the max_p95_ratio 1.5" in reason
    assert f"p95 {np.percentile(BASE, 95):.2f} → {np.percentile(BASE * 3, 95):.2f} ms" in reason
    assert "30 queries × 5 rounds" in reason and "slower beyond noise" in reason


def test_an_equal_candidate_passes():
    verdict, reason = rules(gate(), timings(BASE, BASE.copy()))["latency p95 ratio"]
    assert verdict == "pass" and "ratio 1.00" in reason and "within the max_p95_ratio 1.5" in reason
    assert "median paired difference +0.00 ms" in reason


def test_a_ratio_over_the_limit_within_noise_passes():
    # Of 10 queries only the slowest is slower: the p95 ratio is over 1.5, but a third of the
    # resamples leave that query out, so the interval reaches 1 (as a measure's loss must be significant).
    base = BASE[:10]
    candidate = base.copy()
    candidate[np.argmax(base)] *= 4
    verdict, reason = rules(gate(), timings(base, candidate))["latency p95 ratio"]
    ratio = np.percentile(candidate, 95) / np.percentile(base, 95)
    assert ratio > 1.5 and verdict == "pass" and "CI 1.00–" in reason and "not slower beyond noise" in reason


def test_other_stages_are_held_to_their_own_limit():
    slower = timings(BASE, BASE * 30, same=False)
    verdict, reason = rules(gate(), slower)["latency p95 ratio"]
    assert verdict == "pass" and "within the max_p95_ratio_changed_stages 100" in reason
    assert "other stages than the baseline" in reason
    verdict, reason = rules(gate(), timings(BASE, BASE * 300, same=False))["latency p95 ratio"]
    assert verdict == "fail" and "ratio 300.00" in reason
    no_limit = gate(latency={"max_p95_ratio": 1.5})
    assert rules(no_limit, slower)["latency p95 ratio"][0] == "info"


def test_an_untimed_gate_fails_the_ratio():
    assert rules(gate(), None)["latency p95 ratio"] == ("fail", "no query was timed: the ratio cannot be checked")


# --------------------------------------------------------------------------- the absolute budget


def test_the_absolute_budget_is_not_applied_on_other_hardware():
    budget = gate(hardware={"name": "latency-runner", "cpus": 8, "cpu_model": "EPYC"}, latency_p95_ms=1.0)
    verdict, reason = rules(budget, timings(BASE, BASE * 10))["p95 latency budget"]
    assert verdict == "info" and reason.startswith("not applied: this machine is not the declared hardware")
    assert "latency-runner: 2 CPUs, not 8; CPU 'Example CPU 9000 @ 2.0GHz', not 'EPYC'" in reason


def test_the_absolute_budget_is_applied_on_the_declared_hardware():
    declared = {"cpus": 2, "cpu_model": "example cpu 9000", "memory_gb": 8, "architecture": "x86_64"}
    evidence = timings(BASE, BASE)  # wall = 2 x the CPU medians: p95 about 3.9 ms
    wall = np.percentile(BASE * 2, 95)
    verdict, reason = rules(gate(hardware=declared, latency_p95_ms=10), evidence)["p95 latency budget"]
    assert verdict == "pass" and reason.startswith(f"{wall:.1f} ms p95 wall time measured here")
    verdict, reason = rules(gate(hardware=declared, latency_p95_ms=2), evidence)["p95 latency budget"]
    assert verdict == "fail" and "over the budget 2" in reason


def test_recorded_latency_is_reported_as_information():
    verdict, reason = rules(gate(), timings(BASE, BASE), {"baseline": 0.3, "candidate": 282.0})["recorded p95 latency"]
    assert verdict == "info" and "baseline 0.3 ms, candidate 282.0 ms" in reason and "not compared" in reason


# --------------------------------------------------------------------------- the policy is strict


def write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "gate.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_an_unknown_latency_key_names_the_file_and_field(tmp_path):
    data = yaml.safe_load(POLICY.read_text())
    data["latency"]["max_ratio"] = 2
    with pytest.raises(PolicyError) as raised:
        load_policy(write(tmp_path, data))
    text = str(raised.value)
    assert "gate.yaml:" in text and "latency.max_ratio: unknown key 'max_ratio'" in text
    assert "max_p95_ratio" in text  # the fix lists the allowed keys


def test_a_millisecond_budget_needs_declared_hardware(tmp_path):
    data = yaml.safe_load(POLICY.read_text()) | {"latency_p95_ms": 1000}
    with pytest.raises(PolicyError) as raised:
        load_policy(write(tmp_path, data))
    (problem,) = raised.value.problems
    assert problem.file.endswith("gate.yaml") and problem.field == "latency_p95_ms"
    assert "needs hardware" in problem.message
    with pytest.raises(PolicyError, match="hardware: .*declare at least one of cpus"):
        load_policy(write(tmp_path, data | {"hardware": {"name": "box"}}))


def test_the_shipped_policy_compares_with_the_baseline():
    shipped = load_policy(POLICY)
    assert shipped.latency is not None and shipped.latency_p95_ms is None
    assert (shipped.latency.max_p95_ratio, shipped.latency.max_p95_ratio_changed_stages) == (1.5, 100)


# --------------------------------------------------------------------------- the timing procedure


def test_machine_describes_this_machine():
    here = machine()
    assert isinstance(here["cpus"], int) and here["cpus"] >= 1 and here["cpu_model"] and here["memory_gb"] > 0


def test_both_arms_are_timed_interleaved_on_the_same_queries():
    from rageval.benchmark.loading import load_benchmark
    from rageval.config.load import load_config

    base = load_config(ROOT / "params" / "bm25.yaml", split="release")
    cand = load_config(ROOT / "params" / "bm25.yaml", ["retrieval.stages.0.k1=1.2"], split="release")
    bench = load_benchmark(base.benchmark)
    queries = sample_queries(bench, "release", 8, seed=0)
    timed = time_paired(TimingRequest(base, cand, bench, queries, rounds=3, warmup=2), cache=False)
    calls = timed.calls
    assert list(calls.columns) == TIMING_COLUMNS and len(calls) == 8 * 3 * 2  # warm-up calls are not kept
    # Each query's two arms run back to back in each round, in an order that varies.
    pairs = calls.sort_values(["round", "position"]).groupby(["round", "query_id"])["position"].agg(["min", "max"])
    assert ((pairs["max"] - pairs["min"]) == 1).all()
    firsts = calls.loc[calls.groupby(["round", "query_id"])["position"].idxmin(), "arm"]
    assert set(firsts) == {"baseline", "candidate"}
    assert (calls["ms"] > 0).all() and (calls["cpu_ms"] > 0).all()
    medians = per_query_ms(calls)
    assert list(medians.index) == sorted(q.query_id for q in queries)
    one = calls[(calls["query_id"] == medians.index[0]) & (calls["arm"] == "candidate")]["cpu_ms"]
    assert medians.iloc[0]["candidate"] == pytest.approx(float(one.median()))


# --------------------------------------------------------------------------- a real gate


@pytest.fixture(scope="module")
def bm25_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Tracker, str, str]:
    tracker = Tracker(f"sqlite:///{tmp_path_factory.mktemp('latency') / 'mlflow.db'}")
    baseline = sealed_release_run(tracker, [], "baseline")
    candidate = sealed_release_run(tracker, ["retrieval.stages.0.b=0.75"], "candidate")
    return tracker, baseline, candidate


def test_a_real_gate_on_two_bm25_runs_records_its_timing_table(bm25_runs):
    tracker, baseline, candidate = bm25_runs
    outcome = execute_gate(baseline, candidate, POLICY, tracker=tracker)

    ratio = next(r for r in outcome.decision.rules if r.rule == "latency p95 ratio")
    assert ratio.verdict == "pass" and ratio.limit == 1.5  # the same stages: the tuning limit
    assert "21 queries × 5 rounds, timed here interleaved, cpu clock" in ratio.reason
    info = tracker.run(outcome.run_id)
    assert info.sealed and tracker.verify(outcome.run_id) == []
    assert "latency p95 ratio" in info.tags["mlflow.note.content"]  # the figures are in the description
    root = Path(info.artifact_uri.removeprefix("file://"))
    table = pd.read_csv(root / "tables" / "latency_timings.csv")
    assert list(table.columns) == TIMING_COLUMNS and len(table) == 21 * 5 * 2
    assert set(table["arm"]) == {"baseline", "candidate"} and set(table["round"]) == set(range(5))
    per_query = pd.read_csv(root / "tables" / "latency_per_query.csv").set_index("query_id")
    assert np.percentile(per_query["candidate"], 95) / np.percentile(per_query["baseline"], 95) == pytest.approx(
        ratio.value
    )
    record = json.loads((root / "decision.json").read_text())
    assert record["latency"]["same_stages"] is True and record["latency"]["queries"] == 21
    assert set(record["recorded_latency_p95_ms"]) == {"baseline", "candidate"}
    assert "tables/latency_timings.json" in info.tags["mlflow.loggedArtifacts"]
    assert info.metrics["p95_cpu_ratio"] == pytest.approx(ratio.value)
    assert not [k for k in info.metrics if "/" in k]  # each arm's p95 is decision.json's, not a metric key
    assert record["latency"]["clock"] == "cpu"
    # results.md carries the paired timing, the one to quote, beside the recorded figures
    results = (root / "results.md").read_text()
    paired = next(r for r in record["rules"] if r["rule"] == "latency p95 ratio")
    assert f"- **Paired** (this gate, both arms timed interleaved on one machine): {paired['reason']}" in results
    assert f"ratio {ratio.value:.2f}" in results and "interleaved" in paired["reason"]
    assert "- Recorded by each run where and when it ran (noise beside other work, not compared): baseline" in results
    assert record["latency"]["p95_ms"]["candidate"] == pytest.approx(np.percentile(per_query["candidate"], 95))


def test_a_real_millisecond_budget_is_timed_only_on_its_hardware(bm25_runs, tmp_path: Path):
    tracker, baseline, candidate = bm25_runs
    data = yaml.safe_load(POLICY.read_text())
    del data["latency"]  # the budget alone: the gate times both arms only where it applies
    here = machine()
    elsewhere = write(tmp_path, data | {"hardware": {"cpus": here["cpus"] + 1}, "latency_p95_ms": 1000})
    outcome = execute_gate(baseline, candidate, elsewhere, tracker=tracker)
    (budget,) = [r for r in outcome.decision.rules if r.rule == "p95 latency budget"]
    assert budget.verdict == "info" and f"{here['cpus']} CPUs, not {here['cpus'] + 1}" in budget.reason
    root = Path(tracker.run(outcome.run_id).artifact_uri.removeprefix("file://"))
    assert not (root / "tables" / "latency_timings.csv").exists()

    declared = write(tmp_path, data | {"hardware": {"cpus": here["cpus"]}, "latency_p95_ms": 1000})
    outcome = execute_gate(baseline, candidate, declared, tracker=tracker)
    (budget,) = [r for r in outcome.decision.rules if r.rule == "p95 latency budget"]
    assert budget.verdict == "pass" and "ms p95 wall time measured here on the declared hardware" in budget.reason
    root = Path(tracker.run(outcome.run_id).artifact_uri.removeprefix("file://"))
    wall = pd.read_csv(root / "tables" / "latency_timings.csv").query("arm == 'candidate'")
    assert budget.value == pytest.approx(np.percentile(wall.groupby("query_id")["ms"].median(), 95))


def test_torch_runs_on_the_policy_threads_while_timing_and_is_restored_after():
    torch = pytest.importorskip("torch")
    from rageval.experiment.latency import _torch_threads

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with _torch_threads(1):
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2
        with _torch_threads(None):
            assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
