"""What each piece of rageval's start-up machinery buys a run (and a sweep), measured by taking it out.

Each variant is the real ``rageval run CONFIG`` (``--sweep``: also ``rageval sweep FILE``) started as
a user starts it, with one piece of machinery taken out by a patch applied in that command's own
process before it starts (nothing in rageval has a switch for it, and none should: a switch would
be a second way to run). Variants alternate within each repeat, into one store created beforehand,
so the machine's load falls on all of them alike. Prints each variant's min and median wall time
and its median minus the shipped command's: a positive difference is what the piece saves. Beside
them, the median CPU seconds of the whole command (its kernels included) and their difference: a
shared machine's load disturbs them far less than the wall time, which they confirm for a piece that
saves work (fewer collections) and cannot show for one that only overlaps work (a warm start).

    python benchmarks/machinery.py [--config params/bm25.yaml] [--repeat 5] [--sweep params/sweeps/demo.yaml]

The pieces (rageval/execution/, docs/architecture.md):

- ``preload``      the run's kernel imports the notebook's modules before it reports ready
- ``warm kernel``  the kernel starts while the run is checked and prepared (else: started, then checks)
- ``early log``    the parent logs the handed-back result while the notebook still draws (else: after)
- ``handoff``      the kernel hands its result back to the parent, which has the store open already
                   (else: the notebook logs into its run itself — a notebook copy without ``handoff``,
                   which also draws its figures twice: to log them, then to show them)
- ``gc tuning``    fewer young-generation collections in the command's process
- ``exit freeze``  the command's last collection skips every object (``gc.freeze`` at exit)
- ``no rfc3987``   jsonschema's ``rfc3987_syntax`` grammar left unimported in the command's process
- ``gc off``       (a candidate, not shipped) no garbage collection at all in the command's process
- ``fork server``  (sweep only) a sweep's kernels forked from one process that imported their modules once
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from run_overhead import children_cpu  # shared with the run benchmark

from rageval.tracking.store import Tracker

ROOT = Path(__file__).resolve().parents[1]

# Each patch runs in the command's own process, before rageval's entry point.
RUN_VARIANTS: dict[str, str] = {
    "shipped": "",
    "without preload": (
        "import rageval.execution.kernels as k\nk.WarmKernel.__init__.__kwdefaults__['preload'] = ()"
    ),
    "without warm kernel": (
        "import rageval.execution.kernels as k\n"
        "_init = k.WarmKernel.__init__\n"
        "def init(self, *a, **kw):\n    _init(self, *a, **kw)\n    self._thread.join()\n"
        "k.WarmKernel.__init__ = init"
    ),
    "without early log": (
        "import rageval.execution.handoff as h\n"
        "_watch = h.EarlyLog._watch\n"
        "def watch(self):\n    self._stop.wait()\n    _watch(self)\n"
        "h.EarlyLog._watch = watch"
    ),
    "without handoff": "",  # a notebook copy without the `handoff` parameter: see notebook_without_handoff
    "without gc tuning": "import rageval.execution.preload as p\np.GC_THRESHOLDS = (700, 10, 10)",
    "without exit freeze": "import gc\ngc.freeze = lambda: None",
    "with gc off (a candidate)": "import rageval.execution.preload as p\np.GC_THRESHOLDS = (0, 0, 0)",
    "with rfc3987_syntax": (
        "import importlib, sys\na = importlib.import_module('rageval.cli.app')\n"
        "_tune = a.tune_process\n"
        "def tune():\n    _tune()\n    if sys.modules.get('rfc3987_syntax', 0) is None:\n"
        "        del sys.modules['rfc3987_syntax']\n"
        "a.tune_process = tune"
    ),
}
SWEEP_VARIANTS: dict[str, str] = {
    "sweep shipped": "",
    "sweep without fork server": "import rageval.execution.kernels as k\nk.available = lambda: False",
}
ENTRY = "import sys\n{patch}\nfrom rageval.cli.app import main\nsys.argv = ['rageval', *sys.argv[1:]]\nmain()\n"


def notebook_without_handoff(folder: Path) -> Path:
    """notebooks/evaluate.ipynb without its ``handoff`` parameter, beside it (its working directory
    and relative paths are the notebook folder's): ``rageval run`` then lets the notebook log."""
    source = ROOT / "notebooks" / "evaluate.ipynb"
    notebook = json.loads(source.read_text())
    for cell in notebook["cells"]:
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            lines = "".join(cell["source"]).splitlines(keepends=True)
            kept = [line for line in lines if not line.startswith("handoff")]
            if len(kept) == len(lines):
                raise SystemExit(f"{source}: no `handoff` parameter to take out")
            cell["source"] = kept
    target = source.with_name(f".bench-{folder.name}.ipynb")
    target.write_text(json.dumps(notebook))
    return target


def command(patch: str, args: list[str], store: str) -> tuple[float, float]:
    """The command's wall and CPU seconds (its kernels' included)."""
    env = {**os.environ, "MLFLOW_TRACKING_URI": store}
    cpu = children_cpu()
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", ENTRY.format(patch=patch), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - started
    cpu = children_cpu() - cpu
    if done.returncode != 0 or "sealed" not in done.stdout:
        raise SystemExit(f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return wall, cpu


def report(times: dict[str, list[tuple[float, float]]], shipped: str) -> None:
    base_wall = statistics.median(wall for wall, _ in times[shipped])
    base_cpu = statistics.median(cpu for _, cpu in times[shipped])
    print(f"\n{'variant':<28} {'min s':>7} {'median s':>9} {'median − shipped':>17} {'CPU s':>7} {'CPU − shipped':>14}")
    for name, values in times.items():
        walls, cpus = [wall for wall, _ in values], [cpu for _, cpu in values]
        median, cpu = statistics.median(walls), statistics.median(cpus)
        diff = "" if name == shipped else f"{median - base_wall:+17.2f}"
        cpu_diff = "" if name == shipped else f"{cpu - base_cpu:+14.2f}"
        print(f"{name:<28} {min(walls):7.2f} {median:9.2f} {diff:>17} {cpu:7.2f} {cpu_diff}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "params" / "bm25.yaml")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--sweep", type=Path, help="also measure this sweep with and without the fork server")
    parser.add_argument("--only", nargs="+", help="only these run variants (names as printed)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="rageval-machinery-"))
    store = f"sqlite:///{folder / 'mlflow.db'}"
    Tracker(store)  # the store's one-time set-up, before any timing
    variants = {k: v for k, v in RUN_VARIANTS.items() if not args.only or k in args.only or k == "shipped"}
    print(f"config {args.config}; {os.cpu_count()} CPU cores; load average {os.getloadavg()[0]:.2f} at start")
    copy = notebook_without_handoff(folder)
    try:
        command("", ["run", str(args.config)], store)  # untimed: fills the caches every variant reads
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
        for _ in range(args.repeat):
            for name, patch in variants.items():
                extra = ["--notebook", str(copy)] if name == "without handoff" else []
                times[name].append(command(patch, ["run", str(args.config), *extra], store))
        report(times, "shipped")
        if args.sweep:
            sweeps: dict[str, list[tuple[float, float]]] = {name: [] for name in SWEEP_VARIANTS}
            for _ in range(args.repeat):
                for name, patch in SWEEP_VARIANTS.items():
                    sweeps[name].append(command(patch, ["sweep", str(args.sweep)], store))
            report(sweeps, "sweep shipped")
            # The fork server ignores SIGCHLD, so the operating system reaps its forked kernels and their CPU
            # seconds reach no one's count: only the wall times compare the two sweeps.
            print("(the shipped sweep's CPU leaves out its forked kernels': compare the wall times)")
    finally:
        copy.unlink(missing_ok=True)
    print(f"\nload average {os.getloadavg()[0]:.2f} at end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
