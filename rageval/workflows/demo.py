"""``rageval demo``: the whole loop on the bundled demo benchmark."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rageval.benchmark.schema import RELEASE_SPLIT
from rageval.config.sweep import load_sweep
from rageval.errors import ComparisonError
from rageval.paths import project_root
from rageval.progress import Reporter
from rageval.tracking.store import Tracker
from rageval.workflows.compare import ComparisonOutcome, execute_comparison
from rageval.workflows.gate import GateOutcome, execute_gate
from rageval.workflows.run import RunOutcome, execute_run
from rageval.workflows.sweep import run_sweep


@dataclass(frozen=True)
class DemoOutcome:
    sweep: Any  # rageval.sweep.SweepOutcome
    comparison: ComparisonOutcome
    chosen: str  # the sweep member taken to the release split
    release_baseline: RunOutcome
    release_candidate: RunOutcome
    gate: GateOutcome


def execute_demo(
    sweep_file: str | Path | None = None,
    policy_file: str | Path | None = None,
    *,
    baseline: str = "baseline",
    workers: int | None = None,
    tracker: Tracker,
    progress: Any = None,
) -> DemoOutcome:
    """The whole loop on the demo: sweep on dev, compare every member with ``baseline``, take the
    member with the best primary measure to the release split (with the baseline: two release
    evaluations, counted), and gate it. Each step is a run of its own."""

    sweep_file = Path(sweep_file) if sweep_file else project_root() / "params" / "sweeps" / "demo.yaml"
    policy_file = Path(policy_file) if policy_file else project_root() / "params" / "gates" / "release.yaml"
    swept = run_sweep(sweep_file, workers=workers, tracker=tracker, progress=progress)
    swept.check()
    runs = {m.name: m for m in swept.members}
    if baseline not in runs:
        raise ComparisonError(
            f"the sweep has no member named {baseline!r} to serve as the baseline; members: {', '.join(runs)}"
        )
    comparison = execute_comparison(runs[baseline].run_id, sweep=swept.parent_run_id, tracker=tracker)
    key, _ = swept.primary
    chosen = max(
        (m for m in swept.members if m.name != baseline), key=lambda m: (m.metrics.get(key, float("-inf")), m.name)
    )
    spec = load_sweep(sweep_file)
    members = {m.name: m for m in spec.members}
    released = [
        execute_run(
            spec.base,
            overrides=members[name].overrides,
            benchmark=spec.benchmark,
            split=RELEASE_SPLIT,
            tracker=tracker,
            run_name=f"{spec.spec.name}/{name}@{RELEASE_SPLIT}",
            reporter=progress.member(f"{name}@{RELEASE_SPLIT}") if isinstance(progress, Reporter) else None,
        )
        for name in (baseline, chosen.name)
    ]
    gate = execute_gate(released[0].run_id, released[1].run_id, policy_file, tracker=tracker)
    return DemoOutcome(swept, comparison, chosen.name, released[0], released[1], gate)
