"""Issue 28 item 6: every count a user gives has a bound, and the limit is in the error (the sweep's
``workers``, ``final_k`` and ``evaluation.depth`` are in tests/test_reliability3.py)."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import ROOT

from rageval.benchmark.loading import load_benchmark
from rageval.config.load import load_config
from rageval.errors import BenchmarkError, ConfigError
from rageval.judging.pooling import MAX_POOL_DEPTH, pool

BM25 = ROOT / "params" / "bm25.yaml"


@pytest.mark.parametrize(
    ("override", "field", "limit"),
    [
        ("context.max_tokens=1000000000", "context.max_tokens", "10000000"),
        ("chunking.size=1000000000", "chunking.size", "100000"),
        ("final_k=10001", "final_k", "10000"),
        ("evaluation.depth=10001", "evaluation.depth", "10000"),
    ],
)
def test_a_count_past_its_bound_is_refused_with_the_limit(override, field, limit):
    with pytest.raises(ConfigError) as raised:
        load_config(BM25, [override])
    (problem,) = raised.value.problems
    assert problem.file == f"--set {override}" and problem.field == field  # the override is the source
    assert f"less than or equal to {limit}" in problem.message


@pytest.mark.parametrize(
    "override", ["context.max_tokens=0", "chunking.size=0", "final_k=-1", "failures.max_fraction=2"]
)
def test_a_count_below_its_bound_is_refused(override):
    with pytest.raises(ConfigError) as raised:
        load_config(BM25, [override])
    assert raised.value.problems[0].field == override.split("=")[0]


def test_the_largest_allowed_counts_load():
    config = load_config(BM25, ["context.max_tokens=10000000", "final_k=10000", "chunking.size=100000"])
    assert (config.context.max_tokens, config.final_k, config.chunking.size) == (10_000_000, 10_000, 100_000)


@pytest.mark.parametrize("depth", [0, -3, MAX_POOL_DEPTH + 1, 10**9])
def test_a_pool_depth_past_its_bounds_is_refused_with_the_limit(depth):
    bench = load_benchmark(ROOT / "rageval" / "demo")
    rankings = {"r": pd.DataFrame({"query_id": ["q"], "rank": [1], "chunk_id": ["c"], "parent_id": ["d"]})}
    with pytest.raises(BenchmarkError) as raised:
        pool(rankings, bench, "dev", depth)
    (problem,) = raised.value.problems
    assert problem.file == "--depth" and f"from 1 to {MAX_POOL_DEPTH} (got {depth})" in problem.message
    assert problem.fix and "at most 1000" in problem.fix


@pytest.mark.parametrize(
    ("stage", "field"),
    [({"type": "bm25"}, "candidates"), ({"type": "rerank", "model": "m"}, "top_n")],
)
def test_a_stage_count_past_its_limit_names_the_limit(stage, field):
    from pydantic import ValidationError

    from rageval.retrieval.schema import MAX_CANDIDATES, RetrievalConfig

    first = [] if stage["type"] == "bm25" else [{"type": "bm25"}]  # a reranker needs an input
    with pytest.raises(ValidationError, match=f"less than or equal to {MAX_CANDIDATES}"):
        RetrievalConfig.model_validate({"stages": [*first, {**stage, field: MAX_CANDIDATES + 1}]})
    assert RetrievalConfig.model_validate({"stages": [*first, {**stage, field: MAX_CANDIDATES}]})


def test_gate_samples_past_the_limit_name_the_limit(tmp_path):
    import yaml

    from rageval.analysis.gate_policy import MAX_RESAMPLES, load_policy
    from rageval.errors import PolicyError

    policy = yaml.safe_load((ROOT / "params" / "gates" / "release.yaml").read_text())
    path = tmp_path / "gate.yaml"
    path.write_text(yaml.safe_dump({**policy, "samples": MAX_RESAMPLES + 1}))
    with pytest.raises(PolicyError) as refused:
        load_policy(path)
    assert refused.value.problems[0].field == "samples"
    assert str(MAX_RESAMPLES) in refused.value.problems[0].message
