"""The columns a run adds to its experiment (issue 25): a comparison's headline metrics and its
deltas table, the role tags, an evaluation run's readable params, the one owner tag."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import ROOT

from rageval.analysis.comparison import Comparison


def comparison(deltas: dict[str, float]) -> Comparison:
    """Two measures over all queries, the baseline and one row per candidate and measure."""
    rows = [{"run": "base", "role": "baseline", "measure": m, "level": "passage", "delta": None, "p_holm": None}
            for m in ("nDCG@10", "R@5")]  # fmt: skip
    for i, (run, delta) in enumerate(deltas.items()):
        rows.append(
            {
                "run": run,
                "role": "candidate",
                "measure": "nDCG@10",
                "level": "passage",
                "delta": delta,
                "p_holm": 0.01 * (i + 1),
            }
        )
        rows.append(
            {"run": run, "role": "candidate", "measure": "R@5", "level": "passage", "delta": -delta, "p_holm": 0.5}
        )
    table = pd.DataFrame(rows).assign(slice="all")
    empty = pd.DataFrame()
    return Comparison(
        "base", "id0", {r: f"id{r}" for r in deltas}, ["nDCG@10", "R@5"], "nDCG@10",
        table, empty, empty, empty, empty, empty, empty, [], [], {},
    )  # fmt: skip


def test_a_comparison_logs_the_best_candidates_headline_and_every_delta_as_a_table_row():
    made = comparison({"a": 0.01, "b": 0.05, "c": -0.02})
    assert made.best() == "b"
    assert made.metrics() == pytest.approx({"delta_nDCG_at_10": 0.05, "p_holm_nDCG_at_10": 0.02})
    deltas = made.deltas()
    assert list(deltas.columns) == ["run", "measure", "level", "delta", "p_holm"]
    assert len(deltas) == 6 and set(deltas["run"]) == {"a", "b", "c"}  # 3 candidates x 2 measures
    assert deltas.set_index(["run", "measure"]).loc[("c", "R@5"), "delta"] == pytest.approx(0.02)
    assert comparison({}).metrics() == {} and comparison({}).best() is None


def test_role_tags_are_two_fixed_keys_whatever_the_run_ids():
    from rageval.tracking.records import role_tags

    assert role_tags("b1", ["c1", "c2"]) == {"rageval.baseline": "b1", "rageval.candidates": "c1,c2"}
    assert role_tags(None, ["c1", None]) == {"rageval.candidates": "c1"} and role_tags(None, []) == {}


def test_an_evaluation_runs_params_are_a_readable_few():
    from rageval.config.load import load_config
    from rageval.workflows.run import run_params

    config = load_config(ROOT / "params" / "hybrid-rerank-dedup-filter.yaml", ["final_k=7"])
    params = run_params(config, ["final_k=7"])
    assert params["pipeline"] == "bm25 → dense → rrf → rerank → filter → dedup"
    assert params["chunking"] == "markdown 200/30 minilm" and params["final_k"] == 7
    assert params["measures"] == "nDCG@10, R@5, R@20, R@100, Hit@5, MRR, P@5, AP"
    assert params["rageval.overrides"] == ["final_k=7"] and "split" not in params  # the tag rageval.split
    # what a comparison checks is still there, one param each (rageval.analysis.CONTRACT_PARAMS)
    from rageval.analysis import CONTRACT_PARAMS

    assert set(CONTRACT_PARAMS) <= params.keys() and len(params) == 9
    # the evaluation options are one param, read back option by option (older runs: a param each)
    from rageval.analysis.comparability import evaluation_options

    assert params["evaluation"] == "ties=docid-asc; duplicates=keep-first; relevance=1; gain=grade"
    older = {f"evaluation.{k}": v for k, v in evaluation_options(params).items()}
    assert evaluation_options(older) == evaluation_options(params) == {
        "ties": "docid-asc", "duplicates": "keep-first", "relevance": "1", "gain": "grade"
    }  # fmt: skip
    assert not [k for k in params if k.startswith(("retrieval.", "measure_definition.", "chunking."))]


def test_the_owner_is_one_json_tag_and_older_runs_one_tag_per_field_are_still_read():
    import os
    import socket

    from rageval.tracking.owners import OWNER_TAG, PID_TAG, owner_fields, owner_of, owner_tags

    tags = owner_tags()
    assert list(tags) == [OWNER_TAG] and json.loads(tags[OWNER_TAG])["pid"] == str(os.getpid())
    older = {"rageval.owner.host": socket.gethostname(), PID_TAG: str(os.getpid()), "rageval.owner.started": "0"}
    assert owner_fields(older) == {"host": socket.gethostname(), "pid": str(os.getpid()), "started": "0"}
    assert owner_of(older).state == "dead"  # our PID, started at the epoch: reused, so that owner is gone
    assert owner_of(tags).state == "alive"
    assert owner_of({OWNER_TAG: "not json"}).state == "unknown"
