"""Every bad input of the Validation list is reported with its file and line or field."""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import CASES, DOCS, write_tiny

from rageval.benchmark.loading import load_benchmark, validate_benchmark
from rageval.errors import BenchmarkError


def problems_of(root):
    benchmark, problems = validate_benchmark(root)
    assert benchmark is None, "expected the benchmark to be refused"
    return problems


def only(problems, file):
    found = [p for p in problems if p.file == file]
    assert found, f"no problem reported for {file}: {problems}"
    return found


def test_valid_tiny_benchmark_loads(tiny):
    benchmark = load_benchmark(tiny)
    assert list(benchmark.documents) == ["alpha", "beta", "gamma"]
    assert [c.queryId for c in benchmark.cases_for("dev")] == ["q1", "q2"]
    assert benchmark.qrels("dev") == {"q1": {"alpha": 3}, "q2": {"beta": 2, "gamma": 0}}
    assert benchmark.cases_for("release")[0].answerable is False
    assert len(benchmark.hashes["qrels"]) == 64


def test_malformed_json_names_file_and_line(tmp_path):
    raw = json.dumps(DOCS[0]) + "\n" + '{"id": "beta", "title": "B", "text": \n'
    (problem,) = only(problems_of(write_tiny(tmp_path / "b", raw_docs=raw)), "documents.jsonl")
    assert problem.line == 2 and "malformed JSON" in problem.message
    assert str(problem).startswith("documents.jsonl:2:")


def test_unknown_key_names_line_field_and_allowed_keys(tmp_path):
    cases = [dict(CASES[0], colour="red"), *CASES[1:]]
    (problem,) = only(problems_of(write_tiny(tmp_path / "b", cases=cases)), "cases.jsonl")
    assert (problem.line, problem.field) == (1, "colour")
    assert "unknown key" in problem.message and "queryId" in problem.fix


def test_unknown_key_inside_a_judgment(tmp_path):
    cases = [dict(CASES[0], relevant=[{"documentId": "alpha", "grade": 3, "score": 1}]), *CASES[1:]]
    (problem,) = only(problems_of(write_tiny(tmp_path / "b", cases=cases)), "cases.jsonl")
    assert (problem.line, problem.field) == (1, "relevant[0].score")
    assert "documentId" in problem.fix


def test_missing_key(tmp_path):
    docs = [DOCS[0], {"id": "beta", "text": "no title"}, DOCS[2]]
    (problem,) = only(problems_of(write_tiny(tmp_path / "b", documents=docs)), "documents.jsonl")
    assert (problem.line, problem.field) == (2, "title") and "missing" in problem.message


def test_duplicate_document_id(tmp_path):
    docs = [*DOCS, dict(DOCS[0], title="again")]
    (problem,) = only(problems_of(write_tiny(tmp_path / "b", documents=docs)), "documents.jsonl")
    assert (problem.line, problem.field) == (4, "id") and "first on line 1" in problem.message


def test_duplicate_query_id(tmp_path):
    cases = [*CASES, dict(CASES[1], queryId="q1")]
    (problem,) = only(problems_of(write_tiny(tmp_path / "b", cases=cases)), "cases.jsonl")
    assert (problem.line, problem.field) == (4, "queryId") and "duplicate query ID 'q1'" in problem.message


def test_judgment_of_unknown_document(tmp_path):
    cases = [CASES[0], dict(CASES[1], relevant=[{"documentId": "delta", "grade": 2}]), CASES[2]]
    (problem,) = only(problems_of(write_tiny(tmp_path / "b", cases=cases)), "cases.jsonl")
    assert (problem.line, problem.field) == (2, "relevant[0].documentId") and "'delta'" in problem.message


def test_grade_outside_rubric(tmp_path):
    cases = [CASES[0], dict(CASES[1], relevant=[{"documentId": "beta", "grade": 5}]), CASES[2]]
    (problem,) = only(problems_of(write_tiny(tmp_path / "b", cases=cases)), "cases.jsonl")
    assert (problem.line, problem.field) == (2, "relevant[0].grade")
    assert "outside the rubric" in problem.message and "0, 1, 2, 3" in problem.fix


def test_offsets_outside_document(tmp_path):
    cases = [dict(CASES[0], relevant=[{"documentId": "alpha", "grade": 3, "start": 10, "end": 5000}]), *CASES[1:]]
    (problem,) = only(problems_of(write_tiny(tmp_path / "b", cases=cases)), "cases.jsonl")
    assert (problem.line, problem.field) == (1, "relevant[0].end") and "outside document 'alpha'" in problem.message


def test_offsets_in_a_document_unit_benchmark(tmp_path):
    root = write_tiny(tmp_path / "b", spec_overrides={"relevanceUnit": "document"})
    (problem,) = only(problems_of(root), "cases.jsonl")
    assert problem.line == 1 and "relevanceUnit is 'document'" in problem.message


def test_empty_query(tmp_path):
    cases = [CASES[0], CASES[1], dict(CASES[2], query="   ")]
    (problem,) = only(problems_of(write_tiny(tmp_path / "b", cases=cases)), "cases.jsonl")
    assert (problem.line, problem.field) == (3, "query") and "empty" in problem.message


def test_corpus_version_mismatch(tmp_path):
    cases = [CASES[0], dict(CASES[1], corpusVersion="tiny-0"), CASES[2]]
    (problem,) = only(problems_of(write_tiny(tmp_path / "b", cases=cases)), "cases.jsonl")
    assert (problem.line, problem.field) == (2, "corpusVersion")
    assert "'tiny-0'" in problem.message and "'tiny-1'" in problem.message


def test_file_hash_differs_from_benchmark_yaml(tiny):
    with (tiny / "documents.jsonl").open("a") as handle:
        handle.write(json.dumps({"id": "delta", "title": "D", "text": "added later"}) + "\n")
    (problem,) = only(problems_of(tiny), "benchmark.yaml")
    assert problem.field == "files.documents.jsonl"
    lines = (tiny / "benchmark.yaml").read_text().splitlines()
    assert lines[problem.line - 1].strip().startswith("documents.jsonl:")
    assert "new version" in problem.fix


def test_bad_benchmark_yaml_key_names_its_line(tiny):
    spec = yaml.safe_load((tiny / "benchmark.yaml").read_text())
    spec["relevanceUnits"] = "passage"
    (tiny / "benchmark.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    problems = only(problems_of(tiny), "benchmark.yaml")
    unknown = next(p for p in problems if p.field == "relevanceUnits")
    lines = (tiny / "benchmark.yaml").read_text().splitlines()
    assert lines[unknown.line - 1].startswith("relevanceUnits:")


def test_every_problem_is_reported_at_once(tmp_path):
    cases = [dict(CASES[0], query=""), dict(CASES[1], corpusVersion="x"), dict(CASES[2], extra=1)]
    problems = problems_of(write_tiny(tmp_path / "b", cases=cases))
    assert {(p.line, p.field) for p in problems} >= {(1, "query"), (2, "corpusVersion"), (3, "extra")}
    with pytest.raises(BenchmarkError) as raised:
        load_benchmark(tmp_path / "b")
    assert "3 problems found" in str(raised.value)


def test_undeclared_split_is_refused(tiny):
    with pytest.raises(BenchmarkError, match="split 'test' is not declared"):
        load_benchmark(tiny).cases_for("test")


# --------------------------------------------------------------------------- conflicting, empty, late


@pytest.mark.parametrize("unit", ["passage", "document"])
def test_a_document_judged_twice_with_different_grades(tmp_path, unit):
    twice = [
        {"documentId": "beta", "grade": 2},
        {"documentId": "gamma", "grade": 0},
        {"documentId": "beta", "grade": 0},
    ]
    cases = [dict(CASES[0], relevant=[{"documentId": "alpha", "grade": 3}]), dict(CASES[1], relevant=twice), CASES[2]]
    root = write_tiny(tmp_path / "b", cases=cases, spec_overrides={"relevanceUnit": unit})
    (problem,) = only(problems_of(root), "cases.jsonl")
    assert (problem.line, problem.field) == (2, "relevant[2].documentId")
    assert problem.message == "document 'beta' is judged twice (relevant[0] and relevant[2]) with grades 2 and 0"
    assert problem.fix.startswith("keep one judgment per document")


def test_the_same_span_judged_twice(tmp_path):
    span = {"documentId": "alpha", "grade": 3, "start": 9, "end": 57}
    cases = [dict(CASES[0], relevant=[span, dict(span, grade=1), dict(span, start=0)]), *CASES[1:]]
    (problem,) = only(problems_of(write_tiny(tmp_path / "b", cases=cases)), "cases.jsonl")
    assert problem.message == "document 'alpha' 9–57 is judged twice (relevant[0] and relevant[1]) with grades 3 and 1"


@pytest.mark.parametrize("name,what", [("cases.jsonl", "cases"), ("documents.jsonl", "documents")])
def test_an_empty_data_file_is_refused(tmp_path, name, what):
    root = write_tiny(tmp_path / "b", **{"raw_cases" if what == "cases" else "raw_docs": "\n"})
    (problem,) = [p for p in problems_of(root) if p.file == name]
    assert problem.message == f"the file holds no {what}" and problem.fix == f"write one {what[:-1]} as JSON per line"


@pytest.mark.parametrize("label", ["..", "."])
def test_a_slice_label_that_cannot_be_an_mlflow_key_fails_validation(tmp_path, label):
    cases = [CASES[0], dict(CASES[1], slice=["long-tail", label]), CASES[2]]
    (problem,) = only(problems_of(write_tiny(tmp_path / "b", cases=cases)), "cases.jsonl")
    assert (problem.line, problem.field) == (2, "slice[1]")
    assert problem.message == f"slice label '{label}' would read as a folder in an MLflow key (MLflow refuses it)"
    assert problem.fix.startswith("rename the slice")


def test_a_slice_label_too_long_for_an_mlflow_key(tmp_path):
    cases = [CASES[0], dict(CASES[1], slice=["é" * 40]), CASES[2]]
    (problem,) = only(problems_of(write_tiny(tmp_path / "b", cases=cases)), "cases.jsonl")
    assert problem.field == "slice[0]" and "is 280 characters long as a part of an MLflow key" in problem.message


def test_the_key_escaping_is_the_one_measures_use_and_reverses():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from rageval.evaluation import measures
    from rageval.validation import metric_key

    assert measures.metric_key is metric_key

    @settings(max_examples=200, deadline=None, derandomize=True)
    @given(st.text(max_size=30))
    def reverses(text):
        assert measures.measure_from_key(metric_key(text)) == text

    reverses()


def test_a_bom_in_cases_and_benchmark_yaml_is_read_through(tmp_path):
    root = write_tiny(tmp_path / "b")
    for name in ("cases.jsonl", "benchmark.yaml"):
        (root / name).write_bytes(b"\xef\xbb\xbf" + (root / name).read_bytes())
    problems = problems_of(root)  # only the hash of the changed cases.jsonl differs
    assert [(p.file, p.field) for p in problems] == [("benchmark.yaml", "files.cases.jsonl")]


def test_a_yaml_key_given_twice_in_benchmark_yaml(tiny):
    with (tiny / "benchmark.yaml").open("a") as handle:
        handle.write("relevanceUnit: document\n")
    (problem,) = only(problems_of(tiny), "benchmark.yaml")
    assert problem.field == "relevanceUnit" and "given twice (on lines 4 and" in problem.message
