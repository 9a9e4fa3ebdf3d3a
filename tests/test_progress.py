"""Progress: the reporter and its channel file, the plain and live views, and real runs, sweeps and
imports reporting their steps on stderr while the executed notebook stays free of them."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import nbformat
import pytest
import yaml
from conftest import ROOT
from typer.testing import CliRunner

from rageval.cli import app
from rageval.cli.progress import RunView, SweepView
from rageval.progress import (
    ENV_VAR,
    SILENT,
    ChannelWriter,
    Reporter,
    channel,
    current,
    from_environment,
    read_events,
    reporting,
)
from rageval.tracking.store import Tracker

CLI = [sys.executable, "-c", "from rageval.cli import app; app()"]
BM25 = ROOT / "params" / "bm25.yaml"


class Collect(Reporter):
    enabled = True

    def __init__(self) -> None:
        self.events: list[dict] = []

    def emit(self, event) -> None:
        self.events.append(dict(event))


# --------------------------------------------------------------------------- the reporter and its channel


def test_the_silent_reporter_hands_items_back_untouched():
    items = [1, 2, 3]
    assert list(SILENT.bar(items, desc="x")) == items
    assert SILENT.member("m") is SILENT and current() is SILENT


def test_a_bar_reports_its_start_and_where_it_stopped():
    sink = Collect()
    assert list(sink.bar(range(5), desc="queries")) == [0, 1, 2, 3, 4]
    first, last = sink.events[0], sink.events[-1]
    assert (first["kind"], first["n"], first["total"]) == ("bar", 0, 5)
    assert (last["n"], last["total"], last.get("done")) == (5, 5, True)
    sized = Collect()
    list(sized.bar([["a", "b"], ["c"]], desc="texts", total=3, size=len))
    assert sized.events[-1]["n"] == 3
    stopped = Collect()
    for item in stopped.bar(iter(range(10)), desc="early"):
        if item == 2:
            break
    assert stopped.events[-1]["n"] == 2 and stopped.events[-1]["total"] is None


def test_the_channel_carries_steps_and_bars_and_leaves_a_partial_line(tmp_path):
    path = tmp_path / "events.jsonl"
    writer = ChannelWriter(path).member("m1")
    writer.step("chunking")
    list(writer.bar(["a", "b"], desc="queries"))
    writer.end()
    with path.open("a") as handle:
        handle.write("not json\n")
        handle.write('{"kind": "step", "name": "half')  # still being written
    events, offset = read_events(path)
    assert [e["kind"] for e in events] == ["step", "bar", "bar", "end"]
    assert events[0]["name"] == "chunking" and all(e["member"] == "m1" for e in events)
    assert events[2]["n"] == 2 and events[2]["total"] == 2
    with path.open("a") as handle:
        handle.write('"}\n')
    more, _ = read_events(path, offset)
    assert [e["name"] for e in more] == ["half"]


def test_the_environment_names_the_channel(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert from_environment() is SILENT
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "c.jsonl"))
    reporter = from_environment()
    assert isinstance(reporter, ChannelWriter) and reporter.path == tmp_path / "c.jsonl"


def test_everything_written_to_a_channel_is_handed_on_when_it_closes():
    sink = Collect()
    with channel(sink.emit) as path:
        writer = ChannelWriter(path)
        for number in range(50):
            writer.step(f"s{number}")
    assert [e["name"] for e in sink.events] == [f"s{n}" for n in range(50)]
    with channel(None) as none:
        assert none is None


def test_the_reporter_in_effect_is_per_thread():
    sink = Collect()
    seen = []
    with reporting(sink):
        worker = threading.Thread(target=lambda: seen.append(current()))
        worker.start()
        worker.join()
        assert current() is sink
    assert seen == [SILENT] and current() is SILENT


def test_run_experiment_reports_its_steps_and_a_bar_over_the_queries():
    from rageval.config.load import load_config
    from rageval.experiment.run import run_experiment

    config = load_config(BM25, [], split="dev")
    sink = Collect()
    result = run_experiment(config, cache=False, reporter=sink)
    steps = [e["name"] for e in sink.events if e["kind"] == "step"]
    assert steps[:5] == ["load benchmark", "chunking", "build stages", "bm25: BM25 index", "retrieval"]
    assert steps[-3:] == ["evaluation", "stage evaluation", "diagnostics"] and sink.events[-1]["kind"] == "end"
    queries = [e for e in sink.events if e["kind"] == "bar" and e["desc"] == "queries"]
    assert queries[-1]["n"] == queries[-1]["total"] == len(result.context_tokens)
    tokenized = [e for e in sink.events if e["kind"] == "bar" and e["desc"] == "chunks tokenized"]
    assert tokenized and tokenized[-1]["n"] == tokenized[-1]["total"] > 0


# --------------------------------------------------------------------------- the views


def events_at(*pairs: tuple[float, dict]) -> list[dict]:
    return [{**event, "t": t} for t, event in pairs]


def test_the_plain_view_prints_each_finished_step_with_its_seconds():
    out = io.StringIO()
    with RunView(out) as view:
        for event in events_at(
            (100.0, {"kind": "step", "name": "checks"}),
            (100.5, {"kind": "step", "name": "retrieval"}),
            (100.6, {"kind": "bar", "desc": "queries", "n": 3, "total": 3}),
            (102.0, {"kind": "step", "name": "seal\x1b[2J"}),
            (102.25, {"kind": "end"}),
        ):
            view.emit(event)
    assert out.getvalue().splitlines() == [
        "checks (0.50 s)",
        "retrieval (1.50 s; queries 3/3)",
        "seal (0.25 s)",
    ]


def test_a_step_open_when_the_view_closes_on_an_error_is_marked_failed():
    out = io.StringIO()
    with pytest.raises(RuntimeError), RunView(out) as view:
        view.step("checks")
        raise RuntimeError("bad")
    assert re.fullmatch(r"checks \(\d+\.\d\d s; failed\)\n", out.getvalue())


def test_the_live_view_keeps_the_finished_steps():
    out = io.StringIO()
    with RunView(out, live=True) as view:
        view.step("chunking")
        view.step("retrieval")
        list(view.bar(range(4), desc="queries"))
    text = out.getvalue()
    assert "✓ chunking" in text and "✓ retrieval" in text and "queries 4/4" in text


def test_the_plain_sweep_view_labels_each_members_steps():
    out = io.StringIO()
    with SweepView(out) as view:
        a, b = view.member("a"), view.member("b")
        view.emit({"kind": "sweep", "member": "a", "status": "start", "line": "sweep: 0/2"})
        a.emit({"kind": "step", "name": "checks", "t": 10.0})
        b.emit({"kind": "step", "name": "checks", "t": 10.5})
        a.emit({"kind": "step", "name": "chunking", "t": 11.0})
        a.emit({"kind": "end", "t": 11.5})
        view.emit({"kind": "sweep", "member": "a", "status": "sealed", "line": "sweep: 1/2 configs"})
    assert out.getvalue().splitlines() == [
        "[a] checks (1.00 s)",
        "[a] chunking (0.50 s)",
        "a: sealed | sweep: 1/2 configs",
    ]


def test_the_live_sweep_view_draws_its_members_and_prints_those_that_end():
    out = io.StringIO()
    with SweepView(out, live=True) as view:
        view.note("sweep parent run p1")
        view.emit({"kind": "sweep", "member": "a", "status": "start", "line": "sweep: 0/1 configs"})
        member = view.member("a")
        member.step("retrieval")
        list(member.bar(range(3), desc="queries"))
        table = view._table()
        view.emit({"kind": "sweep", "member": "a", "status": "sealed", "line": "sweep: 1/1 configs"})
    from rich.console import Console

    drawn = Console(file=io.StringIO(), width=100)
    drawn.print(table)
    row = drawn.file.getvalue()
    assert "a" in row and "retrieval" in row and "queries 3/3" in row and "sweep: 0/1 configs" in row
    text = out.getvalue()
    assert "sweep parent run p1" in text and "✓ a: sealed" in text


# --------------------------------------------------------------------------- real commands


def cli(*args: str, store: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MLFLOW_TRACKING_URI": store, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    env.pop(ENV_VAR, None)
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=400, env=env, cwd=ROOT)


RUN_STEPS = [
    "checks",
    "create run",
    "kernel start",
    "load benchmark",
    "chunking",
    "build stages",
    "bm25: BM25 index",
    "retrieval",
    "context",
    "evaluation",
    "stage evaluation",
    "diagnostics",
    "notebook displays",
    "logging",
    "attach notebook",
    "seal",
]


def step_lines(stderr: str, prefix: str = "") -> list[str]:
    pattern = re.compile(rf"^{re.escape(prefix)}(.+?) \(\d+\.\d\d s(?:; [^)]*)?\)$")
    return [m.group(1) for line in stderr.splitlines() if (m := pattern.match(line))]


@pytest.mark.e2e
def test_rageval_run_prints_its_steps_in_order_and_the_notebook_holds_none(tmp_path):
    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    done = cli("run", str(BM25), store=store)
    assert done.returncode == 0, done.stderr
    assert step_lines(done.stderr) == RUN_STEPS, done.stderr
    assert "retrieval (" in done.stderr and re.search(r"queries (\d+)/\1\)", done.stderr)
    lines = done.stdout.splitlines()  # the summary is unchanged, on stdout
    assert re.fullmatch(r"run [0-9a-f]{32} sealed \(experiment rageval-demo, manifest sha256 [0-9a-f]{12}…\)", lines[0])
    assert lines[1].startswith("queries: ") and lines[-1].startswith("browse: rageval ui")
    run_id = lines[0].split()[1]
    root = Path(Tracker(store).run(run_id).artifact_uri.removeprefix("file://"))
    notebook = nbformat.read(root / "notebook" / "evaluate.ipynb", as_version=4)
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    streams = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    # (bm25s's import of tqdm.auto leaves a TqdmWarning on stderr here, as before: no bar, no step)
    for marker in ("BM25 index", "chunks tokenized", "load benchmark", "queries", ENV_VAR, "\r", "it/s"):
        assert marker not in streams, marker
    assert ENV_VAR not in json.dumps(notebook)


@pytest.mark.e2e
def test_a_sweep_of_two_members_shows_each_members_steps(tmp_path):
    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    sweep = tmp_path / "sweep.yaml"
    variants = [{"name": "one", "set": {}}, {"name": "two", "set": {"retrieval.stages.0.k1": 1.2}}]
    sweep.write_text(yaml.safe_dump({"version": 1, "name": "p", "base": str(BM25), "workers": 2, "variants": variants}))
    done = cli("sweep", str(sweep), store=store)
    assert done.returncode == 0, done.stderr
    for member in ("one", "two"):
        assert step_lines(done.stderr, f"[{member}] ") == RUN_STEPS, done.stderr
        assert re.search(rf"^{member}: sealed \| sweep: \d/2 configs", done.stderr, re.M)
    assert "sweep parent run " in done.stderr
    assert re.search(r"^one +sealed", done.stdout, re.M) and re.search(r"^two +sealed", done.stdout, re.M)


def test_benchmark_import_shows_its_steps_on_a_generated_folder(tmp_path):
    source = tmp_path / "beir"
    (source / "qrels").mkdir(parents=True)
    documents = [{"_id": f"d{n}", "title": f"T{n}", "text": f"text number {n}"} for n in range(300)]
    (source / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in documents))
    queries = [{"_id": str(n), "text": f"query {n}"} for n in range(40)]
    (source / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (source / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{n}\td{n * 7}\t1\n" for n in range(40))
    )
    result = CliRunner().invoke(
        app,
        ["benchmark", "import", "beir", str(source), "--out", str(tmp_path / "out")]
        + ["--name", "gen", "--version", "1", "--split", "test=release"],
    )
    assert result.exit_code == 0, result.output
    assert step_lines(result.stderr) == [
        "read corpus.jsonl",
        "check documents",
        "read queries.jsonl",
        "check queries",
        "read qrels/test.tsv",
        "build cases",
        "write benchmark",
        "validate",
    ], result.stderr
    assert "(documents 300/300)" not in result.stderr and "; documents 300/300)" in result.stderr
    assert "; queries 40/40)" in result.stderr and "; lines 41)" in result.stderr
    assert "wrote " in result.stdout and "300 documents" in result.stdout


def test_trec_import_reports_its_steps_and_a_bar_over_the_documents(tmp_path):
    from rageval.benchmark.importers import TrecImport, import_trec

    topics, qrels, docs = tmp_path / "topics.txt", tmp_path / "qrels.txt", tmp_path / "docs.sgml"
    topics.write_text("".join(f"<top>\n<num> Number: {n}\n<title> topic {n}\n</top>\n" for n in range(5)))
    qrels.write_text("".join(f"{n} 0 D-{n} 1\n" for n in range(5)))
    docs.write_text("".join(f"<DOC>\n<DOCNO>D-{n}</DOCNO>\n<TEXT>text {n}</TEXT>\n</DOC>\n" for n in range(25)))
    sink = Collect()
    import_trec(
        TrecImport(topics=topics, qrels=qrels, documents=docs, out=tmp_path / "out", name="t", version="1"), sink
    )
    steps = [e["name"] for e in sink.events if e["kind"] == "step"]
    assert steps == [
        "read docs.sgml",
        "check documents",
        "read topics.txt",
        "read qrels.txt",
        "build cases",
        "write benchmark",
    ]
    bars = [e for e in sink.events if e["kind"] == "bar"]
    assert bars[-1]["desc"] == "documents" and bars[-1]["n"] == 25 and bars[-1]["total"] is None
