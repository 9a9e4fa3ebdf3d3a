"""Time two retrieval pipelines side by side, in this process on this machine: the gate's latency evidence.

A run's recorded latency says how fast it was on the machine and at the moment it ran; two runs
recorded on different machines, or one beside a busy neighbour, cannot be compared by it. So
:func:`time_paired` rebuilds both configurations, warms each up (index build, model load and
``warmup`` queries whose times are thrown away), then times the same sample of queries through
both, ``rounds`` times: each round visits the queries in a fresh random order and runs the two
arms back to back in a random order per query, so that a neighbour's load falls on both arms
alike. Each timed call is one query through :meth:`Pipeline.run` (query encoding included: the
pipeline forgets query embeddings on every run), with the garbage collector off, as ``timeit``
does, and is measured twice: wall time and the CPU time of the calling thread.

torch runs with ``threads`` intra-op threads (default 1) while timing. On a shared 2-core machine
at load 4.5-5, the demo's hybrid with torch's default 2 threads took 338 ms p95 wall per query
against 30 ms with one thread (and 14 ms of CPU): threads waiting for each other's core measure
the neighbours, not the model. With one thread the CPU time of the calling thread is the whole
cost of a query, which a neighbour changes little; a stage that waits on a service (a plugin
calling an API) spends wall time without CPU time, so time such pipelines by the wall clock.
Nothing is recorded here; :func:`per_query_ms` gives the per-query medians the gate judges.
"""

from __future__ import annotations

import gc
import os
import platform
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from rageval.benchmark.chunking import chunk_corpus
from rageval.benchmark.loading import Benchmark
from rageval.config.schema import RunConfig
from rageval.experiment.run import corpus_for, query_of
from rageval.retrieval import Pipeline, Query
from rageval.retrieval.cache import Cache

ARMS = ("baseline", "candidate")
TIMING_COLUMNS = ["round", "position", "query_id", "arm", "ms", "cpu_ms"]  # ms: wall time


@dataclass(frozen=True)
class PairedTimings:
    """Every timed call (``round, position, query_id, arm, ms``; ``position`` is the call's place
    in its round), the seconds each arm took to build and warm up, and the machine."""

    calls: pd.DataFrame
    build_s: dict[str, float]  # build only; warm-up is untimed
    warmup_queries: int
    machine: dict[str, str | int | float]


def machine() -> dict[str, str | int | float]:
    """What the timings ran on: usable CPUs, the CPU model, memory, architecture and the load."""
    import psutil

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 0)
    return {
        "cpus": cpus,
        "cpu_model": _cpu_model(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "architecture": platform.machine(),
        "load_1min": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else float("nan"),
    }


def _cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def sample_queries(benchmark: Benchmark, split: str, count: int, seed: int) -> list[Query]:
    """``count`` queries of ``split`` (all when it has fewer), drawn with ``seed``, in ID order."""
    cases = benchmark.cases_for(split)
    rng = np.random.default_rng(seed)
    chosen = sorted(rng.choice(len(cases), size=min(count, len(cases)), replace=False).tolist())
    return [query_of(cases[i]) for i in chosen]


def build_pipeline(config: RunConfig, benchmark: Benchmark, cache: Cache | None) -> Pipeline:
    """The configuration's pipeline over its chunks, as :func:`rageval.experiment.run.run_experiment` builds it."""
    corpus = corpus_for(config, benchmark, chunk_corpus(benchmark.document_texts(), config.chunking), cache)
    return Pipeline.from_config(config.retrieval.stages, corpus, source=f"run configuration '{config.name}'")


def _timed(pipeline: Pipeline, query: Query) -> tuple[float, float]:
    """Wall and CPU milliseconds of this thread for one query through the pipeline, the
    collector off (as ``timeit``)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        started, cpu = time.perf_counter(), time.thread_time()
        pipeline.run([query])
        return (time.perf_counter() - started) * 1000, (time.thread_time() - cpu) * 1000
    finally:
        if enabled:
            gc.enable()


@dataclass(frozen=True)
class TimingRequest:
    """Two configurations to time side by side on ``queries`` of ``benchmark``: ``warmup`` untimed
    queries per arm, then ``rounds`` timed passes ordered by ``seed``; ``threads``: torch's intra-op
    threads while warming up and timing (``None``: as they are)."""

    baseline: RunConfig
    candidate: RunConfig
    benchmark: Benchmark
    queries: list[Query]
    rounds: int
    warmup: int
    seed: int = 0
    threads: int | None = 1


def time_paired(request: TimingRequest, *, cache: Cache | None | bool = True) -> PairedTimings:
    """Build, warm up and time both configurations on the request's queries (see the module
    docstring); ``cache``: the pipelines' cache (True: the default one; False or None: none)."""
    queries, warmup = request.queries, request.warmup
    if not queries:
        raise ValueError("no query to time")
    store = Cache() if cache is True else (cache or None)
    pipelines, build_s = {}, {}
    for arm, config in zip(ARMS, (request.baseline, request.candidate), strict=True):
        started = time.perf_counter()
        pipelines[arm] = build_pipeline(config, request.benchmark, store)
        build_s[arm] = time.perf_counter() - started
    rng = np.random.default_rng(request.seed)
    rows = []
    with _torch_threads(request.threads):
        for arm in ARMS:
            for query in (queries * warmup)[:warmup]:
                pipelines[arm].run([query])
        for round_ in range(request.rounds):
            gc.collect()
            position = 0
            for index in rng.permutation(len(queries)).tolist():
                query = queries[index]
                for arm in ARMS if rng.random() < 0.5 else ARMS[::-1]:
                    rows.append((round_, position, query.query_id, arm, *_timed(pipelines[arm], query)))
                    position += 1
    return PairedTimings(pd.DataFrame(rows, columns=TIMING_COLUMNS), build_s, warmup, machine())


@contextmanager
def _torch_threads(threads: int | None) -> Iterator[None]:
    """torch's intra-op thread count set for the block and restored after; nothing when torch
    is not loaded (no stage of either pipeline uses it) or ``threads`` is None."""
    torch = sys.modules.get("torch")
    if torch is None or threads is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def per_query_ms(calls: pd.DataFrame, clock: str = "cpu") -> pd.DataFrame:
    """Per query (rows, in ID order), each arm's median over the rounds, in milliseconds of the
    ``clock`` (``cpu`` or ``wall``)."""
    clock = {"cpu": "cpu_ms", "wall": "ms"}[clock]
    wide = calls.pivot_table(index="query_id", columns="arm", values=clock, aggfunc="median")
    return wide.reindex(columns=list(ARMS)).sort_index().rename_axis(columns=None)
