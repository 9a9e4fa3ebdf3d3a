"""rageval's BM25 stage against raw bm25s on the same corpus and queries, in one process.

Prints the time ratio (target <= 1.15) for indexing and for per-query retrieval, checks that both
give identical rankings, and splits the end-to-end time of `rageval run` into its parts.

    python benchmarks/bm25_overhead.py [--beir ../shared/datasets/scifact] [--repeats 5] [--skip-run]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import bm25s
import Stemmer

from rageval.benchmark.beir import BeirImport, import_beir
from rageval.benchmark.chunking import chunk_corpus
from rageval.benchmark.loading import load_benchmark
from rageval.config.load import load_config
from rageval.retrieval import BM25Stage, Corpus, Query
from rageval.tracking.records import LOGGING_METRIC
from rageval.tracking.store import Tracker

ROOT = Path(__file__).resolve().parents[1]


def best_of(repeats: int, work) -> tuple[float, object]:
    times, value = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        value = work()
        times.append(time.perf_counter() - started)
    return min(times), value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--beir", type=Path, default=ROOT.parent / "shared" / "datasets" / "scifact")
    parser.add_argument("--split", default="test", help="BEIR qrels split whose queries are timed")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--skip-run", action="store_true", help="skip the end-to-end `rageval run` timing")
    args = parser.parse_args()
    if not args.beir.is_dir():
        sys.exit(f"{args.beir} not found: pass --beir with a BEIR folder (e.g. ../shared/datasets/scifact)")

    tmp = Path(tempfile.mkdtemp(prefix="rageval-bench-"))
    folder = import_beir(
        BeirImport(
            source=args.beir, out=tmp / "bench", name=args.beir.name, version="bench", splits={args.split: "release"}
        )
    )
    config = load_config(
        ROOT / "params" / "bm25.yaml",
        ["chunking.method=none", "retrieval.stages.0.candidates=100"],
        benchmark=folder,
        split="release",
    )
    stage_config = config.retrieval.stages[0]
    benchmark = load_benchmark(folder)
    chunks = chunk_corpus(benchmark.documents.values(), config.chunking)
    texts = [c.index_text for c in chunks]
    queries = [Query(c.queryId, c.query) for c in benchmark.cases_for("release")]
    stemmer = Stemmer.Stemmer(stage_config.tokenizer.stemmer)
    opts = dict(stopwords=stage_config.tokenizer.stopwords, stemmer=stemmer, show_progress=False)
    k = stage_config.candidates
    print(f"corpus: {len(chunks)} documents; queries: {len(queries)}; k1={stage_config.k1} b={stage_config.b} k={k}")

    def raw_index():
        retriever = bm25s.BM25(k1=stage_config.k1, b=stage_config.b, method=stage_config.method)
        retriever.index(bm25s.tokenize(texts, **opts), show_progress=False)
        return retriever

    def raw_search(retriever):
        out = {}
        for query in queries:
            tokens = bm25s.tokenize([query.text], return_ids=False, **opts)
            docs, scores = retriever.retrieve(tokens, k=k, show_progress=False)
            out[query.query_id] = [
                (chunks[d].chunk_id, float(s)) for d, s in zip(docs[0], scores[0], strict=True) if s > 0
            ]
        return out

    def ours_search(stage):
        return {q.query_id: [(h.chunk_id, h.score) for h in stage(q, None)] for q in queries}

    raw_index_s, raw = best_of(args.repeats, raw_index)
    our_index_s, stage = best_of(
        args.repeats, lambda: BM25Stage(stage_config, Corpus(chunks, benchmark.documents))
    )  # no cache: both index afresh
    raw_search_s, raw_hits = best_of(args.repeats, lambda: raw_search(raw))
    our_search_s, our_hits = best_of(args.repeats, lambda: ours_search(stage))

    # bm25s orders equal scores arbitrarily; rageval orders them by chunk ID: compare in that order.
    identical = all(sorted(raw_hits[q], key=lambda x: (-x[1], x[0])) == our_hits[q] for q in raw_hits)
    print(
        f"index     raw bm25s {raw_index_s:8.3f} s   rageval {our_index_s:8.3f} s   ratio {our_index_s / raw_index_s:5.3f}"
    )
    print(
        f"retrieve  raw bm25s {raw_search_s:8.3f} s   rageval {our_search_s:8.3f} s   ratio {our_search_s / raw_search_s:5.3f}"
        f"   ({1000 * our_search_s / len(queries):.2f} ms/query)"
    )
    total_ratio = (our_index_s + our_search_s) / (raw_index_s + raw_search_s)
    search_ratio = our_search_s / raw_search_s
    passed = total_ratio <= 1.15 and search_ratio <= 1.15
    print(
        f"index+retrieve ratio {total_ratio:5.3f}, retrieve alone {search_ratio:5.3f} (target <= 1.15 for both): "
        f"{'PASS' if passed else 'FAIL'}"
    )
    print(f"identical rankings (ties by chunk ID): {identical}")

    if not args.skip_run:
        end_to_end(folder, tmp)
    return 0 if identical and passed else 1


def end_to_end(folder: Path, tmp: Path) -> None:
    from rageval.workflows.run import RunRequest, execute_run

    started = time.perf_counter()
    outcome = execute_run(
        RunRequest(
            ROOT / "params" / "bm25.yaml", overrides=["chunking.method=none"], benchmark=folder, split="release"
        ),
        Tracker(f"sqlite:///{tmp / 'mlruns' / 'mlflow.db'}"),
    )
    total = time.perf_counter() - started
    tracker = Tracker(f"sqlite:///{tmp / 'mlruns' / 'mlflow.db'}")
    m = dict(outcome.metrics)
    for table in ("timings", "run_timings"):  # each step's time, as the run records it
        frame = tracker.sealed_frame(outcome.run_id, f"tables/{table}.parquet")
        m.update({f"time_s/{step}": seconds for step, seconds in zip(frame["step"], frame["seconds"], strict=True)})
    parts = {
        "prepare (config, notebook check, benchmark load, run creation)": outcome.seconds["prepare"],
        "kernel start": m.get("time_s/kernel_start", float("nan")),
        "benchmark load (in kernel)": m["time_s/load"] + m["time_s/chunking"],
        "retrieval (index + queries)": m["time_s/index"] + m["time_s/retrieval"],
        "evaluation": m["time_s/evaluation"],
        "logging (kernel)": m[LOGGING_METRIC],
        "seal": outcome.seconds["seal"],
    }
    print(f"\nrageval run end to end: {total:.2f} s (run {outcome.run_id}, nDCG@10 {m['nDCG_at_10']:.4f})")
    for name, seconds in parts.items():
        print(f"  {name:<64} {seconds:7.2f} s")
    rest = outcome.seconds["notebook"] - sum(parts[p] for p in list(parts)[1:6])
    print(f"  {'notebook other (imports, displays, plot, shutdown)':<64} {rest:7.2f} s")
    print(
        f"  {'overhead beyond retrieval + evaluation':<64} {total - parts['retrieval (index + queries)'] - parts['evaluation']:7.2f} s"
    )


if __name__ == "__main__":
    sys.exit(main())
