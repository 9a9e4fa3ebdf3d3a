"""The rageval command: help, validation exit codes, trec_eval-style metrics output, imports."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CASES, shared, write_tiny
from typer.testing import CliRunner

from rageval.cli import app

runner = CliRunner()
COMMANDS = [
    "benchmark",
    "metrics",
    "run",
    "verify",
    "runs",
    "export-run",
    "ui",
    "sweep",
    "compare",
    "gate",
    "diff-notebooks",
    "demo",
    "reproduce",
    "judge",
    "migrate-labels",
]


def invoke(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def test_console_script_help_lists_the_commands():
    # The script sits beside the interpreter running the tests (a venv need not be on PATH).
    beside = Path(sys.executable).parent / "rageval"
    exe = str(beside) if beside.exists() else shutil.which("rageval")
    assert exe, "the rageval console script is not installed"
    out = subprocess.run([exe, "--help"], capture_output=True, text=True, check=True).stdout
    for command in COMMANDS:
        assert command in out
    sub = subprocess.run([exe, "benchmark", "--help"], capture_output=True, text=True, check=True).stdout
    for command in ("validate", "hash", "import", "export-qrels"):
        assert command in sub


def test_validate_reports_every_problem_and_exits_nonzero(tmp_path):
    cases = [
        dict(CASES[0], corpusVersion="old"),
        dict(CASES[1], relevant=[{"documentId": "nope", "grade": 1}]),
        CASES[2],
    ]
    result = invoke("benchmark", "validate", write_tiny(tmp_path / "b", cases=cases))
    assert result.exit_code == 1
    assert "cases.jsonl:1: corpusVersion:" in result.output
    assert "cases.jsonl:2: relevant[0].documentId: unknown document 'nope'" in result.output
    assert "2 problems" in result.output


def test_validate_a_sound_benchmark_prints_counts(tiny):
    result = invoke("benchmark", "validate", tiny)
    assert result.exit_code == 0, result.output
    assert "documents: 3" in result.output and "dev cases: 2 (0 unanswerable)" in result.output
    assert "release cases: 1 (1 unanswerable)" in result.output


def test_hash_write_records_a_deliberate_change(tiny):
    with (tiny / "cases.jsonl").open("a") as handle:
        handle.write(json.dumps(dict(CASES[0], queryId="q9")) + "\n")
    assert invoke("benchmark", "validate", tiny).exit_code == 1
    assert invoke("benchmark", "hash", tiny, "--write").exit_code == 0
    assert invoke("benchmark", "validate", tiny).exit_code == 0


def test_metrics_prints_trec_eval_lines_and_json(tmp_path):
    qrels = tmp_path / "qrels"
    qrels.write_text("1 0 a 1\n1 0 b 0\n2 0 c 2\n3 0 a 0\n")  # query 3: judged, nothing relevant
    run = tmp_path / "run"
    run.write_text("1 Q0 b 1 2.0 t\n1 Q0 a 2 1.0 t\n2 Q0 c 1 5.0 t\n3 Q0 a 1 1.0 t\n4 Q0 a 1 1.0 t\n")
    result = invoke("metrics", qrels, run, "-m", "RR", "-m", "Hit@1", "--per-query")
    assert result.exit_code == 0, result.output
    lines = [line.split("\t") for line in result.stdout.splitlines()]
    # trec_eval's rule by default: query 3 scores 0 and counts; query 4 (no judgment) is skipped.
    assert [(m.strip(), q, v) for m, q, v in lines] == [
        ("RR", "1", "0.5000"),
        ("RR", "2", "1.0000"),
        ("RR", "3", "0.0000"),
        ("RR", "all", "0.5000"),
        ("Hit@1", "1", "0.0000"),
        ("Hit@1", "2", "1.0000"),
        ("Hit@1", "3", "0.0000"),
        ("Hit@1", "all", "0.3333"),
    ]
    assert "# 1 queries skipped (no judgment); num_q 3" in result.stderr
    payload = json.loads(invoke("metrics", qrels, run, "-m", "RR", "--format", "json").stdout)
    assert payload["aggregates"] == {"RR": 0.5} and payload["skipped"] == ["4"] and payload["num_q"] == 3
    assert payload["contract"]["options"]["no_relevant"] == "score"
    # The metric contract's rule (what runs record), one flag away.
    skip = json.loads(invoke("metrics", qrels, run, "-m", "RR", "--format", "json", "--no-relevant", "skip").stdout)
    assert skip["aggregates"] == {"RR": 0.75} and skip["skipped"] == ["3", "4"] and skip["num_q"] == 2


def test_metrics_keeps_the_first_of_a_duplicate_and_refuses_when_asked(tmp_path):
    qrels = tmp_path / "qrels"
    qrels.write_text("1 0 a 1\n")
    run = tmp_path / "run"
    run.write_text("1 Q0 b 1 2.0 t\n1 Q0 b 2 1.0 t\n1 Q0 a 3 0.5 t\n")
    kept = invoke("metrics", qrels, run, "-m", "RR")  # the contract: b counts once, at rank 1; a moves to 2
    assert kept.exit_code == 0 and kept.stdout.split("\t")[-1].strip() == "0.5000"
    counted = invoke("metrics", qrels, run, "-m", "RR", "--format", "json")
    assert json.loads(counted.stdout)["duplicates_dropped"] == 1
    refused = invoke("metrics", qrels, run, "-m", "RR", "--duplicates", "error")
    assert refused.exit_code == 1 and "1/b" in refused.output


def test_metrics_matches_trec_eval_on_its_suite():
    folder = shared("trec_eval")
    result = invoke("metrics", folder / "qrels.test", folder / "results.test", "-m", "P@10", "-m", "nDCG@100", "-q")
    golden = {
        tuple(p.strip() for p in line.split("\t")[:2]): line.split("\t")[2]
        for line in (folder / "out.test.aq").read_text().splitlines()
    }
    names = {"P@10": "P_10", "nDCG@100": "ndcg_cut_100"}
    for line in result.stdout.splitlines():
        measure, query, value = (p.strip() for p in line.split("\t"))
        assert value == golden[(names[measure], query)]


@pytest.mark.realdata
def test_import_scifact_then_validate(tmp_path):
    source = shared("scifact")
    out = tmp_path / "scifact"
    result = invoke(
        "benchmark",
        "import",
        "beir",
        source,
        "--out",
        out,
        "--name",
        "scifact",
        "--version",
        "1",
        "--split",
        "train=dev",
        "--split",
        "test=release",
    )
    assert result.exit_code == 0, result.output
    assert "5183 documents" in result.output
    validated = invoke("benchmark", "validate", out)
    assert validated.exit_code == 0
    assert "documents: 5183" in validated.output
    assert "dev cases: 809" in validated.output and "release cases: 300" in validated.output


def test_cli_choices_are_the_contracts_and_the_schemas():
    """The CLI offers exactly the choices the models accept (one source for each list)."""
    from typing import get_args

    from rageval.benchmark.schema import LEVELS
    from rageval.cli import common
    from rageval.config.schema import EvaluationConfig
    from rageval.evaluation.contract import DUPLICATE_POLICIES, GAINS, NO_RELEVANT_POLICIES, TIE_POLICIES

    assert [m.value for m in common.TiePolicy] == list(TIE_POLICIES)
    assert [m.value for m in common.NoRelevantPolicy] == list(NO_RELEVANT_POLICIES)
    assert [m.value for m in common.DuplicatePolicy] == list(DUPLICATE_POLICIES)
    assert [m.value for m in common.Gain] == list(GAINS)
    assert [m.value for m in common.Level] == list(LEVELS)
    fields = EvaluationConfig.model_fields
    assert get_args(fields["ties"].annotation) == TIE_POLICIES
    assert get_args(fields["gain"].annotation) == GAINS
    assert get_args(fields["level"].annotation) == ("auto", *LEVELS)
    result = CliRunner().invoke(app, ["metrics", "q", "r", "-m", "RR", "--ties", "bogus"], terminal_width=200)
    output = " ".join(re.sub("[│╭╮╰╯─]", " ", result.output).split())  # the error box wraps lines
    assert result.exit_code == 2 and "'bogus' is not one of 'docid-asc', 'docid-desc', 'input-order'" in output
