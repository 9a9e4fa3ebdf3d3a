"""What a sweep costs beyond its members' own work, and what a second worker buys.

Measures, in the same session, (a) each member's work alone — ``run_experiment`` on its resolved
configuration in a fresh process, no notebook and no tracking, as ``run_overhead.py`` measures a
run's — and (b) the whole sweep into a fresh store, with 1 worker and with 2. The per-configuration
overhead is (sweep wall − Σ work alone) / configurations (target <= 2 s). Also printed: the
overhead against the members' retrieval + evaluation alone as they recorded it in the sweep
(``tables/timings``; stricter: their index builds and model loads count as overhead there), where
the time goes (run preparation, kernel start-up, the notebook beyond the experiment, logging,
sealing), and the speed-up of 2 workers over 1.

    python benchmarks/sweep_overhead.py [--sweep params/sweeps/demo.yaml] [--workers 1 2] [--repeat 3]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from rageval.config.load import dump_config
from rageval.config.sweep import load_sweep
from rageval.tracking.records import LOGGING_METRIC
from rageval.tracking.store import Tracker
from rageval.workflows.sweep import SweepRequest, run_sweep

ROOT = Path(__file__).resolve().parents[1]
OWN = ("retrieval", "evaluation")  # the members' own work, as the issue counts it
COMPUTE = ("load", "chunking", "index", "retrieval", "evaluation")  # everything run_experiment does


WORK = """
import json, sys, time
started = time.perf_counter()
from rageval.config.load import config_from_yaml, load_config
from rageval.experiment.run import run_experiment
imported = time.perf_counter()
# A params file and overrides, or "-": a resolved configuration on stdin (a sweep member's).
config = config_from_yaml(sys.stdin.read()) if sys.argv[1] == "-" else load_config(sys.argv[1], json.loads(sys.argv[2]))
loaded = time.perf_counter()
run_experiment(config)
done = time.perf_counter()
print(json.dumps({"import_s": imported - started, "load_s": loaded - imported, "work_s": done - loaded}))
"""


def work_alone(config: Path | str, overrides: Sequence[str] = ()) -> dict[str, float]:
    """The in-process work alone: ``run_experiment`` on the configuration (a params file, or a
    resolved configuration's YAML text), no notebook and no tracking, timed inside a fresh Python
    process (its imports reported apart)."""
    text = isinstance(config, str)
    out = subprocess.run(
        [sys.executable, "-c", WORK, "-" if text else str(config), json.dumps(list(overrides))],
        input=config if text else "",
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def member_timings(tracker: Tracker, run_id: str) -> dict[str, float]:
    """A run's time per step: the experiment's (tables/timings) and the run's own (tables/run_timings)."""
    out: dict[str, float] = {}
    for table in ("timings", "run_timings"):
        frame = tracker.sealed_frame(run_id, f"tables/{table}.parquet")
        out.update(zip(frame["step"], frame["seconds"], strict=True))
    out["logging"] = tracker.run(run_id).metrics[LOGGING_METRIC]
    return out


def warm_cache(sweep: Path) -> None:
    """Run every member alone once, untimed: the cache's one-time fills (a dense member's corpus
    embeddings) are no run's cost, and the sweep and the work alone must both find them."""
    members_alone(sweep)


def members_alone(sweep: Path) -> float:
    """The members' work alone: each member's ``run_experiment`` in a fresh process, summed."""
    return sum(work_alone(dump_config(m.config))["work_s"] for m in load_sweep(sweep).members)


def measure(sweep: Path, workers: int, store: str) -> dict[str, float]:
    alone = members_alone(sweep)  # in the same session, just before the sweep
    request = SweepRequest(sweep, workers=workers, experiment=f"overhead-{workers}")
    outcome = run_sweep(request, tracker=Tracker(store), progress=io.StringIO())
    outcome.check()
    tracker = Tracker(store)
    timings = [member_timings(tracker, m.run_id) for m in outcome.members]
    n = len(timings)

    def total(*keys: str) -> float:
        return sum(t.get(k, 0.0) for t in timings for k in keys)

    compute = total(*COMPUTE)
    return {
        "configs": n,
        "alone": alone,
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
    warm_cache(args.sweep)
    results = {w: measure(args.sweep, w, store) for w in args.workers}

    print(
        f"\n{'workers':>7} {'wall s':>8} {'alone s':>8} {'own s':>7} {'overhead/config s':>17} "
        f"{'vs own s':>8} {'wall/alone':>10}"
    )
    for w, r in results.items():
        n = r["configs"]
        print(
            f"{w:>7} {r['wall']:8.2f} {r['alone']:8.3f} {r['own']:7.3f} {(r['wall'] - r['alone']) / n:17.2f} "
            f"{(r['wall'] - r['own']) / n:8.2f} {r['wall'] / r['alone']:10.1f}"
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
    for w, r in results.items():
        overhead = (r["wall"] - r["alone"]) / r["configs"]
        print(
            f"\nworkers {w}: overhead per configuration {overhead:.2f} s against the work alone "
            f"(target <= 2 s: {'met' if overhead <= 2 else 'NOT met'}); {(r['wall'] - r['own']) / r['configs']:.2f} s "
            "against retrieval + evaluation only"
        )
    if 1 in results and 2 in results:
        print(f"speed-up of 2 workers over 1: {results[1]['wall'] / results[2]['wall']:.2f}x")
    return 0


def repeated(args: argparse.Namespace) -> int:
    """The measurement ``args.repeat`` times per worker count, alternating: min and median."""
    import statistics

    store = f"sqlite:///{Path(tempfile.mkdtemp(prefix='rageval-overhead-')) / 'mlflow.db'}"
    Tracker(store)
    warm_cache(args.sweep)
    seen: dict[int, list[dict[str, float]]] = {w: [] for w in args.workers}
    for repeat in range(args.repeat):
        for w in args.workers:
            r = measure(args.sweep, w, store)
            seen[w].append(r)
            n = r["configs"]
            print(
                f"repeat {repeat + 1}, workers {w}: wall {r['wall']:.2f} s, work alone {r['alone']:.3f} s, "
                f"overhead/config {(r['wall'] - r['alone']) / n:.2f} s (against retrieval + evaluation only "
                f"{(r['wall'] - r['own']) / n:.2f} s), wall/alone {r['wall'] / r['alone']:.1f}x"
            )
    for w, results in seen.items():
        overheads = [(r["wall"] - r["alone"]) / r["configs"] for r in results]
        strict = [(r["wall"] - r["own"]) / r["configs"] for r in results]
        ratios = [r["wall"] / r["alone"] for r in results]
        print(
            f"workers {w}: overhead per configuration min {min(overheads):.2f} s, median {statistics.median(overheads):.2f} s "
            f"(target <= 2 s: {'met' if statistics.median(overheads) <= 2 else 'NOT met'}); "
            f"against retrieval + evaluation only: min {min(strict):.2f} s, median {statistics.median(strict):.2f} s; "
            f"wall/alone min {min(ratios):.1f}x, median {statistics.median(ratios):.1f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
