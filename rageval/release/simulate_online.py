"""A seeded A/B cohort simulated from two arms' rankings and the benchmark's graded judgments:
synthetic evidence for the demo and the tests, every record labelled ``simulated: true``.

The click model is position-biased (the examination hypothesis; Craswell, Zoeter, Taylor and Ramsey,
"An experimental comparison of click position-bias models", WSDM 2008): a session draws one query,
examines rank r with probability ``1 / r**eta``, and clicks an examined result with the
attractiveness of its grade. A search succeeds when a result of grade ≥ ``success_grade`` is
clicked; an unsuccessful one is reformulated, and escalated, with the given probabilities. Latency
is log-normal per arm. A sample-ratio mismatch (candidate units lost) and a latency regression can
be injected to exercise the decision's refusals.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from pydantic import Field, StrictInt

from rageval.release.online import ARMS
from rageval.validation import Strict

# What a grade's result attracts (probability of a click once examined): rubric 0-3.
DEFAULT_ATTRACTIVENESS = {0: 0.05, 1: 0.2, 2: 0.6, 3: 0.9}


class Simulation(Strict):
    """The knobs of one simulated cohort (all recorded with the log)."""

    sessions: StrictInt = Field(default=20_000, ge=10)
    seed: StrictInt = 0
    candidate_share: float = Field(default=0.5, gt=0, lt=1, description="the planned split")
    eta: float = Field(default=1.0, ge=0, description="examination probability 1 / rank**eta")
    depth: StrictInt = Field(default=10, ge=1, description="ranks a user may examine")
    attractiveness: dict[int, float] = Field(default_factory=lambda: dict(DEFAULT_ATTRACTIVENESS), strict=False)
    success_grade: StrictInt = 2
    p_reformulate: float = Field(default=0.6, ge=0, le=1, description="after an unsuccessful search")
    p_escalate: float = Field(default=0.3, ge=0, le=1, description="after an unsuccessful search")
    latency_median_ms: float = Field(default=120.0, gt=0)
    latency_sigma: float = Field(default=0.35, ge=0, description="of log latency")
    candidate_latency_factor: float = Field(default=1.0, gt=0, description="> 1 injects a latency regression")
    srm_drop: float = Field(default=0.0, ge=0, lt=1, description="share of candidate units lost (an injected SRM)")
    start: dt.datetime = Field(default=dt.datetime(2026, 11, 2, 9, 0, tzinfo=dt.UTC), strict=False)
    seconds_between: float = Field(default=20.0, gt=0)


def simulate(
    rankings: Mapping[str, Mapping[str, Sequence[str]]],
    grades: Mapping[str, Mapping[str, int]],
    query_hashes: Mapping[str, str],
    simulation: Simulation,
) -> list[dict[str, Any]]:
    """The cohort's units as log records (:class:`rageval.release.online.OnlineEvent` fields).

    ``rankings[arm][query_id]`` is that arm's ranked document IDs, ``grades[query_id][doc_id]`` the
    judgments (unjudged documents grade 0), ``query_hashes[query_id]`` what the log may say of the
    query. Queries are those both arms ranked, in sorted order, so the same seed gives the same log."""
    queries = sorted(set(rankings["baseline"]) & set(rankings["candidate"]))
    if not queries:
        raise ValueError("the arms ranked no query in common")
    rng = np.random.default_rng(simulation.seed)
    sim = simulation
    ranks = np.arange(1, sim.depth + 1)
    examine = 1.0 / ranks**sim.eta
    records = []
    for index in range(sim.sessions):
        # The same draws per session whatever happens in it: an injected change alters only what it injects.
        assign, ref, esc, loss = rng.random(4)
        pick, noise = int(rng.integers(len(queries))), float(rng.standard_normal())
        looks, likes = rng.random(sim.depth), rng.random(sim.depth)
        arm = ARMS[int(assign < sim.candidate_share)]
        query = queries[pick]
        ranked = list(rankings[arm][query])[: sim.depth]
        judged = grades.get(query, {})
        attract = np.array([sim.attractiveness.get(judged.get(doc, 0), 0.0) for doc in ranked])
        n = len(ranked)
        clicks = (looks[:n] < examine[:n]) & (likes[:n] < attract)
        clicked = [r for r in range(n) if clicks[r]]
        success = any(judged.get(ranked[r], 0) >= sim.success_grade for r in clicked)
        reformulated = not success and bool(ref < sim.p_reformulate)
        escalated = not success and bool(esc < sim.p_escalate)
        factor = sim.candidate_latency_factor if arm == "candidate" else 1.0
        latency = sim.latency_median_ms * factor * math.exp(sim.latency_sigma * noise)
        if arm == "candidate" and loss < sim.srm_drop:
            continue
        records.append(
            {
                "session_id": f"sim-{sim.seed}-{index:06d}",
                "arm": arm,
                "time": (sim.start + dt.timedelta(seconds=index * sim.seconds_between)).isoformat(),
                "successful_search": success,
                "citation_opened": bool(clicked),
                "citation_rank": clicked[0] + 1 if clicked else None,
                "reformulation": reformulated,
                "escalation": escalated,
                "latency_ms": round(latency, 3),
                "query_hash": query_hashes[query],
                "simulated": True,
            }
        )
    return records
