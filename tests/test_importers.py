"""Importing BEIR and TREC collections, and exporting qrels and runs in TREC format."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import shared

from rageval.benchmark.beir import BeirImport, import_beir
from rageval.benchmark.importers import TrecImport, import_trec, release_split
from rageval.benchmark.loading import load_benchmark
from rageval.benchmark.trec import read_qrels, read_qrels_and_run, read_run, read_topics, write_qrels, write_run
from rageval.errors import BenchmarkError, InputError


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
        import_beir(
            BeirImport(source=source, out=tmp_path / "out", name="toy", version="1", splits={"test": "release"})
        )
    )
    assert benchmark.spec.relevanceUnit == "document" and benchmark.spec.splits == ["release"]
    assert [c.queryId for c in benchmark.cases] == ["1", "2"]
    assert benchmark.qrels("release") == {"1": {"d1": 1}, "2": {"d2": 2}}
    assert benchmark.spec.corpusVersion.startswith("beir-")


def test_beir_grades_outside_the_rubric_need_an_explicit_map(tmp_path):
    source = write_beir(tmp_path / "beir", [("1", "d1", 4)])
    with pytest.raises(BenchmarkError) as raised:
        import_beir(BeirImport(source=source, out=tmp_path / "out", name="toy", version="1", splits={"test": "dev"}))
    (problem,) = raised.value.problems
    assert problem.file.endswith("test.tsv") and problem.line == 2 and "--grade-map" in problem.fix
    benchmark = load_benchmark(
        import_beir(
            BeirImport(
                source=source, out=tmp_path / "out", name="toy", version="1", splits={"test": "dev"}, grade_map={4: 3}
            )
        )
    )
    assert benchmark.qrels("dev") == {"1": {"d1": 3}}
    assert "4→3" in benchmark.spec.description


def test_an_existing_benchmark_version_is_never_overwritten(tmp_path):
    source = write_beir(tmp_path / "beir", [("1", "d1", 1)])
    import_beir(BeirImport(source=source, out=tmp_path / "out", name="toy", version="1", splits={"test": "dev"}))
    with pytest.raises(BenchmarkError, match="append-only"):
        import_beir(BeirImport(source=source, out=tmp_path / "out", name="toy", version="2", splits={"test": "dev"}))


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
        TrecImport(
            topics=topics,
            qrels=qrels,
            documents=docs,
            out=tmp_path / "out",
            name="trec",
            version="1",
            release_fraction=0.5,
        )
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
    with pytest.raises(InputError, match=r"run:2: rank: rank 'two' is not an integer"):
        read_run(path)


@pytest.mark.realdata
def test_scifact_imports_with_its_published_counts(tmp_path):
    source = shared("scifact")
    folder = import_beir(
        BeirImport(
            source=source,
            out=tmp_path / "scifact",
            name="scifact",
            version="1",
            splits={"train": "dev", "test": "release"},
        )
    )
    benchmark = load_benchmark(folder)
    assert len(benchmark.documents) == 5183
    assert (len(benchmark.cases_for("dev")), len(benchmark.cases_for("release"))) == (809, 300)


# --------------------------------------------------------------------------- strict TREC files


def test_a_bom_is_not_part_of_the_first_query_id(tmp_path):
    qrels, run = tmp_path / "qrels", tmp_path / "run"
    qrels.write_bytes(b"\xef\xbb\xbfq1 0 d1 1\nq2 0 d2 1\n")
    run.write_bytes(b"\xef\xbb\xbfq1 Q0 d1 1 2.0 t\n")
    assert read_qrels(qrels) == {"q1": {"d1": 1}, "q2": {"d2": 1}}
    assert read_run(run)["query_id"].tolist() == ["q1"]


def test_invalid_utf8_in_a_trec_file_is_an_error_not_a_replacement(tmp_path):
    path = tmp_path / "qrels"
    path.write_bytes(b"q1 0 d1 1\nq1 0 caf\xe9 0\n")
    with pytest.raises(InputError) as raised:
        read_qrels(path)
    (problem,) = raised.value.problems
    assert (problem.line, problem.message) == (2, "not UTF-8: byte 0xe9 at byte offset 18 (invalid continuation byte)")


def test_a_document_judged_twice_with_different_grades_names_both_lines(tmp_path):
    path = tmp_path / "qrels"
    path.write_text("q1 0 d1 1\nq1 0 d2 0\nq1 0 d1 1\nq1 1 d1 2\n")
    with pytest.raises(InputError) as raised:
        read_qrels(path)
    (problem,) = raised.value.problems  # the identical repeat on line 3 changes nothing
    assert (problem.line, problem.field) == (4, "grade")
    assert problem.message == "query 'q1' judges document 'd1' 1 on line 1 and 2 here (iterations 0 and 1)"
    assert "one grade per query and document" in problem.fix


@pytest.mark.parametrize(
    "line,field,message",
    [
        ("q1 Q0 d1 1_0 2.0 t", "rank", "rank '1_0' is not an integer"),
        ("q1 Q0 d1 ٣ 2.0 t", "rank", "rank '٣' is not an integer"),
        ("q1 Q0 d1 1 nan t", "score", "score 'nan' is not a finite number"),
        ("q1 Q0 d1 1 1e999 t", "score", "score '1e999' is not a finite number"),
        ("q1 Q0 d1 1 2.0", None, "expected 'query Q0 document rank score tag', found 5 field(s)"),
    ],
)
def test_run_numbers_are_ascii_and_finite(tmp_path, line, field, message):
    path = tmp_path / "run"
    path.write_text(f"q1 Q0 d0 1 3.0 t\n{line}\n", encoding="utf-8")
    with pytest.raises(InputError) as raised:
        read_run(path)
    (problem,) = raised.value.problems
    assert (problem.file, problem.line, problem.field, problem.message) == (str(path), 2, field, message)


def test_qrels_comments_are_skipped_as_trec_eval_does():
    folder = shared("trec_eval")
    plain = read_qrels(folder / "qrels.test")
    plain["301"]["CR#93E-1860"] = plain["301"].pop("CR93E-1860")  # a '#' inside a line is no comment
    assert read_qrels(folder / "qrels.test.with-comments") == plain


@pytest.mark.parametrize("reader", [read_qrels, read_run, read_topics])
def test_a_trec_file_without_records_is_an_error(tmp_path, reader):
    path = tmp_path / "empty"
    path.write_text("\n  \n")
    with pytest.raises(InputError) as raised:
        reader(path)
    (problem,) = raised.value.problems
    assert problem.file == str(path) and problem.message.startswith("no ") and problem.fix


def test_a_run_sharing_no_query_with_the_qrels_is_refused(tmp_path):
    qrels, run = tmp_path / "qrels", tmp_path / "run"
    qrels.write_text("1 0 d1 1\n2 0 d2 0\n")
    run.write_text("q1 Q0 d1 1 2.0 t\nq2 Q0 d1 1 2.0 t\n")
    with pytest.raises(InputError) as raised:
        read_qrels_and_run(qrels, run)
    (problem,) = raised.value.problems
    assert problem.file == str(run) and problem.message.startswith("none of the run's 2 queries (q1, q2, …)")
    run.write_text("1 Q0 d9 1 2.0 t\n3 Q0 d1 1 2.0 t\n")  # one query judged: fine
    judged, frame = read_qrels_and_run(qrels, run)
    assert judged == {"1": {"d1": 1}, "2": {"d2": 0}} and len(frame) == 2
    with pytest.raises(InputError, match="no query has a document judged 2 or higher"):
        read_qrels_and_run(qrels, run, relevance=2)


def test_topics_that_conflict_or_lack_text_name_their_line(tmp_path):
    path = tmp_path / "topics"
    path.write_text("1\tcats\n2\t \n1\tdogs\n")
    with pytest.raises(InputError) as raised:
        read_topics(path)
    assert [(p.line, p.message) for p in raised.value.problems] == [
        (2, "topic '2' has no title text"),
        (3, "topic '1' is given twice with different texts (first on line 1)"),
    ]
    with pytest.raises(InputError, match="unknown topic field"):
        read_topics(path, field="titel")


def test_unclosed_sgml_topics_are_linear_and_named(tmp_path):
    path = tmp_path / "topics"
    path.write_text("<top>\n<num> 1\n<title> a\n</top>\n" + "<top>\n" + "x" * 200_000)
    with pytest.raises(InputError) as raised:
        read_topics(path)
    (problem,) = raised.value.problems
    assert (problem.line, problem.message) == (5, "a <top> without </top>")


# --------------------------------------------------------------------------- strict BEIR folders


def beir_problems(source, tmp_path, **options):
    options.setdefault("splits", {"test": "dev"})
    with pytest.raises(BenchmarkError) as raised:
        import_beir(BeirImport(source=source, out=tmp_path / "out", name="toy", version="1", **options))
    assert not (tmp_path / "out").exists()
    return raised.value.problems


def test_beir_records_without_text_or_with_integer_ids_are_refused(tmp_path):
    source = write_beir(tmp_path / "beir", [("1", "d1", 1)])
    corpus = source / "corpus.jsonl"
    corpus.write_text('{"_id": "d1", "title": "Cats"}\n{"_id": 2, "title": "", "text": "x"}\n')
    problems = beir_problems(source, tmp_path)
    assert [(p.line, p.field, p.message) for p in problems] == [
        (1, "text", "missing required key"),
        (2, "_id", "Input should be a valid string (got 2)"),
    ]
    assert problems[1].fix == 'IDs are JSON strings: quote it, e.g. "_id": "12"'


def test_beir_qrels_with_a_bad_score_or_conflicting_grades(tmp_path):
    source = write_beir(tmp_path / "beir", [("1", "d1", 1), ("2", "d2", "high"), ("1", "d1", 2), ("1", "d1", 1)])
    problems = beir_problems(source, tmp_path)
    assert [(p.line, p.field, p.message) for p in problems] == [
        (3, "score", "score 'high' is not an integer"),
        (4, "score", "query '1' judges document 'd1' 1 on line 2 and 2 here"),
    ]


def test_beir_splits_must_exist_and_name_a_known_benchmark_split(tmp_path):
    source = write_beir(tmp_path / "beir", [("1", "d1", 1)])
    (bogus,) = beir_problems(source, tmp_path, splits={"test": "bogus"})
    assert (bogus.file, bogus.field) == ("--split", "test=bogus")
    assert bogus.message == "'bogus' is not a benchmark split rageval knows (dev, release)"
    (missing,) = beir_problems(source, tmp_path, splits={"../../etc/passwd": "dev"})
    assert missing.message == "qrels split '../../etc/passwd' not found" and missing.fix == "available: test"
    imported = import_beir(
        BeirImport(
            source=source,
            out=tmp_path / "out",
            name="toy",
            version="1",
            splits={"test": "bogus"},
            extra_splits=["bogus"],
        )
    )
    assert load_benchmark(imported).spec.splits == ["bogus"]


def test_an_empty_beir_split_or_a_repeated_id_is_refused(tmp_path):
    source = write_beir(tmp_path / "beir", [])
    (empty,) = beir_problems(source, tmp_path)
    assert empty.file.endswith("test.tsv") and empty.message == "no judgments in the file"
    source = write_beir(tmp_path / "beir2", [("1", "d1", 1)])
    with (source / "queries.jsonl").open("a") as handle:
        handle.write('{"_id": "1", "text": "again"}\n')
    (repeat,) = beir_problems(source, tmp_path)
    assert (repeat.line, repeat.field, repeat.message) == (4, "_id", "_id '1' repeats (first on line 1)")


def test_an_out_folder_that_is_a_file_is_named(tmp_path):
    source = write_beir(tmp_path / "beir", [("1", "d1", 1)])
    (tmp_path / "taken").write_text("a file")
    with pytest.raises(BenchmarkError) as raised:
        import_beir(BeirImport(source=source, out=tmp_path / "taken", name="toy", version="1", splits={"test": "dev"}))
    (problem,) = raised.value.problems
    assert (problem.file, problem.message) == (str(tmp_path / "taken"), "is a file, not a folder")
