"""Human review of a gate: selection on a real gate pair, the sheet's round trip and safety, strict
decisions, incomplete reviews, resolved rejections, the sealed review run and the needs-judgment pool."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import ROOT
from test_compare import record_run
from typer.testing import CliRunner

from rageval.analysis import wide_scores
from rageval.benchmark.loading import load_benchmark
from rageval.errors import InputError
from rageval.judging import read_pool
from rageval.judging.review_sheets import write_review
from rageval.release.review import changed, lost_evidence, review_view, top_k
from rageval.tracking.store import Tracker
from rageval.workflows.gate import execute_gate
from rageval.workflows.release.review import ReviewRequest, record_review, start_review

FILTERED = 'retrieval.stages=[{"type": "bm25", "k1": %s, "b": %s, "candidates": %s}, {"type": "filter"}]'


@pytest.fixture(scope="module")
def gate(store, tmp_path_factory):
    """A sealed gate run of a filtered BM25 baseline against a re-tuned candidate (release
    split), under the shipped release policy without its latency timing (which costs seconds)."""
    runs = {
        role: record_run(
            store,
            split="release",
            overrides=[FILTERED % values],
            name=f"review-{role}",
            experiment="review-tests",
            family="review-tests-family",
        )
        for role, values in (("baseline", (0.9, 0.4, 100)), ("candidate", (1.2, 0.75, 100)))
    }
    data = yaml.safe_load((ROOT / "params" / "gates" / "release.yaml").read_text())
    data.pop("latency")
    policy = tmp_path_factory.mktemp("policy") / "release.yaml"
    policy.write_text(yaml.safe_dump(data, sort_keys=False))
    outcome = execute_gate(runs["baseline"], runs["candidate"], policy, tracker=Tracker(store))
    return {**runs, "gate": outcome.run_id, "losses": outcome.decision.largest_losses["query_id"].tolist()}


def fill(folder: Path, decide) -> Path:
    """Fill the sheet as a reviewer would, in a spreadsheet: ``decide(row)`` gives (decision, note)."""
    sheet = pd.read_csv(folder / "review.csv", dtype=str, keep_default_na=False)
    for i, row in sheet.iterrows():
        sheet.loc[i, ["decision", "note"]] = decide(row)
    sheet.to_csv(folder / "review.csv", index=False)
    return folder / "review.csv"


def app():
    from rageval.cli import app

    return app


def test_selection_picks_losses_gains_critical_permission_and_flagged_queries(gate, store, tmp_path):
    tracker = Tracker(store)
    started = start_review(ReviewRequest(gate["gate"], tmp_path / "r", n=3, k=5), tracker=tracker)
    reasons = started.manifest["reasons"]
    # Independently of the selection code: the deltas, slices and top lists of the two runs.
    base, cand = tracker.run_artifacts(gate["baseline"]), tracker.run_artifacts(gate["candidate"])
    delta = (wide_scores(cand.per_query)["nDCG@10"] - wide_scores(base.per_query)["nDCG@10"]).sort_values()
    assert started.manifest["measure"] == "nDCG@10"  # the policy's first measure
    worst = delta[delta < 0].index[:3].tolist()
    best = delta[delta > 0].sort_values(ascending=False).index[:3].tolist()
    assert worst and best, "the pair should both lose and gain somewhere"
    assert all("loss" in reasons[q].split("; ") for q in worst)
    assert all("gain" in reasons[q].split("; ") for q in best)
    assert sum("loss" in r.split("; ") for r in reasons.values()) == len(worst)
    bt, ct = top_k(base.rankings, 5), top_k(cand.rankings, 5)
    bench = load_benchmark(ROOT / "rageval" / "demo")
    cases = bench.cases_for("release")
    permission = [c.queryId for c in cases if c.principal and changed(c.queryId, bt, ct)]
    critical = [c.queryId for c in cases if {"permissions", "negation", "exact-term"} & set(c.slice)]
    moved = [q for q in critical if changed(q, bt, ct)]
    assert permission and moved
    assert all("permission" in reasons[q] for q in permission)
    assert all("critical:" in reasons[q] for q in moved)
    assert not any("critical:" in reasons.get(q, "") for q in critical if q not in moved)  # unchanged
    assert all("gate:largest-loss" in reasons[q] for q in gate["losses"])
    # the sheet: one row per selection, the figures and both top lists
    sheet = started.sheet.set_index("query_id")
    assert list(sheet.index) == started.manifest["queries"]
    q = worst[0]
    assert sheet.loc[q, "delta"] == pytest.approx(delta[q])
    assert sheet.loc[q, "lost_evidence"] == "; ".join(lost_evidence(q, bt, ct, bench.qrels("release")))
    assert sheet.loc[q, "baseline_top"].startswith("1. " + bt[q][0][1])
    detail = started.detail
    assert set(detail["query_id"]) == set(sheet.index) and detail["rank"].max() == 5


def test_a_review_round_trip_records_a_sealed_linked_run(gate, store, tmp_path):
    tracker = Tracker(store)
    folder = tmp_path / "r"
    start_review(ReviewRequest(gate["gate"], folder, n=2, k=5), tracker=tracker)
    fill(folder, lambda row: ("accept", "looked fine"))
    result = CliRunner().invoke(app(), ["review", "record", str(folder), "--reviewer", "ana", "--tracking-uri", store])
    assert result.exit_code == 0, result.output
    run_id = result.output.split("review run ")[1].split()[0]
    info = tracker.run(run_id)
    assert info.sealed and tracker.verify(run_id) == []
    tags = info.tags
    assert tags["rageval.kind"] == "review" and tags["rageval.review.gate"] == gate["gate"]
    assert (tags["rageval.baseline"], tags["rageval.candidates"]) == (gate["baseline"], gate["candidate"])
    assert tags["rageval.review.status"] == "complete" and tags["rageval.review.open_rejections"] == "0"
    assert tags["rageval.review.reviewers"] == "ana" and tags["rageval.simulated"] == "false"
    root = Path(info.artifact_uri.removeprefix("file://"))
    record = json.loads((root / "decisions.json").read_text())
    queries = json.loads((folder / "review.json").read_text())["queries"]
    assert [d["query_id"] for d in record["decisions"]] == queries
    assert {d["decision"] for d in record["decisions"]} == {"accept"} and record["reviewers"] == ["ana"]
    assert record["decisions"][0]["source"] == f"{folder / 'review.csv'}:2"
    assert record["counts"]["accept"] == len(queries) and record["undecided"] == []
    assert info.metrics == {"open_rejections": 0, "needs_judgment": 0}  # every other count: decisions.json


def test_bad_decisions_are_refused_naming_file_line_and_field(gate, store, tmp_path):
    tracker = Tracker(store)
    folder = tmp_path / "r"
    start_review(ReviewRequest(gate["gate"], folder, n=2, k=5), tracker=tracker)
    sheet = fill(folder, lambda row: ("accept", ""))
    frame = pd.read_csv(sheet, dtype=str, keep_default_na=False)
    frame.loc[0, "decision"] = "approve"
    frame.loc[1, ["decision", "note"]] = ["reject", ""]
    frame.to_csv(sheet, index=False)
    before = len(tracker.runs("review-tests"))
    with pytest.raises(InputError) as raised:
        record_review(folder, tracker=tracker, reviewer="ana")
    first, second = raised.value.problems
    assert (first.file, first.line, first.field) == (str(sheet), 2, "decision")
    assert "accept" in first.message and "needs-judgment" in first.message
    assert second.field == "note" and "rejection without its rationale" in second.message
    # a CSV record's line is where it starts (the top lists span several lines)
    assert sheet.read_text().splitlines()[second.line - 1].startswith(frame.loc[1, "query_id"] + ",")
    assert len(tracker.runs("review-tests")) == before  # nothing recorded
    frame.loc[0, "decision"], frame.loc[1, "note"] = "accept", "the lost passage is obsolete"
    frame.to_csv(sheet, index=False)
    with pytest.raises(InputError, match="a decision without a reviewer"):
        record_review(folder, tracker=tracker)  # no reviewer column filled, no --reviewer


def test_an_undecided_row_makes_the_review_incomplete(gate, store, tmp_path):
    tracker = Tracker(store)
    folder = tmp_path / "r"
    start_review(ReviewRequest(gate["gate"], folder, n=2, k=5), tracker=tracker)
    with pytest.raises(InputError, match="no row of the sheet has a decision .* is this the blank sheet"):
        record_review(folder, tracker=tracker, reviewer="bo")
    fill(folder, lambda row: ("accept", "") if row.name else ("", ""))  # the first row left blank
    result = CliRunner().invoke(app(), ["review", "record", str(folder), "--reviewer", "bo", "--tracking-uri", store])
    assert result.exit_code == 1 and "1 undecided" in result.output
    run_id = result.output.split("review run ")[1].split()[0]
    info = tracker.run(run_id)
    assert info.sealed and info.tags["rageval.review.status"] == "incomplete"
    record = json.loads(tracker.download(run_id, "decisions.json", folder / "dl").read_text())
    assert len(record["undecided"]) == 1 and info.metrics == {"open_rejections": 0, "needs_judgment": 0}


def test_a_later_review_resolves_an_earlier_rejection(gate, store, tmp_path):
    tracker = Tracker(store)
    first = tmp_path / "first"
    start_review(ReviewRequest(gate["gate"], first, n=2, k=5), tracker=tracker)
    target = json.loads((first / "review.json").read_text())["queries"][0]
    fill(first, lambda row: ("reject", "lost the refund policy") if row["query_id"] == target else ("accept", ""))
    earlier = record_review(first, tracker=tracker, reviewer="ana")
    assert [e["query_id"] for e in earlier.open] == [target]
    assert tracker.run(earlier.run_id).tags["rageval.review.open_rejections"] == "1"

    second = tmp_path / "second"
    started = start_review(ReviewRequest(gate["gate"], second, n=0, k=5, resolves=earlier.run_id), tracker=tracker)
    assert "open-rejection" in started.manifest["reasons"][target]
    fill(second, lambda row: ("accept", ""))
    with pytest.raises(InputError, match="accepting a query an earlier review rejected, without a note"):
        record_review(second, tracker=tracker, reviewer="cy")
    fill(second, lambda row: ("accept", "policy doc moved; the new one is ranked first"))
    later = record_review(second, tracker=tracker, reviewer="cy")
    info = tracker.run(later.run_id)
    assert info.tags["rageval.review.open_rejections"] == "0" and info.tags["rageval.review.resolves"] == earlier.run_id
    assert later.resolved == [
        {
            "query_id": target,
            "note": "lost the refund policy",
            "reviewer": "ana",
            "review": earlier.run_id,
            "resolution": "policy doc moved; the new one is ranked first",
            "resolved_by": "cy",
        }
    ]
    # needs-judgment leaves an earlier rejection open, carried with the review that made it
    third = tmp_path / "third"
    start_review(ReviewRequest(gate["gate"], third, n=0, k=5, resolves=earlier.run_id), tracker=tracker)
    fill(third, lambda row: ("needs-judgment", "") if row["query_id"] == target else ("accept", ""))
    still = record_review(third, tracker=tracker, reviewer="cy")
    assert [(e["query_id"], e["review"]) for e in still.open] == [(target, earlier.run_id)]


def test_scripted_review_is_simulated_and_pools_needs_judgment_queries(gate, store, tmp_path):
    tracker = Tracker(store)
    folder = tmp_path / "r"
    wrong = CliRunner().invoke(
        app(), ["review", "start", gate["baseline"], "--out", str(folder), "--tracking-uri", store]
    )
    assert wrong.exit_code == 1 and "review a gate or comparison run" in wrong.output and not folder.exists()
    started = CliRunner().invoke(
        app(), ["review", "start", gate["gate"], "--out", str(folder), "--tracking-uri", store]
    )
    assert started.exit_code == 0 and "queries to review: fill" in started.output, started.output
    result = CliRunner().invoke(app(), ["review", "record", str(folder), "--scripted", "--tracking-uri", store])
    run_id = result.output.split("review run ")[1].split()[0]
    info = tracker.run(run_id)
    assert info.tags["rageval.simulated"] == "true" and info.tags["rageval.review.reviewers"] == "scripted-demo"
    assert "SIMULATED review" in result.output and info.sealed and tracker.verify(run_id) == []
    record = json.loads((Path(info.artifact_uri.removeprefix("file://")) / "decisions.json").read_text())
    sheet = pd.read_json(folder / "review.jsonl", lines=True).set_index("query_id")
    for d in record["decisions"]:
        row = sheet.loc[d["query_id"]]
        assert d["note"].startswith("scripted: ")
        if "permission" in row["reasons"] and row["lost_evidence"]:
            assert d["decision"] == "reject"
        elif row["delta"] > 0:
            assert d["decision"] == "accept"
    wanted = {d["query_id"] for d in record["decisions"] if d["decision"] == "needs-judgment"}
    assert wanted, "the candidate brings unjudged documents into some top lists"
    manifest = read_pool(folder / "pool")
    assert manifest.items and {item.queryId for item in manifest.items} <= wanted
    assert set(manifest.runs) == {gate["baseline"], gate["candidate"]} and (folder / "pool" / "sheet.csv").is_file()
    assert info.metrics["needs_judgment"] == len(wanted)


def test_the_sheet_neutralises_formulas_and_the_view_escapes_html(tmp_path):
    sheet = pd.DataFrame({"query_id": ["q1"], "query": ['=HYPERLINK("http://x")'], "decision": [""]})
    detail = pd.DataFrame(
        {
            "query_id": ["q1"],
            "rank": [1],
            "baseline_text": ["<script>alert(1)</script>"],
            "baseline_lost": [True],
            "candidate_text": ["+1+2"],
        }
    )
    write_review(tmp_path / "r", {"queries": ["q1"]}, sheet, detail)
    assert "'=HYPERLINK" in (tmp_path / "r" / "review.csv").read_text()
    assert "'+1+2" in (tmp_path / "r" / "side_by_side.csv").read_text()
    with pytest.raises(InputError, match="a review exists here already"):
        write_review(tmp_path / "r", {"queries": ["q1"]}, sheet, detail)
    html = review_view(detail).to_html()
    assert "<script>" not in html and "&lt;script&gt;" in html and "#f8d7da" in html


def test_a_comparison_run_can_be_reviewed(gate, store, tmp_path):
    from rageval.workflows.compare import ComparisonRequest, execute_comparison

    tracker = Tracker(store)
    comparison = execute_comparison(ComparisonRequest(gate["baseline"], [gate["candidate"]]), tracker=tracker).run_id
    request = ReviewRequest(comparison, tmp_path / "r", n=2, k=5, critical=["permissions"])
    started = start_review(request, tracker=tracker)
    assert started.manifest["kind"] == "comparison" and started.manifest["measure"] == "nDCG@10"
    assert started.manifest["candidate"] == gate["candidate"]
    reasons = started.manifest["reasons"].values()
    assert sum("loss" in r.split("; ") for r in reasons) == 2 and any("critical:permissions" in r for r in reasons)
    assert not any("gate:" in r for r in reasons)  # no gate, no largest losses of its decision
    fill(tmp_path / "r", lambda row: ("accept", ""))
    outcome = record_review(tmp_path / "r", tracker=tracker, reviewer="ana")
    assert tracker.run(outcome.run_id).tags["rageval.review.gate"] == comparison and outcome.status == "complete"


def test_select_by_hand():
    from rageval.release.review import Focus, select

    before = pd.Series({"a": 0.9, "b": 0.5, "c": 0.5, "d": 0.2, "e": 0.4})
    after = pd.Series({"a": 0.1, "b": 0.4, "c": 0.5, "d": 0.9, "e": 0.4})
    same, moved = [("x", "X"), ("y", "Y")], [("y", "Y"), ("x", "X")]
    focus = Focus(
        n=1,
        slices={"c": ["rare"], "e": ["rare"]},
        critical=["rare"],
        permission=["b", "c"],
        flagged={"e": ["leak"]},
        carried=["b"],
    )
    base_top, cand_top = {"b": same, "c": same, "e": same}, {"b": same, "c": moved, "e": same}
    frame = select(before, after, focus, base_top, cand_top)
    assert frame[["query_id", "reasons"]].values.tolist() == [
        ["a", "loss"],  # n=1: the worst loss only, not b
        ["b", "open-rejection"],  # its top did not change: no permission reason
        ["c", "critical:rare; permission"],
        ["e", "leak"],  # rare, but unchanged
        ["d", "gain"],
    ]
    assert frame["delta"].tolist() == pytest.approx([-0.8, -0.1, 0.0, 0.0, 0.7])
