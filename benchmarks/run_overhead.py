"""What `rageval run` costs beyond the work it records.

Measures, in the same session and alternating, (a) the in-process work alone — `run_experiment`
on the configuration, with no notebook and no tracking, timed inside a fresh Python process (its
imports reported apart) — and (b) the whole `rageval run CONFIG` command, as a user starts it, into
a store created beforehand (a store's one-time set-up is not a run's cost). Prints each repeat, the
min and median, the overhead (b − a) in seconds and the ratio b / a, and where a run's time goes
(the run's own `tables/run_timings`). Beside each wall time, the CPU seconds of the whole command —
its process and the notebook kernel it started and reaped — which the load of a shared machine
disturbs far less than the wall time. Target: overhead <= 4 s on a quiet 2-core machine.

    python benchmarks/run_overhead.py [--config params/bm25.yaml] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sweep_overhead import member_timings, work_alone  # shared with the sweep benchmark

from rageval.tracking.store import Tracker

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 4.0


def children_cpu() -> float:
    """CPU seconds (user + system) of every child process ended and reaped so far, theirs included."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def whole_run(config: Path, store: str) -> tuple[float, float, str]:
    """The command's wall and CPU seconds (its kernel's included) and its run ID."""
    env = {**os.environ, "MLFLOW_TRACKING_URI": store}
    cpu = children_cpu()
    started = time.perf_counter()
    done = subprocess.run(
        [str(Path(sys.executable).parent / "rageval"), "run", str(config)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - started
    cpu = children_cpu() - cpu
    if done.returncode != 0:
        raise SystemExit(f"rageval run failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    run_id = next(line.split()[1] for line in done.stdout.splitlines() if line.startswith("run ") and "sealed" in line)
    return wall, cpu, run_id


def summary(values: list[float]) -> str:
    return f"min {min(values):6.2f}  median {statistics.median(values):6.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "params" / "bm25.yaml")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    store = f"sqlite:///{Path(tempfile.mkdtemp(prefix='rageval-run-overhead-')) / 'mlflow.db'}"
    tracker = Tracker(store)  # the store's one-time set-up, before any timing
    print(f"config {args.config}; {os.cpu_count()} CPU cores (shared with whatever else runs)")
    print(f"load average {os.getloadavg()[0]:.2f} at start")
    print(
        f"\n{'repeat':>6} {'work s':>8} {'imports s':>9} {'rageval run s':>13} {'CPU s':>6} {'overhead s':>10} {'ratio':>6}"
    )
    works, runs, cpus, imports, last = [], [], [], [], ""
    for repeat in range(1, args.repeat + 1):
        alone = work_alone(args.config)
        wall, cpu, last = whole_run(args.config, store)
        cpus.append(cpu)
        works.append(alone["work_s"])
        imports.append(alone["import_s"])
        runs.append(wall)
        print(
            f"{repeat:>6} {alone['work_s']:8.3f} {alone['import_s']:9.3f} {wall:13.2f} {cpu:6.2f} "
            f"{wall - alone['work_s']:10.2f} {wall / alone['work_s']:6.1f}"
        )
    overheads = [r - w for r, w in zip(runs, works, strict=True)]
    print(f"\nwork alone (run_experiment):  {summary(works)} s")
    print(f"rageval run (whole command):  {summary(runs)} s")
    print(f"  its CPU (kernel included):  {summary(cpus)} s")
    print(f"overhead (run − work):        {summary(overheads)} s")
    ratios = [r / w for r, w in zip(runs, works, strict=True)]
    print(f"ratio (run / work):           min {min(ratios):6.1f}  median {statistics.median(ratios):6.1f}")
    met = statistics.median(overheads) <= TARGET_S
    print(f"target: overhead <= {TARGET_S:.0f} s — median {'met' if met else 'NOT met'}")
    print(f"load average {os.getloadavg()[0]:.2f} at end (above 2 on 2 cores: wall times run long)")
    print(f"\nwhere the last run's time went (its tables/run_timings and tables/timings), run {last}:")
    for step, seconds in member_timings(tracker, last).items():
        print(f"  {seconds:7.3f} s  {step}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
