"""`rageval run` end to end: papermill notebook → sealed run; failures and kills leave no result."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import nbformat
import pandas as pd
import psutil
import pytest
import yaml
from conftest import DEMO, ROOT

from rageval.analysis.plots import EVALUATION_FIGURES
from rageval.errors import ConfigError, NotebookExecutionError, ParameterError
from rageval.execution.handoff import FIGURE_METADATA
from rageval.tracking.records import all_metrics
from rageval.tracking.store import Tracker
from rageval.workflows.run import RunRequest, execute_run

pytestmark = pytest.mark.e2e
BM25 = ROOT / "params" / "bm25.yaml"


def runs_in(store: str) -> set[str]:
    return {r.run_id for r in Tracker(store).runs()}


def notebook_with(tmp_path: Path, body: str) -> Path:
    """A notebook with the evaluation notebook's parameters cell and ``body`` after it."""
    source = nbformat.read(ROOT / "notebooks" / "evaluate.ipynb", as_version=4)
    params = next(c for c in source.cells if "parameters" in c.metadata.get("tags", []))
    notebook = nbformat.v4.new_notebook(cells=[params, nbformat.v4.new_code_cell(body)], metadata=source.metadata)
    path = tmp_path / "custom.ipynb"
    nbformat.write(notebook, path)
    return path


@pytest.fixture(scope="module")
def demo_runs(store):
    """The README's main job, twice with the same configuration."""
    return [execute_run(RunRequest(BM25), Tracker(store)) for _ in range(2)]


def test_the_baseline_ends_in_a_sealed_verified_run(demo_runs, store):
    outcome = demo_runs[0]
    tracker = Tracker(store)
    info = tracker.run(outcome.run_id)
    assert info.status == "FINISHED" and info.sealed
    assert tracker.verify(outcome.run_id) == []
    assert 0 < info.metrics["nDCG_at_10"] <= 1
    every = all_metrics(info.metrics, tracker.sealed_frame(outcome.run_id, "tables/more_metrics.parquet"))
    assert every["queries_evaluated"] + every["queries_skipped"] == info.metrics["queries_total"]
    assert every["queries_skipped"] >= 1  # the demo's unanswerable cases
    # a few readable params, not the flattened configuration (that is config.yaml)
    assert info.params["measures"].startswith("nDCG@10, ") and info.params["evaluation"].startswith("ties=docid-asc; ")
    assert info.params["pipeline"] == "bm25" and info.tags["rageval.split"] == "dev" and len(info.params) == 9
    for tag in (
        "rageval.git.commit",
        "rageval.git.dirty",
        "rageval.version",
        "rageval.benchmark.name",
        "rageval.benchmark.version",
        "rageval.benchmark.corpus_version",
        "rageval.hash.corpus",
        "rageval.hash.cases",
        "rageval.hash.qrels",
        "rageval.chunking.hash",
        "rageval.split",
        "rageval.platform",
    ):
        assert info.tags.get(tag), tag
    assert info.tags["rageval.platform"].startswith("Python 3.") and info.tags["rageval.cache"] in (
        "bm25 hit",
        "bm25 miss",
    )
    assert {"context_tokens_mean", "logging_time_s", "permission_leaks"} <= info.metrics.keys()
    # the run's time is MLflow's Duration column and its steps the table run_timings: no metric
    assert "run_time_s" not in info.metrics
    timings = pd.read_csv(Path(info.artifact_uri.removeprefix("file://")) / "tables" / "run_timings.csv")
    steps = dict(zip(timings["step"], timings["seconds"], strict=True))
    assert steps["prepare"] > 0 and steps["notebook"] > 0
    # no "/" in a metric key of an evaluation run: one chart section, the measures' (the UI puts named
    # sections first); p95 is a row of tables/more_metrics and the tag rageval.latency
    assert not [k for k in info.metrics if "/" in k] and every["latency/total/p95_ms"] > 0
    assert len(info.metrics) <= 40 and not any(k.startswith("slice/") for k in info.metrics)
    # The session's store holds earlier runs of this configuration: the name is numbered after them.
    assert info.tags["rageval.kind"] == "evaluation" and re.fullmatch(r"bm25-baseline@dev( #\d+)?", info.name)
    assert "bm25-baseline" in info.tags["mlflow.note.content"] and "nDCG@10" in info.tags["mlflow.note.content"]
    root = Path(info.artifact_uri.removeprefix("file://"))
    latency = pd.read_parquet(root / "tables" / "latency.parquet").set_index("stage")
    assert {"bm25", "total"} <= set(latency.index) and "p95_ms" in latency.columns
    assert "kernel_start" in set(pd.read_csv(root / "tables" / "run_timings.csv")["step"])
    page = (root / "notebook" / "evaluate.html").read_text()
    assert page.lstrip().lower().startswith("<!doctype html") and "<script" not in page.lower()
    assert (root / "figures" / "distribution.png").read_bytes().startswith(b"\x89PNG")
    first, second = (tracker.run(r.run_id).name for r in demo_runs)
    assert second != first and re.fullmatch(r"bm25-baseline@dev #\d+", second)  # numbered, never repeated
    run = tracker.client.get_run(outcome.run_id)
    (dataset,) = run.inputs.dataset_inputs
    assert dataset.dataset.name.startswith("rageval-demo") and dataset.tags[0].value == "dev"


def test_the_executed_notebook_is_attached_without_errors(demo_runs, store):
    tracker = Tracker(store)
    path = Path(tracker.run(demo_runs[0].run_id).artifact_uri.removeprefix("file://")) / "notebook" / "evaluate.ipynb"
    notebook = nbformat.read(path, as_version=4)
    injected = [c for c in notebook.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert injected and demo_runs[0].run_id in injected[0].source
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert outputs and not any(o.output_type == "error" for o in outputs)
    # The run's figures are the very PNGs the notebook shows, drawn once, in its kernel.
    shown = {
        o.metadata[FIGURE_METADATA]: o.data["image/png"] for o in outputs if FIGURE_METADATA in o.get("metadata", {})
    }
    assert sorted(shown) == sorted(EVALUATION_FIGURES)
    for name, data in shown.items():
        recorded = (path.parent.parent / "figures" / name).read_bytes()
        assert recorded.startswith(b"\x89PNG") and base64.b64decode(data) == recorded


def test_a_notebook_that_hands_its_result_back_without_showing_the_figures_still_records_them(tmp_path, store):
    # A copy of the evaluation notebook without its figures cell; it shows one image marked with a
    # name that is not a run's figure (ignored) and one marked as a figure but not base64 (drawn again).
    body = (
        "from rageval.workflows import door\n"
        "from IPython.display import display\n"
        "result = door.evaluate(globals())\n"
        f"display({{'image/png': 'iVBORw0KGgo='}}, raw=True, metadata={{{FIGURE_METADATA!r}: '../escape.png'}})\n"
        f"display({{'image/png': 'not base64!'}}, raw=True, metadata={{{FIGURE_METADATA!r}: 'latency.png'}})"
    )
    outcome = execute_run(RunRequest(BM25, notebook=notebook_with(tmp_path, body)), Tracker(store))
    root = Path(Tracker(store).run(outcome.run_id).artifact_uri.removeprefix("file://"))
    assert sorted(p.name for p in (root / "figures").iterdir()) == sorted(EVALUATION_FIGURES)
    assert all((root / "figures" / name).read_bytes().startswith(b"\x89PNG") for name in EVALUATION_FIGURES)
    assert not (root / "escape.png").exists() and Tracker(store).verify(outcome.run_id) == []


def test_two_identical_runs_are_two_runs(demo_runs, store):
    first, second = demo_runs
    assert first.run_id != second.run_id
    tracker = Tracker(store)
    a, b = tracker.run(first.run_id), tracker.run(second.run_id)
    assert a.sealed and b.sealed and a.params == b.params
    assert a.metrics["nDCG_at_10"] == b.metrics["nDCG_at_10"]
    assert tracker.rankings(first.run_id).equals(tracker.rankings(second.run_id))


def test_a_notebook_exception_ends_failed_and_unsealed(tmp_path, store):
    notebook = notebook_with(tmp_path, "raise RuntimeError('boom in a cell')")
    before = runs_in(store)
    with pytest.raises(NotebookExecutionError, match="boom in a cell") as raised:
        execute_run(RunRequest(BM25, notebook=notebook), Tracker(store))
    (new,) = runs_in(store) - before
    assert raised.value.run_id == new
    # papermill's cell index, exception name and value, not its whole traceback
    assert (raised.value.ename, raised.value.evalue) == ("RuntimeError", "boom in a cell")
    assert isinstance(raised.value.cell_index, int) and f"cell {raised.value.cell_index} raised" in str(raised.value)
    info = Tracker(store).run(new)
    assert info.status == "FAILED" and not info.sealed and "boom in a cell" in info.tags["rageval.error"]
    partial = Path(info.artifact_uri.removeprefix("file://")) / "notebook" / "custom.ipynb"
    assert "boom in a cell" in partial.read_text()


def test_bad_parameters_and_configs_fail_before_a_run_exists(tmp_path, store):
    before = runs_in(store)
    with pytest.raises(ParameterError, match="unknown notebook parameter"):
        execute_run(RunRequest(BM25, notebook_parameters={"colour": "red"}), Tracker(store))
    with pytest.raises(ParameterError, match="run_id"):
        cell = nbformat.v4.new_code_cell("config_yaml = None\ntracking_uri = None", metadata={"tags": ["parameters"]})
        nb = nbformat.v4.new_notebook(
            cells=[cell], metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
        )
        path = tmp_path / "lacking.ipynb"
        nbformat.write(nb, path)
        execute_run(RunRequest(BM25, notebook=path), Tracker(store))
    with pytest.raises(ConfigError, match="unknown key"):
        execute_run(RunRequest(BM25, overrides=["retrieval.stages.0.k2=1"]), Tracker(store))
    bad = yaml.safe_load(BM25.read_text())
    bad["benchmark"] = str(DEMO)
    bad["evaluation"]["tie"] = "x"
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(bad))
    with pytest.raises(ConfigError, match="bad.yaml"):
        execute_run(RunRequest(tmp_path / "bad.yaml"), Tracker(store))
    assert runs_in(store) == before


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_ui_answers_on_loopback_lists_the_run_and_sigterm_stops_its_server(demo_runs, store):
    port = free_port()
    exe = Path(sys.executable).parent / "rageval"
    ui = subprocess.Popen(
        [str(exe), "ui", "--port", str(port), "--tracking-uri", store],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(ui.stdout), daemon=True)
    reader.start()
    family: list[psutil.Process] = []
    try:
        # The URL is printed once the server answers, not before.
        deadline = time.time() + 90
        while time.time() < deadline and not any(line.startswith("MLflow UI: http") for line in lines):
            time.sleep(0.5)
        assert f"MLflow UI: http://127.0.0.1:{port}/#/?workflowType=machine_learning  (store: {store}" in "".join(lines)
        url = f"http://127.0.0.1:{port}/api/2.0/mlflow/runs/get?run_id={demo_runs[0].run_id}"
        with urllib.request.urlopen(url, timeout=10) as response:
            body = json.loads(response.read())
        tags = {t["key"]: t["value"] for t in body["run"]["data"]["tags"]}
        assert body["run"]["info"]["status"] == "FINISHED" and "rageval.seal" in tags
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as response:
            assert response.status == 200
        # The server runs in a process group of its own, with worker processes under it.
        family = psutil.Process(ui.pid).children(recursive=True)
        assert len(family) >= 2 and all(os.getpgid(p.pid) != os.getpgid(ui.pid) for p in family)
        ui.send_signal(signal.SIGTERM)  # to rageval alone, as a process manager would
        assert ui.wait(timeout=30) == 0
        gone, alive = psutil.wait_procs(family, timeout=15)
        assert alive == [], f"still running after SIGTERM: {[p.pid for p in alive]}"
    finally:
        for process in family:
            if process.is_running():
                process.kill()
        if ui.poll() is None:
            ui.kill()
        ui.wait(timeout=30)
        reader.join(timeout=10)
        ui.stdout.close()


def test_parallel_runs_on_a_new_store_do_not_clash_or_warn(tmp_path):
    store = f"sqlite:///{tmp_path / 'parallel' / 'mlflow.db'}"
    exe = Path(sys.executable).parent / "rageval"
    processes = [
        subprocess.Popen(
            [str(exe), "run", str(BM25), "--tracking-uri", store],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=240) for p in processes]
    for process, (stdout, stderr) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, stderr
        assert "sealed" in stdout
        assert "Warning" not in stderr and "TCP" not in stderr, stderr
    runs = Tracker(store).runs()
    assert len(runs) == 2 and all(r.sealed for r in runs)


def test_a_sealed_run_exports_as_a_trec_run(demo_runs, store, tmp_path):
    from typer.testing import CliRunner

    from rageval.benchmark.trec import read_run
    from rageval.cli import app

    out = tmp_path / "run.txt"
    result = CliRunner().invoke(app, ["export-run", demo_runs[0].run_id, "--out", str(out), "--tracking-uri", store])
    assert result.exit_code == 0, result.output
    exported = read_run(out)
    rankings = Tracker(store).rankings(demo_runs[0].run_id)
    assert set(exported["query_id"]) == set(rankings["query_id"])
    for _, group in exported.groupby("query_id"):
        assert group["rank"].tolist() == list(range(1, len(group) + 1))
        assert group["doc_id"].is_unique and not group["doc_id"].str.contains("#").any()
