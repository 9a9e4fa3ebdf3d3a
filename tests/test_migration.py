"""Label migration between chunkings: overlap proposals, review, and the qrels evaluation uses."""

from __future__ import annotations

import datetime as dt
import json
import shutil

import pytest
import yaml
from conftest import DEMO, ROOT, write_tiny
from typer.testing import CliRunner

from rageval.benchmark.chunking import chunk_corpus, chunk_qrels, config_hash
from rageval.benchmark.loading import load_benchmark, write_hashes
from rageval.benchmark.migration import (
    chunk_labels,
    chunk_qrels_for,
    load_chunking,
    migrate_labels,
    read_review,
    review_labels,
    review_path,
)
from rageval.benchmark.schema import ChunkingConfig
from rageval.benchmark.versions import log_change, new_version
from rageval.cli import app
from rageval.errors import BenchmarkError, ConfigError, EvaluationError

A = ChunkingConfig(size=200, overlap=30)  # the chunking of params/bm25.yaml
B = ChunkingConfig(size=100, overlap=0)


@pytest.fixture
def demo(tmp_path):
    return shutil.copytree(DEMO, tmp_path / "demo")


def test_overlap_scores_by_hand(tmp_path):
    benchmark = load_benchmark(write_tiny(tmp_path / "tiny"))
    whole, small = ChunkingConfig(method="none"), ChunkingConfig(size=6, overlap=0, headings=False)
    path, proposals = migrate_labels(benchmark, whole, small)
    assert path == tmp_path / "tiny" / f"chunk-labels-{config_hash(small)}.jsonl"
    digest = config_hash(small)
    rows = {(p.queryId, p.chunkId): p for p in proposals}
    # q1 judges alpha[9:57] ("Alpha retries the publish after a cache failure.", 48 characters) grade 3.
    # The small chunking cuts alpha into [0,34) [35,57) [59,68) [70,92):
    #   chunk 0 shares [9,34) = 25 characters; the shorter of chunk (34) and span (48) is 34: 25/34 = 0.7353
    #   chunk 1 shares [35,57) = 22 characters and is 22 long: 22/22 = 1.0
    #   chunks 2 and 3 share nothing: no proposal
    # q2's documents are cut in two chunks each (7 tokens: six words and the full stop).
    assert set(rows) == {("q1", f"alpha#{digest}-0"), ("q1", f"alpha#{digest}-1")} | {
        ("q2", f"{doc}#{digest}-{n}") for doc in ("beta", "gamma") for n in (0, 1)
    }
    first = rows["q1", f"alpha#{digest}-0"]
    assert (first.start, first.end, first.grade, first.overlap, first.status, first.decision) == (
        0,
        34,
        3,
        0.7353,
        "proposed",
        None,
    )
    assert rows["q1", f"alpha#{digest}-1"].overlap == 1.0
    assert [(s.documentId, s.grade, s.start, s.end) for s in first.sources] == [("alpha", 3, 9, 57)]
    assert first.fromChunks == [f"alpha#{config_hash(whole)}-0"]
    assert (first.fromChunking, first.toChunking) == (config_hash(whole), digest)
    # q2's judgments have no span: they cover their documents' chunks entirely (0 stays 0).
    assert (rows["q2", f"beta#{digest}-0"].grade, rows["q2", f"gamma#{digest}-0"].grade) == (2, 0)
    assert rows["q2", f"gamma#{digest}-0"].overlap == 1.0
    assert migrate_labels(benchmark, whole, small)[1] == proposals  # proposing again changes nothing


def test_release_refused_until_reviewed_then_accepted(demo):
    benchmark = load_benchmark(demo)
    path, proposals = migrate_labels(benchmark, A, B)
    assert len(proposals) > 100 and all(0 < p.overlap <= 1 for p in proposals)
    partial = [p for p in proposals if p.overlap < 1]
    assert partial, "chunk size 100 must cut some judged spans"
    chunks = chunk_corpus(benchmark.documents.values(), B)
    release = {c.queryId for c in benchmark.cases_for("release")}

    with pytest.raises(BenchmarkError) as caught:
        chunk_qrels_for(benchmark, chunks, B, "release")
    (problem,) = caught.value.problems
    assert problem.file == str(path) and "still 'proposed'" in problem.message and "--review" in problem.fix
    # Other splits use the proposals meanwhile; document-level qrels never change.
    dev = chunk_labels(benchmark, chunks, B, "dev")
    assert (dev.source, dev.status) == ("migrated", "proposed")
    assert dev.qrels == chunk_qrels(benchmark.cases_for("dev"), chunks)
    assert benchmark.qrels("release") == load_benchmark(DEMO).qrels("release")

    # The reviewer rejects the weakest release proposal, lowers another grade, accepts the rest.
    rows = [row for _, row in read_review(path)]
    weakest = min((r for r in rows if r.queryId in release), key=lambda r: r.overlap)
    lowered = next(r for r in rows if r.queryId in release and r.grade == 3 and r is not weakest)
    edited = []
    for row in rows:
        update = {"decision": "accept"}
        if row is weakest:
            update = {"decision": "reject", "note": f"shares only {row.overlap:.0%} of the span"}
        elif row is lowered:
            update = {"decision": "accept", "grade": 2}
        edited.append(json.dumps(row.model_copy(update=update).model_dump(mode="json")))
    path.write_text("\n".join(edited) + "\n")
    summary = review_labels(benchmark, B, reviewer="lead")
    assert (summary.reviewed, summary.proposed, summary.rejected) == (len(rows), 0, 1)

    labels = chunk_labels(benchmark, chunks, B, "release")
    assert (labels.source, labels.status, labels.file) == ("migrated", "reviewed", path)
    assert len(labels.sha256) == 64
    assert weakest.chunkId not in labels.qrels[weakest.queryId]
    assert labels.qrels[lowered.queryId][lowered.chunkId] == 2
    assert set(labels.qrels) == release
    reviewed = [row for _, row in read_review(path)]
    assert {(r.status, r.reviewer) for r in reviewed} == {("reviewed", "lead")}


def test_decisions_passed_in_and_partial_review(demo):
    benchmark = load_benchmark(demo)
    path, proposals = migrate_labels(benchmark, A, B)
    release = {c.queryId for c in benchmark.cases_for("release")}
    chunks = chunk_corpus(benchmark.documents.values(), B)
    dev_only = {(p.queryId, p.chunkId): "accept" for p in proposals if p.queryId not in release}
    summary = review_labels(benchmark, B, dev_only)
    assert summary.proposed == sum(p.queryId in release for p in proposals) > 0
    with pytest.raises(BenchmarkError, match="still 'proposed'"):
        chunk_qrels_for(benchmark, chunks, B, "release")
    review_labels(benchmark, B, {(p.queryId, p.chunkId): "accept" for p in proposals if p.queryId in release})
    assert chunk_qrels_for(benchmark, chunks, B, "release") == chunk_qrels(benchmark.cases_for("release"), chunks)
    with pytest.raises(BenchmarkError, match="not in the file"):
        review_labels(benchmark, B, {("q-0001", "nope#0-0"): "accept"})


def test_recorded_label_chunking_decides_what_needs_migration(demo):
    # Record that the demo's labels were made on chunking A (as `judge adjudicate` does).
    spec = yaml.safe_load((demo / "benchmark.yaml").read_text())
    spec["labelChunking"] = {"hash": config_hash(A), "config": A.model_dump(mode="json")}
    (demo / "benchmark.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    benchmark = load_benchmark(demo)
    chunks_a = chunk_corpus(benchmark.documents.values(), A)
    chunks_b = chunk_corpus(benchmark.documents.values(), B)

    exact = chunk_labels(benchmark, chunks_a, A, "release")
    assert (exact.source, exact.status) == ("derived", "exact")
    with pytest.raises(BenchmarkError) as caught:
        chunk_qrels_for(benchmark, chunks_b, B, "release")
    assert f"made for chunking {config_hash(A)}" in str(caught.value) and "migrate-labels" in str(caught.value)
    assert chunk_labels(benchmark, chunks_b, B, "dev").status == "derived"
    with pytest.raises(BenchmarkError, match="not .* \\(--from\\)"):
        migrate_labels(benchmark, ChunkingConfig(size=150), B)

    spec["labelChunking"]["hash"] = "0" * 12
    (demo / "benchmark.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    with pytest.raises(BenchmarkError, match="labelChunking.hash"):
        load_benchmark(demo)


def test_a_stale_review_file_is_refused_and_proposed_again_keeping_unchanged_reviews(demo):
    benchmark = load_benchmark(demo)
    _, proposals = migrate_labels(benchmark, A, B)
    review_labels(benchmark, B, {(p.queryId, p.chunkId): "accept" for p in proposals}, reviewer="lead")
    folder = new_version(demo, "1.1.0")
    assert review_path(folder, B).is_file()  # the review travels with the new version
    cases = [json.loads(line) for line in (folder / "cases.jsonl").read_text().splitlines()]
    cases[2]["relevant"][0]["end"] -= 50  # q-0003's span shrinks
    (folder / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    write_hashes(folder)
    log_change(folder, "re-judged", ["q-0003"], "span too wide")
    new = load_benchmark(folder)
    chunks = chunk_corpus(new.documents.values(), B)
    with pytest.raises(BenchmarkError, match="no longer matches the judgments"):
        chunk_qrels_for(new, chunks, B, "dev")
    with pytest.raises(EvaluationError, match="was not cut with the given chunking"):
        chunk_qrels_for(new, chunk_corpus(new.documents.values(), A), B, "dev")

    # Proposing again: only q-0003's rows need a new review; release (all reviewed) is usable.
    _, again = migrate_labels(new, A, B)
    pending = {p.queryId for p in again if p.status == "proposed"}
    assert pending == {"q-0003"}
    assert sum(p.status == "reviewed" for p in again) == sum(p.queryId != "q-0003" for p in proposals)
    assert chunk_labels(new, chunks, B, "release").status == "reviewed"
    assert chunk_labels(new, chunks, B, "dev").status == "proposed"
    _, fresh = migrate_labels(new, A, B, force=True)
    assert {p.status for p in fresh} == {"proposed"}


def test_load_chunking_from_params_or_snippet(tmp_path):
    assert load_chunking(ROOT / "params" / "bm25.yaml") == A
    snippet = tmp_path / "small.yaml"
    snippet.write_text("size: 100\noverlap: 0\n")
    assert load_chunking(snippet) == B
    snippet.write_text("size: 100\noverlapp: 0\n")
    with pytest.raises(ConfigError) as caught:
        load_chunking(snippet)
    (problem,) = caught.value.problems
    assert (problem.line, problem.field) == (2, "overlapp") and "overlap" in problem.fix
    params = tmp_path / "p.yaml"
    params.write_text("version: 1\nname: x\nchunking:\n  size: -1\n")
    with pytest.raises(ConfigError) as caught:
        load_chunking(params)
    assert (caught.value.problems[0].line, caught.value.problems[0].field) == (4, "chunking.size")
    snippet.write_text("# nothing here\n")  # an empty file is a mistake; {} asks for the default chunking
    with pytest.raises(ConfigError, match="the file is empty") as caught:
        load_chunking(snippet)
    assert "{} for the default chunking" in caught.value.problems[0].fix
    snippet.write_text("{}\n")
    assert load_chunking(snippet) == ChunkingConfig()


def test_cli_migrate_and_review(demo, tmp_path):
    runner = CliRunner()
    small = tmp_path / "b.yaml"
    small.write_text("size: 100\noverlap: 0\n")
    result = runner.invoke(
        app, ["migrate-labels", str(demo), "--from", str(ROOT / "params" / "bm25.yaml"), "--to", str(small)]
    )
    assert result.exit_code == 0, result.output
    path = review_path(demo, B)
    assert f"wrote {path}" in result.output and "proposed chunk labels" in result.output
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text(
        "".join(json.dumps({**row, "decision": "accept"}) + "\n" for row in rows[:5])
        + "".join(json.dumps(row) + "\n" for row in rows[5:])
    )
    result = runner.invoke(app, ["migrate-labels", str(demo), "--to", str(small), "--review", "--reviewer", "lead"])
    assert result.exit_code == 0, result.output
    assert f"5 reviewed (5 accepted, 0 rejected), {len(rows) - 5} still proposed" in result.output
    result = runner.invoke(app, ["migrate-labels", str(demo), "--from", str(small), "--to", str(small)])
    assert result.exit_code == 2 and "same chunking" in result.output


def test_a_label_chunking_recorded_before_the_chunking_version_still_loads(demo):
    """benchmark.yaml written before ChunkingConfig.parser existed: its labelChunking has no
    parser and the hash version 1 gave (measured at commit 194d561 for params/bm25.yaml's chunking)."""
    old = {k: v for k, v in A.model_dump(mode="json").items() if k != "parser"}
    spec = yaml.safe_load((demo / "benchmark.yaml").read_text())
    spec["labelChunking"] = {"hash": "85783434de96", "config": old}
    (demo / "benchmark.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    benchmark = load_benchmark(demo)
    v1 = A.model_copy(update={"parser": "rageval-1"})
    assert config_hash(v1) == "85783434de96" != config_hash(A)
    chunks = chunk_corpus(benchmark.documents.values(), v1)
    assert chunk_labels(benchmark, chunks, v1, "release").status == "exact"  # labels made for it


def test_a_decision_on_a_row_that_changed_is_refused_and_the_file_kept(demo):
    from rageval.benchmark.migration import record_decision

    benchmark = load_benchmark(demo)
    path, proposals = migrate_labels(benchmark, A, B)
    before = path.read_bytes()
    decided = proposals[1].model_copy(update={"decision": "accept", "grade": 1, "reviewer": "ana"})
    with pytest.raises(BenchmarkError) as caught:
        record_decision(path, 0, decided)  # row 1 is another chunk's label
    (problem,) = caught.value.problems
    assert (problem.file, problem.line) == (str(path), 1)
    assert "reload the review" in problem.fix
    assert path.read_bytes() == before
    saved = record_decision(path, 1, decided, date=dt.date(2026, 12, 2))
    rows = [row for _, row in read_review(path)]
    assert rows[1] == saved and (saved.status, saved.decision, saved.grade, saved.reviewer) == (
        "reviewed",
        "accept",
        1,
        "ana",
    )
    assert str(saved.reviewedOn) == "2026-12-02"
    assert rows[:1] + rows[2:] == proposals[:1] + proposals[2:]
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".")] == []  # no temporary left
