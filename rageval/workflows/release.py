"""``rageval release``: read the gate, review, shadow and online runs by ID (each sealed, intact and
of its kind), decide the release under a release policy (:func:`rageval.analysis.release.decide_release`),
answer the checklist (:mod:`rageval.analysis.checklist`) before sealing, and record one sealed release
run linking them all; and ``rageval checklist``: recompute the checklist of a release run from the
same records and compare it with the one stored in it (evidence recorded later, a rollback drill
for one, changes an item; a sealed run cannot take the new answer, so it is printed, not stored)."""

from __future__ import annotations

import datetime as dt
import json
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from rageval.analysis.checklist import ChecklistInputs, EvalRun, Item, changed_items, checklist, checklist_frame
from rageval.analysis.release import (
    LAYERS,
    Evidence,
    Pair,
    ReleaseDecision,
    ReleasePolicy,
    decide_release,
    load_release_policy,
    reference_runs,
)
from rageval.analysis.shadow import ShadowAnalysis
from rageval.analysis.shadow_rules import decide_shadow
from rageval.benchmark.schema import JUDGMENT_NOTES_FILE
from rageval.config.load import config_from_yaml
from rageval.errors import ComparisonError, InputError, RagevalError, TrackingError
from rageval.hashing import sha256_bytes
from rageval.io import read_jsonl, read_yaml
from rageval.paths import project_root
from rageval.safety import csv_bytes
from rageval.tracking.records import NOTE_TAG, ui_link
from rageval.tracking.store import RunInfo, Tracker
from rageval.workflows.guards import sealed_and_intact
from rageval.workflows.provenance import RAGEVAL_VERSION, git_state

EXPERIMENT = "rageval-release"
CHECKLIST_FILE = "checklist.json"


@dataclass(frozen=True)
class ReleaseOutcome:
    run_id: str
    experiment: str
    sealed: str
    decision: ReleaseDecision
    checklist: list[Item]


def _read_json(tracker: Tracker, run_id: str, artifact: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="rageval-release-") as tmp:
        try:
            local = tracker.download(run_id, artifact, Path(tmp))
        except TrackingError:
            return {}
        data = json.loads(local.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {"rows": data}


def _evidence(tracker: Tracker, layer: str, run_id: str, info: RunInfo | None = None) -> Evidence:
    """A layer's run, or why it cannot count (not sealed, tampered, of another kind): never a crash."""
    try:
        info = info or sealed_and_intact(tracker, run_id)
    except (ComparisonError, TrackingError) as exc:
        return Evidence(layer, run_id, problem=str(exc).splitlines()[0])
    kind = info.tags.get("rageval.kind", "")
    if kind != layer:
        return Evidence(layer, run_id, info.tags, info.metrics, problem=f"run {run_id} is a {kind or 'untyped'} run")
    return Evidence(
        layer, run_id, info.tags, info.metrics, tracker.started_ms(run_id), _read_json(tracker, run_id, "decision.json")
    )


def _recheck_shadow(tracker: Tracker, item: Evidence, policy: ReleasePolicy) -> Evidence:
    """The policy's shadow rules applied to the shadow run's recorded tables (its figures, not its log)."""
    if policy.shadow is None or item.problem:
        return item
    try:
        tables = {
            name: tracker.sealed_frame(item.run_id, f"tables/shadow_{name}.parquet")
            for name in ("summary", "latency", "resources", "leaks")
        }
    except (RagevalError, OSError) as exc:
        return Evidence(**{**item.__dict__, "problem": f"its recorded figures cannot be read: {exc}"})
    rbo = item.record.get("rbo", {})
    analysis = ShadowAnalysis(
        pd.DataFrame(),
        tables["summary"],
        tables["latency"],
        tables["resources"],
        tables["leaks"],
        pd.DataFrame(),
        p=float(rbo.get("p", 0.9)),
        k=int(item.record.get("k", 10)),
    )
    return Evidence(**{**item.__dict__, "recheck": decide_shadow(policy.shadow, analysis)})


def _eval_run(tracker: Tracker, run_id: str, problems: list[str], role: str) -> EvalRun | None:
    try:
        info = sealed_and_intact(tracker, run_id)
        artifacts = tracker.run_artifacts(run_id)
    except (ComparisonError, TrackingError) as exc:
        problems.append(f"the {role} evaluation run: {str(exc).splitlines()[0]}")
        return None
    config = config_from_yaml(artifacts.config_yaml)
    return EvalRun(run_id, info.tags, [], artifacts.config_yaml, config.final_k, artifacts.queries)


def _config_name(run: EvalRun | None) -> str:
    return "" if run is None else run.tags.get("rageval.config.label") or run.tags.get("rageval.config.name", "")


def gather(
    tracker: Tracker, runs: dict[str, str], policy: ReleasePolicy, now: dt.datetime
) -> tuple[ReleaseDecision, dict[str, Evidence], EvalRun | None, EvalRun | None]:
    """Read each given layer's run and the evaluation runs they name; decide."""
    evidence = {layer: _evidence(tracker, layer, run) for layer, run in runs.items() if run}
    if "shadow" in evidence:
        evidence["shadow"] = _recheck_shadow(tracker, evidence["shadow"], policy)
    problems: list[str] = []
    named = reference_runs(evidence)
    baseline = candidate = None
    if named is not None:
        baseline = _eval_run(tracker, named[0], problems, "baseline")
        candidate = _eval_run(tracker, named[1], problems, "candidate")
    pair = None if named is None else Pair(named[0], named[1], _config_name(baseline), _config_name(candidate))
    decision = decide_release(policy, evidence, pair, now=now, pair_problems=problems)
    return decision, evidence, baseline, candidate


def checklist_inputs(
    tracker: Tracker,
    release_run: str,
    decision: ReleaseDecision,
    evidence: dict[str, Evidence],
    baseline: EvalRun | None,
    candidate: EvalRun | None,
) -> ChecklistInputs:
    """What the checklist reads beyond the decision: the gate's policy and baseline config, the
    benchmark's LLM labels, and the store's calibration and rollback runs."""
    gate = evidence.get("gate")
    measures: list[str] = []
    gate_config = ""
    if gate is not None and not gate.problem:
        with tempfile.TemporaryDirectory(prefix="rageval-release-") as tmp:
            try:
                data, _ = read_yaml(tracker.download(gate.run_id, "policy.yaml", Path(tmp)), InputError)
                measures = list((data or {}).get("measures", {}))
                gate_config = tracker.download(gate.run_id, "baseline_config.yaml", Path(tmp)).read_text()
            except (RagevalError, OSError):
                pass
    llm: dict[str, str] = {}
    if candidate is not None:
        notes = Path(config_from_yaml(candidate.config_yaml).benchmark) / JUDGMENT_NOTES_FILE
        if notes.is_file():
            rows, _ = read_jsonl(notes)
            for line, row in rows:
                for label in row.get("labels") or []:
                    assessor = str(label.get("assessor", ""))
                    llm.setdefault(assessor, f"{notes.name} line {line}")
    others: dict[str, list[Evidence]] = {"judge-calibration": [], "rollback": []}
    for info in reversed(tracker.runs()):  # oldest first
        kind = info.tags.get("rageval.kind", "")
        if kind in others and info.sealed:
            others[kind].append(Evidence(kind, info.run_id, info.tags, info.metrics))
    return ChecklistInputs(
        release_run,
        decision,
        evidence,
        baseline,
        candidate,
        measures,
        gate_config,
        llm,
        others["judge-calibration"],
        others["rollback"],
    )


def _links(tracker: Tracker, evidence: dict[str, Evidence], pair: Pair | None) -> list[dict[str, str]]:
    rows = []
    ids = [(layer, e.run_id) for layer, e in evidence.items()]
    if pair is not None:
        ids += [("baseline", pair.baseline), ("candidate", pair.candidate)]
    for role, run_id in ids:
        try:
            info = tracker.run(run_id)
            link = ui_link(info.experiment_id, run_id)
        except TrackingError:
            link = ""
        rows.append({"role": role, "run_id": run_id, "link": link})
    return rows


def _note(decision: ReleaseDecision, links: list[dict[str, str]], items: list[Item]) -> str:
    lines = [f"Release verdict: **{decision.verdict.upper()}**", ""]
    lines += [f"- {r.layer}: {r.verdict.upper()} — {r.reason}" for r in decision.layers]
    lines += ["", "Linked runs:"] + [f"- {r['role']}: [{r['run_id']}]({r['link']})" for r in links if r["link"]]
    passed = sum(i.verdict == "pass" for i in items)
    lines += ["", f"Checklist at release time: {passed}/{len(items)} PASS (checklist.json)"]
    return "\n".join(lines)[:4000]


def execute_release(
    runs: dict[str, str | None],
    policy_file: str | Path,
    *,
    tracker: Tracker,
    experiment: str | None = None,
    now: dt.datetime | None = None,
) -> ReleaseOutcome:
    """Decide a release from the layers' runs (``runs``: layer → run ID or None) and record a sealed
    release run holding decision.json, links, the policy and the checklist at release time."""
    policy_file = Path(policy_file)
    policy = load_release_policy(policy_file)
    now = now or dt.datetime.now(dt.UTC)
    given = {layer: run for layer in LAYERS if (run := runs.get(layer))}
    decision, evidence, baseline, candidate = gather(tracker, given, policy, now)
    pair = decision.pair
    family = "" if candidate is None else candidate.tags.get("rageval.config.family") or _config_name(candidate)
    links = _links(tracker, evidence, pair)
    record = {
        "verdict": decision.verdict,
        "reasons": decision.reasons,
        "policy": {"name": policy.name, "file": str(policy_file), "sha256": sha256_bytes(policy_file.read_bytes())},
        "layers": [asdict(r) for r in decision.layers],
        "baseline": {"run_id": pair.baseline, "config": pair.baseline_config} if pair else None,
        "candidate": {"run_id": pair.candidate, "config": pair.candidate_config} if pair else None,
        "family": family,
        "links": links,
        "simulated_layers": [r.layer for r in decision.layers if r.simulated],
    }
    simulated = any(r.simulated for r in decision.layers)
    name = experiment or EXPERIMENT
    run_id = tracker.create_run(
        name,
        f"release {family or 'candidate'} → {decision.verdict}",
        params={"policy": policy.name, **{layer: run for layer, run in given.items()}},
        tags={
            **git_state(project_root()),
            "rageval.version": RAGEVAL_VERSION,
            "rageval.kind": "release",
            "rageval.release.verdict": decision.verdict,
            "rageval.release.policy": policy.name,
            "rageval.release.family": family,
            "rageval.simulated": str(simulated).lower(),
            **(
                {"rageval.release.baseline": pair.baseline, "rageval.release.candidate": pair.candidate} if pair else {}
            ),
            **({"rageval.baseline": pair.baseline} if pair else {}),
            **{f"rageval.release.{layer}": run for layer, run in given.items()},
            **{f"rageval.release.{r.layer}.verdict": r.verdict for r in decision.layers},
        },
        files={"policy.yaml": policy_file.read_bytes()},
    )
    try:
        items = checklist(checklist_inputs(tracker, run_id, decision, evidence, baseline, candidate))
        passed = sum(i.verdict == "pass" for i in items)
        tracker.log_files(
            run_id,
            {
                "decision.json": json.dumps(record, indent=2, default=str).encode(),
                "layers.csv": csv_bytes(decision.table()),
                CHECKLIST_FILE: json.dumps([asdict(i) for i in items], indent=2).encode(),
                "checklist.csv": csv_bytes(checklist_frame(items)),
            },
        )
        tracker.log_tables(run_id, {"links": pd.DataFrame(links, columns=["role", "run_id", "link"])})
        tracker.set_tags(
            run_id, {NOTE_TAG: _note(decision, links, items), "rageval.checklist.passed": f"{passed}/{len(items)}"}
        )
        tracker.log_metrics(
            run_id,
            {
                "passed": float(decision.passed),
                "layers_failed": sum(r.verdict == "fail" for r in decision.layers),
                "checklist_passed": passed,
            },
        )
        digest = tracker.seal(run_id)
    except Exception as exc:
        tracker.fail(run_id, f"sealing failed: {type(exc).__name__}: {exc}")
        raise
    return ReleaseOutcome(run_id, name, digest, decision, items)


@dataclass(frozen=True)
class ChecklistOutcome:
    release_run: str
    items: list[Item]
    changed: list[str]  # items whose verdict differs from the checklist stored at release time


def execute_checklist(release_run: str, *, tracker: Tracker, now: dt.datetime | None = None) -> ChecklistOutcome:
    """Recompute a release run's checklist from the runs it links and compare with the stored one."""
    info = sealed_and_intact(tracker, release_run)
    if info.tags.get("rageval.kind") != "release":
        raise ComparisonError(
            f"run {release_run} is a {info.tags.get('rageval.kind') or 'untyped'} run, not a release run: "
            "give the run ID `rageval release` printed"
        )
    runs = {layer: run for layer in LAYERS if (run := info.tags.get(f"rageval.release.{layer}"))}
    with tempfile.TemporaryDirectory(prefix="rageval-release-") as tmp:
        policy = load_release_policy(tracker.download(release_run, "policy.yaml", Path(tmp)))
    # Evidence ages from the release's own time: the checklist re-reads the release, not a new one.
    at = now or dt.datetime.fromtimestamp(tracker.started_ms(release_run) / 1000, dt.UTC)
    decision, evidence, baseline, candidate = gather(tracker, runs, policy, at)
    items = checklist(checklist_inputs(tracker, release_run, decision, evidence, baseline, candidate))
    stored = _read_json(tracker, release_run, CHECKLIST_FILE).get("rows", [])
    return ChecklistOutcome(release_run, items, changed_items(stored, items))
