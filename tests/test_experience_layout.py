"""The experiment layout a reviewer reads top-down: the release path's runs (gate, review, shadow,
online) together in the release experiment, apart from the evaluations, and each found from the
evaluation runs it concerns by one tag search."""

from __future__ import annotations

import json
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
from rageval.tracking.views import VIEW_TAG

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
        assert found == {made[layer]: role for layer in ("gate", "review", "shadow", "online")}
    # one vocabulary for every kind: the pair, the verdict, the policy by the same keys, the kind tag says whose
    runs = {layer: tracker.run(run_id) for layer, run_id in made.items()}
    assert {layer: info.tags["rageval.kind"] for layer, info in runs.items()} == {k: k for k in made}
    assert all(runs[k].tags["rageval.verdict"] in ("pass", "fail", "none") for k in ("gate", "shadow", "online"))
    assert runs["gate"].tags["rageval.policy"] and runs["online"].tags["rageval.policy"]
    assert not [
        k for info in runs.values() for k in info.tags if k.split(".")[1:2] in (["gate"], ["shadow"], ["online"])
    ]
    # no params: a gate's policy and a shadow run's rules and settings are their sealed files
    from rageval.hashing import sha256_file

    assert all(info.params == {} for info in runs.values())
    decision = json.loads(tracker.download(made["gate"], "decision.json", tmp_path / "dl").read_text())
    assert decision["policy"]["sha256"] == sha256_file(files["gate"])
    # the headline few as metric keys, no "/": nothing per slice, per arm or per online metric
    assert set(runs["shadow"].metrics) <= {
        "passed",
        "rules_failed",
        "candidate_leaks",
        "rbo_ext_mean",
        "top1_change_rate",
    }
    assert set(runs["online"].metrics) == {"passed", "units", "srm_p_value", "rules_failed"}
    assert set(runs["review"].metrics) == {"open_rejections", "needs_judgment"}
    assert not [k for info in runs.values() for k in info.metrics if "/" in k]

    # the evaluations' saved view "Headline first": the configured measures first, nDCG@10 the first chart
    view = tracker.client.get_experiment(tracker.experiment_id(EVALUATIONS)).tags[VIEW_TAG]
    envelope = json.loads(view)
    state = json.loads(envelope["state"])
    charts = [card["metricKey"] for card in state["compareRunCharts"]]
    measures = tracker.run(b).params["measures"]
    assert envelope["name"] == "Headline first" and charts[0] == "nDCG_at_10"
    assert set(tracker.run(b).metrics) <= set(charts) and "metrics.`nDCG_at_10`" in state["selectedColumns"]
    assert measures.startswith("nDCG@10") and state["compareRunSections"][0]["isReordered"] is True
    note = tracker.client.get_experiment(tracker.experiment_id(EVALUATIONS)).tags["mlflow.note.content"]
    assert "viewStateShareKey=headline&compareRunsMode=CHART&workflowType=machine_learning" in note


def test_the_release_vocabulary_is_the_tracking_one():
    from rageval.release import marks
    from rageval.tracking import records

    assert (marks.BASELINE_TAG, marks.CANDIDATES_TAG) == (records.BASELINE_TAG, records.CANDIDATES_TAG)
    assert marks.named_pair(records.role_tags("b", ["c", "d"])) == ("b", "c")
    assert marks.named_pair({}) == (None, None)
