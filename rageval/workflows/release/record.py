"""``rageval release``: read the gate, review, shadow and online runs by ID (each sealed, intact and
of its kind), decide the release under a release policy (:func:`rageval.release.decision.decide_release`),
answer the checklist (:mod:`rageval.release.checklist`) before sealing, and record one sealed release
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

from rageval.benchmark.loading import load_benchmark
from rageval.benchmark.schema import JUDGMENT_NOTES_FILE
from rageval.config.load import config_from_yaml
from rageval.errors import ComparisonError, InputError, RagevalError, TrackingError, VerificationError
from rageval.hashing import sha256_bytes
from rageval.io import read_jsonl, read_yaml
from rageval.paths import project_root
from rageval.release.checklist import ChecklistInputs, EvalRun, Item, changed_items, checklist, checklist_frame
from rageval.release.decision import (
    LAYERS,
    Evidence,
    Pair,
    ReleaseDecision,
    ReleasePolicy,
    decide_release,
    load_release_policy,
    policy_overrides,
    reference_runs,
)
from rageval.release.marks import POLICY_TAG, VERDICT_TAG, named_pair, overrides_of, overrides_tag
from rageval.release.shadow import ShadowAnalysis
from rageval.release.shadow_rules import decide_shadow
from rageval.safety import csv_bytes
from rageval.tracking.records import NOTE_TAG, RELEASE_EXPERIMENT, role_tags, ui_link
from rageval.tracking.registry import Registry
from rageval.tracking.store import RunInfo, Tracker
from rageval.workflows.guards import sealed_and_intact
from rageval.workflows.provenance import RAGEVAL_VERSION, git_state

EXPERIMENT = RELEASE_EXPERIMENT
CHECKLIST_FILE = "checklist.json"
SHIPPED_POLICY = ("params", "release", "policy.yaml")  # what a policy's overrides are measured against


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


def _why(exc: Exception) -> str:
    """One line saying why a run cannot count: a tampered run's first change named."""
    first = str(exc).splitlines()[0]
    if isinstance(exc, VerificationError) and exc.changes:
        more = f" (and {len(exc.changes) - 1} more)" if len(exc.changes) > 1 else ""
        return f"{first} {exc.changes[0]}{more}"
    return first


def _evidence(tracker: Tracker, layer: str, run_id: str, info: RunInfo | None = None) -> Evidence:
    """A layer's run, or why it cannot count (not sealed, tampered, of another kind): never a crash."""
    try:
        info = info or sealed_and_intact(tracker, run_id)
    except (ComparisonError, TrackingError) as exc:
        return Evidence(layer, run_id, problem=_why(exc))
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
        problems.append(f"the {role} evaluation run: {_why(exc)}")
        return None
    kind = info.tags.get("rageval.kind", "")
    if kind != "evaluation":
        problems.append(f"the {role} run {run_id} is a {kind or 'untyped'} run, not an evaluation run")
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


def _judgment_notes(candidate: EvalRun) -> tuple[dict[str, str], str | None]:
    """The assessors of the candidate's benchmark judgment notes (assessor → where), or why they
    cannot be seen: a benchmark that is not there, not the version the run used, or whose
    benchmark.yaml records a notes file that is gone."""
    folder = Path(config_from_yaml(candidate.config_yaml).benchmark)
    try:
        bench = load_benchmark(folder)
    except (RagevalError, OSError) as exc:
        return {}, f"the benchmark {folder} cannot be read: {str(exc).splitlines()[0]}"
    recorded = candidate.tags.get("rageval.hash.cases")
    if recorded and recorded != bench.hashes["cases"]:
        return {}, f"the benchmark at {folder} is not the version run {candidate.run_id} used (cases hash differs)"
    notes = folder / JUDGMENT_NOTES_FILE
    if not notes.is_file():
        if JUDGMENT_NOTES_FILE in bench.spec.files:
            return {}, f"{notes} is recorded in benchmark.yaml but missing"
        return {}, None
    llm: dict[str, str] = {}
    rows, _ = read_jsonl(notes)
    for line, row in rows:
        for label in row.get("labels") or []:
            llm.setdefault(str(label.get("assessor", "")), f"{notes.name} line {line}")
    return llm, None


def _verified(tracker: Tracker, info: RunInfo) -> Evidence:
    """A calibration or rollback run as the checklist reads it: ``problem`` when it is tampered."""
    kind = info.tags.get("rageval.kind", "")
    try:
        problems = tracker.verify(info.run_id)
    except RagevalError as exc:
        problems = [str(exc).splitlines()[0]]
    problem = f"run {info.run_id} does not verify: {problems[0]}" if problems else None
    if problem is None and kind == "rollback":
        problem = _rollback_in_registry(tracker, info)
    return Evidence(kind, info.run_id, info.tags, info.metrics, problem=problem)


def _rollback_in_registry(tracker: Tracker, info: RunInfo) -> str | None:
    """Why a rollback run is not one `rageval rollback` made (None: the version it rolled back
    carries its run ID, as the rollback tags it)."""
    model, version = info.tags.get("rageval.registry.model", ""), info.tags.get("rageval.registry.from", "")
    if not model or not version:
        return f"rollback run {info.run_id} names no registered model and version (rageval.registry.model/from)"
    try:
        tags = Registry(tracker).get(model, version).tags
    except RagevalError as exc:
        return f"rollback run {info.run_id}: {str(exc).splitlines()[0]}"
    if tags.get("rageval.rolled_back_by") != info.run_id:
        return f"rollback run {info.run_id}: version {version} of {model!r} was not rolled back by it"
    return None


def checklist_inputs(
    tracker: Tracker,
    release_run: str,
    decision: ReleaseDecision,
    evidence: dict[str, Evidence],
    baseline: EvalRun | None,
    candidate: EvalRun | None,
    release_problems: list[str] | None = None,
) -> ChecklistInputs:
    """What the checklist reads beyond the decision: the gate's policy and baseline config, the
    benchmark's LLM labels, and the store's calibration and rollback runs (each verified)."""
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
    llm, notes_problem = ({}, "the candidate evaluation run cannot be read") if candidate is None else (
        _judgment_notes(candidate)
    )  # fmt: skip
    others: dict[str, list[Evidence]] = {"judge-calibration": [], "rollback": []}
    for info in reversed(tracker.runs()):  # oldest first
        kind = info.tags.get("rageval.kind", "")
        if kind in others and info.sealed:
            others[kind].append(_verified(tracker, info))
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
        notes_problem=notes_problem,
        release_problems=list(release_problems or []),
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
    simulated = [r.layer for r in decision.layers if r.simulated]
    lines = [f"Release verdict: **{decision.verdict.upper()}**", ""]
    if simulated:
        lines[1:1] = ["", f"**SIMULATED evidence** ({', '.join(simulated)}): not a release of real traffic"]
    lines += [f"- {r.layer}: {r.verdict.upper()} — {r.reason}" for r in decision.layers]
    lines += ["", "Linked runs:"] + [f"- {r['role']}: [{r['run_id']}]({r['link']})" for r in links if r["link"]]
    passed = sum(i.verdict == "pass" for i in items)
    lines += ["", f"Checklist at release time: {passed}/{len(items)} PASS (checklist.json)"]
    return "\n".join(lines)[:4000]


def _shipped_policy(policy_file: Path) -> ReleasePolicy | None:
    """The shipped release policy, what another policy's overrides are measured against (None when
    this checkout has none, or when ``policy_file`` is it)."""
    shipped = project_root().joinpath(*SHIPPED_POLICY)
    if not shipped.is_file() or shipped.resolve() == policy_file.resolve():
        return None
    return load_release_policy(shipped)


def _release_tags(
    policy: ReleasePolicy, decision: ReleaseDecision, family: str, overrides: list[str], given: dict[str, str]
) -> dict[str, str]:
    pair = decision.pair
    return {
        **git_state(project_root()),
        "rageval.version": RAGEVAL_VERSION,
        "rageval.kind": "release",
        VERDICT_TAG: decision.verdict,
        POLICY_TAG: policy.name,
        "rageval.release.family": family,
        "rageval.simulated": str(any(r.simulated for r in decision.layers)).lower(),
        **overrides_tag(overrides),
        # the pair by the release path's role tags; the layers' runs are the params gate, review, shadow,
        # online (searchable: params.gate = 'RUN_ID'), their verdicts decision.json and layers.csv
        **(role_tags(pair.baseline, [pair.candidate]) if pair else {}),
    }


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
    family = "" if candidate is None else candidate.tags.get("rageval.config.family") or _config_name(candidate)
    links = _links(tracker, evidence, decision.pair)
    overrides = policy_overrides(policy, _shipped_policy(policy_file))
    record = _decision_record(decision, policy, policy_file, family, links, overrides)
    name = experiment or EXPERIMENT
    run_id = tracker.create_run(
        name,
        f"release {family or 'candidate'} → {decision.verdict}",
        params=dict(given),
        tags=_release_tags(policy, decision, family, overrides, given),
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
        tracker.set_tags(run_id, {NOTE_TAG: _note(decision, links, items)})
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


def _decision_record(
    decision: ReleaseDecision,
    policy: ReleasePolicy,
    policy_file: Path,
    family: str,
    links: list[dict[str, str]],
    overrides: list[str],
) -> dict[str, Any]:
    """decision.json: the verdict and its reasons, the policy (and what it overrides), each layer's
    result, the pair and the links to every run the release read."""
    pair = decision.pair
    return {
        "verdict": decision.verdict,
        "reasons": decision.reasons,
        "policy": {"name": policy.name, "file": str(policy_file), "sha256": sha256_bytes(policy_file.read_bytes())},
        "layers": [asdict(r) for r in decision.layers],
        "baseline": {"run_id": pair.baseline, "config": pair.baseline_config} if pair else None,
        "candidate": {"run_id": pair.candidate, "config": pair.candidate_config} if pair else None,
        "family": family,
        "links": links,
        "simulated_layers": [r.layer for r in decision.layers if r.simulated],
        "overrides": overrides,
    }


@dataclass(frozen=True)
class Rederived:
    """A release run read back, its decision recomputed from the runs it links under the policy it
    recorded, at the time it was made. ``problems``: why its own record does not hold (its tags or
    decision.json say other than the evidence does)."""

    run_id: str
    tags: dict[str, str]
    decision: ReleaseDecision
    evidence: dict[str, Evidence]
    baseline: EvalRun | None
    candidate: EvalRun | None
    problems: list[str]

    @property
    def holds(self) -> bool:
        return self.decision.passed and not self.problems

    @property
    def simulated(self) -> list[str]:
        """The linked runs made from simulated or scripted evidence, as 'layer run'."""
        return [f"{layer} {e.run_id}" for layer, e in self.evidence.items() if e.simulated]

    @property
    def overrides(self) -> list[str]:
        return [*overrides_of(self.tags), *(o for e in self.evidence.values() for o in overrides_of(e.tags))]

    def refusal(self) -> str:
        """Why this release may not be acted on (empty: it may)."""
        why = [*self.problems, *self.decision.reasons]
        return "; ".join(why)


def _release_record(tracker: Tracker, release_run: str) -> tuple[RunInfo, ReleasePolicy, dict[str, Any]]:
    info = sealed_and_intact(tracker, release_run)
    if info.tags.get("rageval.kind") != "release":
        raise ComparisonError(
            f"run {release_run} is a {info.tags.get('rageval.kind') or 'untyped'} run, not a release run: "
            "give the run ID `rageval release` printed"
        )
    with tempfile.TemporaryDirectory(prefix="rageval-release-") as tmp:
        try:
            policy = load_release_policy(tracker.download(release_run, "policy.yaml", Path(tmp)))
        except TrackingError:
            raise ComparisonError(
                f"release run {release_run} holds no policy.yaml: it was not recorded by `rageval release`, and "
                "its decision cannot be re-derived; record the release with `rageval release`"
            ) from None
    stored = _read_json(tracker, release_run, "decision.json")
    return info, policy, stored


def rederive_release(tracker: Tracker, release_run: str, *, now: dt.datetime | None = None) -> Rederived:
    """Re-derive a release run's decision from its linked runs (each sealed, intact, of its kind and
    about one pair) under its recorded policy, and compare it with what the run itself says."""
    info, policy, stored = _release_record(tracker, release_run)
    tags = info.tags
    runs = {layer: run for layer in LAYERS if (run := info.params.get(layer))}
    problems: list[str] = []
    # Evidence ages from the release's own time: re-reading a release is not making a new one.
    at = now or dt.datetime.fromtimestamp(tracker.started_ms(release_run) / 1000, dt.UTC)
    decision, evidence, baseline, candidate = gather(tracker, runs, policy, at)
    if tags.get(VERDICT_TAG) != decision.verdict or stored.get("verdict") != decision.verdict:
        problems.append(
            f"it records verdict {tags.get(VERDICT_TAG)!r} (decision.json: {stored.get('verdict')!r}) "
            f"but its evidence, re-read now, gives {decision.verdict!r}"
        )
    pair = decision.pair
    for role, said in zip(("baseline", "candidate"), named_pair(tags), strict=True):
        said, found = said or "", getattr(pair, role) if pair else ""
        if said != found:
            problems.append(f"it names {role} run {said or '(none)'} but its evidence concerns {found or 'no run'}")
    family = "" if candidate is None else candidate.tags.get("rageval.config.family") or _config_name(candidate)
    if tags.get("rageval.release.family", "") != family:
        problems.append(f"it names family {tags.get('rageval.release.family')!r}, its candidate run is of {family!r}")
    simulated = any(e.simulated for e in evidence.values())
    if tags.get("rageval.simulated") != str(simulated).lower():
        said = tags.get("rageval.simulated")
        problems.append(f"it says rageval.simulated={said!r}, its evidence is simulated={simulated}")
    return Rederived(release_run, tags, decision, evidence, baseline, candidate, problems)


@dataclass(frozen=True)
class ChecklistOutcome:
    release_run: str
    items: list[Item]
    changed: list[str]  # items whose verdict differs from the checklist stored at release time
    overrides: list[str]  # every override that weakened a check on the runs the release rests on


def execute_checklist(release_run: str, *, tracker: Tracker, now: dt.datetime | None = None) -> ChecklistOutcome:
    """Recompute a release run's checklist from the runs it links and compare with the stored one."""
    found = rederive_release(tracker, release_run, now=now)
    inputs = checklist_inputs(
        tracker, release_run, found.decision, found.evidence, found.baseline, found.candidate, found.problems
    )
    items = checklist(inputs)
    stored = _read_json(tracker, release_run, CHECKLIST_FILE).get("rows", [])
    later = [
        o
        for info in tracker.runs()
        if info.tags.get("rageval.kind") == "promotion" and info.tags.get("rageval.promotion.release") == release_run
        for o in overrides_of(info.tags)
    ]
    overrides = list(dict.fromkeys([*found.overrides, *later]))
    return ChecklistOutcome(release_run, items, changed_items(stored, items), overrides)
