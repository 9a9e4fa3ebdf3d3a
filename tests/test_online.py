"""Online evidence: the log's schema, the import and metrics policies, the statistics against
statsmodels, scipy and their formulas by hand, the sequential interval against its integral, the
simulator's click model, the decision's refusals, and a sealed online run end to end."""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import DEMO, ROOT
from scipy import integrate, stats
from typer.testing import CliRunner

from rageval.errors import InputError, PolicyError
from rageval.release.online import (
    MetricsPolicy,
    analyze,
    confidence_sequence,
    events_frame,
    fixed_horizon,
    load_events,
    load_import_policy,
    load_metrics_policy,
    sample_ratio,
)
from rageval.release.online_decision import decide_online
from rageval.release.simulate_online import Simulation, simulate

POLICY = ROOT / "params" / "online" / "policy.yaml"
METRICS = ROOT / "params" / "online" / "metrics.yaml"
TODAY = dt.date(2026, 12, 1)
GOOD = {
    "session_id": "s-1",
    "arm": "baseline",
    "time": "2026-11-02T09:00:00+00:00",
    "successful_search": True,
    "citation_opened": True,
    "citation_rank": 2,
    "reformulation": False,
    "escalation": False,
    "latency_ms": 120.5,
}


def write_log(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def policy(**changes) -> MetricsPolicy:
    data = yaml.safe_load(METRICS.read_text())
    data.update(changes)
    return MetricsPolicy.model_validate(data)


# --------------------------------------------------------------------------- the log's schema


def test_log_errors_name_file_line_and_field(tmp_path: Path):
    rows = [
        GOOD,
        {**GOOD, "session_id": "s-2", "arm": "treatment"},
        {**GOOD, "session_id": "s-3", "query": "how do I reset my password"},
        {**GOOD, "session_id": "s-4", "citation_opened": False},
        {**GOOD, "session_id": "jane doe@example.com"},
        {k: v for k, v in GOOD.items() if k != "latency_ms"} | {"session_id": "s-6"},
        GOOD,
        {**GOOD, "session_id": "s-8", "time": "2026-11-02T09:00:00"},
    ]
    log = write_log(tmp_path / "log.jsonl", rows)
    with pytest.raises(InputError) as raised:
        load_events(log)
    found = {(p.line, p.field): p for p in raised.value.problems}
    assert all(p.file == str(log) for p in raised.value.problems)
    assert "'baseline' or 'candidate'" in found[(2, "arm")].message
    assert "raw text" in found[(3, None)].message and "query_hash" in found[(3, None)].message
    assert "citation_rank is given exactly when citation_opened" in found[(4, None)].message
    assert "opaque or hashed" in found[(5, "session_id")].message
    assert found[(6, "latency_ms")].message == "missing required key"
    assert "appears again (first on line 1)" in found[(7, "session_id")].message
    assert "UTC offset" in found[(8, "time")].message
    assert len(raised.value.problems) == 7


def test_parquet_reads_as_jsonl_does(tmp_path: Path):
    rows = [GOOD, {**GOOD, "session_id": "s-2", "arm": "candidate", "citation_opened": False, "citation_rank": None}]
    from_jsonl = load_events(write_log(tmp_path / "log.jsonl", rows))
    frame = pd.DataFrame(rows).assign(time=lambda f: pd.to_datetime(f["time"]))
    frame.to_parquet(tmp_path / "log.parquet")
    assert load_events(tmp_path / "log.parquet") == from_jsonl
    frame.assign(arm=["baseline", "control"]).to_parquet(tmp_path / "bad.parquet")
    with pytest.raises(InputError) as raised:
        load_events(tmp_path / "bad.parquet")
    assert [(p.line, p.field) for p in raised.value.problems] == [(2, "arm")]


def test_a_log_mixing_simulated_and_real_units_is_refused(tmp_path: Path):
    log = write_log(tmp_path / "log.jsonl", [GOOD, {**GOOD, "session_id": "s-2", "simulated": True}])
    with pytest.raises(InputError, match="mixes simulated and real units"):
        load_events(log)


# --------------------------------------------------------------------------- policies


def test_the_example_policies_load():
    assert load_import_policy(POLICY, TODAY).authorization == "DPA-2026-014"
    assert [m for m, d in load_metrics_policy(METRICS).metrics.items() if d.role == "guardrail"] == [
        "reformulation_rate",
        "escalation_rate",
        "latency_ms",
    ]


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"authorization": None}, "authorization", "no authorization is named"),
        ({"authorization": "approved by Jane on the phone"}, "authorization", "looks like text"),
        ({"redaction": None}, "redaction", "missing required key"),
        ({"redaction": {"rules": "presidio", "version": "1", "removed": ["jane@x.org"]}}, "redaction", "never the"),
        ({"retention": "2026-11-30"}, "retention", "past its retention date 2026-11-30 (today is 2026-12-01)"),
    ],
)
def test_an_import_policy_without_its_terms_is_refused(tmp_path: Path, change, field, words):
    data = {**yaml.safe_load(POLICY.read_text()), **change}
    data = {k: v for k, v in data.items() if v is not None}
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(PolicyError) as raised:
        load_import_policy(path, TODAY)
    problem = raised.value.problems[0]
    assert problem.file == str(path) and problem.field == field and words in problem.message
    assert problem.line is not None or words == "missing required key"  # a key that is there: its line


PROPORTION = {"kind": "proportion", "event": "successful_search", "direction": "higher", "role": "guardrail"}


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"metrics": {"m": {**PROPORTION, "role": "primary"}}}, "needs mde"),
        ({"metrics": {"m": {**PROPORTION, "event": "latency_ms", "margin": 1}}}, "a proportion metric counts one of"),
        ({"planned_split": {"baseline": 0.5, "candidate": 0.6}}, "add up to 1"),
        ({"metrics": {"m": {**PROPORTION, "role": "primary", "claim": "non-inferiority"}}}, "needs margin > 0"),
        ({"metrics": {"m": {**PROPORTION, "margin": 0.1, "claim": "non-inferiority"}}}, "claim is a primary"),
        ({"metrics": {"m": {**PROPORTION, "role": "primary", "claim": "parity", "mde": 0.1}}}, "non-inferiority"),
    ],
)
def test_metric_definitions_are_strict(tmp_path: Path, change, words):
    data = {**yaml.safe_load(METRICS.read_text()), **change}
    path = tmp_path / "metrics.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(PolicyError, match=words) as raised:
        load_metrics_policy(path)
    assert raised.value.problems[0].file == str(path)


# --------------------------------------------------------------------------- statistics


def wilson(count: int, n: int, z: float) -> tuple[float, float]:
    p = count / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def test_proportions_match_the_formulas_by_hand():
    cand = np.array([1] * 130 + [0] * 70, dtype=float)
    base = np.array([1] * 110 + [0] * 90, dtype=float)
    low, high, p, test = fixed_horizon("proportion", base, cand, 0.05)
    # Pooled two-proportion z-test.
    pooled = 240 / 400
    z = (0.65 - 0.55) / math.sqrt(pooled * (1 - pooled) * (2 / 200))
    assert p == pytest.approx(2 * stats.norm.sf(abs(z)), rel=1e-12)
    # Newcombe's hybrid score interval (method 10, Newcombe 1998) from the two Wilson intervals.
    zc = stats.norm.ppf(0.975)
    (l1, u1), (l0, u0) = wilson(130, 200, zc), wilson(110, 200, zc)
    assert low == pytest.approx(0.1 - math.sqrt((0.65 - l1) ** 2 + (u0 - 0.55) ** 2), abs=1e-12)
    assert high == pytest.approx(0.1 + math.sqrt((u1 - 0.65) ** 2 + (0.55 - l0) ** 2), abs=1e-12)
    assert "z-test" in test


def test_means_match_welch_by_hand():
    rng = np.random.default_rng(3)
    base, cand = rng.normal(120, 20, 80), rng.normal(126, 35, 50)
    low, high, p, _ = fixed_horizon("mean", base, cand, 0.05)
    v0, v1 = base.var(ddof=1) / 80, cand.var(ddof=1) / 50
    df = (v0 + v1) ** 2 / (v0**2 / 79 + v1**2 / 49)
    t = (cand.mean() - base.mean()) / math.sqrt(v0 + v1)
    assert p == pytest.approx(2 * stats.t.sf(abs(t), df), rel=1e-10)
    half = stats.t.ppf(0.975, df) * math.sqrt(v0 + v1)
    assert (low, high) == pytest.approx((cand.mean() - base.mean() - half, cand.mean() - base.mean() + half))
    # And statsmodels' own implementation of Welch (ours is scipy's).
    from statsmodels.stats.weightstats import CompareMeans, DescrStatsW

    compared = CompareMeans(DescrStatsW(cand), DescrStatsW(base))
    assert (low, high) == pytest.approx(compared.tconfint_diff(alpha=0.05, usevar="unequal"), rel=1e-10)
    assert p == pytest.approx(compared.ttest_ind(usevar="unequal")[1], rel=1e-10)


def test_sample_ratio_is_a_chi_square_by_hand():
    frame = pd.DataFrame({"arm": ["baseline"] * 540 + ["candidate"] * 460})
    srm = sample_ratio(frame, policy())
    statistic = (540 - 500) ** 2 / 500 + (460 - 500) ** 2 / 500
    assert srm.statistic == pytest.approx(statistic) and srm.p_value == pytest.approx(stats.chi2.sf(statistic, 1))
    assert srm.passed  # p = 0.074
    assert not sample_ratio(pd.DataFrame({"arm": ["baseline"] * 600 + ["candidate"] * 400}), policy()).passed
    # The planned split is the reference: 540/460 is exactly what a 54/46 plan expects.
    assert sample_ratio(frame, policy(planned_split={"baseline": 0.54, "candidate": 0.46})).p_value == 1.0


def test_the_confidence_sequence_is_the_mixture_likelihood_ratio():
    rng = np.random.default_rng(5)
    arms = np.tile([0, 1], 300)
    values = rng.normal(0, 1, 600) + 0.2 * arms
    tau, alpha = 0.1, 0.05
    low, high, p = confidence_sequence("mean", arms, values, tau, alpha, min_per_arm=300)
    # One look (the last unit): the interval is where the mixture ratio, integrated numerically, stays below 1/alpha.
    a, b = values[arms == 0], values[arms == 1]
    v = a.var(ddof=1) / a.size + b.var(ddof=1) / b.size
    diff = b.mean() - a.mean()

    def ratio(theta0: float) -> float:
        def integrand(theta: float) -> float:
            return (
                stats.norm.pdf(diff, theta, math.sqrt(v))
                / stats.norm.pdf(diff, theta0, math.sqrt(v))
                * stats.norm.pdf(theta, theta0, tau)
            )

        return integrate.quad(integrand, theta0 - 12 * tau, theta0 + 12 * tau, points=[diff])[0]

    assert ratio(low) == pytest.approx(1 / alpha, rel=1e-6) and ratio(high) == pytest.approx(1 / alpha, rel=1e-6)
    assert p == pytest.approx(min(1.0, 1 / ratio(0.0)), rel=1e-6)
    fixed_low, fixed_high, *_ = fixed_horizon("mean", a, b, alpha)
    assert low < fixed_low and high > fixed_high  # the price of peeking: wider than one look's interval


def test_peeking_inflates_the_z_test_but_not_the_confidence_sequence():
    # A/A cohorts (no difference): a z-test read at 20 looks, stopping at the first p < 0.05, finds a
    # "difference" far more often than 5%; the always-valid interval, valid at every unit, stays under 5%.
    rng = np.random.default_rng(0)
    reps, n, alpha = 300, 4000, 0.05
    peeking = sequence = 0
    for _ in range(reps):
        arms, values = (rng.random(n) < 0.5).astype(int), (rng.random(n) < 0.6).astype(float)
        low, high, _ = confidence_sequence("proportion", arms, values, 0.03, alpha, 100)
        sequence += low > 0 or high < 0
        peeking += any(
            fixed_horizon("proportion", values[:k][arms[:k] == 0], values[:k][arms[:k] == 1], alpha)[2] < alpha
            for k in range(200, n + 1, 200)
        )
    assert sequence / reps <= alpha and peeking / reps > 3 * alpha


# --------------------------------------------------------------------------- simulator and decision

QUERIES = [f"q{i}" for i in range(20)]
GRADES = {q: {f"{q}-good": 3, f"{q}-ok": 2, f"{q}-bad": 0} for q in QUERIES}
HASHES = {q: f"{i:064x}" for i, q in enumerate(QUERIES)}
WORSE = {q: [f"{q}-bad", f"{q}-x", f"{q}-ok", f"{q}-good"] for q in QUERIES}
BETTER = {q: [f"{q}-good", f"{q}-ok", f"{q}-bad", f"{q}-x"] for q in QUERIES}


def cohort(baseline=WORSE, candidate=BETTER, **knobs) -> pd.DataFrame:
    from rageval.release.online import OnlineEvent

    records = simulate({"baseline": baseline, "candidate": candidate}, GRADES, HASHES, Simulation(**knobs))
    return events_frame([OnlineEvent.model_validate(r) for r in records])


def decide(frame: pd.DataFrame, **changes):
    rules = policy(**changes)
    return decide_online(analyze(frame, rules), sample_ratio(frame, rules), rules)


def result(role: str, direction: str, low: float, high: float, threshold: float = 0.02):
    from rageval.release.online import MetricResult

    return MetricResult("m", "proportion", "escalation", role, direction, 100, 100, 0.5, 0.5, (low + high) / 2,
                        low, high, 0.5, "z", threshold)  # fmt: skip


@pytest.mark.parametrize(
    ("role", "direction", "low", "high", "verdict"),
    [
        ("primary", "higher", 0.001, 0.02, "pass"),
        ("primary", "higher", -0.001, 0.02, "fail"),
        ("primary", "lower", -0.02, -0.001, "pass"),  # lower is better: a fall is the improvement
        ("primary", "lower", 0.001, 0.02, "fail"),
        ("guardrail", "lower", -0.05, 0.02, "pass"),  # the interval reaches the margin, not past it
        ("guardrail", "lower", -0.05, 0.0201, "fail"),
        ("guardrail", "higher", -0.02, 0.05, "pass"),
        ("guardrail", "higher", -0.0201, 0.05, "fail"),
    ],
)
def test_decide_online_reads_each_interval_in_its_metrics_direction(role, direction, low, high, verdict):
    srm = sample_ratio(pd.DataFrame({"arm": ["baseline", "candidate"] * 50}), policy())
    decision = decide_online([result(role, direction, low, high)], srm, policy())
    assert decision.verdicts[0].verdict == verdict and decision.passed == (verdict == "pass")
    assert decision.reasons == ([] if verdict == "pass" else [f"m: {decision.verdicts[0].reason}"])


@pytest.mark.parametrize(
    ("direction", "low", "high", "verdict", "words"),
    [
        ("higher", -0.0199, 0.01, "pass", "non-inferior within the margin 0.02"),  # no gain, a loss within it
        ("higher", -0.0201, 0.01, "fail", "the interval allows a loss of 0.0201, beyond the margin 0.02"),
        ("lower", -0.01, 0.0199, "pass", "non-inferior within the margin 0.02"),
        ("lower", -0.01, 0.0201, "fail", "non-inferiority not shown"),
    ],
)
def test_a_non_inferiority_primary_passes_a_no_worse_candidate(direction, low, high, verdict, words):
    from dataclasses import replace

    srm = sample_ratio(pd.DataFrame({"arm": ["baseline", "candidate"] * 50}), policy())
    found = replace(result("primary", direction, low, high), claim="non-inferiority")
    decision = decide_online([found], srm, policy())
    assert decision.verdicts[0].verdict == verdict and words in decision.verdicts[0].reason
    # The same interval under the default claim (improvement) fails: it shows no gain.
    assert decide_online([result("primary", direction, low, high)], srm, policy()).verdict == "fail"


def test_the_shipped_non_inferiority_policy_loads():
    found = load_metrics_policy(METRICS.parent / "noninferiority.yaml")
    primary = found.metrics["success_rate"]
    assert (primary.claim, primary.margin, primary.threshold) == ("non-inferiority", 0.02, 0.02)


def test_the_simulator_is_seeded_labelled_and_position_biased():
    first, again = cohort(seed=7, sessions=3000), cohort(seed=7, sessions=3000)
    pd.testing.assert_frame_equal(first, again)
    assert first["simulated"].all() and first["query_hash"].isin(list(HASHES.values())).all()
    # An injected change alters only what it injects (each session draws the same numbers whatever happens).
    slower, lossy = (
        cohort(seed=7, sessions=3000, candidate_latency_factor=1.3),
        cohort(seed=7, sessions=3000, srm_drop=0.2),
    )
    candidate = first["arm"] == "candidate"
    assert slower["latency_ms"][candidate].to_numpy() == pytest.approx(1.3 * first["latency_ms"][candidate], rel=1e-4)
    pd.testing.assert_frame_equal(slower.drop(columns="latency_ms"), first.drop(columns="latency_ms"))
    kept = first.set_index("session_id").loc[lossy["session_id"]].reset_index()
    pd.testing.assert_frame_equal(lossy, kept[lossy.columns])
    assert (lossy["arm"] == "baseline").sum() == (first["arm"] == "baseline").sum() and len(lossy) < len(first)
    # Two results of grade 1 (attractiveness 0.2): the first click lands on rank 1 with probability 0.2 and
    # on rank 2 with (1 - 0.2) * examination(2) * 0.2, examination(2) = 1 / 2**eta.
    same = {q: [f"{q}-a", f"{q}-b"] for q in QUERIES}
    grades = {q: {f"{q}-a": 1, f"{q}-b": 1} for q in QUERIES}
    for eta in (1.0, 2.0):
        records = simulate({"baseline": same, "candidate": same}, grades, HASHES, Simulation(sessions=8000, eta=eta))
        ranks = pd.Series([r["citation_rank"] for r in records if r["citation_rank"]]).value_counts()
        assert ranks[1] / ranks[2] == pytest.approx(1 / (0.8 * 0.5**eta), rel=0.15)


def test_a_true_improvement_passes():
    decision = decide(cohort(sessions=4000, seed=2))
    assert decision.passed, decision.reasons
    verdicts = {v.metric: v for v in decision.verdicts}
    assert verdicts["success_rate"].reason.startswith("improved: 0.")
    assert all(v.verdict == "pass" for v in decision.verdicts)


def test_no_difference_fails_the_primary_and_says_how_many_units_it_needs():
    decision = decide(cohort(baseline=BETTER, candidate=BETTER, sessions=2000, seed=3))
    primary = next(v for v in decision.verdicts if v.metric == "success_rate")
    assert primary.verdict == "fail" and primary.reason.startswith("no significant improvement")
    assert "needs about" in primary.reason and "units per arm (have" in primary.reason


def test_a_sample_ratio_mismatch_fails_the_cohort():
    decision = decide(cohort(sessions=4000, seed=4, srm_drop=0.1))
    assert not decision.sample_ratio.passed and not decision.passed
    assert decision.reasons[0].startswith("sample-ratio mismatch") and "not trustworthy" in decision.reasons[0]
    # Every metric improved or held: the cohort fails on its assignment alone.
    assert all(v.verdict == "pass" for v in decision.verdicts)


def test_a_guardrail_regression_fails():
    decision = decide(cohort(sessions=4000, seed=5, candidate_latency_factor=1.3))
    latency = next(v for v in decision.verdicts if v.metric == "latency_ms")
    assert latency.verdict == "fail" and latency.reason.startswith("regression: the interval allows a loss of")
    assert decision.sample_ratio.passed and not decision.passed
    assert any(r.startswith("latency_ms: regression") for r in decision.reasons)


def test_sequential_decisions_read_the_always_valid_interval():
    frame = cohort(sessions=4000, seed=2)
    fixed, sequential = decide(frame), decide(frame, sequential=True)
    for a, b in zip(fixed.results, sequential.results, strict=True):
        assert b.seq_ci_low is not None and b.seq_ci_low < a.ci_low and b.seq_ci_high > a.ci_high
    assert "always-valid 95% interval" in sequential.verdicts[0].reason


# --------------------------------------------------------------------------- the sealed run, end to end


def store_files(store: str) -> list[Path]:
    database = Path(store.removeprefix("sqlite:///"))
    return [database, *[p for p in database.parent.rglob("*") if p.is_file()]]


@pytest.mark.e2e
def test_online_run_is_sealed_simulated_and_free_of_query_text(tmp_path: Path):
    from test_compare import record_run

    from rageval.cli import app
    from rageval.tracking.store import Tracker

    # A store of its own: the session's holds other tests' comparisons, whose tables rightly show query text.
    (tmp_path / "store").mkdir()
    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"

    baseline = record_run(store, name="online-baseline", experiment="online-tests")
    candidate = record_run(
        store, overrides=["retrieval.stages.0.k1=1.5"], name="online-candidate", experiment="online-tests"
    )
    runner = CliRunner()
    log = tmp_path / "cohort.jsonl"
    simulated = runner.invoke(
        app,
        ["online", "simulate", "--baseline", baseline, "--candidate", candidate, "--out", str(log),
         "--sessions", "600", "--tracking-uri", store],
    )  # fmt: skip
    assert simulated.exit_code == 0, simulated.output
    assert "SIMULATED units" in simulated.output
    assert all(json.loads(line)["simulated"] for line in log.read_text().splitlines())

    args = ["online", str(log), "--policy", str(POLICY), "--metrics", str(METRICS), "--tracking-uri", store]
    result = runner.invoke(app, [*args, "--baseline", baseline, "--candidate", candidate, "--today", "2026-12-01"])
    assert result.exit_code in (0, 1), result.output
    assert "SIMULATED" in result.output and "sample ratio:" in result.output
    run_id = result.output.split("online run ")[1].split()[0]
    tracker = Tracker(store)
    info = tracker.run(run_id)
    assert info.sealed and tracker.verify(run_id) == []
    assert info.tags["rageval.kind"] == "online" and info.tags["rageval.simulated"] == "true"
    assert info.tags["rageval.baseline"] == baseline and info.tags["rageval.candidates"] == candidate
    assert info.tags["rageval.verdict"] in ("pass", "fail") and info.params == {}
    # The layout: the verdict's figures as metric keys; per arm and per metric a table's rows.
    results = pd.read_csv(tracker.download(run_id, "results.csv", tmp_path / "dl"))
    assert set(info.metrics) == {"passed", "units", "srm_p_value", "rules_failed"}
    record = json.loads(tracker.download(run_id, "decision.json", tmp_path / "dl2").read_text())
    assert info.metrics["srm_p_value"] == pytest.approx(record["sample_ratio"]["p_value"])
    assert info.metrics["rules_failed"] == sum(m["verdict"] == "fail" for m in record["metrics"])
    assert info.metrics["units"] == sum(record["log"]["per_arm"].values())
    shown = tracker.sealed_frame(run_id, "tables/online_results.parquet")
    assert shown["metric"].tolist() == results["metric"].tolist()
    assert shown["diff"].tolist() == pytest.approx(results["diff"].tolist())

    # No query of the benchmark reaches the store, in the database or any artifact.
    queries = [json.loads(line)["query"] for line in (DEMO / "cases.jsonl").read_text().splitlines()]
    for path in store_files(store):
        data = path.read_bytes()
        leaked = [q for q in queries if q.encode() in data]
        assert not leaked, f"{path} holds query text: {leaked[:2]}"

    # Without its import policy the log is refused before a unit is read.
    refused = runner.invoke(app, ["online", str(log), "--metrics", str(METRICS), "--tracking-uri", store])
    assert refused.exit_code == 2 and "--policy" in refused.output
