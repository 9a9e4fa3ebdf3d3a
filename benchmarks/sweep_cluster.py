"""A sweep on Dask workers against the same sweep in threads: wall time for 4 and 8 members.

Each measurement gets a fresh sqlite store and a fresh cache folder. ``threads``: ``run_sweep``
with ``--workers N`` (members are threads of this process, each notebook in its own kernel);
``dask``: ``run_sweep`` on ``DaskExecutor("local")``, a LocalCluster of N worker processes on
127.0.0.1 started inside the call (its start-up is in ``total``, not in the sweep's ``wall``).

    python benchmarks/sweep_cluster.py [--members 4 8] [--workers 2]
"""

from __future__ import annotations

import argparse
import io
import os
import tempfile
import time
from pathlib import Path

import yaml

from rageval.tracking.store import Tracker
from rageval.workflows.cluster import LOCAL, DaskExecutor
from rageval.workflows.sweep import SweepRequest, run_sweep

ROOT = Path(__file__).resolve().parents[1]
# BM25 members of the demo: two indexes (k1 0.9 and 1.2), the rest reads them from the cache.
VARIANTS = [
    {"final_k": 5},
    {"final_k": 3},
    {"retrieval.stages.0.candidates": 50},
    {"final_k": 10},
    {"retrieval.stages.0.k1": 1.2},
    {"retrieval.stages.0.k1": 1.2, "final_k": 3},
    {"retrieval.stages.0.k1": 1.2, "retrieval.stages.0.candidates": 50},
    {"retrieval.stages.0.k1": 1.2, "final_k": 10},
]


def sweep_file(folder: Path, members: int) -> Path:
    variants = [{"name": f"m{i}", "set": VARIANTS[i % len(VARIANTS)]} for i in range(members)]
    path = folder / f"sweep-{members}.yaml"
    body = {"version": 1, "name": f"bench{members}", "base": str(ROOT / "params" / "bm25.yaml"), "variants": variants}
    path.write_text(yaml.safe_dump(body))
    return path


def measure(kind: str, members: int, workers: int, folder: Path) -> dict[str, float]:
    work = folder / f"{kind}-{members}"
    work.mkdir()
    store = f"sqlite:///{work / 'mlflow.db'}"
    path = sweep_file(work, members)
    tracker = Tracker(store)
    began = time.perf_counter()
    if kind == "threads":
        os.environ["RAGEVAL_CACHE"] = str(work / "cache")
        outcome = run_sweep(SweepRequest(path, workers=workers), tracker=tracker, progress=io.StringIO())
    else:
        executor = DaskExecutor(LOCAL, cache_dir=work / "cache")
        outcome = run_sweep(
            SweepRequest(path, workers=workers), tracker=tracker, progress=io.StringIO(), executor=executor
        )
    total = time.perf_counter() - began
    outcome.check()
    misses = sum(Tracker(store).run(m.run_id).tags.get("rageval.cache.bm25") == "miss" for m in outcome.members)
    return {"wall": outcome.wall_s, "total": total, "per_member": outcome.wall_s / members, "bm25_misses": misses}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    print(f"{'path':<8} {'members':>7} {'wall s':>7} {'total s':>8} {'s/member':>8} {'bm25 misses':>11}")
    with tempfile.TemporaryDirectory(prefix="rageval-bench-") as tmp:
        for members in args.members:
            for kind in ("threads", "dask"):
                r = measure(kind, members, args.workers, Path(tmp))
                print(
                    f"{kind:<8} {members:>7} {r['wall']:>7.1f} {r['total']:>8.1f} {r['per_member']:>8.1f} "
                    f"{r['bm25_misses']:>11}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
