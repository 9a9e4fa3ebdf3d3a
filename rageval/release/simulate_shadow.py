"""A seeded shadow-log simulator: two arms' rankings of a benchmark's cases (two runs' rankings
frames) replayed as N requests, every record labelled ``simulated: true``. It serves the tests and
the demo; it is never evidence about real traffic.

Requests sample the cases both arms ranked, with replacement; each logs the query's sha256 (never
its text), the case's principal and slices. Latencies are drawn lognormally around the medians
given (the runs' measured medians, where the caller has them), with a load factor both arms share
per request, since shadow calls run side by side. Faults can be injected on purpose (:class:`Faults`).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from rageval.benchmark.loading import Benchmark
from rageval.errors import InputError, Problem
from rageval.hashing import sha256_text
from rageval.release.shadow import Arm, Hit, ShadowRecord
from rageval.validation import absent_columns


@dataclass(frozen=True)
class Faults:
    """What to break in the candidate arm, so that a rule has something to catch."""

    rbo_drop: float = 0.0  # share of requests whose candidate serves another case's ranking (drift)
    leaks: int = 0  # requests whose candidate puts a document the asker may not see first
    latency_factor: float = 1.0  # the candidate's latencies multiplied by this
    candidate_errors: float = 0.0  # share of requests where the candidate fails
    baseline_errors: float = 0.0


def _ranked(frame: pd.DataFrame, name: str, depth: int) -> dict[str, list[tuple[str, float | None]]]:
    missing = absent_columns(frame, ("query_id", "rank", "chunk_id"))
    if missing:
        raise InputError(
            Problem(file=name, message=f"rankings lack the columns {missing}", fix="pass a run's rankings frame")
        )
    frame = frame.sort_values(["query_id", "rank"], kind="stable")
    scores = frame["score"] if "score" in frame.columns else pd.Series([None] * len(frame), index=frame.index)
    out: dict[str, list[tuple[str, float | None]]] = {}
    for query_id, chunk_id, score in zip(frame["query_id"], frame["chunk_id"], scores, strict=True):
        ranked = out.setdefault(str(query_id), [])
        if len(ranked) < depth and all(c != chunk_id for c, _ in ranked):
            ranked.append((str(chunk_id), None if score is None or pd.isna(score) else float(score)))
    return out


@dataclass(frozen=True)
class SimulatedTraffic:
    """How many requests to simulate and how: ``seed``, each arm's ranking ``depth``, the latency
    medians (``candidate_ms`` default: ``baseline_ms``), the :class:`Faults` to inject, and the
    first request's time (one request a second after it)."""

    requests: int
    seed: int = 0
    depth: int = 10
    baseline_ms: float = 20.0
    candidate_ms: float | None = None
    faults: Faults = Faults()
    start: dt.datetime = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def simulate_shadow(
    baseline: pd.DataFrame,
    candidate: pd.DataFrame,
    benchmark: Benchmark,
    traffic: SimulatedTraffic,
    *,
    baseline_config: str | None = None,
    candidate_config: str | None = None,
) -> list[ShadowRecord]:
    """``traffic.requests`` simulated requests replaying the two arms' rankings (see the module's docstring)."""
    requests, seed, depth, faults = traffic.requests, traffic.seed, traffic.depth, traffic.faults
    if requests < 1:
        raise InputError(Problem(file="--requests", message=f"must be at least 1 (got {requests})"))
    base, cand = _ranked(baseline, "baseline rankings", depth), _ranked(candidate, "candidate rankings", depth)
    cases = {case.queryId: case for case in benchmark.cases}
    shared = sorted(set(base) & set(cand) & set(cases))
    if not shared:
        raise InputError(
            Problem(
                file="rankings",
                message="the two arms rank no case of the benchmark in common",
                fix="pass rankings of the same benchmark's cases",
            )
        )
    rng = np.random.default_rng(seed)
    picked = rng.choice(len(shared), size=requests, replace=True)
    load = rng.lognormal(0.0, 0.25, requests)  # shared per request: both arms ran on the same host at once
    base_ms = traffic.baseline_ms * load * rng.lognormal(0.0, 0.1, requests)
    cand_ms = (
        (traffic.candidate_ms or traffic.baseline_ms) * faults.latency_factor * load * rng.lognormal(0.0, 0.1, requests)
    )
    drifted = rng.random(requests) < faults.rbo_drop
    cand_fail, base_fail = rng.random(requests) < faults.candidate_errors, rng.random(requests) < faults.baseline_errors
    leaking = _leak_plan(shared, picked, benchmark, faults.leaks, rng)
    records = []
    for i, index in enumerate(picked):
        case = cases[shared[index]]
        cand_hits = list(cand[case.queryId])
        if drifted[i]:
            cand_hits = _drift(cand, shared, int(index), case.principal, benchmark) or cand_hits[::-1]
        if i in leaking:
            cand_hits = [(leaking[i], None), *[h for h in cand_hits if h[0] != leaking[i]]][:depth]
        records.append(
            ShadowRecord(
                request_id=f"sim-{seed}-{i:06d}",
                time=traffic.start + dt.timedelta(seconds=i),
                query_sha256=sha256_text(case.query),
                principal=list(case.principal) if case.principal is not None else None,
                case_id=case.queryId,
                segment=list(case.slice),
                simulated=True,
                baseline=_arm(base[case.queryId], float(base_ms[i]), bool(base_fail[i]), baseline_config),
                candidate=_arm(cand_hits, float(cand_ms[i]), bool(cand_fail[i]), candidate_config),
            )
        )
    return records


def _drift(
    ranked: dict[str, list[tuple[str, float | None]]],
    shared: Sequence[str],
    index: int,
    principal: Sequence[str] | None,
    benchmark: Benchmark,
) -> list[tuple[str, float | None]]:
    """The next case's ranking, less what the asker may not see: a candidate drifting off topic
    (the drift fault is no leak fault)."""
    groups = set(principal or ())
    other = ranked[shared[(index + 1) % len(shared)]] if len(shared) > 1 else []

    def visible(item: str) -> bool:
        document = benchmark.documents.get(item.rsplit("#", 1)[0] if "#" in item else item)
        return document is None or document.acl is None or bool(set(document.acl) & groups)

    return [hit for hit in other if visible(hit[0])]


def _arm(hits: Sequence[tuple[str, float | None]], latency: float, failed: bool, config: str | None) -> Arm:
    if failed:
        return Arm(results=[], latency_ms=round(latency, 3), error="simulated failure", config=config)
    return Arm(results=[Hit(id=i, score=s) for i, s in hits], latency_ms=round(latency, 3), config=config)


def _leak_plan(
    shared: Sequence[str], picked: np.ndarray, benchmark: Benchmark, leaks: int, rng: np.random.Generator
) -> dict[int, str]:
    """Which requests leak which document: one the request's principal may not see."""
    if leaks <= 0:
        return {}
    cases = {case.queryId: case for case in benchmark.cases}
    plan: dict[int, str] = {}
    for i in rng.permutation(len(picked)):
        groups = set(cases[shared[picked[i]]].principal or ())
        hidden = sorted(d.id for d in benchmark.documents.values() if d.acl is not None and not set(d.acl) & groups)
        if hidden:
            plan[int(i)] = hidden[int(rng.integers(len(hidden)))]
        if len(plan) == leaks:
            return plan
    raise InputError(
        Problem(
            file="--fault",
            message=f"cannot inject {leaks} leak(s): only {len(plan)} request(s) have a document with an ACL "
            "their principal lacks",
            fix="inject fewer leaks, or use a benchmark whose documents carry ACLs",
        )
    )


def write_log(records: Sequence[ShadowRecord], path: str | Path) -> Path:
    """Write a shadow log as JSON lines (``.jsonl``) or parquet (``.parquet``)."""
    path = Path(path)
    rows = [record.model_dump(mode="json", exclude_none=True) for record in records]
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    elif path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        # every column in every row (nulls where absent: the reader drops them), and no empty struct,
        # which parquet cannot hold
        full = [record.model_dump(mode="json") for record in records]
        for row in full:
            for arm in ("baseline", "candidate"):
                row[arm]["resources"] = row[arm]["resources"] or None
        rows = full
        pq.write_table(pa.Table.from_pylist(rows), path)
    else:
        raise InputError(
            Problem(file=str(path), message=f"unknown log format '{path.suffix}'", fix="use .jsonl or .parquet")
        )
    return path
