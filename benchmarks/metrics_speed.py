"""How fast rageval's ``evaluate`` is against ir-measures and ranx, on the same data, same values.

    python benchmarks/metrics_speed.py                      # 10,000 queries x 1,000 results
    python benchmarks/metrics_speed.py --queries 500 --depth 100

The data: a seeded synthetic run (every query retrieves ``depth`` distinct documents from a corpus
of about a million, scores strictly decreasing, rows grouped by query in rank order, as a run file
or a retrieval stage writes them) and graded qrels (``--judged`` judgments per query, grades 0-3,
about half of them retrieved, mostly near the top). The standard set: nDCG@10, R@100, RR,
Success@10, P@5.

The common input every tool starts from is what a rageval run holds in memory: the run as a pandas
DataFrame (``query_id, doc_id, score``, pandas' default string columns) and the qrels as a dict of
dicts. Whatever a tool needs beyond that (ranx's Run object, ir-measures' dict run, a qrels
DataFrame) is its *conversion*, timed apart from its *evaluation*. Each tool runs in its own
process, so peak memory is that tool's alone: the rise of the peak resident set over the
resident set before it starts (Linux VmHWM, reset first); with ``--tracemalloc`` also
tracemalloc's peak (Python and numpy allocations only; numba and Arrow allocate outside it) from a
separate, untimed call.

ranx compiles with numba: with an empty numba cache, a one-query warm-up pays the compilation
(reported as "jit"); then its conversion, its first evaluation (which also sorts the run, once,
inside the Run object) and warm evaluations are timed. Wall time on a shared machine varies, so CPU time is printed beside it.
The values are checked: every tool's per-query values against rageval's on the queries rageval
evaluates (ir-measures is pytrec_eval, i.e. trec_eval: must agree to 1e-9).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd

MEASURES = ["nDCG@10", "R@100", "RR", "Success@10", "P@5"]
RANX = {"nDCG@10": "ndcg@10", "R@100": "recall@100", "RR": "mrr", "Success@10": "hit_rate@10", "P@5": "precision@5"}
TOOLS = ("rageval", "rageval-shuffled", "ranx", "ir_measures-dict", "ir_measures-dataframe")
CORPUS = 1_000_003  # a prime: a + b*i mod CORPUS gives distinct documents per query


def make_data(queries: int, depth: int, judged: int, seed: int) -> tuple[pd.DataFrame, dict[str, dict[str, int]]]:
    rng = np.random.default_rng(seed)
    corpus = max(CORPUS, depth + 1)
    start = rng.integers(0, corpus, size=queries)
    step = rng.integers(1, corpus, size=queries)
    docs = (start[:, None] + step[:, None] * np.arange(depth)[None, :]) % corpus
    scores = -np.sort(-rng.random((queries, depth)), axis=1) * 30.0
    qids = pd.Series([f"q{q}" for q in range(queries)])
    run = pd.DataFrame(
        {
            "query_id": qids.repeat(depth).reset_index(drop=True).astype("str"),
            "doc_id": ("D" + pd.Series(docs.ravel()).astype("str")).astype("str"),
            "score": scores.ravel(),
        }
    )
    # Judgments: half on retrieved documents (ranks skewed to the top), half on documents not retrieved.
    inside = judged // 2
    ranks = np.minimum(rng.geometric(10.0 / depth, size=(queries, inside)), depth) - 1
    grades = rng.choice(4, size=(queries, judged), p=[0.4, 0.3, 0.2, 0.1])
    qrels: dict[str, dict[str, int]] = {}
    for q in range(queries):
        judged_docs = {f"D{docs[q, r]}": int(g) for r, g in zip(ranks[q], grades[q, :inside], strict=True)}
        judged_docs.update({f"X{q}-{j}": int(g) for j, g in enumerate(grades[q, inside:])})
        qrels[f"q{q}"] = judged_docs
    return run, qrels


# --------------------------------------------------------------------------- one tool, in its own process


def _rss_mb() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM (Linux >= 4.0)
        return True
    except OSError:
        return False


def _peak_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _no_warmup() -> None:
    return None


def _timed(call):
    wall, cpu = time.perf_counter(), time.process_time()
    value = call()
    return value, time.perf_counter() - wall, time.process_time() - cpu


def _rageval(run, qrels, shuffled: bool):
    from rageval.evaluation import evaluate

    if shuffled:  # untimed: the general path (one lexsort) instead of the grouped fast path
        run = run.sample(frac=1.0, random_state=1).reset_index(drop=True)

    def convert():
        return run

    def evaluate_(frame):
        evaluation = evaluate(frame, qrels, MEASURES)
        return evaluation.per_query, {
            "providers": evaluation.providers,
            "diagnostics": evaluation.diagnostic_means.to_dict(),
        }

    return _no_warmup, convert, evaluate_


def _ranx(run, qrels):
    from ranx import Qrels, Run, evaluate

    def convert(frame=run, judgments=qrels):
        frame = frame.astype({"query_id": object, "doc_id": object})  # Run.from_df refuses other string dtypes
        return Qrels(judgments), Run.from_df(frame, q_id_col="query_id", doc_id_col="doc_id", score_col="score")

    def warmup():  # numba compiles ranx's conversion and measures on first use: time that apart
        head = run[run["query_id"].isin(run["query_id"].iloc[:1])]
        evaluate_(convert(head, {q: qrels[q] for q in head["query_id"].unique() if q in qrels}))

    def evaluate_(converted):
        ranx_qrels, ranx_run = converted
        scores = evaluate(ranx_qrels, ranx_run, list(RANX.values()), return_mean=False, save_results_in_run=False)
        ids = list(ranx_run.keys())
        return pd.DataFrame({m: np.asarray(scores[RANX[m]]) for m in MEASURES}, index=ids), {}

    return warmup, convert, evaluate_


def _ir_measures(run, qrels, dict_input: bool):
    import ir_measures

    parsed = [ir_measures.parse_measure(m) for m in MEASURES]

    def convert():
        if not dict_input:
            frame = pd.DataFrame(
                [(q, d, g) for q, docs in qrels.items() for d, g in docs.items()],
                columns=["query_id", "doc_id", "relevance"],
            )
            return frame, run
        as_dict: dict[str, dict[str, float]] = {}
        for q, d, s in zip(run["query_id"].tolist(), run["doc_id"].tolist(), run["score"].tolist(), strict=True):
            as_dict.setdefault(q, {})[d] = s
        return qrels, as_dict

    def evaluate_(converted):
        qrels_in, run_in = converted
        values: dict[str, dict[str, float]] = {str(m): {} for m in parsed}
        for metric in ir_measures.iter_calc(parsed, qrels_in, run_in):
            values[str(metric.measure)][metric.query_id] = metric.value
        frame = pd.DataFrame(values)
        frame.columns = MEASURES
        return frame, {}

    return _no_warmup, convert, evaluate_


def run_tool(tool: str, data: Path, repeat: int, out: Path, trace: bool) -> None:
    with open(data, "rb") as handle:
        run, qrels = pickle.load(handle)
    if tool.startswith("rageval"):
        warmup, convert, evaluate_ = _rageval(run, qrels, shuffled=tool == "rageval-shuffled")
    elif tool == "ranx":
        warmup, convert, evaluate_ = _ranx(run, qrels)
    else:
        warmup, convert, evaluate_ = _ir_measures(run, qrels, dict_input=tool == "ir_measures-dict")
    _, jit_wall, _ = _timed(warmup)
    rss_before = _rss_mb()
    exact_peak = _reset_peak()
    converted, convert_wall, convert_cpu = _timed(convert)
    (values, extra), first_wall, first_cpu = _timed(lambda: evaluate_(converted))
    peak = _peak_mb() - rss_before
    # A slow tool gets one warm call: its warm/first difference is noise next to its time.
    warm = [_timed(lambda: evaluate_(converted))[1:] for _ in range(repeat if first_wall < 20 else min(repeat, 1))]
    traced = float("nan")
    if trace:  # slows Python-heavy tools several-fold: untimed, and only when asked
        tracemalloc.start()
        evaluate_(converted)
        traced = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    values.index = values.index.astype(str)
    values.to_pickle(out / f"{tool}.pkl")
    result = {
        "tool": tool,
        "jit_wall": jit_wall,
        "convert_wall": convert_wall,
        "convert_cpu": convert_cpu,
        "first_wall": first_wall,
        "first_cpu": first_cpu,
        "warm_wall": min(w for w, _ in warm) if warm else first_wall,
        "warm_cpu": min(c for _, c in warm) if warm else first_cpu,
        "peak_rss_mb": peak,
        "peak_exact": exact_peak,
        "tracemalloc_mb": traced,
        **extra,
    }
    (out / f"{tool}.json").write_text(json.dumps(result, default=str))


# --------------------------------------------------------------------------- the report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--depth", type=int, default=1_000)
    parser.add_argument("--judged", type=int, default=20, help="judgments per query")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=2, help="warm calls per tool (the fastest is shown)")
    parser.add_argument("--tracemalloc", action="store_true", help="also an untimed call under tracemalloc")
    parser.add_argument("--tools", default=",".join(TOOLS), help=f"comma-separated subset of {', '.join(TOOLS)}")
    parser.add_argument("--tool", help=argparse.SUPPRESS)  # internal: run one tool in this process
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tool:
        run_tool(args.tool, args.data, args.repeat, args.out, args.tracemalloc)
        return

    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    unknown = sorted(set(tools) - set(TOOLS))
    if unknown:
        parser.error(f"unknown tool(s) {', '.join(unknown)}; valid choices are {', '.join(TOOLS)}")
    started = time.perf_counter()
    print(
        f"machine: {os.cpu_count()} CPUs, load average {_load()} (shared machines inflate wall time; CPU time is ours)"
    )
    run, qrels = make_data(args.queries, args.depth, args.judged, args.seed)
    print(
        f"data: {args.queries:,} queries x {args.depth:,} results = {len(run):,} rows, "
        f"{sum(len(j) for j in qrels.values()):,} judgments (seed {args.seed}); made in {time.perf_counter() - started:.1f} s"
    )
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        data = folder / "data.pkl"
        with open(data, "wb") as handle:
            pickle.dump((run, qrels), handle, protocol=pickle.HIGHEST_PROTOCOL)
        results = {}
        for tool in tools:
            env = dict(os.environ)
            if tool == "ranx":
                env["NUMBA_CACHE_DIR"] = str(folder / "numba-cache")  # empty: the first call compiles
            command = [sys.executable, __file__, "--tool", tool, "--data", str(data), "--out", str(folder)]
            command += ["--repeat", str(args.repeat)] + (["--tracemalloc"] if args.tracemalloc else [])
            print(f"running {tool} ...", flush=True)
            subprocess.run(command, check=True, env=env, cwd=Path(__file__).resolve().parents[1])
            results[tool] = (json.loads((folder / f"{tool}.json").read_text()), pd.read_pickle(folder / f"{tool}.pkl"))
    report(results)
    print(f"\nload average at the end: {_load()}")


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def report(results: dict) -> None:
    base = results.get("rageval", next(iter(results.values())))
    base_total = base[0]["convert_wall"] + base[0]["warm_wall"]
    print()
    header = (
        f"{'tool':<24}{'jit s':>7}{'convert s':>10}{'1st eval s':>11}{'warm eval s':>12}{'(cpu s)':>9}"
        f"{'total s':>9}{'x rageval':>10}{'eval x':>8}{'peak MB':>9}{'traced MB':>10}"
    )
    print(header)
    print("-" * len(header))
    for tool, (r, _) in results.items():
        total = r["convert_wall"] + r["warm_wall"]
        print(
            f"{tool:<24}{r['jit_wall']:>7.2f}{r['convert_wall']:>10.2f}{r['first_wall']:>11.2f}{r['warm_wall']:>12.2f}{r['warm_cpu']:>9.2f}"
            f"{total:>9.2f}{total / base_total:>10.1f}{r['warm_wall'] / base[0]['warm_wall']:>8.1f}"
            f"{r['peak_rss_mb']:>9.0f}{r['tracemalloc_mb']:>10.0f}"
        )
    print(
        "\ntotal = conversion + warm evaluation, from the common input (run DataFrame + qrels dict); "
        "'x rageval' = total / rageval's total; 'eval x' = warm evaluation / rageval's warm evaluation; "
        "jit = ranx's numba compilation (conversion and evaluation of one query, empty numba cache)."
    )
    if "rageval" in results:
        r = results["rageval"][0]
        print(f"rageval providers: {r.get('providers')}; diagnostics (means): {r.get('diagnostics')}")
    summary(results)
    print("\nagreement with rageval (max |difference| per measure, on the queries rageval evaluates):")
    reference = base[1]
    for tool, (_, values) in results.items():
        if values is reference:
            continue
        common = reference.index.intersection(values.index)
        worst = {m: float((reference.loc[common, m] - values.loc[common, m]).abs().max()) for m in MEASURES}
        verdict = "identical to 1e-9" if max(worst.values()) <= 1e-9 else "DIFFERENT"
        print(
            f"  {tool:<24} {len(common):>6} queries  {verdict}  " + "  ".join(f"{m} {v:.1e}" for m, v in worst.items())
        )


def summary(results: dict) -> None:
    """rageval on grouped and on shuffled rows against each peer: how many times faster (peer / rageval)."""
    peers = [tool for tool in results if not tool.startswith("rageval")]
    ours = [tool for tool in ("rageval", "rageval-shuffled") if tool in results]
    if not ours:
        return
    print(f"\nrageval against its peers (peer time / rageval time; > 1: rageval is faster); target {TARGET}")
    header = f"{'rows':<10}{'warm s':>8}{'cpu s':>7}{'peak MB':>9}" + "".join(
        f"{SHORT.get(p, p) + ' ' + kind:>21}" for p in peers for kind in ("eval", "total")
    )
    print(header)
    print("-" * len(header))
    for tool in ours:
        r = results[tool][0]
        total = r["convert_wall"] + r["warm_wall"]
        cells = ""
        for p in peers:
            peer = results[p][0]
            cells += f"{peer['warm_wall'] / r['warm_wall']:>21.1f}"
            cells += f"{(peer['convert_wall'] + peer['warm_wall']) / total:>21.1f}"
        label = "grouped" if tool == "rageval" else "shuffled"
        print(f"{label:<10}{r['warm_wall']:>8.3f}{r['warm_cpu']:>7.3f}{r['peak_rss_mb']:>9.0f}{cells}")
    print(
        "eval: warm evaluation against warm evaluation (ranx after its JIT and conversion); total: conversion + "
        "warm evaluation from the common input. trec_eval(dict) and ir_meas(df) are ir_measures from a dict run "
        "and from a DataFrame: it computes these measures with pytrec_eval, i.e. trec_eval's C code."
    )


SHORT = {"ir_measures-dict": "trec_eval(dict)", "ir_measures-dataframe": "ir_meas(df)"}
TARGET = "10,000 x 1,000 grouped in <= 0.3 s warm at <= 500 MB (issue 27)"


if __name__ == "__main__":
    main()
