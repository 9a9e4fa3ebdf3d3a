"""A discrete-event simulation of a 10,000-configuration sweep over 10M chunks and 10k queries,
to check the throughput claims of docs/scale.md. Synthetic task costs, scaled linearly from what
benchmarks/scale.py measured (pass its --json output with --costs, or use the defaults below, which
are that script's figures on this machine; see docs/scale.md).

    python benchmarks/sweep_sim.py [--costs scale.json] [--workers 64,256,1024] [--chunks 10000000]

The sweep is a grid: chunkings x BM25 settings x embedding models x downstream variants (fusion
weights, final_k, ...); the defaults 10 x 20 x 5 x 10 give 10,000 hybrid configurations. Each needs
a BM25 index (chunking, BM25 setting), document embeddings (chunking, model), a BM25 ranking and a
dense ranking of every query, then fusion + evaluation + diagnostics, then one run logged to the
tracking server (a queue with --server-workers slots, --log-s each).

Two schedules are compared:

- ``today``: one task per configuration, as ``rageval sweep --cluster`` runs it. Indexes and
  embeddings come from the shared content-addressed cache (the first task that needs one builds
  it, the others wait on its lock, later ones read it), but every configuration retrieves every
  query again.
- ``planned``: a task graph. Builds, then one retrieval task per distinct retriever (its top-k per
  query cached, like an index), then the cheap downstream tasks. Dense search goes to a vector
  index service (ANN, --ann-ms per query) in both schedules when --ann is given; exact numpy
  otherwise. Encoding runs on --gpus GPU workers when given, else on CPU workers.

Output: makespan, busy fraction, cache builds and hits, the tracking server's peak and mean runs/s,
artifact bytes. Deterministic (no randomness: costs are the measured means).
"""

from __future__ import annotations

import argparse
import heapq
import json
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

# Per-unit costs in CPU seconds on one core of this machine, rounded from benchmarks/scale.py's
# run recorded in docs/scale.md (50k-200k chunks, 2,000 queries), and a run's artifact bytes from
# one `rageval run` on the 20k corpus. --costs FILE replaces the measured ones exactly.
DEFAULTS = {
    "index_s_per_chunk": 1.2e-4,  # bm25s tokenize + index
    "bm25_s_per_query_per_chunk": 1.0e-8,  # bm25s retrieve, one query: grows with the postings
    "dense_s_per_query_per_chunk": 2.0e-9,  # embeddings @ q + argpartition, exact
    "encode_s_per_chunk": 0.06,  # MiniLM on CPU, 128 word pieces: 8,125 texts in 798 s at ~0.66 of a core
    "encode_gpu_s_per_chunk": 5e-5,  # MiniLM on one data-centre GPU (assumed, not measured here)
    "query_embed_s": 0.01,  # one query through MiniLM on CPU (and its fusion)
    "downstream_s_per_query": 2.0e-3,  # fusion + evaluation + stage measures + diagnostics
    "artifact_bytes_per_query": 6.5e3,  # rankings + every stage's rankings (3 stages + context), parquet
    "artifact_fixed_bytes": 4.0e5,  # notebook, its HTML, figures, manifest, contract
    "log_s": 0.14,  # one sealed run through the MLflow server (STACK-NOTES measurement)
}


@dataclass(order=True)
class Event:
    time: float
    seq: int
    kind: str = field(compare=False)
    payload: object = field(compare=False, default=None)


def costs_from(path: Path) -> dict[str, float]:
    """Per-unit costs from benchmarks/scale.py --json: the largest size measured; each step's CPU
    seconds estimated as its wall seconds times the child's CPU/wall ratio. The dense per-query cost
    is a line through the sizes: its slope per chunk, and its intercept (query encoding + fusion)."""
    rows = json.loads(path.read_text())
    out = dict(DEFAULTS)
    dense = []
    for row in sorted(rows, key=lambda r: r["chunks"]):
        raw, chunks, queries = row["raw"], row["chunks"], row["queries"]
        scale = raw["cpu_s"] / raw["seconds"]
        steps = raw["steps"]
        if row["run"] == "bm25":
            out["index_s_per_chunk"] = steps["index"] * scale / chunks
            out["bm25_s_per_query_per_chunk"] = steps["bm25 retrieval"] * scale / queries / chunks
            ours = row["rageval"]
            ours_steps = ours["steps"]
            rest = sum(v for k, v in ours_steps.items() if k in ("context", "evaluation", "stage_evaluation"))
            out["downstream_s_per_query"] = rest * ours["cpu_s"] / ours["seconds"] / queries
        elif "dense retrieval + fusion" in steps:
            dense.append((chunks, steps["dense retrieval + fusion"] * scale / queries))
    if len(dense) >= 2:
        (n0, t0), (n1, t1) = dense[0], dense[-1]
        out["dense_s_per_query_per_chunk"] = max((t1 - t0) / (n1 - n0), 0.0)
        out["query_embed_s"] = t0 - out["dense_s_per_query_per_chunk"] * n0
    return out


def simulate(args: argparse.Namespace, costs: dict[str, float], workers: int, schedule: str) -> dict:
    n, q = args.chunks, args.queries
    index_s = costs["index_s_per_chunk"] * n
    if args.gpus:
        encode_s = costs["encode_gpu_s_per_chunk"] * n
    else:
        encode_s = costs["encode_s_per_chunk"] * n
    bm25_s = costs["bm25_s_per_query_per_chunk"] * n * q
    if args.ann:
        dense_s = (costs["query_embed_s"] + args.ann_ms / 1000) * q
    else:
        dense_s = (costs["query_embed_s"] + costs["dense_s_per_query_per_chunk"] * n) * q
    down_s = costs["downstream_s_per_query"] * q
    run_bytes = costs["artifact_fixed_bytes"] + costs["artifact_bytes_per_query"] * q
    read_s = args.cache_read_s  # loading a cached index / embeddings / ranking from the shared store

    configs = [
        (c, b, m, d)
        for c in range(args.chunkings)
        for b in range(args.bm25_settings)
        for m in range(args.models)
        for d in range(args.downstream)
    ]
    built: dict[tuple, float] = {}  # key -> time it became available
    building: dict[tuple, float] = {}  # key -> time its build ends
    stats = defaultdict(int)
    busy = 0.0
    log_done: list[float] = []
    server_free = [0.0] * args.server_workers

    def log(at: float) -> float:
        slot = min(range(len(server_free)), key=server_free.__getitem__)
        start = max(at, server_free[slot])
        server_free[slot] = start + costs["log_s"] + run_bytes / (args.artifact_mb_s * 1e6)
        log_done.append(server_free[slot])
        return server_free[slot]

    def need(key: tuple, now: float, cost: float) -> tuple[float, float]:
        """(time the input is ready for this task, worker seconds spent on it)."""
        if key in built and built[key] <= now:
            stats["cache hits"] += 1
            return now + read_s, read_s
        if key in building:  # another task holds the lock: wait for it, then read
            stats["lock waits"] += 1
            ready = max(now, building[key]) + read_s
            return ready, ready - now
        stats["builds"] += 1
        spent = cost
        building[key] = built[key] = now + spent
        return now + spent, spent

    finish = 0.0
    if schedule == "today":
        free = [(0.0, w) for w in range(workers)]
        heapq.heapify(free)
        for c, b, m, _ in configs:
            now, w = heapq.heappop(free)
            t, s1 = need(("index", c, b), now, index_s)
            t, s2 = need(("emb", c, m), t, encode_s)
            t += bm25_s + dense_s + down_s
            busy += s1 + s2 + bm25_s + dense_s + down_s
            end = log(t)
            finish = max(finish, end)
            heapq.heappush(free, (t, w))
    else:
        # Level by level: builds, retrievals (one per distinct retriever), downstream + logging.
        free = [(0.0, w) for w in range(workers)]
        heapq.heapify(free)
        ready: dict[tuple, float] = {}
        shards = max(1, -(-n // args.encode_shard))  # encoding is split: each shard a task
        parts = max(1, -(-q // args.query_shard))  # and each retriever's queries
        levels = [
            [(("index", c, b), index_s, ()) for c in range(args.chunkings) for b in range(args.bm25_settings)]
            + [
                (("emb", c, m, shard), encode_s / shards, ())
                for c in range(args.chunkings)
                for m in range(args.models)
                for shard in range(shards)
            ],
            [
                (("bm25run", c, b, part), bm25_s / parts, (("index", c, b),))
                for c in range(args.chunkings)
                for b in range(args.bm25_settings)
                for part in range(parts)
            ]
            + [
                (("denserun", c, m, part), dense_s / parts, tuple(("emb", c, m, shard) for shard in range(shards)))
                for c in range(args.chunkings)
                for m in range(args.models)
                for part in range(parts)
            ],
        ]
        for level in levels:
            for key, cost, deps in sorted(level, key=lambda item: -item[1]):  # longest first
                now, w = heapq.heappop(free)
                start = max([now, *(ready[dep] + read_s for dep in deps)])
                ready[key] = start + cost
                stats["builds"] += 1
                busy += cost  # reading its inputs is in start, as waiting
                heapq.heappush(free, (ready[key], w))
        for c, b, m, _ in configs:
            now, w = heapq.heappop(free)
            inputs = [ready[("bm25run", c, b, p)] for p in range(parts)] + [
                ready[("denserun", c, m, p)] for p in range(parts)
            ]
            start = max(now, *inputs) + 2 * read_s
            stats["cache hits"] += 2
            t = start + down_s
            busy += down_s + 2 * read_s
            finish = max(finish, log(t))
            heapq.heappush(free, (t, w))
    span = max(finish, 1e-9)
    per_second = defaultdict(int)
    for t in log_done:
        per_second[int(t // 60)] += 1
    return {
        "schedule": schedule,
        "workers": workers,
        "makespan_h": span / 3600,
        "busy": busy / (span * workers),
        "cpu_h": busy / 3600,
        "builds": stats["builds"],
        "cache_hits": stats["cache hits"],
        "lock_waits": stats["lock waits"],
        "peak_runs_per_s": max(per_second.values()) / 60 if per_second else 0.0,
        "mean_runs_per_s": len(log_done) / span,
        "artifact_gb": len(configs) * run_bytes / 1e9,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--costs", type=Path, help="benchmarks/scale.py --json output (else the defaults)")
    parser.add_argument("--workers", default="64,256,1024", help="worker counts to simulate, comma-separated")
    parser.add_argument("--chunks", type=int, default=10_000_000)
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--chunkings", type=int, default=10)
    parser.add_argument("--bm25-settings", type=int, default=20)
    parser.add_argument("--models", type=int, default=5)
    parser.add_argument("--downstream", type=int, default=10)
    parser.add_argument("--gpus", action="store_true", help="encode on GPU workers (the assumed GPU rate)")
    parser.add_argument("--ann", action="store_true", help="dense search by a vector index service")
    parser.add_argument("--ann-ms", type=float, default=5.0, help="per query, with --ann (assumed)")
    parser.add_argument("--cache-read-s", type=float, default=30.0, help="reading one cached input (assumed)")
    parser.add_argument("--encode-shard", type=int, default=500_000, help="chunks per encoding task (planned)")
    parser.add_argument("--query-shard", type=int, default=1000, help="queries per retrieval task (planned)")
    parser.add_argument("--artifact-mb-s", type=float, default=100.0, help="artifact upload per slot (assumed)")
    parser.add_argument("--server-workers", type=int, default=1, help="tracking-server request slots")
    args = parser.parse_args()
    costs = costs_from(args.costs) if args.costs else dict(DEFAULTS)
    print("simulated (synthetic task costs scaled linearly from benchmarks/scale.py), per-unit costs:")
    print("  " + ", ".join(f"{k} {v:.3g}" for k, v in costs.items()))
    print(
        f"  sweep: {args.chunkings * args.bm25_settings * args.models * args.downstream:,} configurations, "
        f"{args.chunks:,} chunks, {args.queries:,} queries; encode on {'GPU' if args.gpus else 'CPU'}, "
        f"dense search {'ANN service' if args.ann else 'exact numpy'}"
    )
    n, q = args.chunks, args.queries
    parts = {
        "BM25 index (once per chunking x setting)": costs["index_s_per_chunk"] * n,
        "encoding on CPU (once per chunking x model)": costs["encode_s_per_chunk"] * n,
        "encoding on GPU (assumed rate)": costs["encode_gpu_s_per_chunk"] * n,
        "BM25 retrieval, all queries": costs["bm25_s_per_query_per_chunk"] * n * q,
        "dense exact search + query encoding, all queries": (
            costs["query_embed_s"] + costs["dense_s_per_query_per_chunk"] * n
        )
        * q,
        "dense via ANN service + query encoding, all queries": (costs["query_embed_s"] + args.ann_ms / 1000) * q,
        "fusion + evaluation + stage measures + diagnostics": costs["downstream_s_per_query"] * q,
        "logging one run (server + artifact upload)": costs["log_s"]
        + (costs["artifact_fixed_bytes"] + costs["artifact_bytes_per_query"] * q) / (args.artifact_mb_s * 1e6),
    }
    print(f"\none configuration's parts at {n:,} chunks x {q:,} queries (worker seconds, one core):")
    for name, seconds in parts.items():
        print(f"  {name:<55} {seconds:12,.0f} s")
    print(
        "\n| schedule | workers | makespan h | worker h | occupied | builds | cache hits | lock waits "
        "| peak runs/s | mean runs/s | artifacts GB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for workers in [int(w) for w in args.workers.split(",")]:
        for schedule in ("today", "planned"):
            r = simulate(args, costs, workers, schedule)
            print(
                f"| {r['schedule']} | {workers} | {r['makespan_h']:,.1f} | {r['cpu_h']:,.0f} | {r['busy']:.2f} "
                f"| {r['builds']} | {r['cache_hits']} | {r['lock_waits']} | {r['peak_runs_per_s']:.2f} "
                f"| {r['mean_runs_per_s']:.3f} | {r['artifact_gb']:,.0f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
