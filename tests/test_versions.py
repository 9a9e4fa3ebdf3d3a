"""Append-only versions: a new version names its predecessor; silent drops and edits are refused."""

from __future__ import annotations

import datetime as dt
import json
import shutil

import pytest
import yaml
from conftest import DEMO
from typer.testing import CliRunner

from rageval.benchmark.loading import load_benchmark, validate_benchmark, write_hashes
from rageval.benchmark.versions import log_change, new_version, next_version
from rageval.cli import app
from rageval.errors import BenchmarkError
from rageval.hashing import sha256_file

DAY = dt.date(2026, 11, 3)


@pytest.fixture
def demo(tmp_path):
    return shutil.copytree(DEMO, tmp_path / "demo")


def cases_of(root):
    return [json.loads(line) for line in (root / "cases.jsonl").read_text().splitlines()]


def rewrite(root, cases):
    (root / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    write_hashes(root)


def problems_of(root):
    benchmark, problems = validate_benchmark(root)
    assert benchmark is None, "expected the version to be refused"
    return problems


def test_new_version_names_its_predecessor_and_leaves_it_untouched(demo):
    before = {name: sha256_file(demo / name) for name in ("benchmark.yaml", "documents.jsonl", "cases.jsonl")}
    folder = new_version(demo, "1.1.0")
    assert folder == demo.parent / "rageval-demo-v1.1.0"
    spec = yaml.safe_load((folder / "benchmark.yaml").read_text())
    assert spec["version"] == "1.1.0"
    assert spec["predecessor"] == {"path": "../demo", "version": "1.0.0", "cases": before["cases.jsonl"]}
    assert spec["changelog"] == []
    new = load_benchmark(folder)
    assert new.cases == load_benchmark(demo).cases
    assert {name: sha256_file(demo / name) for name in before} == before  # the old version is untouched
    with pytest.raises(BenchmarkError, match="exists already"):
        new_version(demo, "1.1.0")
    assert next_version("1.0.0") == "1.0.1" and next_version("v3") == "v4"


def test_a_silently_dropped_case_is_refused_and_a_retired_one_accepted(demo):
    folder = new_version(demo, "1.1.0")
    cases = cases_of(folder)
    rewrite(folder, [c for c in cases if c["queryId"] != "q-0003"])

    (problem,) = problems_of(folder)
    assert problem.file == "cases.jsonl" and problem.field == "queryId"
    assert (
        "case 'q-0003' of version 1.0.0 (cases.jsonl line 3 there) was dropped without being retired" in problem.message
    )
    assert "action: retired, cases: [q-0003], reason:" in problem.fix

    entry = log_change(folder, "retired", ["q-0003"], "includeTypeKeys was removed from the product", DAY)
    assert entry.version == "1.1.0"
    benchmark = load_benchmark(folder)
    assert [c.queryId for c in benchmark.cases_for("dev")][:2] == ["q-0004", "q-0005"]
    (logged,) = benchmark.spec.changelog
    assert (logged.date, logged.action, logged.cases, logged.reason) == (
        DAY,
        "retired",
        ["q-0003"],
        "includeTypeKeys was removed from the product",
    )
    assert yaml.safe_load((folder / "benchmark.yaml").read_text())["changelog"][0]["date"] == DAY


def test_a_silently_edited_query_or_judgment_is_refused_and_a_rejudged_one_accepted(demo):
    folder = new_version(demo, "1.1.0")
    cases = cases_of(folder)
    cases[1]["query"] = "How do we move to Frankfurt?"  # q-0002, line 2
    cases[2]["relevant"][0]["grade"] = 2  # q-0003, line 3
    rewrite(folder, cases)

    problems = {(p.line, p.field): p for p in problems_of(folder)}
    assert set(problems) == {(2, "query"), (3, "relevant")}
    assert "the query of case 'q-0002' differs from version 1.0.0's" in problems[2, "query"].message
    assert "the judgments of case 'q-0003' differ" in problems[3, "relevant"].message
    assert "action: re-judged" in problems[3, "relevant"].fix

    log_change(folder, "re-judged", ["q-0002", "q-0003"], "reviewed against the 2026-11 docs", DAY)
    assert load_benchmark(folder).spec.changelog[0].action == "re-judged"


def test_judgments_added_covers_additions_only(demo):
    folder = new_version(demo, "1.1.0")
    cases = cases_of(folder)
    cases[2]["relevant"].append({"documentId": "general-faq", "grade": 0})
    rewrite(folder, cases)
    log_change(folder, "judgments-added", ["q-0003"], "pooled judgments", DAY)
    assert load_benchmark(folder)

    cases[2]["relevant"][0]["grade"] = 1  # an existing judgment changed: not an addition
    rewrite(folder, cases)
    (problem,) = problems_of(folder)
    assert problem.field == "relevant" and "covers new judgments only" in problem.message


def test_new_cases_need_an_added_entry_and_may_carry_a_time_slice(demo):
    folder = new_version(demo, "1.1.0")
    cases = cases_of(folder)
    new_case = {**cases[2], "queryId": "q-0100", "slice": ["added-2026-11", "exact-term"]}
    rewrite(folder, [*cases, new_case])
    (problem,) = problems_of(folder)
    assert (problem.line, problem.field) == (56, "queryId") and "not list it as added" in problem.message

    log_change(folder, "added", ["q-0100"], "failure found in production, 2026-11", DAY)
    benchmark = load_benchmark(folder)
    assert benchmark.cases[-1].slice[0] == "added-2026-11"


def test_changelog_entries_must_match_the_cases(demo):
    folder = new_version(demo, "1.1.0")
    log_change(folder, "retired", ["q-0003"], "no longer relevant", DAY)  # ... but q-0003 is still there
    log_change(folder, "added", ["q-0004"], "oops", DAY)  # q-0004 existed already
    problems = problems_of(folder)
    assert [(p.file, p.field) for p in problems] == [
        ("benchmark.yaml", "changelog[0].cases"),
        ("benchmark.yaml", "changelog[1].cases"),
    ]
    assert "listed as retired but is still in cases.jsonl" in problems[0].message
    assert problems[0].line is not None
    with pytest.raises(BenchmarkError, match="reason is empty"):
        log_change(folder, "retired", ["q-0003"], "  ", DAY)
    with pytest.raises(BenchmarkError, match="action"):
        log_change(folder, "deleted", ["q-0003"], "why", DAY)


def test_a_changed_or_missing_predecessor_is_refused(demo):
    folder = new_version(demo, "1.1.0")
    with (demo / "cases.jsonl").open("a") as handle:
        handle.write(json.dumps({**cases_of(demo)[0], "queryId": "q-0999"}) + "\n")
    (problem,) = problems_of(folder)
    assert problem.field == "predecessor" and "changed after this version was started" in problem.message

    shutil.rmtree(demo)
    (problem,) = problems_of(folder)
    assert "the predecessor's cases.jsonl is not at" in problem.message


def test_cli_new_version_and_log_change(demo):
    runner = CliRunner()
    out = demo.parent / "v2"
    result = runner.invoke(app, ["benchmark", "new-version", str(demo), "--version", "2.0.0", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert f"wrote {out}" in result.output
    rewrite(out, cases_of(out)[1:])
    result = runner.invoke(
        app,
        [
            "benchmark",
            "log-change",
            str(out),
            "retired",
            "--case",
            "q-0001",
            "--reason",
            "duplicate of q-0002",
            "--date",
            "2026-11-03",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "2.0.0 2026-11-03: retired q-0001 (duplicate of q-0002)" in result.output
    assert load_benchmark(out).spec.predecessor.version == "1.0.0"
