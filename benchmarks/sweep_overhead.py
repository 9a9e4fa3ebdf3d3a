"""What a sweep costs beyond its members' own work, and what a second worker buys.

Runs the same sweep twice into a fresh store, with 1 worker and with 2, and compares each wall
time with the sum of the members' own retrieval + evaluation time as the members recorded it
(their ``tables/timings`` and ``tables/run_timings``). Prints the per-configuration overhead (target <= 2 s),
where it goes (run preparation, kernel start-up, the notebook beyond the experiment, logging,
sealing), and the speed-up of 2 workers over 1.

    python benchmarks/sweep_overhead.py [--sweep params/sweeps/demo.yaml] [--workers 1 2]
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
from pathlib import Path

from rageval.config.sweep import load_sweep
from rageval.tracking.store import Tracker
from rageval.workflows.sweep import run_sweep

ROOT = Path(__file__).resolve().parents[1]
OWN = ("retrieval", "evaluation")  # the members' own work, as the issue counts it
COMPUTE = ("load", "chunking", "index", "retrieval", "evaluation")  # everything run_experiment does


def member_timings(tracker: Tracker, run_id: str) -> dict[str, float]:
    """A run's time per step: the experiment's (tables/timings) and the run's own (tables/run_timings)."""
    out: dict[str, float] = {}
    for table in ("timings", "run_timings"):
        frame = tracker.sealed_frame(run_id, f"tables/{table}.parquet")
        out.update(zip(frame["step"], frame["seconds"], strict=True))
    out["logging"] = tracker.run(run_id).metrics.get("time_s/logging", 0.0)
    return out


def measure(sweep: Path, workers: int, store: str) -> dict[str, float]:
    outcome = run_sweep(
        sweep, workers=workers, tracker=Tracker(store), progress=io.StringIO(), experiment=f"overhead-{workers}"
    )
    outcome.check()
    tracker = Tracker(store)
    timings = [member_timings(tracker, m.run_id) for m in outcome.members]
    n = len(timings)

    def total(*keys: str) -> float:
        return sum(t.get(k, 0.0) for t in timings for k in keys)

    compute = total(*COMPUTE)
    return {
        "configs": n,
        "wall": outcome.wall_s,
        "own": total(*OWN),
        "compute": compute,
        "member_sum": sum(m.seconds or 0.0 for m in outcome.members),
        "prepare": total("prepare"),
        "kernel_start": total("kernel_start"),
        "notebook_rest": total("notebook") - total("kernel_start") - compute - total("logging"),
        "logging": total("logging"),
        "seal": sum((m.seconds or 0.0) for m in outcome.members) - total("prepare") - total("notebook"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", type=Path, default=ROOT / "params" / "sweeps" / "demo.yaml")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeat", type=int, default=1, help="repeat the whole measurement; min and median")
    args = parser.parse_args()
    if args.repeat > 1:
        return repeated(args)
    sweep = load_sweep(args.sweep)
    print(
        f"sweep {sweep.spec.name}: {len(sweep.members)} configurations on {sweep.split}; "
        f"{os.cpu_count()} CPU cores (shared with whatever else runs)"
    )
    store = f"sqlite:///{Path(tempfile.mkdtemp(prefix='rageval-overhead-')) / 'mlflow.db'}"
    Tracker(store)  # create the store first: its one-time set-up is not a sweep's cost
    results = {w: measure(args.sweep, w, store) for w in args.workers}

    print(
        f"\n{'workers':>7} {'wall s':>8} {'own s':>7} {'compute s':>9} {'overhead/config s':>17} {'wall/config s':>13}"
    )
    for w, r in results.items():
        overhead = (r["wall"] - r["own"]) / r["configs"]
        print(
            f"{w:>7} {r['wall']:8.2f} {r['own']:7.3f} {r['compute']:9.3f} {overhead:17.2f} {r['wall'] / r['configs']:13.2f}"
        )
    first = results[args.workers[0]]
    n = first["configs"]
    print(f"\nwhere the serial overhead goes, per configuration (workers={args.workers[0]}):")
    for key, label in (
        ("prepare", "validate, create the run, log params and dataset"),
        ("kernel_start", "kernel start-up"),
        ("notebook_rest", "notebook beyond the experiment (imports, displays, figures)"),
        ("logging", "logging metrics and artifacts"),
        ("seal", "attach the notebook, hash and seal"),
    ):
        print(f"  {first[key] / n:6.2f} s  {label}")
    unaccounted = first["wall"] - first["member_sum"]
    print(f"  {unaccounted / n:6.2f} s  sweep itself (validation, parent run, summary)")
    overhead = (first["wall"] - first["own"]) / n
    print(f"\noverhead per configuration: {overhead:.2f} s (target <= 2 s: {'met' if overhead <= 2 else 'NOT met'})")
    if 1 in results and 2 in results:
        print(f"speed-up of 2 workers over 1: {results[1]['wall'] / results[2]['wall']:.2f}x")
    return 0


def repeated(args: argparse.Namespace) -> int:
    """The measurement ``args.repeat`` times per worker count, alternating: min and median."""
    import statistics

    store = f"sqlite:///{Path(tempfile.mkdtemp(prefix='rageval-overhead-')) / 'mlflow.db'}"
    Tracker(store)
    seen: dict[int, list[dict[str, float]]] = {w: [] for w in args.workers}
    for repeat in range(args.repeat):
        for w in args.workers:
            r = measure(args.sweep, w, store)
            seen[w].append(r)
            n = r["configs"]
            print(
                f"repeat {repeat + 1}, workers {w}: wall {r['wall']:.2f} s, own {r['own']:.3f} s, "
                f"overhead/config {(r['wall'] - r['own']) / n:.2f} s, wall/own {r['wall'] / r['own']:.1f}x"
            )
    for w, results in seen.items():
        overheads = [(r["wall"] - r["own"]) / r["configs"] for r in results]
        ratios = [r["wall"] / r["own"] for r in results]
        print(
            f"workers {w}: overhead per configuration min {min(overheads):.2f} s, median {statistics.median(overheads):.2f} s "
            f"(target <= 2 s: {'met' if statistics.median(overheads) <= 2 else 'NOT met'}); "
            f"wall/own min {min(ratios):.1f}x, median {statistics.median(ratios):.1f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
