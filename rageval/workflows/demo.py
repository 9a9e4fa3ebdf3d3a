"""``rageval demo``: the whole loop on the bundled demo benchmark."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rageval.benchmark.loading import load_benchmark
from rageval.benchmark.schema import RELEASE_SPLIT
from rageval.config.load import config_from_yaml
from rageval.config.sweep import load_sweep
from rageval.errors import ComparisonError
from rageval.paths import project_root
from rageval.progress import Reporter
from rageval.release.simulate_online import Simulation
from rageval.release.simulate_shadow import SimulatedTraffic, simulate_shadow, write_log
from rageval.tracking.store import Tracker
from rageval.workflows.compare import ComparisonOutcome, ComparisonRequest, execute_comparison
from rageval.workflows.gate import GateOutcome, execute_gate
from rageval.workflows.release.online import OnlineOutcome, execute_online, simulate_log
from rageval.workflows.release.record import ChecklistOutcome, ReleaseOutcome, execute_checklist, execute_release
from rageval.workflows.release.registry import PromoteRequest, PromotionOutcome, execute_promote
from rageval.workflows.release.review import ReviewOutcome, ReviewRequest, record_review, start_review
from rageval.workflows.release.rollback import RollbackOutcome, execute_rollback
from rageval.workflows.release.shadow import ShadowOutcome, ShadowRequest, execute_shadow
from rageval.workflows.run import RunOutcome, RunRequest, execute_run
from rageval.workflows.sweep import SweepRequest, run_sweep

SHADOW_REQUESTS = 200


@dataclass(frozen=True)
class DemoOutcome:
    sweep: Any  # rageval.sweep.SweepOutcome
    comparison: ComparisonOutcome
    chosen: str  # the sweep member taken to the release split
    release_baseline: RunOutcome
    release_candidate: RunOutcome
    gate: GateOutcome
    # The release path after the gate (None where the demo stopped before the step).
    review: ReviewOutcome | None = None  # scripted decisions
    shadow: ShadowOutcome | None = None  # simulated log
    online: OnlineOutcome | None = None  # simulated cohort
    release: ReleaseOutcome | None = None
    promotion: PromotionOutcome | None = None
    drill: RollbackOutcome | None = None  # rollback to the previous version, its rankings re-checked
    repromotion: PromotionOutcome | None = None  # champion back on the candidate after the drill
    checklist: ChecklistOutcome | None = None
    stopped: list[str] = field(default_factory=list)  # why the path stopped early, if it did


def execute_demo(
    sweep_file: str | Path | None = None,
    policy_file: str | Path | None = None,
    *,
    release_policy_file: str | Path | None = None,
    baseline: str = "baseline",
    workers: int | None = None,
    tracker: Tracker,
    progress: Any = None,
) -> DemoOutcome:
    """The whole loop on the demo: sweep on dev, compare every member with ``baseline``, take the
    member with the best primary measure to the release split (with the baseline: two release
    evaluations, counted), and gate it; then walk the release path on that pair: a scripted review,
    a simulated shadow log and online cohort, the release decision, promotion, a rollback drill (and
    re-promotion, so the candidate ends as champion) and the recomputed checklist. Each step is a run
    of its own; a failing gate or release stops the path, its reasons in ``stopped``."""

    sweep_file = Path(sweep_file) if sweep_file else project_root() / "params" / "sweeps" / "demo.yaml"
    policy_file = Path(policy_file) if policy_file else project_root() / "params" / "gates" / "release.yaml"
    swept = run_sweep(SweepRequest(sweep_file, workers=workers), tracker=tracker, progress=progress)
    swept.check()
    runs = {m.name: m for m in swept.members}
    if baseline not in runs:
        raise ComparisonError(
            f"the sweep has no member named {baseline!r} to serve as the baseline; members: {', '.join(runs)}"
        )
    compared = ComparisonRequest(runs[baseline].run_id, sweep=swept.parent_run_id)
    comparison = execute_comparison(compared, tracker=tracker)
    key, _ = swept.primary
    chosen = max(
        (m for m in swept.members if m.name != baseline), key=lambda m: (m.metrics.get(key, float("-inf")), m.name)
    )
    spec = load_sweep(sweep_file)
    members = {m.name: m for m in spec.members}
    released = [
        execute_run(
            RunRequest(
                spec.base,
                overrides=members[name].overrides,
                benchmark=spec.benchmark,
                split=RELEASE_SPLIT,
                run_name=f"{spec.spec.name}/{name}@{RELEASE_SPLIT}",
            ),
            tracker,
            reporter=progress.member(f"{name}@{RELEASE_SPLIT}") if isinstance(progress, Reporter) else None,
        )
        for name in (baseline, chosen.name)
    ]
    gate = execute_gate(released[0].run_id, released[1].run_id, policy_file, tracker=tracker)
    outcome = DemoOutcome(swept, comparison, chosen.name, released[0], released[1], gate)
    if not gate.decision.passed:
        return _stopped(outcome, ["the gate failed"])
    return _release_path(outcome, release_policy_file, tracker)


def _stopped(outcome: DemoOutcome, reasons: list[str], **done: Any) -> DemoOutcome:
    return replace(outcome, stopped=reasons, **done)


def _release_path(outcome: DemoOutcome, release_policy_file: str | Path | None, tracker: Tracker) -> DemoOutcome:
    root = project_root() / "params"
    base, cand = outcome.release_baseline.run_id, outcome.release_candidate.run_id
    benchmark = config_from_yaml(tracker.run_artifacts(cand).config_yaml).benchmark
    with tempfile.TemporaryDirectory(prefix="rageval-demo-") as tmp:
        folder = Path(tmp)
        start_review(ReviewRequest(outcome.gate.run_id, folder / "review"), tracker=tracker)
        review = record_review(folder / "review", tracker=tracker, scripted=True)
        records = simulate_shadow(
            tracker.rankings(base),
            tracker.rankings(cand),
            load_benchmark(benchmark),
            SimulatedTraffic(SHADOW_REQUESTS),
            baseline_config=base,
            candidate_config=cand,
        )
        shadow_log = write_log(records, folder / "shadow.jsonl")
        shadow = execute_shadow(
            ShadowRequest(
                shadow_log,
                root / "shadow" / "policy.yaml",
                benchmark,
                rules_file=root / "shadow" / "demo-rules.yaml",
                baseline_run=base,
                candidate_run=cand,
            ),
            tracker=tracker,
        )
        online_log, _ = simulate_log(base, cand, folder / "online.jsonl", Simulation(), tracker=tracker)
        online = execute_online(
            online_log,
            root / "online" / "policy.yaml",
            root / "online" / "metrics.yaml",
            tracker=tracker,
            baseline=base,
            candidate=cand,
        )
    runs = {"gate": outcome.gate.run_id, "review": review.run_id, "shadow": shadow.run_id, "online": online.run_id}
    release = execute_release(
        runs,
        Path(release_policy_file) if release_policy_file else root / "release" / "demo-policy.yaml",
        tracker=tracker,
    )
    done: dict[str, Any] = {"review": review, "shadow": shadow, "online": online, "release": release}
    if not release.decision.passed:
        return _stopped(outcome, [f"the release failed: {r}" for r in release.decision.reasons], **done)
    # The demo's evidence is simulated (scripted review, simulated shadow log and cohort): promoted
    # only because it is allowed here, and marked SIMULATED on the promotion run and registry version.
    promote = PromoteRequest(release.run_id, allow_simulated=True)
    done["promotion"] = promotion = execute_promote(promote, tracker=tracker)
    # The drill: roll back to the previous version (refused unless its bundle reproduces its rankings
    # on a sample), then promote the same release again so that the demo ends on the candidate.
    done["drill"] = drill = execute_rollback(promotion.model, tracker=tracker)
    if not drill.passed:
        reason = drill.check.problem or f"rankings differ on {len(drill.check.differing)} sampled queries"
        return _stopped(outcome, [f"the rollback drill failed: {reason}"], **done)
    done["repromotion"] = execute_promote(promote, tracker=tracker)
    done["checklist"] = execute_checklist(release.run_id, tracker=tracker)
    return _stopped(outcome, [], **done)
