"""The release path cannot be fooled: every attack below is tried on a real store (sealed evaluation
runs, a real gate, a person's review recorded by the review command, shadow and online runs), and
``rageval promote`` or ``rageval checklist`` refuses it with its reason. The last tests are the
controls: the honest release is promoted, and a simulated one only with ``--allow-simulated``,
marked SIMULATED on the promotion run and the registry version.

The shadow and online logs of the "served" path are the simulator's records without its mark (see
``test_release._as_served``): the stand-in for a team's real traffic logs, which rageval reads the same way."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse

import pytest
from test_compare import record_run
from test_gate import FILTERED
from test_release import evidence_path, files, human_review, review_run, shadow_run  # noqa: F401  (files: a fixture)
from typer.testing import CliRunner

from rageval.tracking.registry import CHAMPION, Registry
from rageval.tracking.store import Tracker

FAMILY = "attacks-family"
EXPERIMENT = "attack-tests"


def app():
    from rageval.cli import app

    return app


def invoke(*args: str):
    return CliRunner().invoke(app(), list(args))


@pytest.fixture(scope="module")
def scene(store: str, files: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A release pair (a starved BM25 baseline, the same BM25 with its candidates) and another
    candidate; the served evidence path for the pair, and the runs the attacks swap in."""
    from rageval.workflows.gate import execute_gate

    folder = tmp_path_factory.mktemp("attacks")
    made = {
        key: record_run(
            store, split="release", overrides=[FILTERED % values], name=f"attack-{key}", experiment=EXPERIMENT,
            family=FAMILY,
        )
        for key, values in (("baseline", (0.9, 0.4, 3)), ("candidate", (0.9, 0.4, 100)), ("other", (1.2, 0.75, 100)))
    }  # fmt: skip
    b, c = made["baseline"], made["candidate"]
    made |= evidence_path(store, files, folder, b, c, served=True)
    tracker = Tracker(store)
    made["gate_other"] = execute_gate(b, made["other"], files["gate"], tracker=tracker, experiment=EXPERIMENT).run_id
    made["review_open"] = review_run(store, made["gate"], b, c, rejections=2)
    made["shadow_simulated"] = shadow_run(store, b, c, folder / "sim-shadow.jsonl", files["rules"])
    made["folder"] = str(folder)
    return made


def layers(scene: dict[str, str], **swap: str) -> dict[str, str]:
    return {layer: scene[swap.get(layer, layer)] for layer in ("gate", "review", "shadow", "online")}


def real_release(store: str, files: dict[str, Path], runs: dict[str, str]) -> str:
    from rageval.workflows.release.record import execute_release

    return execute_release(runs, files["release"], tracker=Tracker(store), experiment=EXPERIMENT).run_id


def forge(store: str, files: dict[str, Path], scene: dict[str, str], links: dict[str, str], **changes) -> str:
    """A release run made by hand with the tags, params and files `rageval release` writes, claiming PASS."""
    tags = {
        "rageval.kind": "release",
        "rageval.verdict": "pass",
        "rageval.baseline": scene["baseline"],
        "rageval.candidates": scene["candidate"],
        "rageval.release.family": FAMILY,
        "rageval.simulated": "false",
        **changes.get("tags", {}),
    }
    params = changes.get("params", links)
    made = {"policy.yaml": files["release"].read_bytes(), "decision.json": json.dumps({"verdict": "pass"}).encode()}
    for name in changes.get("drop", ()):
        made.pop(name)
    tracker = Tracker(store)
    run_id = tracker.create_run(EXPERIMENT, "release (made by hand)", params=params, tags=tags, files=made)
    tracker.seal(run_id)
    return run_id


def fresh(scene: dict[str, str], name: str) -> Path:
    """A review folder no other test wrote (a review folder is written once)."""
    import uuid

    return Path(scene["folder"]) / f"{name}-{uuid.uuid4().hex[:8]}"


def artifact_root(store: str, run_id: str) -> Path:
    return Path(urlparse(Tracker(store).run(run_id).artifact_uri).path)


# ------------------------------------------------------------------------------------------- the attacks


def only_release_tags(store, files, scene):
    tracker = Tracker(store)
    tags = {
        "rageval.kind": "release",
        "rageval.verdict": "pass",
        "rageval.baseline": scene["baseline"],
        "rageval.candidates": scene["candidate"],
        "rageval.release.family": FAMILY,
    }
    run_id = tracker.create_run(EXPERIMENT, "release tags only", params={}, tags=tags)
    tracker.seal(run_id)
    return run_id


def no_evidence(store, files, scene):
    return forge(store, files, scene, {})


def failing_evidence_claimed_passing(store, files, scene):
    return forge(store, files, scene, layers(scene, review="review_open"))


def edited_link(store, files, scene):
    run_id = real_release(store, files, layers(scene))
    Tracker(store).client.set_tag(run_id, "rageval.baseline", scene["shadow_simulated"])
    return run_id


def tags_name_another_pair(store, files, scene):
    return forge(store, files, scene, layers(scene), tags={"rageval.candidates": scene["baseline"]})


def gate_on_another_pair(store, files, scene):
    return forge(store, files, scene, layers(scene, gate="gate_other"))


def simulated_shadow_in_a_real_release(store, files, scene):
    return real_release(store, files, layers(scene, shadow="shadow_simulated"))


def simulated_evidence_tagged_real(store, files, scene):
    return forge(store, files, scene, layers(scene, shadow="shadow_simulated"))


def deleted_review(store, files, scene):
    review = human_review(store, scene["gate"], fresh(scene, "review-deleted"), reviewer="grace")
    run_id = real_release(store, files, layers(scene) | {"review": review})
    Tracker(store).client.delete_run(review)
    return run_id


def tampered_layer(store, files, scene):
    review = human_review(store, scene["gate"], fresh(scene, "review-tampered"), reviewer="linus")
    run_id = real_release(store, files, layers(scene) | {"review": review})
    decisions = artifact_root(store, review) / "decisions.json"
    decisions.write_bytes(decisions.read_bytes() + b"\n")
    return run_id


def unsealed_layer(store, files, scene):
    tracker = Tracker(store)
    review = tracker.create_run(
        EXPERIMENT,
        "review left running",
        params={},
        tags={
            "rageval.kind": "review",
            "rageval.review.gate": scene["gate"],
            "rageval.baseline": scene["baseline"],
            "rageval.candidates": scene["candidate"],
            "rageval.review.status": "complete",
            "rageval.review.open_rejections": "0",
            "rageval.review.reviewers": "ada",
        },
    )
    return forge(store, files, scene, layers(scene) | {"review": review})


def wrong_kind(store, files, scene):
    return forge(store, files, scene, layers(scene, shadow="online"))


def tampered_release(store, files, scene):
    run_id = real_release(store, files, layers(scene))
    decision = artifact_root(store, run_id) / "decision.json"
    decision.write_text(decision.read_text().replace('"verdict": "pass"', '"verdict": "pass" '))
    return run_id


def another_family(store, files, scene):
    return forge(store, files, scene, layers(scene), tags={"rageval.release.family": "some-other-family"})


def a_release_that_failed(store, files, scene):
    return real_release(store, files, layers(scene, review="review_open"))


def a_gate_as_the_release(store, files, scene):
    return scene["gate"]


ATTACKS: list[tuple[str, Callable[..., str], str]] = [
    ("a run with only the release tags", only_release_tags, "holds no policy.yaml"),
    ("a hand-made release linking no evidence", no_evidence, "gate: no gate run given (required by the policy)"),
    ("failing evidence claimed as pass", failing_evidence_claimed_passing, "review has 2 open rejection(s)"),
    ("a link edited after sealing", edited_link, "was altered after sealing"),
    ("tags naming another pair than its layers", tags_name_another_pair, "it names candidate run {baseline} but its evidence concerns {candidate}"),
    ("a gate on another pair", gate_on_another_pair, "mismatch: its candidate is run {candidate}, the release's is {other}"),
    ("a simulated shadow in a real release", simulated_shadow_in_a_real_release, "rests on SIMULATED or scripted evidence (shadow {shadow_simulated})"),
    ("simulated evidence tagged real", simulated_evidence_tagged_real, "it says rageval.simulated='false', its evidence is simulated=True"),
    ("a deleted review", deleted_review, "review run"),
    ("a layer run tampered after the release", tampered_layer, "was altered after sealing"),
    ("an unsealed layer run", unsealed_layer, "is RUNNING and not sealed"),
    ("a layer run of the wrong kind", wrong_kind, "run {online} is a online run"),
    ("a release run tampered after sealing", tampered_release, "was altered after sealing"),
    ("a release naming another family", another_family, "it names family 'some-other-family'"),
    ("a release that failed", a_release_that_failed, "review has 2 open rejection(s)"),
    ("a gate run given as the release", a_gate_as_the_release, "is a gate run, not a release run"),
]  # fmt: skip


@pytest.mark.parametrize("attack, make, reason", ATTACKS, ids=[a[0] for a in ATTACKS])
def test_each_attack_on_promote_is_refused_with_its_reason(store, files, scene, attack, make, reason):
    registry = Registry(Tracker(store))
    before = registry.alias(FAMILY, CHAMPION)
    release_run = make(store, files, scene)
    result = invoke("promote", release_run, "--tracking-uri", store)
    assert result.exit_code == 1, f"{attack}: {result.output}"
    assert reason.format(**scene) in result.output, f"{attack}: {result.output}"
    after = registry.alias(FAMILY, CHAMPION)
    assert (before and before.version) == (after and after.version), f"{attack} moved champion"
    promotions = [r for r in Tracker(store).runs(EXPERIMENT) if r.tags.get("rageval.promotion.release") == release_run]
    assert promotions == [], f"{attack} recorded a promotion"


def test_a_deleted_review_is_named_as_deleted(store, files, scene):
    release_run = deleted_review(store, files, scene)
    result = invoke("promote", release_run, "--tracking-uri", store)
    assert result.exit_code == 1 and "deleted" in result.output, result.output


# ------------------------------------------------------------------------------------------- the checklist


def checklist_lines(store: str, release_run: str) -> tuple[int, dict[int, str]]:
    result = invoke("checklist", release_run, "--tracking-uri", store)
    lines = {int(line[6:8]): line for line in result.output.splitlines() if line[:4] in ("PASS", "FAIL")}
    return result.exit_code, lines


def test_a_hand_made_rollback_does_not_pass_item_10(store, files, scene):
    release_run = real_release(store, files, layers(scene))
    tracker = Tracker(store)
    tags = {"rageval.kind": "rollback", "rageval.promotion.release": release_run}
    two_tags = tracker.create_run(EXPERIMENT, "rollback (two tags)", params={}, tags=tags)
    tracker.seal(two_tags)
    code, lines = checklist_lines(store, release_run)
    assert code == 1 and lines[10].startswith("FAIL"), lines[10]
    assert f"rollback run {two_tags} names no registered model and version" in lines[10]

    forged = tracker.create_run(
        EXPERIMENT,
        "rollback (forged verdict)",
        params={},
        tags={
            "rageval.kind": "rollback",
            "rageval.promotion.release": release_run,
            "rageval.verdict": "pass",
            "rageval.registry.model": FAMILY,
            "rageval.registry.from": "1",
        },
    )
    tracker.seal(forged)
    _, lines = checklist_lines(store, release_run)
    assert lines[10].startswith("FAIL"), lines[10]
    assert f"rollback run {forged}" in lines[10] and (
        "was not rolled back by it" in lines[10] or "no version 1 of registered model" in lines[10]
    ), lines[10]


def test_each_item_fails_on_a_tampered_or_missing_run(store, files, scene):
    review = human_review(store, scene["gate"], fresh(scene, "review-checklist"), reviewer="mary")
    release_run = real_release(store, files, layers(scene) | {"review": review})
    _, before = checklist_lines(store, release_run)
    assert before[7].startswith("PASS") and before[8].startswith("PASS"), (before[7], before[8])
    decisions = artifact_root(store, review) / "decisions.json"
    decisions.write_bytes(decisions.read_bytes() + b"\n")
    _, after = checklist_lines(store, release_run)
    assert after[7].startswith("FAIL") and f"run {review} was altered after sealing" in after[7], after[7]
    assert after[10].startswith("FAIL") and "the release run does not hold" in after[10], after[10]


def test_item_6_fails_when_the_judgment_notes_cannot_be_seen(store, scene, tmp_path):
    import shutil

    import yaml
    from conftest import DEMO

    from rageval.benchmark.loading import write_hashes
    from rageval.benchmark.schema import JUDGMENT_NOTES_FILE
    from rageval.release.checklist import EvalRun
    from rageval.workflows.release.record import _judgment_notes

    artifacts = Tracker(store).run_artifacts(scene["candidate"])
    config = yaml.safe_load(artifacts.config_yaml)

    def run_on(benchmark: Path) -> EvalRun:
        text = yaml.safe_dump(config | {"benchmark": str(benchmark)})
        return EvalRun(scene["candidate"], artifacts.info.tags, [], text, 5, artifacts.queries)

    assert _judgment_notes(run_on(DEMO)) == ({}, None)  # the demo has no notes, and records none
    llm, problem = _judgment_notes(run_on(tmp_path / "gone"))
    assert llm == {} and problem and f"the benchmark {tmp_path / 'gone'} cannot be read" in problem

    copy = tmp_path / "bench"
    shutil.copytree(DEMO, copy)
    (copy / JUDGMENT_NOTES_FILE).write_text(
        json.dumps({"queryId": "q", "labels": [{"assessor": "llm:x@1", "grade": 2}]}) + "\n"
    )
    write_hashes(copy)
    llm, problem = _judgment_notes(run_on(copy))
    assert problem is None and llm == {"llm:x@1": f"{JUDGMENT_NOTES_FILE} line 1"}
    (copy / JUDGMENT_NOTES_FILE).unlink()
    llm, problem = _judgment_notes(run_on(copy))
    assert llm == {} and problem and "cannot be read" in problem and JUDGMENT_NOTES_FILE in problem


def test_today_is_recorded_on_the_run_it_moved(store, scene):
    import datetime as dt

    from test_release import ROOT

    from rageval.workflows.release.online import execute_online

    then = dt.date.today() - dt.timedelta(days=3)
    outcome = execute_online(
        Path(scene["folder"]) / "online.jsonl",
        ROOT / "params/online/policy.yaml",
        ROOT / "params/online/metrics.yaml",
        tracker=Tracker(store),
        baseline=scene["baseline"],
        candidate=scene["candidate"],
        today=then,
        experiment=EXPERIMENT,
    )
    tags = Tracker(store).run(outcome.run_id).tags
    assert tags["rageval.today"] == then.isoformat()
    (override,) = json.loads(tags["rageval.overrides"])
    assert override.startswith(f"--today {then.isoformat()}: the import policy's retention was checked against it")
    shipped = {"release": ROOT / "params/release/policy.yaml"}
    release_run = real_release(store, shipped, layers(scene) | {"online": outcome.run_id})
    listed = invoke("checklist", release_run, "--tracking-uri", store)
    assert f"override: --today {then.isoformat()}" in listed.output, listed.output


def test_a_laxer_policy_is_recorded_and_listed_by_the_checklist(store, files, scene):
    """A policy laxer than the shipped one, recorded on the release run and listed by `rageval checklist`."""
    tracker = Tracker(store)
    release_run = real_release(store, files, layers(scene))
    tags = tracker.run(release_run).tags
    overrides = json.loads(tags["rageval.overrides"])
    said = "release policy 'release-default' sets shadow.min_rbo 0.3 where the shipped 'release-default' sets 0.8"
    assert said in overrides
    result = invoke("checklist", release_run, "--tracking-uri", store)
    assert "override: release policy 'release-default' sets shadow.min_rbo 0.3" in result.output, result.output


# ------------------------------------------------------------------------------------------- the controls


def test_the_honest_release_is_promoted_and_marked_real(store, files, scene):
    release_run = real_release(store, files, layers(scene))
    result = invoke("promote", release_run, "--tracking-uri", store, "--sample", "5")
    assert result.exit_code == 0, result.output
    tracker = Tracker(store)
    registry = Registry(tracker)
    champion = registry.alias(FAMILY, CHAMPION)
    assert champion is not None and champion.evaluation_run == scene["candidate"]
    assert champion.tags["rageval.simulated"] == "false"
    (promotion,) = [r for r in tracker.runs(EXPERIMENT) if r.tags.get("rageval.promotion.release") == release_run]
    assert promotion.sealed and promotion.tags["rageval.simulated"] == "false"
    assert "SIMULATED" not in result.output


def test_a_simulated_release_is_promoted_only_when_allowed_and_then_marked(store, files, scene):
    release_run = simulated_shadow_in_a_real_release(store, files, scene)
    result = invoke("promote", release_run, "--tracking-uri", store, "--sample", "5", "--allow-simulated")
    assert result.exit_code == 0, result.output
    assert f"SIMULATED: the release rests on simulated evidence (shadow {scene['shadow_simulated']})" in result.output
    tracker = Tracker(store)
    registry = Registry(tracker)
    champion = registry.alias(FAMILY, CHAMPION)
    assert champion.tags["rageval.simulated"] == "true"
    version = registry.client.get_model_version(FAMILY, champion.version)
    assert version.description.startswith(f"SIMULATED: promoted by release run {release_run}")
    assert registry.client.get_registered_model(FAMILY).tags["rageval.champion.simulated"] == "true"
    (promotion,) = [r for r in tracker.runs(EXPERIMENT) if r.tags.get("rageval.promotion.release") == release_run]
    assert promotion.tags["rageval.simulated"] == "true" and "(SIMULATED)" in promotion.name
    assert promotion.tags["mlflow.note.content"].startswith("SIMULATED")
    assert any(o.startswith("--allow-simulated") for o in json.loads(promotion.tags["rageval.overrides"]))
    listed = invoke("checklist", release_run, "--tracking-uri", store)
    assert "override: --allow-simulated: SIMULATED: promoted by release run" in listed.output, listed.output
