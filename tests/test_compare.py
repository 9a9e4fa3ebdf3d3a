"""Comparing runs: comparability refusals, significance tables, curves and diffs by hand, and the
comparison notebook end to end."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest
from conftest import ROOT

from rageval import analysis as cmp
from rageval.analysis import export as cmp_export
from rageval.errors import ComparisonError
from rageval.evaluation import evaluate
from rageval.tracking.records import all_metrics
from rageval.tracking.store import RunInfo, Tracker
from rageval.workflows.readback import load_inputs

BM25 = ROOT / "params" / "bm25.yaml"
HASHES = {"rageval.hash.corpus": "c" * 64, "rageval.hash.cases": "d" * 64, "rageval.hash.qrels": "e" * 64}


def info(run_id: str, sealed: bool = True, params: dict | None = None, **tags: str) -> RunInfo:
    base = {**HASHES, "rageval.split": "dev", "rageval.level": "passage", "rageval.chunking.hash": "abc123"}
    base.update({k.replace("__", "."): v for k, v in tags.items()})
    return RunInfo(
        run_id,
        run_id,
        "0",
        "FINISHED" if sealed else "FAILED",
        sealed,
        {"metrics.contract": "rageval-metrics/1", **(params or {})},
        {},
        base,
        "",
    )


def record_run(
    store: str,
    *,
    split: str = "dev",
    overrides: Sequence[str] = (),
    experiment: str = "compare-tests",
    name: str | None = None,
    tags: dict[str, str] | None = None,
    family: str | None = None,
) -> str:
    """A sealed evaluation run made in this process (the notebook-free path of ``rageval run``)."""
    from rageval.benchmark.loading import load_benchmark
    from rageval.config.load import dump_config, load_config
    from rageval.experiment.run import run_experiment
    from rageval.workflows.guards import record_release_evaluation
    from rageval.workflows.run import run_params, run_tags

    config = load_config(BM25, overrides, split=split)
    bench = load_benchmark(config.benchmark)
    tracker = Tracker(store)
    run_id = tracker.create_run(
        experiment,
        name or f"{config.name}@{split}",
        params=run_params(config, list(overrides)),
        tags={**run_tags(config, bench, BM25, family), **(tags or {})},
        files={"config.yaml": dump_config(config).encode()},
    )
    if split == "release":
        record_release_evaluation(tracker, run_id, bench, family or config.name)
    tracker.log_result(run_id, run_experiment(config, bench))
    tracker.seal(run_id)
    return run_id


# --------------------------------------------------------------------------- comparability


def test_differences_name_each_mismatch():
    found = cmp.differences(info("base0000"), info("cand0000", rageval__hash__qrels="f" * 64, rageval__split="release"))
    assert len(found) == 2
    assert found[0].startswith(
        "qrels hash differs (rageval.hash.qrels): baseline base0000 has eeeeeeeeeeee…, candidate cand0000 has ffffffffffff…"
    )
    assert found[1].startswith("split differs (rageval.split)") and "'dev'" not in found[1] and "dev" in found[1]


def test_chunking_matters_only_where_passages_were_matched_by_chunk_id():
    passage = cmp.differences(info("a"), info("b", rageval__chunking__hash="zzz999"))
    assert passage == [
        "chunking differs (rageval.chunking.hash) and passage-level measures count chunks: baseline a has abc123, candidate b has zzz999"
    ]
    # Graded on judged spans (rageval-metrics/4 on), runs with different chunkings compare at passage level.
    spans = {"metrics.contract": "rageval-metrics/4"}
    assert cmp.differences(info("a", params=spans), info("b", params=spans, rageval__chunking__hash="zzz999")) == []
    document = cmp.differences(
        info("a", rageval__level="document"), info("b", rageval__level="document", rageval__chunking__hash="zzz999")
    )
    assert document == []
    contract = cmp.differences(info("a"), info("b", params={"metrics.contract": "rageval-metrics/2"}))
    assert contract and "metric contract differs" in contract[0]
    # the evaluation options, one param now (a param each before): the option that differs is named
    ties = cmp.differences(
        info("a", params={"evaluation": "ties=docid-asc; duplicates=keep-first; relevance=1; gain=grade"}),
        info("b", params={"evaluation.ties": "score-only", "evaluation.duplicates": "keep-first",
                          "evaluation.relevance": "1", "evaluation.gain": "grade"}),
    )  # fmt: skip
    assert ties == ["metric contract differs (evaluation: ties): baseline a has docid-asc, candidate b has score-only"]


def test_check_comparable_refuses_unless_allowed():
    with pytest.raises(ComparisonError, match="not comparable") as raised:
        cmp.check_comparable(info("a"), [info("b", rageval__hash__qrels="f" * 64)])
    assert "qrels hash" in raised.value.differences[0] and "--allow-mismatch" in str(raised.value)
    allowed = cmp.check_comparable(info("a"), [info("b", rageval__hash__qrels="f" * 64)], allow_mismatch=True)
    assert len(allowed) == 1
    with pytest.raises(ComparisonError, match="FAILED and not sealed"):
        cmp.check_comparable(info("a"), [info("b", sealed=False)], allow_mismatch=True)


# --------------------------------------------------------------------------- tables by hand


def test_significance_table_by_hand():
    queries = ["q1", "q2", "q3", "q4"]
    base = pd.DataFrame({"m": [0.0, 0.0, 0.0, 0.5]}, index=queries)
    cand = pd.DataFrame({"m": [1.0, 0.5, 0.25, 0.0]}, index=queries)
    slices = {"q1": ["a"], "q2": ["a"], "q3": ["b"], "q4": ["b"]}
    table = cmp.significance_table({"base": base, "cand": cand}, "base", slices, ["m"], resamples=2000)
    rows = table.set_index(["run", "slice"])
    overall = rows.loc[("cand", "all")]
    assert overall["mean"] == pytest.approx(0.4375) and overall["delta"] == pytest.approx(0.3125)
    assert (overall["wins"], overall["ties"], overall["losses"]) == (3, 0, 1)
    assert overall["p_value"] == pytest.approx(0.5)  # the 4-pair enumeration of test_stats
    # slice a: differences 1, .5 → sums ±1.5, ±.5: 2 of 4 patterns reach 1.5; slice b: .25, −.5 → all 4 reach .25
    assert rows.loc[("cand", "a"), "p_value"] == pytest.approx(0.5)
    assert rows.loc[("cand", "b"), "p_value"] == pytest.approx(1.0)
    # Holm over the candidate's three tests: .5 x 3 → 1, .5 x 2 = 1, 1 → all 1
    assert rows.loc["cand", "p_holm"].tolist() == pytest.approx([1.0, 1.0, 1.0])
    assert rows.loc[("base", "all"), "mean"] == pytest.approx(0.125) and np.isnan(rows.loc[("base", "all"), "delta"])
    assert rows.loc[("base", "a"), "queries"] == 2
    low, high = overall["delta_ci_low"], overall["delta_ci_high"]
    assert -0.5 <= low < 0.3125 < high <= 1.0


def test_per_query_deltas_pair_only_queries_both_runs_evaluated():
    index = pd.Index(["q1", "q2", "q3"], name="query_id")
    base = pd.DataFrame({"m": [0.5, np.nan, 1.0]}, index=index)
    cand = pd.DataFrame({"m": [0.75, 0.5, 0.0]}, index=pd.Index(["q1", "q2", "q4"], name="query_id"))
    deltas = cmp.per_query_deltas({"b": base, "c": cand}, "b", ["m"])
    # q2: the baseline has no value; q3 and q4: only one run evaluated them
    assert deltas.to_dict("records") == [
        {"run": "c", "query_id": "q1", "measure": "m", "baseline": 0.5, "candidate": 0.75, "delta": 0.25}
    ]
    assert cmp.per_query_deltas({"b": base}, "b", ["m"]).columns.tolist() == [
        "run",
        "query_id",
        "measure",
        "baseline",
        "candidate",
        "delta",
    ]


def test_holm_family_is_every_measure_and_slice_of_a_candidate():
    rng = np.random.default_rng(0)
    index = [f"q{i}" for i in range(30)]
    base = pd.DataFrame({"x": rng.random(30), "y": rng.random(30)}, index=index)
    cand = base + pd.DataFrame({"x": 0.3, "y": 0.0}, index=index) * rng.random((30, 2))
    slices = {q: (["odd"] if i % 2 else ["even"]) for i, q in enumerate(index)}
    table = cmp.significance_table({"b": base, "c": cand}, "b", slices, ["x", "y"], resamples=500, samples=2000)
    block = table[table["run"] == "c"]
    assert len(block) == 6  # (all, even, odd) x (x, y)
    from rageval.evaluation.stats import holm

    assert block["p_holm"].to_numpy() == pytest.approx(holm(block["p_value"].to_numpy()))


def test_recall_curve_by_hand_matches_ir_measures():
    ranking = pd.DataFrame(
        {
            "query_id": ["q1", "q1", "q1", "q2"],
            "doc_id": ["d1", "d2", "d3", "d9"],
            "rank": [1, 2, 3, 1],
            "score": [3.0, 2.0, 1.0, 1.0],
        }
    )
    qrels = {"q1": {"d2": 2, "d4": 1, "d5": 0}, "q2": {"d9": 1}, "q3": {"d7": 0}}
    curve = cmp.recall_curve(ranking, qrels, ["q1", "q2", "q3"], [1, 2, 3])
    # q1: relevant d2, d4 → 0, 1/2, 1/2; q2: 1, 1, 1; q3 has no relevant item and is not averaged
    assert curve.tolist() == pytest.approx([0.5, 0.75, 0.75])
    reference = evaluate(ranking, qrels, ["R@1", "R@2", "R@3"]).aggregates
    assert curve.tolist() == pytest.approx(reference.tolist())


def test_pareto_frontier():
    points = pd.DataFrame({"quality": [0.5, 0.6, 0.55, 0.6, 0.4], "cost": [10, 20, 25, 30, 5]})
    assert cmp.pareto(points, "quality", "cost").tolist() == [True, True, False, False, True]


def test_total_latency_prefers_the_recorded_total():
    stages = pd.DataFrame(
        {
            "query_id": ["a", "a", "a", "b", "b", "b"],
            "stage": ["bm25", "bm25:search", "fetch"] * 2,
            "seconds": [0.010, 0.008, 0.002, 0.020, 0.015, 0.004],
        }
    )
    # no total: stages summed, steps not added again: a 12 ms, b 24 ms → p95 = 12 + 0.95 x 12
    assert cmp.total_p95_ms(stages) == pytest.approx(23.4)
    with_total = pd.concat([stages, pd.DataFrame({"query_id": ["a", "b"], "stage": "total", "seconds": [0.1, 0.2]})])
    assert cmp.total_p95_ms(with_total) == pytest.approx(195.0)


def test_explain_query_lists_relevant_ranks_and_moved_chunks():
    judgments = cmp.Judgments(
        level="document",
        qrels={"q": {"good": 3, "meh": 0}},
        queries={"q": "the question"},
        texts={"good#h-0": "The   good\nanswer.", "bad#h-0": "Noise.", "meh#h-0": "Meh."},
    )

    def chunks(ids: list[str]) -> pd.DataFrame:
        return pd.DataFrame({"query_id": "q", "chunk_id": ids, "rank": range(1, len(ids) + 1)})

    def docs(ids: list[str]) -> pd.DataFrame:
        return pd.DataFrame({"query_id": "q", "doc_id": ids, "rank": range(1, len(ids) + 1)})

    before = (docs(["bad", "meh", "good"]), chunks(["bad#h-0", "meh#h-0", "good#h-0"]))
    after = (docs(["good", "meh"]), chunks(["good#h-0", "meh#h-0"]))
    why = cmp.explain_query("q", judgments, before, after)
    assert why["query"] == "the question"
    assert why["relevant"] == [{"item": "good", "grade": 3, "before": 3, "after": 1}]
    assert [(m["chunk_id"], m["before"], m["after"], m["grade"]) for m in why["moved"]] == [
        ("bad#h-0", 1, None, 0),
        ("good#h-0", 3, 1, 3),
    ]
    assert why["moved"][1]["snippet"] == "The good answer."


def test_explain_query_on_spans_grades_each_runs_own_passages():
    from rageval.evaluation.spans import evidence_from_rows

    evidence = evidence_from_rows(["q"], [("q", "d", 100, 140, 3), ("q", "d", 500, 520, 1)])
    judgments = cmp.Judgments(level="passage", qrels=evidence, queries={"q": "the question"}, texts={})

    def ranking(rows: list[tuple[str, int, int]]) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "query_id": "q",
                "doc_id": [i for i, _, _ in rows],
                "chunk_id": [i for i, _, _ in rows],
                "rank": range(1, len(rows) + 1),
                "document_id": "d",
                "start": [a for _, a, _ in rows],
                "end": [b for _, _, b in rows],
            }
        )

    # Two chunkings: the baseline's 200-character chunks, the candidate's own 50-character passages.
    before = ranking([("d#a-2", 400, 600), ("d#a-0", 0, 200)])
    after = ranking([("d#span:90-140", 90, 140), ("d#span:700-750", 700, 750)])
    why = cmp.explain_query("q", judgments, (before, before), (after, after))
    assert why["relevant"] == [
        {"item": "d:100-140", "grade": 3, "before": 2, "after": 1},
        {"item": "d:500-520", "grade": 1, "before": 1, "after": None},
    ]
    grades = {m["chunk_id"]: m["grade"] for m in why["moved"]}
    assert grades["d#span:90-140"] == 3 and grades["d#span:700-750"] is None  # unjudged, not grade 0


def test_runs_with_different_chunkings_compare_at_passage_level(store):
    baseline = record_run(store, name="chunks-200")
    other = record_run(store, overrides=["chunking.size=80", "chunking.overlap=0"], name="chunks-80")
    statistics = cmp.Statistics(resamples=500, samples=500)
    comparison = cmp.compare(load_inputs(Tracker(store), baseline, [other]), statistics=statistics)
    overall = comparison.overall.set_index(["run", "level", "measure"])
    metrics = Tracker(store).run(other).metrics
    assert overall.loc[("chunks-80", "passage", "nDCG@10"), "mean"] == pytest.approx(metrics["nDCG_at_10"])
    costs = comparison.costs.set_index("run")
    more = all_metrics(metrics, Tracker(store).sealed_frame(other, "tables/more_metrics.parquet"))
    assert costs.loc["chunks-80", "evidence_recall"] == pytest.approx(more["evidence_recall"])
    assert "evidence recall" in cmp_export.results_table(comparison).columns


def test_overview_draws_one_measure_per_query_and_per_slice():
    from rageval.benchmark.loading import load_benchmark
    from rageval.config.load import load_config
    from rageval.experiment.run import run_experiment

    config = load_config(BM25, [], split="dev")
    result = run_experiment(config, load_benchmark(config.benchmark))
    left, right = cmp.overview(result, "R@5").axes
    evaluated = int(result.evaluation.per_query["R@5"].notna().sum())
    assert left.get_title() == f"R@5 per query (n={evaluated})"
    assert sum(p.get_height() for p in left.patches) == evaluated  # every evaluated query in one bin
    assert len(right.patches) == int(result.slices["R@5"].notna().sum())


# --------------------------------------------------------------------------- runs from a store


@pytest.fixture(scope="module")
def pair(store) -> tuple[str, str, str]:
    """Two release runs of one family: the second is its family's second release evaluation."""
    kwargs = {"split": "release", "family": "compare-tests-family"}
    baseline = record_run(store, name="baseline", **kwargs)
    candidate = record_run(store, overrides=["retrieval.stages.0.candidates=3"], name="three-candidates", **kwargs)
    return store, baseline, candidate


def test_compare_in_process_agrees_with_the_runs_metrics(pair):
    store, baseline, candidate = pair
    tracker = Tracker(store)
    statistics = cmp.Statistics(resamples=1000, samples=2000)
    comparison = cmp.compare(load_inputs(tracker, baseline, [candidate]), statistics=statistics)
    assert comparison.primary == "nDCG@10" and list(comparison.candidates) == ["three-candidates"]
    # A run read back carries the metric contract it recorded (metric_contract.json).
    from rageval.evaluation import CONTRACT

    assert tracker.run_artifacts(baseline).contract["version"] == CONTRACT
    overall = comparison.overall.set_index(["run", "measure"])
    for run_id, label in ((baseline, "baseline"), (candidate, "three-candidates")):
        metrics = tracker.run(run_id).metrics
        assert overall.loc[(label, "nDCG@10"), "mean"] == pytest.approx(metrics["nDCG_at_10"])
        curve = comparison.recall[comparison.recall["run"] == label].set_index("k")["recall"]
        for k in (5, 20, 100):
            assert curve[k] == pytest.approx(metrics[f"R_at_{k}"])
    # three candidates cannot recall more at 20 than at 3
    assert overall.loc[("three-candidates", "R@20"), "delta"] < 0
    assert overall.loc[("three-candidates", "R@20"), "p_value"] < 0.01
    slices = comparison.slice_view("R@20")
    assert slices.loc["all", "queries"] == overall.loc[("baseline", "R@20"), "queries"]
    assert "unanswerable" in slices.index and slices.loc["unanswerable", "queries"] == 0
    losses = comparison.diffs[comparison.diffs["change"] == "loss"]
    assert len(losses) and losses["query"].str.len().min() > 0 and (losses["delta"] < 0).all()
    assert losses["relevant_ranks"].str.contains("→").all()
    assert set(cmp.figures(comparison)) == {"query_deltas.png", "slices.png", "recall_at_k.png", "latency.png"}


def test_comparing_different_qrels_hashes_is_refused_before_any_run(pair, tmp_path):
    from rageval.workflows.compare import ComparisonRequest, execute_comparison

    store, baseline, _ = pair
    other = record_run(store, tags={"rageval.hash.qrels": "0" * 64}, name="other-judgments")
    before = {r.run_id for r in Tracker(store).runs()}
    with pytest.raises(ComparisonError, match="qrels hash differs") as raised:
        execute_comparison(ComparisonRequest(baseline, [other]), tracker=Tracker(store))
    assert "--allow-mismatch" in str(raised.value)
    assert {r.run_id for r in Tracker(store).runs()} == before


def test_unsealed_runs_are_refused(pair):
    from rageval.workflows.compare import ComparisonRequest, execute_comparison

    store, baseline, _ = pair
    tracker = Tracker(store)
    open_run = tracker.create_run("compare-tests", "open", params={}, tags={})
    with pytest.raises(ComparisonError, match="RUNNING and not sealed"):
        execute_comparison(ComparisonRequest(baseline, [open_run]), tracker=Tracker(store))


@pytest.mark.e2e
def test_compare_logs_a_sealed_run_with_the_executed_notebook_and_figures(pair):
    from rageval.workflows.compare import ComparisonRequest, execute_comparison

    store, baseline, candidate = pair
    request = ComparisonRequest(
        baseline,
        [candidate],
        notebook_parameters={"resamples": 1000, "samples": 2000},
        max_release_evaluations=1,
    )
    outcome = execute_comparison(request, tracker=Tracker(store))
    tracker = Tracker(store)
    run = tracker.run(outcome.run_id)
    assert run.sealed and run.status == "FINISHED" and tracker.verify(outcome.run_id) == []
    assert run.tags["rageval.kind"] == "comparison" and run.tags["rageval.baseline"] == baseline
    assert run.tags["rageval.candidates"] == candidate and "rageval.compare.allow_mismatch" not in run.tags
    # no tag repeats another's value under its own key: the split is the evaluation runs' column
    assert run.tags["rageval.split"] == tracker.run(baseline).tags["rageval.split"]
    assert not {"rageval.compare.baseline", "rageval.compare.candidates", "rageval.compare.split"} & run.tags.keys()
    # two release evaluations of the candidate's family, more than the 1 allowed: warned and recorded
    (warning,) = outcome.warnings
    assert "after 2 release evaluations of family 'compare-tests-family' (more than 1)" in warning
    assert run.tags["rageval.warning.release"] == warning
    root = Path(run.artifact_uri.removeprefix("file://"))
    for name in (
        "comparison.csv",
        "comparison.parquet",
        "overall.csv",
        "slices.csv",
        "per_query_diff.csv",
        "recall_at_k.csv",
        "figures/query_deltas.png",
        "figures/slices.png",
        "figures/recall_at_k.png",
        "figures/latency.png",
        "notebook/compare.ipynb",
    ):
        assert (root / name).is_file(), name
    assert (root / "figures" / "slices.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    notebook = nbformat.read(root / "notebook" / "compare.ipynb", as_version=4)
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not any(o.output_type == "error" for o in outputs)
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 4
    assert not any(o.output_type == "stream" and o.get("name") == "stderr" for o in outputs)
    overall = outcome.overall.set_index(["run", "measure"])
    assert overall.loc[("three-candidates", "R@20"), "delta"] < 0
    # every candidate × measure is a row of tables/deltas, no metric key; the metrics hold the headline
    deltas = tracker.sealed_frame(run.run_id, "tables/deltas.parquet").set_index(["run", "measure"])
    assert deltas.loc[("three-candidates", "R@20"), "delta"] == pytest.approx(
        overall.loc[("three-candidates", "R@20"), "delta"]
    )
    assert deltas.loc[("three-candidates", "R@20"), "p_holm"] == pytest.approx(
        overall.loc[("three-candidates", "R@20"), "p_holm"]
    )
    assert run.metrics == pytest.approx(
        {
            "delta_nDCG_at_10": overall.loc[("three-candidates", "nDCG@10"), "delta"],
            "p_holm_nDCG_at_10": overall.loc[("three-candidates", "nDCG@10"), "p_holm"],
        }
    )


@pytest.mark.parametrize("name", ["evaluate.ipynb", "compare.ipynb"])
def test_notebooks_are_committed_without_outputs_and_display_through_safety(name):
    notebook = nbformat.read(ROOT / "notebooks" / name, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert sum("parameters" in cell.metadata.get("tags", []) for cell in code) == 1
    assert all(cell.outputs == [] and cell.execution_count is None for cell in code)
    source = "\n".join(cell.source for cell in code)
    # Every table goes through rageval.safety.styled: pandas' own Styler escapes nothing by default.
    assert ".style" not in source and "styled(" in source


def test_the_results_table_rounds_marks_significance_and_renders_markdown_and_latex(pair):
    import dataclasses

    store, baseline, candidate = pair
    tracker = Tracker(store)
    statistics = cmp.Statistics(resamples=200, samples=500)
    comparison = cmp.compare(load_inputs(tracker, baseline, [candidate]), statistics=statistics)
    table = cmp.results_table(comparison)
    assert list(table.index) == ["baseline", "three-candidates"]
    assert list(table.columns) == [
        *comparison.measures,
        "p95 ms",
        "context tokens",
        "evidence recall",
        "evidence precision",
    ]
    mean = comparison.overall.set_index(["run", "measure"]).loc[("baseline", "nDCG@10"), "mean"]
    assert table.loc["baseline", "nDCG@10"] == f"{mean:.4f}"
    p95 = all_metrics({}, tracker.sealed_frame(baseline, "tables/more_metrics.parquet"))["latency/total/p95_ms"]
    assert table.loc["baseline", "p95 ms"] == f"{p95:.1f}"

    # A significant gain and a significant loss are marked; the baseline never is.
    forced = comparison.table.copy()
    rows = (forced["run"] == "three-candidates") & (forced["slice"] == "all")
    forced.loc[rows & (forced["measure"] == "nDCG@10"), ["delta", "p_holm"]] = [0.1, 0.001]
    forced.loc[rows & (forced["measure"] == "AP"), ["delta", "p_holm"]] = [-0.1, 0.001]
    forced.loc[rows & (forced["measure"] == "MRR"), ["delta", "p_holm"]] = [0.1, 0.2]
    marked = cmp.results_table(dataclasses.replace(comparison, table=forced))
    assert marked.loc["three-candidates", "nDCG@10"].endswith("▲")
    assert marked.loc["three-candidates", "AP"].endswith("▼")
    assert not marked.loc["three-candidates", "MRR"].endswith(("▲", "▼"))
    assert not any(str(v).endswith(("▲", "▼")) for v in marked.loc["baseline"])

    markdown = cmp.render(dataclasses.replace(comparison, table=forced), "markdown")
    assert markdown.splitlines()[0].startswith("| run | nDCG@10 |") and markdown.splitlines()[1].startswith("|---|---:")
    latex = cmp.render(dataclasses.replace(comparison, table=forced), "latex")
    assert r"\toprule" in latex and r"$^{\uparrow}$" in latex and "nDCG@10" in latex and "three-candidates" in latex
    # the p95 column says what it is: each run's recorded figure, with its clock and load (the run's tag)
    recorded = {
        run: tracker.run(i).tags["rageval.latency"]
        for run, i in (("baseline", baseline), ("three-candidates", candidate))
    }
    assert all(text.startswith("p95 ") and ", wall clock, load " in text for text in recorded.values())
    note = f"(baseline: {recorded['baseline']}; three-candidates: {recorded['three-candidates']})"
    assert note in markdown and note in cmp.render(comparison, "text") and "not a paired timing" in markdown
    assert "`rageval gate` times the pair interleaved" in markdown
    assert "the gate run's results.md and its metric p95_cpu_ratio" in markdown
    older = dataclasses.replace(comparison, costs=comparison.costs.assign(latency="clock and load not recorded"))
    assert "(baseline: clock and load not recorded;" in cmp.render(older, "markdown")
