"""The provenance block of cases and of benchmark.yaml: validated, and retention enforced."""

from __future__ import annotations

import datetime as dt

import pytest
from conftest import CASES, DEMO, write_tiny
from typer.testing import CliRunner

from rageval.benchmark.loading import load_benchmark, validate_benchmark, write_hashes
from rageval.benchmark.provenance import SOURCES
from rageval.benchmark.versions import log_change, new_version, write_cases
from rageval.cli import app
from rageval.errors import BenchmarkError

LOG = {
    "source": "search-log",
    "authorization": "DPA-2026-014",
    "redaction": {"rules": "presidio-default", "version": "2.2.360", "types": ["email", "phone"]},
    "retention": "2999-12-31",
    "access": ["privacy-team"],
}


def with_provenance(*blocks):
    """The tiny cases, the first ones given the blocks (None: none of its own)."""
    cases = [dict(case) for case in CASES]
    for case, block in zip(cases, blocks, strict=False):
        if block is not None:
            case["provenance"] = block
    return cases


def problems_of(root, **kwargs):
    benchmark, problems = validate_benchmark(root, **kwargs)
    assert benchmark is None, "expected the benchmark to be refused"
    return problems


def test_a_full_block_loads_and_a_case_without_one_inherits_the_default(tmp_path):
    default = {"source": "acceptance", "access": ["docs-team"]}
    root = write_tiny(tmp_path / "b", cases=with_provenance(LOG), spec_overrides={"provenance": default})
    benchmark = load_benchmark(root)
    first, second = benchmark.cases[:2]
    assert benchmark.provenance_of(first).source == "search-log"
    assert benchmark.provenance_of(first).redaction.types == ["email", "phone"]
    assert benchmark.provenance_of(first).retention == dt.date(2999, 12, 31)
    assert benchmark.provenance_of(second).source == "acceptance"  # the default, as a whole
    assert benchmark.provenance_of(second).access == ["docs-team"]


def test_the_demo_labels_its_cases_as_hand_written():
    benchmark = load_benchmark(DEMO)
    assert {benchmark.provenance_of(case).source for case in benchmark.cases} == {"expert-written"}


def test_an_unknown_source_lists_the_choices(tmp_path):
    root = write_tiny(tmp_path / "b", cases=with_provenance({"source": "twitter"}))
    (problem,) = problems_of(root)
    assert (problem.file, problem.line, problem.field) == ("cases.jsonl", 1, "provenance.source")
    assert all(repr(source) in problem.message for source in SOURCES)


@pytest.mark.parametrize("source", ["search-log", "support", "failed-navigation", "incident"])
def test_a_user_record_source_needs_an_authorization(tmp_path, source):
    block = {key: value for key, value in LOG.items() if key != "authorization"} | {"source": source}
    (problem,) = problems_of(write_tiny(tmp_path / "b", cases=with_provenance(None, block)))
    assert (problem.file, problem.line, problem.field) == ("cases.jsonl", 2, "provenance.authorization")
    assert f"source '{source}' is a record of real users" in problem.message
    assert "add `authorization`" in problem.fix


def test_a_default_without_authorization_is_reported_in_benchmark_yaml(tmp_path):
    root = write_tiny(tmp_path / "b", spec_overrides={"provenance": {"source": "support"}})
    (problem,) = problems_of(root)
    assert (problem.file, problem.field) == ("benchmark.yaml", "provenance.authorization")
    lines = (root / "benchmark.yaml").read_text().splitlines()
    assert lines[problem.line - 1] == "provenance:"


@pytest.mark.parametrize(
    ("redaction", "field", "words"),
    [
        ({"rules": "presidio", "version": "1", "removed": ["jane@example.com"]}, "provenance.redaction", "never the"),
        ({"rules": "replaced jane@example.com with <EMAIL>", "version": "1"}, "provenance.redaction.rules", "looks"),
        ({"rules": "presidio", "version": "1", "types": ["+49 30 1234567"]}, "provenance.redaction.types[0]", "looks"),
        ({"rules": "presidio", "version": "4111111111111111"}, "provenance.redaction.version", "looks"),
    ],
)
def test_a_redaction_that_holds_text_is_refused(tmp_path, redaction, field, words):
    (problem,) = problems_of(write_tiny(tmp_path / "b", cases=with_provenance(dict(LOG, redaction=redaction))))
    assert (problem.line, problem.field) == (1, field)
    assert words in problem.message and "removed" in problem.message


def test_a_case_past_its_retention_date_fails_validation_until_retired(tmp_path):
    old = dict(LOG, retention="2026-03-31")
    root = write_tiny(tmp_path / "b", cases=with_provenance(None, old))
    assert load_benchmark(root, today=dt.date(2026, 3, 31)).cases  # the date itself is the last day of use
    (problem,) = problems_of(root, today=dt.date(2026, 4, 1))
    assert (problem.file, problem.line, problem.field) == ("cases.jsonl", 2, "provenance.retention")
    assert problem.message == (
        "case 'q2' is past its retention date 2026-03-31 (today is 2026-04-01): it may no longer be used"
    )
    assert "retire it" in problem.fix and "new-version" in problem.fix

    # Retiring it: a new version may still be started from the expired one, and drops the case.
    folder = new_version(root, "1.1.0")
    kept = [case for case in load_benchmark(root, retention=False).cases if case.queryId != "q2"]
    write_cases(folder / "cases.jsonl", kept)
    log_change(folder, "retired", ["q2"], "retention date passed", date=dt.date(2026, 4, 1))
    write_hashes(folder)
    retired = load_benchmark(folder, today=dt.date(2026, 4, 1))
    assert [case.queryId for case in retired.cases] == ["q1", "q3"]


def test_an_inherited_retention_date_is_one_problem_naming_the_cases(tmp_path):
    root = write_tiny(
        tmp_path / "b", spec_overrides={"provenance": {"source": "acceptance", "retention": "2020-01-01"}}
    )
    (problem,) = problems_of(root)
    assert (problem.file, problem.field) == ("benchmark.yaml", "provenance.retention")
    assert "3 case(s) inherit the retention date 2020-01-01" in problem.message and "q1, q2, q3" in problem.message


def test_validate_on_the_command_line_fails_on_a_past_retention_date(tmp_path):
    root = write_tiny(tmp_path / "b", cases=with_provenance(dict(LOG, retention="2020-01-01")))
    result = CliRunner().invoke(app, ["benchmark", "validate", str(root)])
    assert result.exit_code == 1
    assert "cases.jsonl:1: provenance.retention: case 'q1' is past its retention date 2020-01-01" in result.output


def test_the_format_docs_name_every_source():
    text = (DEMO.parents[1] / "docs" / "governance.md").read_text()
    section = text[text.index("## Query provenance") : text.index("## Diagnostics")]
    assert all(f"`{source}`" in section for source in SOURCES)


def test_a_run_refuses_a_benchmark_with_a_case_past_retention(tmp_path):
    from rageval.config.load import load_config
    from rageval.experiment.run import run_experiment

    root = write_tiny(tmp_path / "b", cases=with_provenance(dict(LOG, retention="2020-01-01")))
    config = load_config(DEMO.parents[1] / "params" / "bm25.yaml", benchmark=root, split="dev")
    with pytest.raises(BenchmarkError) as caught:
        run_experiment(config, cache=False)
    (problem,) = caught.value.problems
    assert (problem.file, problem.line, problem.field) == ("cases.jsonl", 1, "provenance.retention")
