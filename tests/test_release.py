"""The release decision and its checklist: a strict policy; real sealed gate, shadow and online runs
(the shadow log and the cohort SIMULATED from two real release runs) and a review run written here
with the common brief's tags; every rule failing the release with its reason; the checklist."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
import yaml
from conftest import DEMO, ROOT
from test_compare import record_run
from test_gate import FILTERED
from typer.testing import CliRunner

from rageval.errors import PolicyError
from rageval.release.decision import load_release_policy
from rageval.release.simulate_online import Simulation
from rageval.tracking.store import Tracker

POLICY = ROOT / "params" / "release" / "policy.yaml"
TODAY = dt.date(2026, 12, 1)


def app():
    from rageval.cli import app

    return app


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A gate policy without latency rules (nothing to time here), test shadow rules, a release policy."""
    folder = tmp_path_factory.mktemp("release-files")
    gate = yaml.safe_load((ROOT / "params/gates/release.yaml").read_text())
    gate.pop("latency")
    gate["critical_slices"] = {}
    # Limits the clean simulated pair meets (mean RBO_ext ≈ 0.65, p95 ratio ≈ 1) and the faults below break.
    rules = {
        "version": 1,
        "name": "release-test",
        "min_requests": 50,
        "min_rbo": 0.3,
        "max_p95_ratio": 1.5,
        "max_leaks": 0,
        "max_error_rate_delta": 0.05,
    }
    release = yaml.safe_load(POLICY.read_text()) | {"shadow": rules, "max_age_days": 30}
    out = {"gate": folder / "gate.yaml", "rules": folder / "rules.yaml", "release": folder / "release.yaml"}
    for key, data in (("gate", gate), ("rules", rules), ("release", release)):
        out[key].write_text(yaml.safe_dump(data))
    return out


def _as_served(log: Path) -> Path:
    """The log as a team's own logger writes it: the same records without the simulator's mark (the
    tests' stand-in for real traffic; rageval cannot tell them apart, which is the point)."""
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    log.write_text("".join(json.dumps({**row, "simulated": False}) + "\n" for row in rows))
    return log


def shadow_run(
    store: str, baseline: str, candidate: str, out: Path, rules: Path, *, served: bool = False, **faults: float
) -> str:
    from rageval.benchmark.loading import load_benchmark
    from rageval.release.simulate_shadow import Faults, SimulatedTraffic, simulate_shadow, write_log
    from rageval.workflows.release.shadow import ShadowRequest, execute_shadow

    tracker = Tracker(store)
    records = simulate_shadow(
        tracker.rankings(baseline),
        tracker.rankings(candidate),
        load_benchmark(DEMO),
        SimulatedTraffic(120, seed=1, faults=Faults(**faults)),
        baseline_config=baseline,
        candidate_config=candidate,
    )
    write_log(records, out)
    if served:
        _as_served(out)
    request = ShadowRequest(
        out,
        ROOT / "params/shadow/policy.yaml",
        DEMO,
        rules_file=rules,
        baseline_run=baseline,
        candidate_run=candidate,
        resamples=200,
        today=TODAY,
        experiment="release-tests",
    )
    outcome = execute_shadow(request, tracker=tracker)
    return outcome.run_id


def online_run(
    store: str, baseline: str, candidate: str, out: Path, *, served: bool = False, metrics: Path | None = None, **knobs
) -> str:
    from rageval.workflows.release.online import execute_online, simulate_log

    tracker = Tracker(store)
    simulate_log(baseline, candidate, out, Simulation(sessions=6000, seed=2, **knobs), tracker=tracker)
    if served:
        _as_served(out)
    outcome = execute_online(
        out,
        ROOT / "params/online/policy.yaml",
        metrics or ROOT / "params/online/metrics.yaml",
        tracker=tracker,
        baseline=baseline,
        candidate=candidate,
        today=TODAY,
        experiment="release-tests",
    )
    return outcome.run_id


def review_run(store: str, gate: str, baseline: str, candidate: str, status="complete", rejections=0) -> str:
    """A minimal review run with the common brief's tags (the review command records the real one)."""
    tracker = Tracker(store)
    run_id = tracker.create_run(
        "release-tests",
        "review (scripted for the test)",
        params={},
        tags={
            "rageval.kind": "review",
            "rageval.review.gate": gate,
            "rageval.baseline": baseline,
            "rageval.candidates": candidate,
            "rageval.review.status": status,
            "rageval.review.open_rejections": str(rejections),
            "rageval.review.reviewers": "ada,grace",
            "rageval.simulated": "true",
        },
        files={"decisions.json": b"[]"},
    )
    tracker.seal(run_id)
    return run_id


def human_review(store: str, gate: str, folder: Path, reviewer: str = "ada") -> str:
    """A review run the review command records from a sheet a person filled: every query accepted."""
    import pandas as pd

    from rageval.workflows.release.review import ReviewRequest, record_review, start_review

    tracker = Tracker(store)
    start_review(ReviewRequest(gate, folder), tracker=tracker)
    sheet = folder / "review.csv"
    frame = pd.read_csv(sheet, dtype=str, keep_default_na=False)
    frame["decision"], frame["reviewer"] = "accept", reviewer
    frame.to_csv(sheet, index=False)
    return record_review(folder, tracker=tracker).run_id


def evidence_path(
    store: str, files: dict[str, Path], folder: Path, baseline: str, candidate: str, **how
) -> dict[str, str]:
    """A gate, review, shadow and online run for one pair. ``served=True``: a person's review and
    logs without the simulator's mark (see :func:`_as_served`); else the scripted review and the
    SIMULATED logs. ``metrics``: the online metrics policy."""
    from rageval.workflows.gate import execute_gate

    served = how.get("served", False)
    tracker = Tracker(store)
    made = {"baseline": baseline, "candidate": candidate}
    made["gate"] = execute_gate(baseline, candidate, files["gate"], tracker=tracker, experiment="release-tests").run_id
    if served:
        made["review"] = human_review(store, made["gate"], folder / "review")
    else:
        made["review"] = review_run(store, made["gate"], baseline, candidate)
    made["shadow"] = shadow_run(store, baseline, candidate, folder / "shadow.jsonl", files["rules"], served=served)
    made["online"] = online_run(
        store, baseline, candidate, folder / "online.jsonl", served=served, metrics=how.get("metrics")
    )
    return made


@pytest.fixture(scope="module")
def path(store: str, files: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A starved BM25 baseline, a better BM25 candidate and another candidate, on release; a passing
    gate, review, shadow and online run for the pair; and the failing variants."""
    from rageval.workflows.gate import execute_gate

    folder = tmp_path_factory.mktemp("release-logs")
    made = {}
    for key, values in (("baseline", (0.9, 0.4, 3)), ("candidate", (0.9, 0.4, 100)), ("other", (1.2, 0.75, 100))):
        made[key] = record_run(
            store,
            split="release",
            overrides=[FILTERED % values],
            name=f"release-{key}",
            experiment="release-tests",
            family="release-tests-family",
        )
    b, c = made["baseline"], made["candidate"]
    tracker = Tracker(store)
    made["gate"] = execute_gate(b, c, files["gate"], tracker=tracker, experiment="release-tests").run_id
    made["gate_other"] = execute_gate(
        b, made["other"], files["gate"], tracker=tracker, experiment="release-tests"
    ).run_id
    made["review"] = review_run(store, made["gate"], b, c)
    made["review_open"] = review_run(store, made["gate"], b, c, rejections=2)
    made["shadow"] = shadow_run(store, b, c, folder / "shadow.jsonl", files["rules"])
    made["shadow_leak"] = shadow_run(store, b, c, folder / "leak.jsonl", files["rules"], leaks=3)
    made["shadow_drift"] = shadow_run(store, b, c, folder / "drift.jsonl", files["rules"], rbo_drop=0.9)
    made["shadow_slow"] = shadow_run(store, b, c, folder / "slow.jsonl", files["rules"], latency_factor=2.0)
    made["online"] = online_run(store, b, c, folder / "online.jsonl")
    made["online_srm"] = online_run(store, b, c, folder / "srm.jsonl", srm_drop=0.2)
    made["online_slow"] = online_run(store, b, c, folder / "slow-online.jsonl", candidate_latency_factor=1.5)
    return made


def release(store: str, files: dict[str, Path], runs: dict[str, str]) -> tuple[int, str, str]:
    args = ["release", "--policy", str(files["release"]), "--tracking-uri", store]
    for layer, run in runs.items():
        args += [f"--{layer}", run]
    result = CliRunner().invoke(app(), args)
    run_id = result.output.split("release run ")[1].split()[0] if "release run " in result.output else ""
    return result.exit_code, result.output, run_id


def layers(path: dict[str, str], **changes: str) -> dict[str, str]:
    return {
        "gate": path["gate"],
        "review": path["review"],
        "shadow": path["shadow"],
        "online": path["online"],
    } | changes


def test_the_shipped_policy_loads_and_a_bad_key_names_its_line(tmp_path: Path):
    policy = load_release_policy(POLICY)
    assert policy.layers.gate.required and policy.shadow is not None and policy.shadow.max_leaks == 0
    bad = tmp_path / "p.yaml"
    bad.write_text("version: 1\nname: x\nlayers:\n  gate: {required: yes}\n  shadwo: {required: false}\n")
    with pytest.raises(PolicyError) as caught:
        load_release_policy(bad)
    assert caught.value.problems[0].line == 5 and "shadwo" in str(caught.value)


def test_all_layers_passing_make_a_sealed_release_that_links_them(store, files, path):
    code, output, run_id = release(store, files, layers(path))
    assert code == 0, output
    assert "sealed: PASS" in output and "checklist:" in output
    tracker = Tracker(store)
    info = tracker.run(run_id)
    assert info.sealed and tracker.verify(run_id) == []
    tags = info.tags
    assert tags["rageval.kind"] == "release" and tags["rageval.verdict"] == "pass"
    assert tags["rageval.baseline"] == path["baseline"] and tags["rageval.candidates"] == path["candidate"]
    assert tags["rageval.release.family"] == "release-tests-family"
    for layer in ("gate", "review", "shadow", "online"):
        assert info.params[layer] == path[layer] and f"rageval.release.{layer}" not in tags
        experiment = tracker.run(path[layer]).experiment_id
        assert f"#/experiments/{experiment}/runs/{path[layer]}" in tags["mlflow.note.content"]
    root = Path(info.artifact_uri.removeprefix("file://"))
    record = json.loads((root / "decision.json").read_text())
    assert record["verdict"] == "pass" and [r["verdict"] for r in record["layers"]] == ["pass"] * 4
    assert set(record["simulated_layers"]) == {"review", "shadow", "online"}
    stored = json.loads((root / "checklist.json").read_text())
    assert [i["number"] for i in stored] == list(range(1, 11))
    assert info.metrics["checklist_passed"] == sum(i["verdict"] == "pass" for i in stored)
    assert "rageval.checklist.passed" not in tags  # the count is the metric, the items checklist.json


@pytest.mark.parametrize(
    "change, words",
    [
        ({"shadow": "shadow_leak"}, "shadow run {shadow_leak}: shadow verdict is fail: max leaks"),
        ({"online": "online_srm"}, "online run {online_srm}: online verdict is fail: sample-ratio mismatch: baseline"),
        ({"shadow": "shadow_drift"}, "shadow run {shadow_drift}: shadow verdict is fail: min rbo"),
        ({"shadow": "shadow_slow"}, "shadow run {shadow_slow}: shadow verdict is fail: max p95 ratio"),
        ({"online": "online_slow"}, "online run {online_slow}: online verdict is fail: latency_ms"),
        ({"review": "review_open"}, "review run {review_open}: review has 2 open rejection(s)"),
        ({"gate": "gate_other"}, "mismatch: its candidate is run {candidate}, the release's is {other}"),
    ],
)
def test_each_failing_layer_fails_the_release_with_its_reason(store, files, path, change, words):
    runs = layers(path, **{layer: path[key] for layer, key in change.items()})
    code, output, run_id = release(store, files, runs)
    assert code == 1, output
    assert words.format(**path).lower() in output.lower(), output
    info = Tracker(store).run(run_id)
    assert info.sealed and info.tags["rageval.verdict"] == "fail"


def test_a_missing_required_layer_or_a_wrong_kind_fails_not_crashes(store, files, path):
    runs = layers(path)
    runs.pop("online")
    code, output, _ = release(store, files, runs)
    assert code == 1 and "online: no online run given (required by the policy)" in output
    code, output, _ = release(store, files, layers(path, shadow=path["online"]))
    assert code == 1 and f"run {path['online']} is a online run" in output


def test_the_policy_shadow_rules_are_reapplied_to_the_recorded_figures(store, files, path, tmp_path):
    strict = tmp_path / "strict.yaml"
    data = yaml.safe_load(files["release"].read_text())
    data["shadow"] |= {"min_requests": 10_000}  # the log holds 120
    strict.write_text(yaml.safe_dump(data))
    code, output, _ = release(store, {**files, "release": strict}, layers(path))
    assert code == 1, output
    assert "the release policy's shadow rules fail on the recorded figures: min requests" in output


def test_checklist_recomputes_the_ten_items_and_names_their_records(store, files, path):
    _, _, run_id = release(store, files, layers(path))
    result = CliRunner().invoke(app(), ["checklist", run_id, "--tracking-uri", store])
    lines = [line for line in result.output.splitlines() if line[:4] in ("PASS", "FAIL")]
    assert len(lines) == 10, result.output
    verdicts = {int(line[6:8]): line[:4] for line in lines}
    # The release run precedes any rollback drill: item 10 says so; the slices and k items pass on the demo.
    assert verdicts[10] == "FAIL" and "no rollback run names this release" in result.output
    assert verdicts[4] == "PASS" and "Hit@5 at final_k 5" in result.output
    assert verdicts[5] == "PASS" and verdicts[7] == "PASS" and verdicts[8] == "PASS"
    assert result.exit_code == 1

    # A run merely tagged as a rollback of the release does not turn item 10 (a real drill does:
    # test_registry); the stored checklist is compared and nothing changed.
    tracker = Tracker(store)
    rollback = tracker.create_run(
        "release-tests",
        "rollback drill (test)",
        params={},
        tags={"rageval.kind": "rollback", "rageval.promotion.release": run_id},
    )
    tracker.seal(rollback)
    again = CliRunner().invoke(app(), ["checklist", run_id, "--tracking-uri", store])
    assert f"rollback run {rollback} names no registered model and version" in again.output, again.output
    assert "changed since the release run" not in again.output


# --------------------------------------------------------------------------- the pure rules


def evidence(layer: str, run_id: str, days_old: float = 0.0, **tags: str):
    from rageval.release.decision import Evidence

    now = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    started = int((now - dt.timedelta(days=days_old)).timestamp() * 1000)
    return Evidence(layer, run_id, {k.replace("__", "."): v for k, v in tags.items()}, started_ms=started)


def test_config_names_match_when_no_run_ids_are_named_and_old_evidence_fails():
    from rageval.release.decision import Pair, ReleasePolicy, decide_release

    policy = ReleasePolicy.model_validate({"layers": {"review": {"required": False}}, "max_age_days": 30})
    pair = Pair("B", "C", "bm25-baseline", "hybrid")
    now = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    gate = evidence("gate", "g", **{"rageval__verdict": "pass", "rageval__baseline": "B",
                                    "rageval__candidates": "C"})  # fmt: skip
    by_name = evidence("online", "o", **{"rageval__verdict": "pass",
                                         "rageval__baseline__config": "bm25-baseline",
                                         "rageval__candidate__config": "hybrid"})  # fmt: skip
    shadow = evidence("shadow", "s", **{"rageval__verdict": "pass", "rageval__baseline": "B",
                                        "rageval__candidates": "C"})  # fmt: skip
    found = decide_release(policy, {"gate": gate, "shadow": shadow, "online": by_name}, pair, now=now)
    assert found.verdict == "pass", found.reasons
    assert [r.verdict for r in found.layers] == ["pass", "absent", "pass", "pass"]

    wrong = evidence("online", "o", **{"rageval__verdict": "pass",
                                       "rageval__baseline__config": "bm25-baseline",
                                       "rageval__candidate__config": "dense"})  # fmt: skip
    found = decide_release(policy, {"gate": gate, "shadow": shadow, "online": wrong}, pair, now=now)
    assert found.verdict == "fail"
    assert "its candidate configuration is 'dense', the release's is 'hybrid' (run C)" in found.reasons[0]

    old = evidence("shadow", "s", days_old=45, **{"rageval__verdict": "pass",
                                                  "rageval__baseline": "B", "rageval__candidates": "C"})  # fmt: skip
    found = decide_release(policy, {"gate": gate, "shadow": old, "online": by_name}, pair, now=now)
    assert found.verdict == "fail" and "45.0 days old, more than max_age_days 30" in found.reasons[0]


def test_an_llm_assessor_needs_a_passing_calibration_run():
    from rageval.release.checklist import ChecklistInputs, checklist
    from rageval.release.decision import ReleaseDecision

    decision = ReleaseDecision("pass", [], [], None)
    base = ChecklistInputs("R", decision, {}, None, None)
    assert checklist(base)[5].verdict == "pass" and "no LLM labels" in checklist(base)[5].reason
    labelled = ChecklistInputs("R", decision, {}, None, None, llm_assessors={"llm:qwen@abc123": "notes line 4"})
    (item,) = [i for i in checklist(labelled) if i.number == 6]
    assert item.verdict == "fail" and "no passing judge-calibration run for llm:qwen@abc123" in item.reason
    # the tags rageval judge calibrate writes: the judge's assessor mark and whether it passed
    failed = evidence("judge-calibration", "F", **{"rageval__judge__assessor": "llm:qwen@abc123",
                                                   "rageval__judge__calibration__passed": "false"})  # fmt: skip
    (item,) = [
        i
        for i in checklist(ChecklistInputs("R", decision, {}, None, None, llm_assessors={"llm:qwen@abc123": "n"}, calibrations=[failed]))
        if i.number == 6
    ]  # fmt: skip
    assert item.verdict == "fail" and "(calibration failed)" in item.reason
    calibration = evidence("judge-calibration", "K", **{"rageval__judge__assessor": "llm:qwen@abc123",
                                                        "rageval__judge__calibration__passed": "true"})  # fmt: skip
    calibrated = ChecklistInputs(
        "R", decision, {}, None, None, llm_assessors={"llm:qwen@abc123": "notes line 4"}, calibrations=[calibration]
    )
    (item,) = [i for i in checklist(calibrated) if i.number == 6]
    assert item.verdict == "pass" and "llm:qwen@abc123 by K" in item.reason
