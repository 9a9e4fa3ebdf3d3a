"""The MLflow and JupyterLab experience: links open the UI on runs, runs name their source, the CLI
behaves in a pipe, notebooks render and diff cleanly, kernels leave nothing behind."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from rageval.release.decision import Pair
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
    from rageval.workflows.release.record import _links

    tracker = Tracker(store)
    runs = [
        tracker.create_run("experience-links", name, params={}, tags={"rageval.kind": "evaluation"}) for name in "ab"
    ]
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
        'echo "status ${PIPESTATUS[0]}"',
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

    from rageval.execution.kernels import WarmKernel

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


# ---------------------------------------------------------------------------- notebook tables


def _ids_and_selectors(html: str) -> tuple[str, set[str]]:
    table = re.search(r'<table id="(T_[^"]+)"', html).group(1)  # type: ignore[union-attr]
    selectors = set(re.findall(r"#(T_[A-Za-z0-9_]+?)_(?:row|level|col)", html))
    return table, selectors


def test_two_styled_tables_never_share_an_id_and_one_s_css_never_reaches_the_other():
    import pandas as pd

    from rageval.safety import styled

    a = styled(pd.DataFrame({"nDCG@10": [0.5, 0.7]}, index=["bm25", "dense"])).highlight_max(color="#cfc")
    b = styled(pd.DataFrame({"R@5": [0.9, 0.1]}, index=["bm25", "dense"])).highlight_max(color="#cfc")
    id_a, css_a = _ids_and_selectors(a.to_html())
    id_b, css_b = _ids_and_selectors(b.to_html())
    assert id_a != id_b
    assert css_a == {id_a} and css_b == {id_b}  # each table's style rules select only its own cells
    # Stable: the same table renders with the same ID (two executions diff only where values differ).
    assert a.to_html() == a.to_html() == a._repr_html_()
    assert re.fullmatch(r"T_rageval_[0-9a-f]{10}", id_a)
    # An explicit ID is still honoured.
    assert '<table id="T_mine"' in a.to_html(table_uuid="mine")


def test_the_notebook_diff_masks_rageval_table_ids():
    from rageval.workflows.notebook_diff import _mask

    assert _mask('<td id="T_rageval_0123456789_row0_col0">') == '<td id="T_…_row0_col0">'


# ---------------------------------------------------------------------------- diff-notebooks on local files


def test_diff_notebooks_takes_local_ipynb_files_without_a_store(tmp_path):
    import nbformat
    from typer.testing import CliRunner

    from rageval.cli import app

    def notebook(value: str) -> Path:
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell("x", execution_count=1)]
        nb.cells[0].outputs = [nbformat.v4.new_output("execute_result", data={"text/plain": value}, execution_count=1)]
        path = tmp_path / f"{value}.ipynb"
        nbformat.write(nb, path)
        return path

    old, new = notebook("0.5970"), notebook("0.6012")
    result = CliRunner().invoke(
        app, ["diff-notebooks", str(old), str(new), "--tracking-uri", "sqlite:////nonexistent/x.db"]
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[:2] == [f"--- {old}", f"+++ {new}"]
    assert "-0.5970" in lines and "+0.6012" in lines
    missing = CliRunner().invoke(app, ["diff-notebooks", str(old), str(tmp_path / "gone.ipynb")])
    assert missing.exit_code == 2
    assert (
        f"{tmp_path / 'gone.ipynb'}: no such notebook file (give a .ipynb file that exists, or a run ID)"
        in missing.output
    )


# ---------------------------------------------------------------------------- the HTML render


def test_the_html_render_is_styled_offline_and_runs_nothing(tmp_path):
    import nbformat
    import pandas as pd

    from rageval.execution.render import notebook_html
    from rageval.safety import styled

    table = styled(pd.DataFrame({"nDCG@10": [0.5]}, index=["bm25"]))
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("styled(frame)", execution_count=1)]
    nb.cells[0].outputs = [
        nbformat.v4.new_output("display_data", data={"text/html": table.to_html(), "text/plain": "table"}),
        nbformat.v4.new_output("display_data", data={"application/javascript": "alert(1)", "text/plain": "js"}),
    ]
    path = tmp_path / "evaluate.ipynb"
    nbformat.write(nb, path)
    page = notebook_html(path).decode()
    assert page.lstrip().lower().startswith("<!doctype html")
    assert "<title>evaluate</title>" in page
    assert "<script" not in page.lower() and "alert(1)" not in page
    assert not re.findall(r"""(?:src|href)=["']?https?:|@import|url\(\s*["']?https?:""", page)  # nothing fetched
    assert ".jp-OutputArea-output" in page and "--jp-content-font-color1" in page  # JupyterLab's CSS, inlined
    assert 'class="jp-Notebook"' in page and 'id="T_rageval_' in page


# ---------------------------------------------------------------------------- a clean first run


def test_loading_an_encoder_in_a_notebook_kernel_prints_no_tqdm_warning(tmp_path):
    """A run's first notebook (cold cache) loads the dense encoder's libraries in the kernel, and tqdm
    warned "IProgress not found" into it, in red."""
    import json

    import nbformat

    from rageval.execution.notebooks import execute_notebook

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell(
            "from rageval.retrieval.encoders import _import, _quiet\n_quiet()\nst = _import('sentence_transformers')"
        ),
        nbformat.v4.new_code_cell("import sys\n'tqdm.autonotebook' in sys.modules"),
    ]
    source, out = tmp_path / "in.ipynb", tmp_path / "out.ipynb"
    nbformat.write(nb, source)
    execute_notebook(source, out, {})
    cells = json.loads(out.read_text())["cells"]
    assert cells[0]["outputs"] == []
    assert "".join(cells[1]["outputs"][0]["data"]["text/plain"]) == "True"  # the import that used to warn did happen


# ---------------------------------------------------------------------------- iterating in JupyterLab


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def _run_and_save_as_jupyterlab(path: Path, edit: dict[str, str] | None = None) -> None:
    """Edit parameters, run cells in a real kernel and save through jupyter_server's contents manager
    (JupyterLab's own save), with the kernelspec and language_info JupyterLab writes."""
    import nbformat
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_server.services.contents.filemanager import FileContentsManager
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    parameters = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    for old, new in (edit or {}).items():
        assert old in parameters.source
        parameters.source = parameters.source.replace(old, new)
    probe = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('print("ran")\n1 + 1')])
    NotebookClient(probe, kernel_name="python3", record_timing=True).execute()
    first_code = next(c for c in nb.cells if c.cell_type == "code" and c is not parameters)
    first_code.outputs, first_code.execution_count = probe.cells[0].outputs, 2
    first_code.metadata["execution"] = probe.cells[0].metadata["execution"]
    parameters.execution_count = 1
    spec = KernelSpecManager().get_kernel_spec("python3")
    nb.metadata["kernelspec"] = {"display_name": spec.display_name, "language": spec.language, "name": "python3"}
    nb.metadata["language_info"] = probe.metadata["language_info"]
    manager = FileContentsManager(root_dir=str(path.parents[1]))
    manager.save({"type": "notebook", "format": "json", "content": nb}, str(path.relative_to(path.parents[1])))


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    from rageval.workflows.provenance import install_notebook_filter

    repo = tmp_path / "clone"
    (repo / "notebooks").mkdir(parents=True)
    for name in (".gitattributes", ".gitignore", "notebooks/evaluate.ipynb", "notebooks/compare.ipynb"):
        (repo / name).write_bytes((ROOT / name).read_bytes())
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-q", "-m", "c")
    install_notebook_filter(repo)
    return repo


def test_a_scratch_copy_is_edited_run_and_saved_in_jupyterlab_and_git_stays_clean(clone):
    """A real `jupyter lab` server (tools/jupyterlab_roundtrip.py): the scratch copy's parameters
    edited, every cell of the evaluation run in a kernel over its websocket, saved by the contents
    API as JupyterLab saves; no warning in the notebook, nothing for git to report."""
    import json

    from rageval.workflows.provenance import dirty_files

    scratch = clone / "notebooks" / "scratch"
    scratch.mkdir()
    (scratch / "evaluate.ipynb").write_bytes((clone / "notebooks" / "evaluate.ipynb").read_bytes())
    config = json.dumps(str(ROOT / "params" / "bm25.yaml"))
    tool = [sys.executable, str(ROOT / "tools" / "jupyterlab_roundtrip.py"), "--root", str(clone)]
    edits = ["--set", f"config_path={config}", "--set", 'overrides=["retrieval.stages.0.k1=1.2"]']
    done = subprocess.run(
        [*tool, "notebooks/scratch/evaluate.ipynb", *edits], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 failed cells" in done.stdout and "stderr outputs (warnings): 0" in done.stdout, done.stdout
    saved = json.loads((scratch / "evaluate.ipynb").read_text())
    parameters = next(c for c in saved["cells"] if "parameters" in c["metadata"].get("tags", []))
    assert 'overrides: list[str] = ["retrieval.stages.0.k1=1.2"]' in "".join(parameters["source"])
    shown = json.dumps([c.get("outputs") for c in saved["cells"] if c["cell_type"] == "code"])
    assert "nDCG@10" in shown and "queries_evaluated" in shown
    assert "(nothing)" in done.stdout
    assert _git(clone, "status", "--porcelain", "--untracked-files=all") == ""
    assert dirty_files(clone) == []


def test_run_all_and_save_of_the_tracked_notebook_with_no_edit_leaves_no_diff(clone):
    for name in ("evaluate", "compare"):
        _run_and_save_as_jupyterlab(clone / "notebooks" / f"{name}.ipynb")
        assert '"Python 3 (ipykernel)"' in (clone / "notebooks" / f"{name}.ipynb").read_text()
    assert _git(clone, "diff") == ""
    _git(clone, "add", "notebooks")  # refreshes git's stat cache (see docs/notebooks.md); stages nothing
    assert _git(clone, "status", "--porcelain") == ""


def test_the_compare_notebook_s_errors_name_its_parameters(store):
    from rageval.errors import ComparisonError
    from rageval.workflows.readback import load_inputs

    tracker = Tracker(store)
    with pytest.raises(ComparisonError, match=r'in compare\.ipynb\'s parameters cell, baseline = "RUN"'):
        load_inputs(tracker, None, [])  # type: ignore[arg-type]
    with pytest.raises(ComparisonError, match=r'candidates = \["RUN"\]\), or a sweep .*sweep = "PARENT"'):
        load_inputs(tracker, "some-run", [])
