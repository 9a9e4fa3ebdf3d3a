"""Importing BEIR and TREC collections, and exporting qrels and runs in TREC format."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import shared

from rageval.benchmark.importers import import_beir, import_trec, release_split
from rageval.benchmark.loading import load_benchmark
from rageval.benchmark.trec import read_qrels, read_run, read_topics, write_qrels, write_run
from rageval.errors import BenchmarkError


def write_beir(root, qrels_rows, split="test"):
    root.mkdir()
    corpus = [
        {"_id": "d1", "title": "Cats", "text": "Cats sleep a lot."},
        {"_id": "d2", "title": "", "text": "Dogs bark."},
    ]
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in corpus))
    queries = [
        {"_id": "1", "text": "why do cats sleep"},
        {"_id": "2", "text": "barking"},
        {"_id": "3", "text": "unjudged"},
    ]
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (root / "qrels").mkdir()
    (root / "qrels" / f"{split}.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{s}\n" for q, d, s in qrels_rows)
    )
    return root


def test_beir_import_keeps_judged_queries_and_validates(tmp_path):
    source = write_beir(tmp_path / "beir", [("1", "d1", 1), ("2", "d2", 2)])
    benchmark = load_benchmark(
        import_beir(source, tmp_path / "out", name="toy", version="1", splits={"test": "release"})
    )
    assert benchmark.spec.relevanceUnit == "document" and benchmark.spec.splits == ["release"]
    assert [c.queryId for c in benchmark.cases] == ["1", "2"]
    assert benchmark.qrels("release") == {"1": {"d1": 1}, "2": {"d2": 2}}
    assert benchmark.spec.corpusVersion.startswith("beir-")


def test_beir_grades_outside_the_rubric_need_an_explicit_map(tmp_path):
    source = write_beir(tmp_path / "beir", [("1", "d1", 4)])
    with pytest.raises(BenchmarkError) as raised:
        import_beir(source, tmp_path / "out", name="toy", version="1", splits={"test": "dev"})
    (problem,) = raised.value.problems
    assert problem.file.endswith("test.tsv") and problem.line == 2 and "--grade-map" in problem.fix
    benchmark = load_benchmark(
        import_beir(source, tmp_path / "out", name="toy", version="1", splits={"test": "dev"}, grade_map={4: 3})
    )
    assert benchmark.qrels("dev") == {"1": {"d1": 3}}
    assert "4→3" in benchmark.spec.description


def test_an_existing_benchmark_version_is_never_overwritten(tmp_path):
    source = write_beir(tmp_path / "beir", [("1", "d1", 1)])
    import_beir(source, tmp_path / "out", name="toy", version="1", splits={"test": "dev"})
    with pytest.raises(BenchmarkError, match="append-only"):
        import_beir(source, tmp_path / "out", name="toy", version="2", splits={"test": "dev"})


def test_trec_import_with_sgml_topics_and_stable_release_split(tmp_path):
    topics = tmp_path / "topics.txt"
    topics.write_text(
        "<top>\n<num> Number: 301\n<title> International Organized Crime\n<desc> Description:\nIdentify organizations.\n</top>\n"
        "<top>\n<num> Number: 302\n<title> Poliomyelitis and Post-Polio\n<desc> Description:\nIs the disease under control?\n</top>\n"
    )
    assert read_topics(topics) == {"301": "International Organized Crime", "302": "Poliomyelitis and Post-Polio"}
    assert (
        read_topics(topics, field="title+desc")["302"] == "Poliomyelitis and Post-Polio Is the disease under control?"
    )
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("301 0 FT-1 1\n301 0 FT-2 0\n302 0 FT-2 2\n")
    docs = tmp_path / "docs.sgml"
    docs.write_text(
        "<DOC>\n<DOCNO> FT-1 </DOCNO>\n<HEADLINE>Crime</HEADLINE>\n<TEXT>\nCrime text.\n</TEXT>\n</DOC>\n"
        "<DOC>\n<DOCNO>FT-2</DOCNO>\n<TEXT>Polio text.</TEXT>\n</DOC>\n"
    )
    folder = import_trec(
        topics=topics, qrels=qrels, documents=docs, out=tmp_path / "out", name="trec", version="1", release_fraction=0.5
    )
    benchmark = load_benchmark(folder)
    assert benchmark.documents["FT-1"].title == "Crime"
    expected = {q: "release" if release_split(q, 0.5) else "dev" for q in ("301", "302")}
    assert {c.queryId: c.split for c in benchmark.cases} == expected
    assert benchmark.spec.splits == ["dev", "release"]
    assert benchmark.qrels() == {"301": {"FT-1": 1, "FT-2": 0}, "302": {"FT-2": 2}}


def test_release_assignment_is_stable_and_near_its_fraction():
    ids = [str(i) for i in range(2000)]
    first = [release_split(q, 0.3) for q in ids]
    assert first == [release_split(q, 0.3) for q in ids]
    assert 0.25 < sum(first) / len(ids) < 0.35


def test_qrels_and_runs_round_trip_through_trec_files(tmp_path):
    qrels = {"q1": {"a": 3, "b": 0}, "q2": {"c": 1}}
    assert read_qrels(write_qrels(qrels, tmp_path / "qrels")) == qrels
    run = pd.DataFrame({"query_id": ["q1", "q1"], "doc_id": ["a", "b"], "rank": [1, 2], "score": [2.5, 1.0]})
    back = read_run(write_run(run, tmp_path / "run", tag="t"))
    assert back[["query_id", "doc_id", "rank", "score"]].equals(run) and set(back["tag"]) == {"t"}


def test_bad_trec_lines_are_named(tmp_path):
    path = tmp_path / "run"
    path.write_text("q1 Q0 a 1 2.0 t\nq1 Q0 b two 1.0 t\n")
    with pytest.raises(Exception, match=r"run:2"):
        read_run(path)


@pytest.mark.realdata
def test_scifact_imports_with_its_published_counts(tmp_path):
    source = shared("scifact")
    folder = import_beir(
        source, tmp_path / "scifact", name="scifact", version="1", splits={"train": "dev", "test": "release"}
    )
    benchmark = load_benchmark(folder)
    assert len(benchmark.documents) == 5183
    assert (len(benchmark.cases_for("dev")), len(benchmark.cases_for("release"))) == (809, 300)
