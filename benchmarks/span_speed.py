"""What grading passages on judged spans costs against matching chunk IDs, on the same run.

    python benchmarks/span_speed.py                       # 10,000 queries x 1,000 passages
    python benchmarks/span_speed.py --queries 500 --depth 100

The data: metrics_speed.py's seeded run (every query retrieves ``depth`` distinct chunks, rows
grouped by query in rank order) where chunk ``D<n>`` is characters ``[500*(n mod 10), +500)`` of
document ``P<n div 10>``, with graded judgments on about ``--judged`` chunks per query (half of them
retrieved). The same judgments are given twice: as chunk qrels (query → chunk ID → grade, what a
chunk-ID evaluation matches) and as judged spans (each judged chunk's extent in its document, what
span grading covers). The chunks do not overlap, so both must give the same value for every query
and measure: the script checks it, then times each (median of ``--repeat`` warm calls after one
untimed call; wall and CPU) and prints the ratio span / chunk-ID. The run frame with its passages'
``document_id, start, end`` and the spans are built before timing: a run holds its rankings with
those columns, as it holds the chunk qrels.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from metrics_speed import MEASURES, make_data  # noqa: E402

from rageval.evaluation import evaluate  # noqa: E402
from rageval.evaluation.spans import evidence_from_rows  # noqa: E402

WIDTH = 500  # characters per chunk
PER_DOCUMENT = 10  # chunks per document


def location(chunk: str) -> tuple[str, int, int]:
    """A chunk ID's document and offsets: ``D<n>`` → ``P<n div 10>``; a never-retrieved ``X<q>-<j>``
    → document ``X<q>``."""
    if chunk.startswith("D"):
        n = int(chunk[1:])
        at = (n % PER_DOCUMENT) * WIDTH
        return f"P{n // PER_DOCUMENT}", at, at + WIDTH
    query, _, j = chunk[1:].partition("-")
    return f"X{query}", int(j) * WIDTH, (int(j) + 1) * WIDTH


def passage_run(run: pd.DataFrame) -> pd.DataFrame:
    n = run["doc_id"].str.slice(1).astype(np.int64).to_numpy()
    # String columns as a run holds them (pandas' default, Arrow-backed), as run["doc_id"] is.
    return run.assign(
        document_id=("P" + pd.Series(n // PER_DOCUMENT).astype("str")).astype("str"),
        start=(n % PER_DOCUMENT) * WIDTH,
        end=(n % PER_DOCUMENT) * WIDTH + WIDTH,
    )


def timed(call, repeat: int) -> tuple[float, float, object]:
    result = call()  # untimed: warms caches and imports
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        result = call()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--depth", type=int, default=1_000)
    parser.add_argument("--judged", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args()

    run, qrels = make_data(args.queries, args.depth, args.judged, args.seed)
    passages = passage_run(run)
    rows = [(q, *location(chunk), grade) for q, judged in qrels.items() for chunk, grade in judged.items()]
    evidence = evidence_from_rows(qrels, rows)
    print(
        f"{args.queries:,} queries x {args.depth:,} passages, {len(evidence):,} judged spans; measures {', '.join(MEASURES)}"
    )

    id_wall, id_cpu, by_id = timed(lambda: evaluate(run, qrels, MEASURES), args.repeat)
    span_wall, span_cpu, by_span = timed(lambda: evaluate(passages, evidence, MEASURES), args.repeat)
    pd.testing.assert_frame_equal(by_id.per_query, by_span.per_query)  # type: ignore[attr-defined]
    print("values: identical for every query and measure")
    print()
    print("| evaluation | wall (median) | CPU (median) |")
    print("|---|---|---|")
    print(f"| chunk IDs matched | {id_wall:.3f} s | {id_cpu:.3f} s |")
    print(f"| passages graded on spans | {span_wall:.3f} s | {span_cpu:.3f} s |")
    print(f"| **ratio spans / chunk IDs** | **{span_wall / id_wall:.2f}x** | **{span_cpu / id_cpu:.2f}x** |")


if __name__ == "__main__":
    main()
