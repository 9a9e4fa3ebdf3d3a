"""The rageval command: help, validation exit codes, trec_eval-style metrics output, imports."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CASES, DEMO, ROOT, shared, write_tiny
from typer.testing import CliRunner

from rageval.cli import app

runner = CliRunner()
COMMANDS = [
    "benchmark",
    "metrics",
    "run",
    "setup-git",
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
    "server",
    "online",
    "shadow",
    "queries",
    "review",
    "release",
    "checklist",
    "promote",
    "rollback",
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
    assert result.exit_code == 0, result.output
    seen = {}
    for line in result.stdout.splitlines():
        measure, query, value = (p.strip() for p in line.split("\t"))
        seen[(names[measure], query)] = value
    # Every line trec_eval printed for these measures (3 queries and "all", each), value for value.
    expected = {key: value for key, value in golden.items() if key[0] in names.values()}
    assert len(expected) == 8 and seen == expected


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


# --------------------------------------------------------------------------- failures: never a traceback


def boom(*args, **kwargs):
    raise RuntimeError("boom:\n  a second line")


def test_an_unexpected_exception_is_one_line_without_a_traceback(tmp_path, monkeypatch):
    import rageval.benchmark.trec as trec

    qrels, run = tmp_path / "qrels", tmp_path / "run"
    qrels.write_text("1 0 a 1\n")
    run.write_text("1 Q0 a 1 1.0 t\n")
    monkeypatch.setattr(trec, "read_qrels", boom)
    result = invoke("metrics", qrels, run, "-m", "RR")
    assert result.exit_code == 70 and isinstance(result.exception, SystemExit)
    assert result.stdout == "" and "Traceback" not in result.output
    assert result.stderr.splitlines() == [
        "error: internal error (RuntimeError: boom: a second line), please report it; "
        "rerun with `rageval --debug ...` for the traceback"
    ]


def test_debug_shows_the_traceback_of_an_unexpected_exception(tmp_path, monkeypatch):
    import rageval.benchmark.trec as trec

    qrels, run = tmp_path / "qrels", tmp_path / "run"
    qrels.write_text("1 0 a 1\n")
    run.write_text("1 Q0 a 1 1.0 t\n")
    monkeypatch.setattr(trec, "read_qrels", boom)
    result = invoke("--debug", "metrics", qrels, run, "-m", "RR")
    assert result.exit_code == 70
    lines = result.stderr.splitlines()
    assert lines[0] == "Traceback (most recent call last):" and "in boom" in result.stderr
    assert lines[-3:] == [
        "RuntimeError: boom:",
        "  a second line",
        "error: internal error (RuntimeError: boom: a second line), please report it",
    ]


def test_a_rageval_error_escaping_a_command_is_printed_as_bad_input(tmp_path, monkeypatch):
    from rageval.errors import BenchmarkError, Problem

    def refuse(*args, **kwargs):
        raise BenchmarkError(Problem(file="b/cases.jsonl", line=3, field="query", message="empty", fix="write one"))

    monkeypatch.setattr("rageval.benchmark.loading.validate_benchmark", refuse)
    result = invoke("benchmark", "validate", tmp_path)  # a command that does not catch it itself
    assert result.exit_code == 2
    assert result.stderr.splitlines() == ["error: b/cases.jsonl:3: query: empty (write one)"]


def test_invalid_yaml_in_a_notebook_parameter_names_the_parameter_and_the_fix(store):
    result = invoke("compare", "--baseline", "x", "-p", "top_n=[1", "-p", "day=2024-01-01", "--tracking-uri", store)
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.stderr.splitlines() == [
        "error: 2 problems found:",
        "--parameter: top_n: '[1' is not a YAML value (did not find expected ',' or ']') "
        "(quote text that holds YAML syntax, e.g. -p 'top_n=\"[1\"')",
        "--parameter: day: '2024-01-01' reads as a YAML date, which a notebook parameter cannot hold "
        "(quote it as text, e.g. -p 'day=\"2024-01-01\"', or give a number, list or mapping)",
    ]


def test_notebook_parameters_are_read_as_yaml_values():
    from rageval.cli.common import parse_notebook_parameters

    assert parse_notebook_parameters(["top_n=5", "note=a b", "measures=[AP, RR]", "x=null", 'q="[1"']) == {
        "top_n": 5,
        "note": "a b",
        "measures": ["AP", "RR"],
        "x": None,
        "q": "[1",
    }


@pytest.mark.parametrize(
    "content,message",
    [
        ("hello: [\n", ":1: not a notebook: not JSON (Expecting value)"),
        ('{"cells": 3, "nbformat": 4}', ": cells: not a notebook: no list of cells"),
        ('{"cells": [], "nbformat": 3}', ": nbformat: not a notebook of format 4 or later"),
        ('{"cells": [{"source": "x"}], "nbformat": 4}', ": cells[0]: not a notebook cell"),
        (None, ": is a folder, not a notebook"),
    ],
)
def test_a_notebook_option_that_is_no_notebook_is_bad_input(tmp_path, store, content, message):
    path = tmp_path / "nb.ipynb"
    path.mkdir() if content is None else path.write_text(content)
    result = invoke("compare", "--baseline", "x", "--notebook", path, "--tracking-uri", store)
    assert result.exit_code == 2 and "Traceback" not in result.output and "internal error" not in result.output
    assert result.stderr.startswith(f"error: {path}{message}")
    assert "(give a Jupyter notebook (.ipynb)" in result.stderr


def test_a_folder_given_where_a_file_is_expected_is_bad_input_naming_it(tmp_path, tiny, store):
    folder = tmp_path / "folder"
    folder.mkdir()
    text = tmp_path / "file.txt"
    text.write_text("x\n")
    rankings = tmp_path / "r.csv"
    rankings.write_text("query_id,rank,chunk_id,parent_id\n")
    trec_import = ["--out", tmp_path / "o", "--name", "n", "--version", "1"]
    cases = {
        "QRELS": ["metrics", folder, text, "-m", "RR"],
        "RUN": ["metrics", text, folder, "-m", "RR"],
        "--out": ["benchmark", "export-qrels", tiny, "--out", folder],
        "--config": [
            "benchmark",
            "export-qrels",
            tiny,
            "--out",
            tmp_path / "q",
            "--level",
            "passage",
            "--config",
            folder,
        ],
        "--topics": ["benchmark", "import", "trec", "--topics", folder, "--qrels", text, "--docs", text, *trec_import],
        "FILE": ["sweep", folder, "--tracking-uri", store],
        "--policy": ["gate", "--baseline", "a", "--candidate", "b", "--policy", folder, "--tracking-uri", store],
        "--chunking": ["judge", "pool", "--out", tmp_path / "p", "--rankings", f"a={rankings}", "--chunking", folder],
        "--to": ["migrate-labels", tiny, "--to", folder, "--from", folder],
    }
    for option, args in cases.items():
        result = invoke(*args)
        assert result.exit_code == 2, (option, result.output)
        assert result.stderr.startswith(f"error: {folder}: {option}: is a folder"), (option, result.stderr)
    # And the reverse: a file where a folder is expected.
    for args in (
        ["benchmark", "hash", text],
        ["benchmark", "log-change", text, "added", "--case", "q", "--reason", "r"],
    ):
        result = invoke(*args)
        assert result.exit_code == 2 and result.stderr.startswith(f"error: {text}: PATH: is a file, not a folder")
    missing = invoke("benchmark", "export-qrels", tiny, "--out", tmp_path / "none" / "q")
    assert missing.exit_code == 2 and f"folder {tmp_path / 'none'} does not exist" in missing.stderr


def test_printed_tables_carry_no_terminal_control_sequences(tmp_path):
    qrels, run = tmp_path / "qrels", tmp_path / "run"
    qrels.write_text("q\x1b[2J 0 a 1\n")
    run.write_text("q\x1b[2J Q0 a 1 1.0 t\nz\x1b]0;title\x07 Q0 a 1 1.0 t\n")
    result = invoke("metrics", qrels, run, "-m", "RR", "-q")
    assert result.exit_code == 0 and "\x1b" not in result.output and "\x07" not in result.output
    assert [line.split("\t")[1] for line in result.stdout.splitlines()] == ["q", "all"]  # q's ID, its escape gone


# --------------------------------------------------------------------------- exported files reproduce a run


def test_exported_passage_qrels_are_the_covering_chunks_and_say_how_runs_differ(tmp_path):
    from rageval.benchmark.chunking import chunk_corpus, chunk_qrels
    from rageval.benchmark.loading import load_benchmark
    from rageval.benchmark.trec import read_qrels
    from rageval.config.load import load_config

    params = ROOT / "params" / "bm25.yaml"
    config = load_config(params, [], split="dev")
    qrels = tmp_path / "qrels.passage"
    exported = invoke(
        "benchmark", "export-qrels", DEMO, "--split", "dev", "--level", "passage", "--config", params, "--out", qrels
    )
    assert exported.exit_code == 0, exported.output
    assert exported.stdout.startswith(f"wrote {qrels}: ") and "credits each span once" in exported.stderr
    benchmark = load_benchmark(DEMO)
    expected = chunk_qrels(benchmark.cases_for("dev"), chunk_corpus(benchmark.documents.values(), config.chunking))
    assert read_qrels(qrels) == {q: judged for q, judged in expected.items() if judged}

    # Document-level qrels of a passage benchmark do not reproduce it, and say so.
    documents = tmp_path / "qrels.document"
    warned = invoke("benchmark", "export-qrels", DEMO, "--split", "dev", "--out", documents)
    assert warned.exit_code == 0 and warned.stderr.startswith(
        "warning: rageval-demo is judged per passage (relevanceUnit), these qrels are per document"
    )
    needs = invoke("benchmark", "export-qrels", DEMO, "--level", "passage", "--out", tmp_path / "q")
    assert needs.exit_code == 2 and "--level passage needs the chunking the run used" in needs.output


def test_a_rankings_file_that_cannot_be_read_is_bad_input(tmp_path, tiny):
    broken = tmp_path / "r.parquet"
    broken.write_text("not parquet")
    result = invoke("judge", "pool", "--out", tmp_path / "p", "--rankings", f"a={broken}", "--benchmark", tiny)
    assert result.exit_code == 2 and "internal error" not in result.output
    assert result.stderr.startswith(f"error: {broken}: --rankings: cannot be read as parquet: ")


def test_the_cli_starts_without_the_heavy_libraries():
    """`rageval --help` pays for none of them: each command imports what it needs when it runs."""
    heavy = ("mlflow", "papermill", "nbformat", "matplotlib", "torch", "sentence_transformers", "bm25s", "pandas")
    code = f"import sys, rageval.cli; print([m for m in {heavy!r} if m in sys.modules])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_rageval_run_does_not_import_the_release_statistics():
    """What `rageval run` imports to record a run leaves out scipy, which only the comparison, gate
    and release path use (about 0.6 s of every run, measured: benchmarks/run_overhead.py)."""
    code = "import sys, rageval.cli.runs, rageval.workflows.run; print('scipy' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
