"""The MLflow and JupyterLab experience: links open the UI on runs, runs name their source, the CLI
behaves in a pipe, notebooks render and diff cleanly, kernels leave nothing behind."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from rageval.analysis.release import Pair
from rageval.tracking.records import UI_MODE, source_tags, ui_link
from rageval.tracking.store import Tracker

CLI = [sys.executable, "-c", "from rageval.cli import main; main()"]


# ---------------------------------------------------------------------------- the UI's mode


def test_every_ui_address_asks_for_model_training_mode():
    assert ui_link("3", "abc") == "#/experiments/3/runs/abc?workflowType=machine_learning"
    assert ui_link("3") == "#/experiments/3?workflowType=machine_learning"
    assert ui_link(base="http://127.0.0.1:5000/") == "http://127.0.0.1:5000/#/?workflowType=machine_learning"
    # MLflow's own UI reads this query parameter to pick its mode (its bundled JavaScript says so).
    bundle = Path(__import__("mlflow").__file__).parent / "server/js/build/static/js"
    assert any('MACHINE_LEARNING="machine_learning"' in p.read_text(errors="ignore") for p in bundle.glob("main.*.js"))
    assert any('get("workflowType")' in p.read_text(errors="ignore") for p in bundle.glob("*.js"))


def test_no_module_writes_a_ui_address_of_its_own():
    """Every ``#/…`` address comes from ui_link, so none can open the GenAI mode."""
    written = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "rageval").rglob("*.py"))
        if path.name != "records.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"[\"']#/|/#/", line)
    ]
    assert written == []


def test_a_release_run_links_its_runs_in_model_training_mode(store):
    from rageval.workflows.release import _links

    tracker = Tracker(store)
    runs = [tracker.create_run("experience-links", name, params={}, tags={"rageval.kind": "evaluation"}) for name in "ab"]
    experiment = tracker.run(runs[0]).experiment_id
    rows = _links(tracker, {}, Pair(runs[0], runs[1], "a", "b"))
    assert [r["link"] for r in rows] == [
        f"#/experiments/{experiment}/runs/{runs[0]}?{UI_MODE}",
        f"#/experiments/{experiment}/runs/{runs[1]}?{UI_MODE}",
    ]


# ---------------------------------------------------------------------------- the Source column


def test_a_run_names_its_source(store):
    tracker = Tracker(store)
    gate = tracker.create_run("experience-source", "g", params={}, tags={"rageval.kind": "gate"})
    evaluation = tracker.create_run(
        "experience-source",
        "e",
        params={},
        tags={"rageval.kind": "evaluation", "rageval.config.file": "params/bm25.yaml"},
    )
    assert tracker.run(gate).tags["mlflow.source.name"] == "rageval gate"
    assert tracker.run(evaluation).tags["mlflow.source.name"] == "params/bm25.yaml"
    assert tracker.run(evaluation).tags["mlflow.source.type"] == "LOCAL"
    assert source_tags({}) == {"mlflow.source.name": "rageval", "mlflow.source.type": "LOCAL"}
    # A caller's own source wins.
    own = tracker.create_run("experience-source", "o", params={}, tags={"mlflow.source.name": "mine"})
    assert tracker.run(own).tags["mlflow.source.name"] == "mine"


# ---------------------------------------------------------------------------- the CLI in a pipe


def test_rageval_runs_into_a_closed_pipe_exits_quietly(store):
    """`rageval runs | head`: the reader has gone; no "internal error", no traceback, exit 1 (typer's)."""
    tracker = Tracker(store)
    for i in range(3):
        tracker.create_run("experience-pipe", f"r{i}", params={}, tags={})
    process = subprocess.Popen(
        [*CLI, "runs", "--tracking-uri", store], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # the reader leaves before the first line
    with process.stderr:
        err = process.stderr.read().decode()
    assert process.wait(timeout=120) == 1
    assert "internal error" not in err and "Traceback" not in err and "BrokenPipe" not in err, err


def test_rageval_runs_piped_into_head_prints_the_first_line(store):
    tracker = Tracker(store)
    for i in range(2):
        tracker.create_run("experience-head", f"h{i}", params={}, tags={})
    done = subprocess.run(
        f"{' '.join(CLI[:2])} 'from rageval.cli import main; main()' runs --tracking-uri {store} | head -1; "
        "echo \"status ${PIPESTATUS[0]}\"",
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and re.match(r"^[0-9a-f]{32}  ", lines[0]), done.stdout
    assert lines[1] in ("status 0", "status 1")  # 1 only when head left before the last line was written
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr, done.stderr


# ---------------------------------------------------------------------------- help texts


def _leaves(command, path=()):
    commands = getattr(command, "commands", None)
    if not commands:
        yield path, command
        return
    for name, sub in commands.items():
        yield from _leaves(sub, (*path, name))


def test_every_help_text_keeps_its_default_and_no_option_is_without_help():
    import typer.main
    from typer.testing import CliRunner

    from rageval.cli import app

    root = typer.main.get_command(app)
    runner = CliRunner()
    shown, empty = 0, []
    for path, command in _leaves(root):
        out = runner.invoke(app, [*path, "--help"], terminal_width=400, env={"COLUMNS": "400"}).output
        flat = " ".join(re.sub(r"[│╭╮╰╯─]", " ", out).split())
        for param in command.params:
            text = (param.help or "") if hasattr(param, "help") else ""
            if not text.strip() and param.param_type_name == "option" and param.name != "help":
                empty.append(f"{' '.join(path)} --{param.name}")
            for default in re.findall(r"\\\[default: [^\]]*\]", text):
                assert " ".join(default.replace("\\[", "[").split()) in flat, (path, param.name, default)
                shown += 1
    assert shown >= 40  # the help texts that write their own default (43 when the issue was filed)
    assert "benchmark import trec --corpus_version" not in empty
    assert "benchmark import beir --corpus_version" not in empty


# ---------------------------------------------------------------------------- kernels leave nothing behind


@pytest.mark.parametrize("inside_a_loop", [False, True], ids=["cli", "notebook-kernel"])
def test_a_warm_kernel_leaves_no_folder_and_no_unawaited_coroutine(tmp_path, monkeypatch, inside_a_loop):
    """rageval run closes its warm kernel from plain code; papermill's door (record=True) closes the
    nested one from inside a kernel, where an event loop is running."""
    import asyncio
    import gc
    import tempfile
    import warnings

    from rageval.workflows.kernels import WarmKernel

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def use_one() -> None:
        kernel = WarmKernel(tmp_path, preload=())
        kernel.manager()
        assert any(p.name.startswith("rageval-kernel-") for p in tmp_path.iterdir())  # its sockets
        kernel.close()

    async def in_a_loop() -> None:
        use_one()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run(in_a_loop()) if inside_a_loop else use_one()
        gc.collect()
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []
    assert list(tmp_path.iterdir()) == []
