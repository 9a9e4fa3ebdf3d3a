"""Shadow evidence: the log's schema, the import policy's refusals, the figures on a hand-made log,
the rules that must fail, the simulator, and a sealed shadow run that keeps raw query text out."""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import write_tiny
from typer.testing import CliRunner

from rageval.benchmark.loading import load_benchmark
from rageval.errors import InputError, PolicyError
from rageval.hashing import sha256_text
from rageval.release.shadow import analyze_shadow, check_import_policy, load_import_policy, read_log
from rageval.release.shadow_rules import ShadowRules, decide_shadow, load_rules
from rageval.release.simulate_shadow import Faults, SimulatedTraffic, simulate_shadow, write_log

TODAY = dt.date(2026, 12, 1)
POLICY = {
    "version": 1,
    "name": "test-import",
    "authorization": "DPA-2026-014",
    "redaction": {"rules": "presidio-default", "version": "2.2", "types": ["email"]},
    "retention": "2027-06-30",
}
REDACTION = {"rules": "presidio-default", "version": "2.2"}
# Hand-made: r1 swaps the top two of three (RBO_ext 0.9 at p=0.9), r2 shares only the first of
# two (RBO_ext 0.55), r3's candidate failed (not compared); r2's candidate shows 'beta' (ACL
# security) to an asker without groups: a leak.
RAW = ["where is the publish retry documented", "how do I sign webhooks"]


def arm(ids, ms, error=None):
    return {"results": [{"id": i, "score": float(len(ids) - n)} for n, i in enumerate(ids)], "latency_ms": ms} | (
        {"error": error} if error else {}
    )


def hand_log(path: Path) -> Path:
    rows = [
        {
            "request_id": "r1",
            "time": "2026-11-30T10:00:00Z",
            "query": RAW[0],
            "redaction": REDACTION,
            "segment": ["frequent"],
            "case_id": "q1",
            "baseline": arm(["alpha", "gamma", "beta"], 10.0) | {"resources": {"cpu_ms": 4.0}},
            "candidate": arm(["gamma", "alpha", "beta"], 12.0) | {"resources": {"cpu_ms": 6.5}},
            "principal": ["security"],
        },
        {
            "request_id": "r2",
            "time": "2026-11-30T10:00:01Z",
            "query": RAW[1],
            "redaction": REDACTION,
            "segment": ["long-tail"],
            "baseline": arm(["alpha", "gamma"], 20.0),
            "candidate": arm(["alpha", "beta"], 25.0),
        },
        {
            "request_id": "r3",
            "time": "2026-11-30T10:00:02Z",
            "query_sha256": sha256_text("a third query"),
            "baseline": arm(["gamma"], 30.0),
            "candidate": arm([], 31.0, error="timeout"),
        },
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def policy_file(path: Path, **changes) -> Path:
    data = {**POLICY, **changes}
    path.write_text(yaml.safe_dump({k: v for k, v in data.items() if v is not None}, sort_keys=False))
    return path


@pytest.fixture
def documents_tiny(tmp_path: Path) -> Path:
    """The tiny benchmark at document level (whole-document judgments)."""
    from conftest import CASES

    cases = [
        {**c, "relevant": [{"documentId": j["documentId"], "grade": j["grade"]} for j in c["relevant"]]} for c in CASES
    ]
    return write_tiny(tmp_path / "tiny-doc", cases=cases, spec_overrides={"relevanceUnit": "document"})


# --------------------------------------------------------------------------- schema


def test_log_errors_name_file_line_and_field(tmp_path: Path):
    good = json.loads(hand_log(tmp_path / "ok.jsonl").read_text().splitlines()[0])
    lines = [
        {**good, "request_id": "a"},
        {**good, "request_id": "b", "redaction": None},  # text without its redaction
        {**good, "request_id": "a"},  # logged twice
        {**good, "request_id": "c", "candidate": {"results": [], "latency": 3}},  # misspelt key, missing latency
        {**good, "request_id": "d", "baseline": arm(["alpha", "alpha"], 1.0)},
    ]
    log = tmp_path / "bad.jsonl"
    log.write_text("".join(json.dumps({k: v for k, v in r.items() if v is not None}) + "\n" for r in lines))
    with pytest.raises(InputError) as caught:
        read_log(log)
    found = {(p.line, p.field) for p in caught.value.problems}
    assert all(p.file == str(log) for p in caught.value.problems)
    assert (2, None) in found and "redaction" in str(caught.value)
    assert (3, "request_id") in found
    assert (4, "candidate.latency") in found and (4, "candidate.latency_ms") in found
    assert (5, "baseline") in found and "'alpha' twice" in str(caught.value)
    (tmp_path / "log.csv").write_text("request_id\nr1\n")
    with pytest.raises(InputError, match="unknown log format '.csv'"):
        read_log(tmp_path / "log.csv")


def test_parquet_and_jsonl_read_back_the_same_records(tmp_path: Path, documents_tiny: Path):
    records = read_log(hand_log(tmp_path / "log.jsonl"))
    assert read_log(write_log(records, tmp_path / "log.parquet")) == records


# --------------------------------------------------------------------------- import policy


def test_import_policy_refusals(tmp_path: Path):
    with pytest.raises(PolicyError, match="only under an import policy"):
        load_import_policy(None, TODAY)
    with pytest.raises(PolicyError) as caught:
        load_import_policy(policy_file(tmp_path / "p1.yaml", authorization=None), TODAY)
    assert caught.value.problems[0].field == "authorization" and "approval" in caught.value.problems[0].fix
    with pytest.raises(PolicyError) as caught:
        load_import_policy(policy_file(tmp_path / "p2.yaml", retention="2026-11-30"), TODAY)
    problem = caught.value.problems[0]
    line = next(
        n for n, text in enumerate((tmp_path / "p2.yaml").read_text().splitlines(), 1) if text.startswith("retention")
    )
    assert (
        problem.field == "retention"
        and problem.line == line
        and "past its retention date 2026-11-30" in problem.message
    )
    with pytest.raises(PolicyError, match="unknown key 'removed'"):
        load_import_policy(policy_file(tmp_path / "p3.yaml", redaction={**REDACTION, "removed": "x"}), TODAY)
    other = load_import_policy(policy_file(tmp_path / "p4.yaml", redaction={"rules": "other", "version": "1"}), TODAY)
    with pytest.raises(PolicyError, match="not the policy's"):
        check_import_policy(read_log(hand_log(tmp_path / "log.jsonl")), other, "log.jsonl")
    shipped = load_import_policy(Path(__file__).parents[1] / "params/shadow/policy.yaml", TODAY)
    assert shipped.authorization and shipped.retention >= TODAY


# --------------------------------------------------------------------------- figures


def test_figures_on_a_hand_made_log(tmp_path: Path, tiny: Path):
    analysis = analyze_shadow(read_log(hand_log(tmp_path / "log.jsonl")), load_benchmark(tiny), resamples=500)
    rows = analysis.per_request.set_index("request_id")
    # worked by hand at p = 0.9: X = (0, 2, 3) gives ext = (0.1/0.9)(0.81 + 0.729) + 0.729 = 0.9,
    # min = (0.1/0.9)(-2.7 - 0.405 + 3 ln 10) = 0.42253; X = (1, 1) gives ext = (1/9)(0.9 + 0.405) + 0.405 = 0.55
    assert rows.loc["r1", "rbo_ext"] == pytest.approx(0.9)
    assert rows.loc["r1", "rbo_min"] == pytest.approx((-2.7 - 0.405 + 3 * math.log(10)) / 9)
    assert rows.loc["r2", "rbo_ext"] == pytest.approx(0.55)
    assert rows.loc["r1", "jaccard"] == 1.0 and rows.loc["r2", "jaccard"] == pytest.approx(1 / 3)
    assert not rows.loc["r3", "compared"] and math.isnan(rows.loc["r3", "rbo_ext"])
    o = analysis.overall
    assert (o["requests"], o["compared"]) == (3, 2)
    assert o["rbo_ext_mean"] == pytest.approx(0.725) and o["jaccard_mean"] == pytest.approx(2 / 3)
    assert o["top1_change_rate"] == 0.5 and o["error_rate_delta"] == pytest.approx(1 / 3)
    assert o["candidate_leaks"] == 1 and o["baseline_leaks"] == 0  # r1's asker is in 'security'
    assert analysis.leaks[["request_id", "rank", "id"]].values.tolist() == [["r2", 2, "beta"]]
    by_slice = analysis.summary.set_index("slice")
    assert by_slice.loc["frequent", "rbo_ext_mean"] == pytest.approx(0.9)
    assert by_slice.loc["long-tail", "candidate_leaks"] == 1
    # r1 is case q1 (judged: alpha only): gamma and beta are unjudged; r2 and r3 match no case
    assert o["matched_requests"] == 1 and o["unjudged_share"] == pytest.approx(2 / 3)
    top = analysis.candidate_top
    assert set(top.loc[~top["judged"], "parent_id"]) == {"gamma", "beta"} and top["judged"].sum() == 1
    cpu = analysis.resources.set_index(["slice", "resource"]).loc[("all", "cpu_ms")]
    assert (cpu["baseline_mean"], cpu["candidate_mean"], cpu["delta"]) == (4.0, 6.5, 2.5)  # where known: r1 only
    p95 = analysis.latency_row(0.95)
    assert p95["delta_ms"] == pytest.approx(
        pd.Series([12.0, 25, 31]).quantile(0.95) - pd.Series([10.0, 20, 30]).quantile(0.95)
    )
    assert p95["delta_low"] <= p95["delta_ms"] <= p95["delta_high"]
    assert p95["ratio_low"] <= p95["ratio"] <= p95["ratio_high"]


# --------------------------------------------------------------------------- rules and the simulator

BASE = pd.DataFrame(
    {
        "query_id": ["q1", "q1", "q1", "q2", "q2", "q3", "q3"],
        "rank": [1, 2, 3, 1, 2, 1, 2],
        "chunk_id": ["alpha", "gamma", "x1", "beta", "gamma", "gamma", "alpha"],
        "parent_id": ["alpha", "gamma", "x1", "beta", "gamma", "gamma", "alpha"],
        "score": [3.0, 2, 1, 2, 1, 2, 1],
    }
)
RULES = ShadowRules(min_requests=50, min_rbo=0.8, max_top1_change=0.2, max_p95_ratio=1.25, max_error_rate_delta=0.05)


@pytest.mark.parametrize(
    ("faults", "failing"),
    [
        (Faults(), {}),
        (Faults(rbo_drop=0.6), {"min rbo": "mean RBO_ext (p=0.9) 0.", "max top-1 change": "top-1 change rate 0."}),
        (Faults(leaks=1), {"max leaks": "candidate results the asker may not see (query "}),
        (Faults(latency_factor=1.6), {"max p95 ratio": "(95% CI "}),
        (Faults(candidate_errors=0.2), {"max error-rate delta": "error rate 0."}),
    ],
)
def test_each_fault_fails_its_rule_with_the_reason(tiny: Path, faults: Faults, failing: dict):
    bench = load_benchmark(tiny)
    records = simulate_shadow(BASE, BASE, bench, SimulatedTraffic(200, seed=0, faults=faults))
    assert all(r.simulated for r in records) and all(r.query is None for r in records)
    decision = decide_shadow(RULES, analyze_shadow(records, bench, resamples=500))
    failed = {r.rule for r in decision.rules if r.verdict == "fail"}
    assert failed == set(failing), decision.table().to_string()
    assert decision.verdict == ("fail" if failing else "pass")
    for rule in decision.rules:
        if rule.rule in failing:
            assert failing[rule.rule] in rule.reason and (" > " in rule.reason or " < " in rule.reason)


def test_simulator_is_seeded_and_rules_file_is_strict(tiny: Path, tmp_path: Path):
    bench = load_benchmark(tiny)
    same = [simulate_shadow(BASE, BASE, bench, SimulatedTraffic(20, seed=3)) for _ in range(2)]
    assert same[0] == same[1]
    assert same[0] != simulate_shadow(BASE, BASE, bench, SimulatedTraffic(20, seed=4))
    shipped = load_rules(Path(__file__).parents[1] / "params/shadow/rules.yaml")
    assert shipped.max_leaks == 0 and shipped.min_rbo is not None
    (tmp_path / "r.yaml").write_text("version: 1\nname: x\nmin_rbo: 0.8\nmax_p95_ratoi: 1.2\n")
    with pytest.raises(PolicyError) as caught:
        load_rules(tmp_path / "r.yaml")
    assert caught.value.problems[0].line == 4 and "max_p95_ratio" in caught.value.problems[0].fix


# --------------------------------------------------------------------------- the sealed run


def test_cli_records_a_sealed_shadow_run_without_raw_query_text(tmp_path: Path, documents_tiny: Path):
    from rageval.cli.app import app
    from rageval.judging import import_sheets, read_pool
    from rageval.tracking.store import Tracker

    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    (tmp_path / "store").mkdir()
    log = hand_log(tmp_path / "log.jsonl")
    policy = policy_file(tmp_path / "policy.yaml")
    rules = tmp_path / "rules.yaml"
    rules.write_text("version: 1\nname: strict\nmin_rbo: 0.8\nmax_leaks: 0\n")
    args = ["shadow", str(log), "--policy", str(policy), "--benchmark", str(documents_tiny), "--rules", str(rules)]
    args += [
        "--tracking-uri",
        store,
        "--pool-out",
        str(tmp_path / "pool"),
        "--today",
        "2026-12-01",
        "--resamples",
        "200",
    ]
    result = CliRunner().invoke(app, args, terminal_width=200)
    assert result.exit_code == 1, result.output  # RBO 0.725 < 0.8 and one leak
    assert "FAIL  min rbo: mean RBO_ext (p=0.9) 0.725 < 0.800" in result.output
    assert "FAIL  max leaks" in result.output
    run_id = result.output.split("shadow run ")[1].split()[0]

    tracker = Tracker(store)
    info = tracker.run(run_id)
    assert tracker.verify(run_id) == []
    assert info.tags["rageval.kind"] == "shadow" and info.tags["rageval.simulated"] == "false"
    assert info.tags["rageval.verdict"] == "fail"
    assert info.metrics["rbo_ext_mean"] == pytest.approx(0.725)
    assert set(info.metrics) == {"passed", "rules_failed", "candidate_leaks", "rbo_ext_mean", "top1_change_rate"}
    resources = tracker.sealed_frame(run_id, "tables/shadow_resources.parquet").set_index(["slice", "resource"])
    assert resources.loc[("all", "cpu_ms"), "delta"] == 2.5
    decision = json.loads(tracker.download(run_id, "decision.json", tmp_path / "dl").read_text())
    assert decision["verdict"] == "fail" and decision["rbo"]["p"] == 0.9
    assert [r["rule"] for r in decision["rules"] if r["verdict"] == "fail"] == ["min rbo", "max leaks"]
    # raw (here: the redacted) query text is nowhere in the store; its hash is
    stored = [p for p in (tmp_path / "store").rglob("*") if p.is_file()]
    blob = b"".join(p.read_bytes() for p in stored)
    assert not [q for q in RAW if q.encode() in blob]
    assert sha256_text(RAW[0]).encode() in blob
    # the proposed pool is a pool the judge sheet flow takes: fill a grade, import it
    manifest = read_pool(tmp_path / "pool" / "dev" / "pool.json")
    assert {(i.queryId, i.documentId) for i in manifest.items} == {("q1", "gamma"), ("q1", "beta")}
    sheet = pd.read_csv(tmp_path / "pool" / "dev" / "sheet.csv")
    sheet["assessor"], sheet["grade"] = "ann", 1
    sheet.to_csv(tmp_path / "filled.csv", index=False)
    labels = import_sheets(manifest, [tmp_path / "filled.csv"])
    assert len(labels) == 2 and set(labels["grade"]) == {1}
    assert any(p.name == "pool.json" for p in stored)

    # the policy may keep the redacted text (never raw text: only what the log holds) in artifacts
    keep = policy_file(tmp_path / "keep.yaml", keep=["query", "request_id"])
    args = ["shadow", str(log), "--policy", str(keep), "--benchmark", str(documents_tiny), "--tracking-uri", store]
    # a sealed run given as an arm is verified and linked (any sealed run does for the link)
    kept = CliRunner().invoke(
        app, [*args, "--today", "2026-12-01", "--resamples", "200", "--baseline", run_id], terminal_width=200
    )
    assert kept.exit_code == 0, kept.output
    kept_id = kept.output.split("shadow run ")[1].split()[0]
    assert "recorded (no rules given)" in kept.output
    tags = tracker.run(kept_id).tags
    assert tags["rageval.baseline"] == run_id and "rageval.baseline.config" not in tags
    assert "rageval.candidates" not in tags
    table = tracker.sealed_frame(kept_id, "tables/shadow_per_request.parquet")
    assert table["query_redacted"].tolist()[:2] == RAW


def test_cli_simulate_writes_a_labelled_log(tmp_path: Path, tiny: Path):
    from rageval.cli.app import app

    BASE.to_parquet(tmp_path / "base.parquet")
    out = tmp_path / "sim.jsonl"
    args = ["shadow", "simulate", "--out", str(out), "--benchmark", str(tiny), "-n", "30"]
    args += [
        "--baseline",
        str(tmp_path / "base.parquet"),
        "--candidate",
        str(tmp_path / "base.parquet"),
        "--leaks",
        "2",
    ]
    result = CliRunner().invoke(app, args, terminal_width=200)
    assert result.exit_code == 0, result.output
    records = read_log(out)
    assert len(records) == 30 and all(r.simulated for r in records)
    assert sum(r.candidate.ids[0] == "beta" and not r.principal for r in records) >= 2


def test_a_passage_benchmark_pools_the_candidates_unjudged_chunks(tmp_path: Path, tiny: Path, store: str):
    from rageval.benchmark.chunking import chunk_document
    from rageval.benchmark.schema import ChunkingConfig
    from rageval.tracking.store import Tracker
    from rageval.workflows.release.shadow import ShadowRequest, execute_shadow

    bench = load_benchmark(tiny)
    chunking = ChunkingConfig()
    chunks = {d: [c.chunk_id for c in chunk_document(bench.documents[d], chunking)] for d in ("alpha", "gamma")}
    # q1 judges alpha's span 9–57: alpha's one chunk is judged, gamma's chunk is not
    ids = [chunks["gamma"][0], *chunks["alpha"]]
    rows = [
        {
            "request_id": "p1",
            "time": "2026-11-30T10:00:00Z",
            "query_sha256": sha256_text("publish retry cache"),  # q1's query: matched by its hash
            "baseline": arm(ids[::-1], 5.0),
            "candidate": arm([*ids, "gamma"], 6.0),  # a whole document cannot be pooled as a passage
        }
    ]
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    outcome = execute_shadow(
        ShadowRequest(log, policy_file(tmp_path / "p.yaml"), tiny, chunking=chunking, today=TODAY),
        tracker=Tracker(store),
    )
    assert outcome.analysis.per_request["case_id"].tolist() == ["q1"]
    manifest = outcome.pools["dev"]
    assert {i.documentId for i in manifest.items} == {"gamma"} and manifest.relevanceUnit == "passage"
    assert any("1 unjudged candidate result(s) are whole documents" in w for w in outcome.warnings)
    assert Tracker(store).verify(outcome.run_id) == []
