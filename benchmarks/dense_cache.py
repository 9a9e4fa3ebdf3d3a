"""rageval's dense stage against raw sentence-transformers on the same texts, in one process.

1. Encoding: rageval's cache-miss build of the document embeddings (``document_embeddings``: model
   identity, encoding, hashing and writing the cache entry) against raw
   ``SentenceTransformer.encode`` on the same texts (ratio; target <= 1.1). Measured on the first
   ``--ratio-docs`` chunks, raw and rageval alternating for ``--rounds`` rounds, best of each, so
   load from other processes does not fall on one side only.
2. Cache: the retrieval stage end to end (build + all queries) on a second run of the same
   configuration, which reads the embeddings from the content-addressed cache, against the first
   (target: >= 10x faster).
3. Agreement: nDCG@10 and R@100 of raw exact cosine search (numpy) and of rageval's dense stage.

    python benchmarks/dense_cache.py [--beir ../shared/datasets/scifact] [--ratio-docs 1000] [--rounds 3]

With SciFact (5,183 abstracts, one chunk each, 256-token cap) the two encodings take about 4
minutes each on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from rageval.benchmark.beir import BeirImport, import_beir
from rageval.benchmark.chunking import chunk_corpus
from rageval.benchmark.loading import load_benchmark
from rageval.config.load import load_config
from rageval.evaluation import evaluate
from rageval.experiment.run import run_experiment
from rageval.retrieval import Corpus
from rageval.retrieval.cache import Cache
from rageval.retrieval.dense import document_embeddings
from rageval.retrieval.encoders import bi_encoder, resolve_model

ROOT = Path(__file__).resolve().parents[1]
MEASURES = ["nDCG@10", "R@100"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--beir", type=Path, default=ROOT.parent / "shared" / "datasets" / "scifact")
    parser.add_argument("--benchmark", type=Path, help="an imported rageval benchmark instead of --beir")
    parser.add_argument("--split", default="release")
    parser.add_argument("--ratio-docs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ratio-only", action="store_true", help="measure the encoding ratio only (minutes less)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="rageval-dense-bench-") as tmp:
        folder = args.benchmark or import_beir(
            BeirImport(
                source=args.beir,
                out=Path(tmp) / "bench",
                name="bench",
                version="1",
                splits={"train": "dev", "test": "release"},
            )
        )
        config = load_config(
            ROOT / "params" / "dense.yaml",
            [
                "chunking.method=none",
                "chunking.tokenizer=words",
                "context.tokenizer=words",
                f"evaluation.measures={MEASURES}",
            ],
            benchmark=folder,
            split=args.split,
        )
        stage = config.retrieval.stages[0]
        benchmark = load_benchmark(config.benchmark)
        chunks = chunk_corpus(benchmark.documents.values(), config.chunking)
        texts = [c.index_text for c in chunks]
        cases = benchmark.cases_for(config.split)
        print(
            f"corpus: {len(texts)} chunks; queries: {len(cases)}; model {stage.model}, cap {stage.max_seq_length} tokens"
        )

        model = bi_encoder(resolve_model(stage.model), stage.device)  # loaded once, shared by both sides
        model.max_seq_length = stage.max_seq_length
        model.encode(texts[:64], batch_size=stage.batch_size)  # warm-up: first-call costs are nobody's

        subset = Corpus(chunks[: args.ratio_docs], benchmark.documents, key={"subset": str(args.ratio_docs)})
        raw_times, ours_times = [], []
        for round_ in range(args.rounds):
            started = time.perf_counter()
            model.encode([c.index_text for c in subset.chunks], batch_size=stage.batch_size, normalize_embeddings=True)
            raw_times.append(time.perf_counter() - started)
            fresh = Corpus(subset.chunks, subset.documents, subset.key, Cache(Path(tmp) / f"ratio-{round_}"))
            started = time.perf_counter()
            _, hit, _ = document_embeddings(stage, fresh)
            ours_times.append(time.perf_counter() - started)
            assert hit is False
        raw_s, ours_s = min(raw_times), min(ours_times)
        if args.ratio_only:
            print(
                f"encode {len(subset.chunks)} chunks (best of {args.rounds})   raw {raw_s:8.2f} s   "
                f"rageval {ours_s:8.2f} s   ratio {ours_s / raw_s:.3f} (target <= 1.1)"
            )
            return 0 if ours_s / raw_s <= 1.1 else 1

        started = time.perf_counter()
        raw = model.encode(texts, batch_size=stage.batch_size, normalize_embeddings=True, convert_to_numpy=True)
        raw_full_s = time.perf_counter() - started

        cache = Cache(Path(tmp) / "cache")
        first = run_experiment(config, benchmark, cache=cache)
        second = run_experiment(config, benchmark, cache=cache)
        assert first.cache_hits == {"dense": False} and second.cache_hits == {"dense": True}
        end_to_end = [r.timings["index"] + r.timings["retrieval"] for r in (first, second)]

        queries = model.encode([c.query for c in cases], batch_size=stage.batch_size, normalize_embeddings=True)
        scores = queries @ raw.T
        top = np.argsort(-scores, axis=1, kind="stable")[:, : stage.candidates]
        run = pd.DataFrame(
            [(c.queryId, chunks[d].parent_id, float(scores[i, d])) for i, c in enumerate(cases) for d in top[i]],
            columns=["query_id", "doc_id", "score"],
        )
        raw_values = evaluate(run, benchmark.qrels(config.split), MEASURES).aggregates
        ours_values = first.evaluation.aggregates

    print(
        f"encode {len(subset.chunks)} chunks (best of {args.rounds})   raw {raw_s:8.2f} s   rageval {ours_s:8.2f} s   "
        f"ratio {ours_s / raw_s:.3f} (target <= 1.1)"
    )
    print(
        f"encode all {len(texts)} chunks once   raw {raw_full_s:8.2f} s   rageval (first run) {first.timings['index/dense']:8.2f} s"
    )
    print(
        f"retrieval stage    first run {end_to_end[0]:8.2f} s   cached run {end_to_end[1]:8.2f} s   "
        f"speed-up {end_to_end[0] / end_to_end[1]:.1f}x (target >= 10x)"
    )
    for measure in MEASURES:
        print(
            f"{measure:<8} raw sentence-transformers + numpy {raw_values[measure]:.4f}   rageval dense {ours_values[measure]:.4f}"
        )
    same = all(abs(raw_values[m] - ours_values[m]) < 5e-4 for m in MEASURES)
    ok = ours_s / raw_s <= 1.1 and end_to_end[0] / end_to_end[1] >= 10 and same
    print("PASS" if ok else "FAIL: a target was missed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
