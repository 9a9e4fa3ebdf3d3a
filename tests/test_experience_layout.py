"""The experiment layout a reviewer reads top-down: the release path's runs (gate, review, shadow,
online) together in the release experiment, apart from the evaluations, and each found from the
evaluation runs it concerns by one tag search."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import DEMO, ROOT
from test_compare import record_run
from test_gate import FILTERED
from test_release import TODAY, files, human_review  # noqa: F401  (files: a fixture)

from rageval.release.simulate_online import Simulation
from rageval.tracking.records import RELEASE_EXPERIMENT
from rageval.tracking.search import runs_concerning
from rageval.tracking.store import Tracker

EVALUATIONS = "layout-evaluations"


@pytest.mark.e2e
def test_the_release_path_is_one_experiment_found_from_its_evaluations(tmp_path: Path, files):  # noqa: F811
    from rageval.benchmark.loading import load_benchmark
    from rageval.release.simulate_shadow import SimulatedTraffic, simulate_shadow, write_log
    from rageval.workflows.gate import execute_gate
    from rageval.workflows.release.online import execute_online, simulate_log
    from rageval.workflows.release.shadow import ShadowRequest, execute_shadow

    (tmp_path / "store").mkdir()
    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    tracker = Tracker(store)
    b, c = (
        record_run(store, split="release", overrides=[FILTERED % v], name=n, experiment=EVALUATIONS)
        for n, v in (("starved", (0.9, 0.4, 3)), ("fed", (0.9, 0.4, 100)))
    )
    made = {"gate": execute_gate(b, c, files["gate"], tracker=tracker).run_id}
    made["review"] = human_review(store, made["gate"], tmp_path / "review")  # follows its gate
    write_log(
        simulate_shadow(tracker.rankings(b), tracker.rankings(c), load_benchmark(DEMO), SimulatedTraffic(60, seed=1)),
        log := tmp_path / "s.jsonl",
    )
    made["shadow"] = execute_shadow(
        ShadowRequest(log, ROOT / "params/shadow/policy.yaml", DEMO, baseline_run=b, candidate_run=c,
        resamples=100, today=TODAY), tracker=tracker,
    ).run_id  # fmt: skip
    simulate_log(b, c, cohort := tmp_path / "o.jsonl", Simulation(sessions=600, seed=2), tracker=tracker)
    made["online"] = execute_online(
        cohort, ROOT / "params/online/policy.yaml", ROOT / "params/online/metrics.yaml", tracker=tracker,
        baseline=b, candidate=c, today=TODAY,
    ).run_id  # fmt: skip

    # the evaluations alone in theirs; the release path together in its own
    assert {r.run_id for r in tracker.runs(EVALUATIONS)} == {b, c}
    assert {r.run_id for r in tracker.runs(RELEASE_EXPERIMENT)} == set(made.values())
    keys = {k for r in tracker.runs(RELEASE_EXPERIMENT) for k in r.tags}
    assert not [k for k in keys if b in k or c in k]  # no tag key holds a run ID
    # every layer about the pair names both evaluation runs in two fixed tag keys (no column per run ID):
    # the search from either finds it, in its role
    experiment = tracker.experiment_id(RELEASE_EXPERIMENT)
    for run, role in ((b, "baseline"), (c, "candidate")):
        found = runs_concerning(tracker.client, [experiment], run)
        assert found == {made["gate"]: role, made["shadow"]: role, made["online"]: role}
        reviews = tracker.client.search_runs([experiment], f"tags.`rageval.review.{role}` = '{run}'")
        assert [r.info.run_id for r in reviews] == [made["review"]]
    # params a column each: a gate's policy and a shadow run's rules are their sealed files, not a param per key
    from rageval.hashing import sha256_file

    gate = tracker.run(made["gate"])
    assert set(gate.params) == {"policy", "baseline", "candidate", "policy_sha256"}
    assert gate.params["policy_sha256"] == sha256_file(files["gate"])
    assert not [k for k in tracker.run(made["shadow"]).params if k.startswith("rules")]  # no rules given here
    # the shadow and online runs keep their headline few: nothing per slice among their metric keys
    assert len(tracker.run(made["shadow"]).metrics) <= 40 and len(tracker.run(made["online"]).metrics) <= 13
