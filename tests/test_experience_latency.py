"""Latency shown so that it separates the members: the frontier's cost axis turns logarithmic when
the members' costs span more than ten times (a 15 ms BM25 and a 1,400 ms hybrid), else stays linear."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from rageval.analysis.comparison import Comparison
from rageval.analysis.plots import figure_frontier


def comparison(p95: list[float], tokens: list[float]) -> Comparison:
    runs = [f"m{i}" for i in range(len(p95))]
    frontier = pd.DataFrame(
        {
            "run": runs,
            "run_id": [f"id{i}" for i in range(len(p95))],
            "quality": [0.50 + 0.05 * i for i in range(len(p95))],
            "p95_ms": p95,
            "context_tokens": tokens,
            "pareto_latency": True,
            "pareto_context": True,
        }
    )
    empty = pd.DataFrame()
    return Comparison(
        "m0", "id0", {r: f"id{i}" for i, r in enumerate(runs)}, ["nDCG@10"], "nDCG@10",
        empty, empty, empty, empty, empty, empty, frontier, [], [], {},
    )  # fmt: skip


@pytest.mark.parametrize(
    ("p95", "scale"),
    [([14.2, 15.1, 16.0, 1372.0], "log"), ([14.2, 15.1, 16.0, 21.0], "linear"), ([0.0, 15.1, 1372.0], "linear")],
)
def test_the_frontier_uses_a_log_axis_when_costs_span_decades(p95, scale):
    figure = figure_frontier(comparison(p95, [400.0] * len(p95)))
    latency, tokens = figure.axes[:2]
    assert latency.get_xscale() == scale and tokens.get_xscale() == "linear"
    assert latency.get_xlabel().endswith("log scale") == (scale == "log")
    if scale == "log":
        # the cheap members are apart on the axis: at least a third of its width between 14.2 and 1372
        low, high = latency.get_xlim()
        assert low < 14.2 and high > 1372.0
        spread = (math.log10(1372.0) - math.log10(14.2)) / (math.log10(high) - math.log10(low))
        assert spread > 0.33
        # on a linear axis 14.2 and 16.0 would be 0.13% of the range apart; on this one over 1%
        gap = (math.log10(16.0) - math.log10(14.2)) / (math.log10(high) - math.log10(low))
        assert gap > 0.01


def test_an_evaluation_record_says_which_clock_and_load_its_latency_was_read_under():
    import json
    import os

    from conftest import ROOT

    from rageval.config.load import load_config
    from rageval.experiment.run import run_experiment
    from rageval.tracking.records import LATENCY_CLOCK, LATENCY_TAG, all_metrics, evaluation_record, latency_text

    result = run_experiment(load_config(ROOT / "params" / "bm25.yaml"))
    record = evaluation_record(result)
    recorded = json.loads(record.files["metrics.json"])["latency"]
    assert "latency/total/p95_ms" not in record.metrics  # no bare number: a table row and the tag
    p95 = all_metrics(record.metrics, record.tables["more_metrics"])["latency/total/p95_ms"]
    assert recorded["p95_ms"] == p95 and recorded["clock"] == LATENCY_CLOCK
    assert recorded["cpus"] == len(os.sched_getaffinity(0)) and 0 <= recorded["load_1min"] < 1000
    assert record.tags[LATENCY_TAG].startswith(f"p95 {p95:.1f} ms, wall clock, load ")
    assert latency_text({"p95_ms": 1372.04, "load_1min": 9.5, "cpus": 2}) == (
        "p95 1372.0 ms, wall clock, load 9.5 on 2 CPUs (busy: noisy)"
    )
    assert latency_text({"p95_ms": 14.65, "load_1min": 0.4, "cpus": 8}) == "p95 14.7 ms, wall clock, load 0.4 on 8 CPUs"
    assert (
        latency_text({"p95_ms": None, "load_1min": None, "cpus": 8}) == "no latency recorded, wall clock, load unknown"
    )
