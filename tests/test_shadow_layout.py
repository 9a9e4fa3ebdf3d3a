"""A shadow run's layout: a bounded set of headline metric keys however many slices its log has;
each slice's figures are rows of the run's tables, equal to the analysis of the same log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_shadow import RAW, REDACTION, arm, documents_tiny, policy_file  # noqa: F401 (a fixture)
from typer.testing import CliRunner

from rageval.benchmark.loading import load_benchmark
from rageval.release.shadow import analyze_shadow, read_log

SEGMENTS = 40


def many_slices_log(path: Path) -> Path:
    """Forty requests, each in a segment of its own and in one of two shared ones."""
    rows = [
        {
            "request_id": f"r{n}",
            "time": f"2026-11-30T10:00:{n:02d}Z",
            "query": RAW[n % 2],
            "redaction": REDACTION,
            "segment": [f"team-{n:02d}", "even" if n % 2 == 0 else "odd"],
            "baseline": arm(["alpha", "gamma", "beta"], 10.0 + n) | {"resources": {"cpu_ms": 4.0}},
            "candidate": arm(["gamma", "alpha", "beta"] if n % 3 else ["alpha", "gamma"], 12.0 + n)
            | {"resources": {"cpu_ms": 5.0}},
        }
        for n in range(SEGMENTS)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_shadow_run_keeps_slices_in_tables_not_metric_keys(tmp_path: Path, documents_tiny: Path):  # noqa: F811
    from rageval.cli.app import app
    from rageval.tracking.store import Tracker

    (tmp_path / "store").mkdir()
    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    log = many_slices_log(tmp_path / "log.jsonl")
    policy = policy_file(tmp_path / "policy.yaml")
    rules = tmp_path / "rules.yaml"
    rules.write_text("version: 1\nname: lenient\nmin_rbo: 0.1\nmax_leaks: 5\n")
    args = ["shadow", str(log), "--policy", str(policy), "--benchmark", str(documents_tiny), "--tracking-uri", store]
    args += ["--rules", str(rules)]
    result = CliRunner().invoke(app, [*args, "--today", "2026-12-01", "--resamples", "200"], terminal_width=200)
    assert result.exit_code in (0, 1), result.output
    run_id = result.output.split("shadow run ")[1].split()[0]
    tracker = Tracker(store)
    info = tracker.run(run_id)

    # 42 slices (all, even, odd, 40 teams), yet a few dozen keys, none of them per slice
    assert len(info.metrics) <= 40, sorted(info.metrics)
    assert not [k for k in info.metrics if "slice" in k.split("/")[1:-1] or "team" in k]
    assert set(info.metrics) == {"passed", "rules_failed", "candidate_leaks", "rbo_ext_mean", "top1_change_rate"}
    # the rules are their sealed file, named by the decision, not a param per rule
    assert (
        info.params == {}
        and json.loads(tracker.download(run_id, "decision.json", tmp_path / "d").read_text())["rules_name"] == "lenient"
    )
    assert tracker.download(run_id, "rules.yaml", tmp_path / "dl").read_text() == rules.read_text()

    analysis = analyze_shadow(read_log(log), load_benchmark(documents_tiny), resamples=200)
    summary = tracker.sealed_frame(run_id, "tables/shadow_summary.parquet")
    assert summary["slice"].tolist() == analysis.summary["slice"].tolist() and len(summary) == SEGMENTS + 3
    assert summary["rbo_ext_mean"].tolist() == pytest.approx(analysis.summary["rbo_ext_mean"].tolist())
    assert info.metrics["rbo_ext_mean"] == pytest.approx(analysis.overall["rbo_ext_mean"])
    latency = tracker.sealed_frame(run_id, "tables/shadow_latency.parquet")
    assert set(latency["slice"]) == set(analysis.summary["slice"])
    # every latency quantile and resource figure is a row of its table
    p95 = latency[(latency["slice"] == "all") & (latency["quantile"] == 0.95)].iloc[0]
    assert p95["delta_ms"] == pytest.approx(analysis.latency_row(0.95)["delta_ms"])
    assert len(set(latency["quantile"])) > 1
    resources = tracker.sealed_frame(run_id, "tables/shadow_resources.parquet")
    whole = resources[resources["slice"] == "all"].set_index("resource")
    assert whole.loc["cpu_ms", "delta"] == 1.0
