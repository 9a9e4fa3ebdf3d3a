"""Pooling, sheets, import, agreement and adjudication on a copy of the demo benchmark."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import shutil

import numpy as np
import pandas as pd
import pytest
from conftest import DEMO, ROOT, write_tiny
from test_agreement import ALICE, ALPHA, BOB, COHEN, FLEISS
from typer.testing import CliRunner

from rageval.benchmark.chunking import chunk_corpus, chunk_qrels, config_hash
from rageval.benchmark.loading import load_benchmark
from rageval.benchmark.migration import load_chunking
from rageval.cli import app
from rageval.errors import BenchmarkError
from rageval.evaluation.agreement import agreement
from rageval.judging import (
    SHEET_COLUMNS,
    adjudicate,
    import_sheets,
    pool,
    read_adjudication,
    read_extra,
    read_labels,
    read_pool,
    write_labels,
    write_pool,
)
from rageval.retrieval import BM25Stage, Corpus, Query
from rageval.retrieval.schema import BM25Config

DAY = dt.date(2026, 11, 3)
PARAMS = ROOT / "params" / "bm25.yaml"
COLUMNS = ["query_id", "rank", "chunk_id", "parent_id", "score", "stage"]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A copy of the demo and three rankings of its dev split: two BM25 settings and a random order."""
    root = shutil.copytree(DEMO, tmp_path_factory.mktemp("judging") / "demo")
    benchmark = load_benchmark(root)
    chunking = load_chunking(PARAMS)
    chunks = chunk_corpus(benchmark.documents.values(), chunking)
    corpus = Corpus(chunks=chunks, documents=benchmark.documents)
    cases = benchmark.cases_for("dev")
    rng = np.random.default_rng(7)

    def frame(rank_lists, stage):
        rows = [
            (qid, rank, cid, corpus.by_id(cid).parent_id, 1.0 / rank, stage)
            for qid, ids in rank_lists.items()
            for rank, cid in enumerate(ids, start=1)
        ]
        return pd.DataFrame(rows, columns=COLUMNS)

    def bm25(config):
        stage = BM25Stage(config, corpus)
        return {c.queryId: [hit.chunk_id for hit in stage(Query(c.queryId, c.query))] for c in cases}

    rankings = {
        "bm25": frame(bm25(BM25Config(type="bm25", tokenizer={"stemmer": "english"})), "bm25"),
        "bm25-robertson": frame(bm25(BM25Config(type="bm25", k1=1.5, b=0.9, method="robertson")), "bm25"),
        "random": frame(
            {c.queryId: [chunks[i].chunk_id for i in rng.permutation(len(chunks))[:20]] for c in cases}, "random"
        ),
    }
    return root, benchmark, chunking, chunks, rankings


def expected_items(benchmark, chunks, rankings, depth):
    """Unjudged (case, passage) pairs in the top ``depth``, computed straight from the frames."""
    judged = chunk_qrels(benchmark.cases_for("dev"), chunks)
    by_id = {c.chunk_id: c for c in chunks}
    found = {}
    for name, frame in rankings.items():
        for row in frame[frame["rank"] <= depth].itertuples():
            if row.chunk_id not in judged[row.query_id]:
                chunk = by_id[row.chunk_id]
                found.setdefault((row.query_id, chunk.parent_id, chunk.start, chunk.end), []).append((name, row.rank))
    return found


def fill(sheet_rows, assessor, grades, notes=""):
    """A copy of the sheet with the first len(grades) rows labelled by ``assessor``."""
    rows = [dict(row) for row in sheet_rows]
    for row, grade in zip(rows, grades, strict=False):
        row.update(assessor=assessor, grade=grade, notes=notes)
    return rows


def read_csv(path):
    return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"), newline="")))


def write_csv(path, rows):
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=SHEET_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_pool_of_three_runs_to_version_n_plus_1(setup, tmp_path):
    root, benchmark, chunking, chunks, rankings = setup
    result = pool(rankings, benchmark, "dev", 10, seed=0, chunking=chunking)
    items = result.manifest.items

    # Exactly the unjudged pairs of the three top 10s, each once, with every run that found it.
    expected = expected_items(benchmark, chunks, rankings, 10)
    assert {(i.queryId, i.documentId, i.start, i.end) for i in items} == set(expected)
    assert len(items) == len(expected) and len(items) > 100
    for item in items:
        assert sorted((f.run, f.rank) for f in item.found) == sorted(
            expected[item.queryId, item.documentId, item.start, item.end]
        )
        assert item.chunking == config_hash(chunking)
    assert result.manifest.runs == ["bm25", "bm25-robertson", "random"]

    # The sheet: passage text and rubric, blind to the systems, in a seeded order.
    first = result.sheet[0]
    item = result.manifest.item(first.itemId)
    assert first.text == benchmark.documents[item.documentId].text[item.start : item.end]
    assert first.rubric.startswith("0: irrelevant or misleading; 1: ")
    assert (first.grade, first.assessor, first.notes) == (None, None, None)
    paths = write_pool(result, tmp_path / "pool")
    sheet_text = paths["csv"].read_text() + paths["jsonl"].read_text()
    assert "bm25-robertson" not in sheet_text and config_hash(chunking) not in sheet_text
    assert all(list(row) == SHEET_COLUMNS for row in read_csv(paths["csv"]))
    again = pool(rankings, benchmark, "dev", 10, seed=0, chunking=chunking)
    other = pool(rankings, benchmark, "dev", 10, seed=1, chunking=chunking)
    assert [r.itemId for r in again.sheet] == [r.itemId for r in result.sheet]
    assert [r.itemId for r in other.sheet] != [r.itemId for r in result.sheet]
    assert sorted(r.itemId for r in other.sheet) == sorted(r.itemId for r in result.sheet)

    # Two assessors label the first ten rows (alice in CSV, bob in JSONL); the rest stay blank.
    manifest = read_pool(tmp_path / "pool")
    rows = read_csv(paths["csv"])
    alice = write_csv(tmp_path / "alice.csv", fill(rows, "alice", ALICE, "checked the table"))
    bob = tmp_path / "bob.jsonl"
    bob.write_text(
        "".join(
            json.dumps(r) + "\n"
            for r in fill([json.loads(x) for x in paths["jsonl"].read_text().splitlines()], "bob", BOB)
        )
    )
    labels = import_sheets(manifest, [alice, bob])
    assert len(labels) == 20 and set(labels["assessor"]) == {"alice", "bob"}
    assert labels.loc[labels["assessor"] == "alice", "source"].iloc[0] == f"{alice}:2"
    write_labels(labels, tmp_path / "pool" / "labels.jsonl")
    labels = read_labels(tmp_path / "pool" / "labels.jsonl")

    # Agreement equals the hand arithmetic of test_agreement (same ten grade pairs).
    report = agreement(labels, {i.itemId: i.slice for i in manifest.items}, list(manifest.rubric))
    assert report.pairs.set_index("scope").loc["all", "cohen_kappa"] == pytest.approx(COHEN)
    assert report.summary.loc["all", "fleiss_kappa"] == pytest.approx(FLEISS)
    assert report.summary.loc["all", "krippendorff_alpha"] == pytest.approx(ALPHA)
    disputed = [result.sheet[n].itemId for n in (1, 5, 8)]  # rows 2, 6 and 9 differ
    assert sorted(report.disagreements.index) == sorted(disputed)
    assert len(report.summary) > 1  # per slice too

    # Adjudication: the three disputed items; the seven agreed ones keep their grade.
    adjudication_file = tmp_path / "adjudication.csv"
    adjudication_file.write_text(
        "itemId,grade,note\n"
        + "".join(
            f"{i},{g},{n}\n"
            for i, g, n in zip(
                disputed, [2, 3, 0], ["combine with the FAQ", "has the limit", "other region"], strict=True
            )
        )
    )
    decided = read_adjudication(adjudication_file, manifest)
    folder = adjudicate(
        benchmark, manifest, labels, decided, out=tmp_path / "v101", date=DAY, file=str(adjudication_file)
    )

    new = load_benchmark(folder)
    assert (new.spec.version, new.spec.predecessor.version) == ("1.0.1", "1.0.0")
    assert new.spec.labelChunking.hash == config_hash(chunking)
    final = dict(zip([r.itemId for r in result.sheet[:10]], ALICE, strict=True)) | dict(
        zip(disputed, [2, 3, 0], strict=True)
    )
    labelled_cases = {manifest.item(i).queryId for i in final}
    old_count = sum(len(c.relevant) for c in benchmark.cases)
    assert sum(len(c.relevant) for c in new.cases) == old_count + 10
    by_case = {c.queryId: c for c in new.cases}
    for item_id, grade in final.items():
        item = manifest.item(item_id)
        assert (item.documentId, grade, item.start, item.end) in {
            (j.documentId, j.grade, j.start, j.end) for j in by_case[item.queryId].relevant
        }
    (entry,) = new.spec.changelog
    assert (entry.version, entry.date, entry.action) == ("1.0.1", DAY, "judgments-added")
    assert sorted(entry.cases) == sorted(labelled_cases)
    assert entry.reason.startswith("pooled judgments 2026-11-03")
    notes = [json.loads(line) for line in (folder / "judgment-notes.jsonl").read_text().splitlines()]
    assert len(notes) == 10 and "judgment-notes.jsonl" in new.spec.files
    note = next(n for n in notes if n["itemId"] == disputed[0])
    assert note["labels"] == [
        {"assessor": "alice", "grade": 2, "notes": "checked the table"},
        {"assessor": "bob", "grade": 1, "notes": ""},
    ]
    assert note["adjudication"] == {"itemId": disputed[0], "grade": 2, "note": "combine with the FAQ"}

    # Pooling the same runs on n+1: the adjudicated items are judged now.
    repooled = pool(rankings, new, "dev", 10, chunking=chunking)
    assert not {i.itemId for i in repooled.manifest.items} & set(final)
    assert len(repooled.manifest.items) <= len(items) - 10


def test_import_rejects_bad_rows_with_file_and_line(setup, tmp_path):
    root, benchmark, chunking, chunks, rankings = setup
    result = pool(rankings, benchmark, "dev", 3, chunking=chunking)
    write_pool(result, tmp_path / "pool")
    manifest = read_pool(tmp_path / "pool")
    # One-line texts, so that each row below is one line of the file (the first spans two).
    a, b, c = ({**row.model_dump(), "text": "t"} for row in result.sheet[:3])
    rows = [
        {**a, "itemId": "i00000000000", "text": "two\nlines", "assessor": "alice", "grade": 1},  # line 2 (and 3)
        {**a, "assessor": "alice", "grade": 7},  # line 4
        {**b, "assessor": "", "grade": 2},  # line 5
        {**c, "assessor": "alice", "grade": 1},  # line 6
        {**c, "assessor": "alice", "grade": 2},  # line 7
        {**b, "queryId": "q-0001", "assessor": "bob", "grade": 0},  # line 8
        {**a, "assessor": "bob", "grade": None},  # line 9: no grade, skipped
    ]
    sheet = write_csv(tmp_path / "bad.csv", [{k: ("" if v is None else v) for k, v in r.items()} for r in rows])
    jsonl = tmp_path / "bad.jsonl"
    jsonl.write_text(
        json.dumps({**a, "assessor": "carol", "grade": "two"})
        + "\n"
        + json.dumps({**a, "colour": "red", "grade": 1, "assessor": "carol"})
        + "\n"
    )
    with pytest.raises(BenchmarkError) as caught:
        import_sheets(manifest, [sheet, jsonl])
    found = {(p.file, p.line, p.field): p for p in caught.value.problems}
    assert set(found) == {
        (str(sheet), 2, "itemId"),
        (str(sheet), 4, "grade"),
        (str(sheet), 5, "assessor"),
        (str(sheet), 7, "itemId"),
        (str(sheet), 8, "queryId"),
        (str(jsonl), 1, "grade"),
        (str(jsonl), 2, "colour"),
    }
    assert "unknown item 'i00000000000'" in found[str(sheet), 2, "itemId"].message
    assert (
        "outside the rubric" in found[str(sheet), 4, "grade"].message
        and "0, 1, 2, 3" in found[str(sheet), 4, "grade"].fix
    )
    assert f"already at {sheet}:6" in found[str(sheet), 7, "itemId"].message

    # A disagreement nobody adjudicated blocks the new version; bad adjudication rows are named.
    good = write_csv(
        tmp_path / "good.csv",
        [
            {k: ("" if v is None else v) for k, v in {**a, "assessor": who, "grade": g}.items()}
            for who, g in (("alice", 1), ("bob", 2))
        ],
    )
    labels = import_sheets(manifest, [good])
    with pytest.raises(BenchmarkError, match=r"the assessors disagree \(alice 1, bob 2\) and it is not adjudicated"):
        adjudicate(benchmark, manifest, labels, [], out=tmp_path / "never")
    assert not (tmp_path / "never").exists()
    adjudication = tmp_path / "adj.jsonl"
    adjudication.write_text(
        "".join(
            json.dumps(r) + "\n"
            for r in [
                {"itemId": a["itemId"], "grade": 2},
                {"itemId": a["itemId"], "grade": 1},
                {"itemId": "nope", "grade": 1},
                {"itemId": b["itemId"], "grade": 9},
            ]
        )
    )
    with pytest.raises(BenchmarkError) as caught:
        read_adjudication(adjudication, manifest)
    assert [(p.line, p.field) for p in caught.value.problems] == [(2, "itemId"), (3, "itemId"), (4, "grade")]


def test_targeted_search_items_join_the_pool(setup, tmp_path):
    root, benchmark, chunking, chunks, rankings = setup
    document = benchmark.documents["webhooks-overview"]
    extra = tmp_path / "found.jsonl"
    extra.write_text(
        json.dumps({"queryId": "q-0003", "documentId": "webhooks-overview", "start": 0, "end": 40})
        + "\n"
        + json.dumps({"queryId": "q-0003", "documentId": "nope"})
        + "\n"
        + json.dumps(
            {"queryId": "q-0003", "documentId": "webhooks-overview", "start": 5, "end": len(document.text) + 1}
        )
        + "\n"
        + json.dumps({"queryId": "q-0001", "documentId": "webhooks-overview"})
        + "\n"
    )
    with pytest.raises(BenchmarkError) as caught:
        read_extra(extra, benchmark, "dev")
    assert [(p.line, p.field) for p in caught.value.problems] == [(2, "documentId"), (3, "end"), (4, "queryId")]
    assert "not a case of split 'dev'" in caught.value.problems[2].message

    extra.write_text(json.dumps({"queryId": "q-0003", "documentId": "webhooks-overview", "start": 0, "end": 40}) + "\n")
    result = pool(
        {}, benchmark, "dev", 10, read_extra(extra, benchmark, "dev"), chunking=chunking, extra_file="found.jsonl"
    )
    (item,) = result.manifest.items
    assert (item.queryId, item.documentId, item.start, item.end, item.found[0].run) == (
        "q-0003",
        "webhooks-overview",
        0,
        40,
        "found.jsonl:1",
    )
    assert result.sheet[0].text == document.text[:40]


def test_document_level_pool_skips_judged_documents(tmp_path):
    cases = [
        {
            "queryId": "q1",
            "query": "publish retry",
            "corpusVersion": "tiny-1",
            "relevant": [{"documentId": "alpha", "grade": 3}],
            "split": "dev",
        },
        {"queryId": "q2", "query": "webhooks", "corpusVersion": "tiny-1", "relevant": [], "split": "dev"},
    ]
    benchmark = load_benchmark(write_tiny(tmp_path / "b", cases=cases, spec_overrides={"relevanceUnit": "document"}))
    frame = pd.DataFrame(
        [
            ("q1", 1, "alpha#x-0", "alpha"),
            ("q1", 2, "alpha#x-1", "alpha"),
            ("q1", 3, "beta#x-0", "beta"),
            ("q2", 1, "gamma#x-0", "gamma"),
        ],
        columns=["query_id", "rank", "chunk_id", "parent_id"],
    )
    result = pool({"run": frame}, benchmark, "dev", 1, seed=3)
    assert sorted((i.queryId, i.documentId, i.start) for i in result.manifest.items) == [("q2", "gamma", None)]
    # Each parent counts once, at its best chunk: beta, third chunk of q1, is q1's second document.
    result = pool({"run": frame}, benchmark, "dev", 2)
    assert sorted((i.queryId, i.documentId) for i in result.manifest.items) == [("q1", "beta"), ("q2", "gamma")]
    beta = next(i for i in result.manifest.items if i.documentId == "beta")
    assert beta.found[0].rank == 2
    assert result.sheet[result.manifest.items.index(beta)].text == "Beta explains webhooks and signing secrets."
    with pytest.raises(BenchmarkError, match="not cases of split 'release'"):
        pool({"run": frame}, benchmark, "release", 3)


def test_cli_pool_import_agreement_adjudicate(setup, tmp_path):
    root, benchmark, chunking, chunks, rankings = setup
    runner = CliRunner()
    rankings["bm25"].to_parquet(tmp_path / "bm25.parquet")
    pool_dir = tmp_path / "pool"
    result = runner.invoke(
        app,
        [
            "judge",
            "pool",
            "--rankings",
            f"bm25={tmp_path / 'bm25.parquet'}",
            "--chunking",
            str(PARAMS),
            "--benchmark",
            str(root),
            "--split",
            "dev",
            "--depth",
            "2",
            "--out",
            str(pool_dir),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "unjudged items" in result.output

    rows = read_csv(pool_dir / "sheet.csv")
    write_csv(tmp_path / "a.csv", fill(rows, "alice", [3, 1]))
    write_csv(tmp_path / "b.csv", fill(rows, "bob", [3, 2]))
    bad = write_csv(tmp_path / "bad.csv", fill(rows, "", [3]))
    result = runner.invoke(app, ["judge", "import", str(pool_dir), str(bad)])
    assert result.exit_code == 2 and f"{bad}:2: assessor: a grade without an assessor" in result.output
    result = runner.invoke(app, ["judge", "import", str(pool_dir), str(tmp_path / "a.csv"), str(tmp_path / "b.csv")])
    assert result.exit_code == 0, result.output
    assert "4 labels on 2 items" in result.output

    result = runner.invoke(app, ["judge", "agreement", str(pool_dir), "--json", str(tmp_path / "agreement.json")])
    assert result.exit_code == 0, result.output
    assert "Disagreements: 1" in result.output
    payload = json.loads((tmp_path / "agreement.json").read_text())
    # Two items, alice (3, 1) vs bob (3, 2): p_o = 1/2, p_e = (1*1 + 1*0 + 0*1)/4 = 1/4 -> kappa = (1/4)/(3/4) = 1/3
    assert payload["pairs"][0]["cohen_kappa"] == pytest.approx(1 / 3)

    (tmp_path / "adj.csv").write_text(f"itemId,grade,note\n{rows[1]['itemId']},2,tie broken by the lead\n")
    result = runner.invoke(
        app,
        [
            "judge",
            "adjudicate",
            str(pool_dir),
            "--file",
            str(tmp_path / "adj.csv"),
            "--version",
            "1.1.0",
            "--out",
            str(tmp_path / "v11"),
            "--date",
            "2026-11-03",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "rageval-demo 1.1.0" in result.output and "judgments-added" in result.output
    assert load_benchmark(tmp_path / "v11").spec.changelog[0].date == DAY


def test_cli_pool_reads_sealed_runs(setup, tmp_path, store):
    from rageval.config.load import dump_config, load_config
    from rageval.tracking.store import Tracker

    root, benchmark, chunking, chunks, rankings = setup
    tracker = Tracker(store)
    params = {"benchmark": str(root), **{f"chunking.{k}": v for k, v in chunking.model_dump(mode="json").items()}}
    tags = {
        "rageval.split": "dev",
        "rageval.hash.cases": benchmark.hashes["cases"],
        "rageval.chunking.hash": config_hash(chunking),
    }
    # A run records its resolved configuration; its chunking is read back from there.
    config = load_config(ROOT / "params" / "bm25.yaml", benchmark=root).model_copy(update={"chunking": chunking})
    files = {"config.yaml": dump_config(config).encode()}
    run_ids = []
    for name in ("bm25", "random"):
        run_id = tracker.create_run("judging", name, params=params, tags=tags, files=files)
        tracker.log_frame(run_id, "rankings.parquet", rankings[name])
        tracker.seal(run_id)
        run_ids.append(run_id)
    unsealed = tracker.create_run("judging", "unsealed", params=params, tags=tags)

    runner = CliRunner()
    args = ["judge", "pool", "--depth", "3", "--tracking-uri", store]
    result = runner.invoke(app, [*args, "--runs", run_ids[0], "--runs", run_ids[1], "--out", str(tmp_path / "pool")])
    assert result.exit_code == 0, result.output
    manifest = read_pool(tmp_path / "pool")
    assert manifest.runs == run_ids and manifest.split == "dev" and manifest.path == str(root)
    expected = expected_items(benchmark, chunks, {k: rankings[k] for k in ("bm25", "random")}, 3)
    assert {(i.queryId, i.documentId, i.start, i.end) for i in manifest.items} == set(expected)
    result = runner.invoke(app, [*args, "--runs", unsealed, "--out", str(tmp_path / "other")])
    assert result.exit_code == 1 and "not sealed" in result.output


# --------------------------------------------------------------------------- strict sheets


def test_an_excel_csv_utf8_sheet_imports_and_a_blank_one_is_refused(setup, tmp_path):
    root, benchmark, chunking, chunks, rankings = setup
    result = pool(rankings, benchmark, "dev", 3, chunking=chunking)
    paths = write_pool(result, tmp_path / "pool")
    manifest = read_pool(tmp_path / "pool")
    rows = read_csv(paths["csv"])
    filled = write_csv(tmp_path / "alice.csv", fill(rows, "alice", [2, 1, 0]))
    excel = tmp_path / "excel.csv"  # Excel's "CSV UTF-8": a byte-order mark (and CRLF, as csv writes)
    excel.write_bytes(b"\xef\xbb\xbf" + filled.read_bytes())
    labels = import_sheets(manifest, [excel])
    assert labels["grade"].tolist() == [2, 1, 0] and labels["source"].iloc[0] == f"{excel}:2"
    with pytest.raises(BenchmarkError) as raised:
        import_sheets(manifest, [filled, paths["csv"]])  # the blank sheet given by mistake
    (problem,) = raised.value.problems
    assert (problem.file, problem.field) == (str(paths["csv"]), "grade")
    assert problem.message == f"no row of the sheet has a grade ({len(rows)} row(s)): is this the blank sheet?"
    assert problem.fix == "fill in the grade (and assessor) columns, or leave the sheet out"


@pytest.mark.parametrize("grade", ["٣", "²", "2.0", "1_0"])
def test_a_grade_cell_is_ascii_digits_or_an_error(setup, tmp_path, grade):
    root, benchmark, chunking, chunks, rankings = setup
    result = pool(rankings, benchmark, "dev", 3, chunking=chunking)
    paths = write_pool(result, tmp_path / "pool")
    rows = read_csv(paths["csv"])
    sheet = write_csv(tmp_path / "a.csv", [{**rows[0], "assessor": "alice", "grade": grade}])
    with pytest.raises(BenchmarkError) as raised:
        import_sheets(read_pool(tmp_path / "pool"), [sheet])
    (problem,) = raised.value.problems
    assert (problem.line, problem.field) == (2, "grade") and f"(got '{grade}')" in problem.message


def test_a_judges_label_alone_never_enters_the_release_split(setup, tmp_path):
    from rageval.judging.adjudication import verdicts

    root, benchmark, chunking, chunks, rankings = setup
    result = pool(rankings, benchmark, "dev", 3, chunking=chunking)
    write_pool(result, tmp_path / "pool")
    manifest = read_pool(tmp_path / "pool").model_copy(update={"split": "release"})  # as a release pool reads
    a = {**result.sheet[0].model_dump(), "text": "t"}
    human = import_sheets(manifest, [write_csv(tmp_path / "h.csv", [{**a, "assessor": "alice", "grade": 2}])])
    judge = human.assign(assessor="llm:minilm@0123456789ab")
    with pytest.raises(BenchmarkError) as caught:
        verdicts(manifest, judge, [])
    assert "has only judge labels (llm:minilm@0123456789ab 2)" in caught.value.problems[0].message
    assert a["itemId"] in caught.value.problems[0].fix
    # beside a human's label, or decided by an adjudication row, it is accepted
    assert [v.grade for v in verdicts(manifest, pd.concat([human, judge]), [])] == [2]
    # a sheet holds human labels: a judge's mark there is refused
    with pytest.raises(BenchmarkError, match="is a judge's mark"):
        import_sheets(manifest, [write_csv(tmp_path / "j.csv", [{**a, "assessor": "llm:minilm@0123", "grade": 1}])])
