"""Notebook hygiene in real git repositories: the nbstripout filter keeps a saved notebook's outputs
out of git, and a run's provenance ignores output-only notebook changes but names every real one."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT
from nbclient import NotebookClient
from typer.testing import CliRunner

from rageval.cli import app
from rageval.errors import RagevalError
from rageval.workflows.provenance import (
    dirty_files,
    dirty_warning,
    git_diff,
    git_state,
    install_notebook_filter,
    notebook_source,
)

NOTEBOOK = "notebooks/evaluate.ipynb"


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True)
    return done.stdout


def commit(repo: Path, *args: str) -> None:
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-q", "-m", "snapshot", *args)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A clone-like repository: the project's .gitattributes, its evaluate notebook and a module."""
    repo = tmp_path / "clone"
    (repo / "notebooks").mkdir(parents=True)
    (repo / "rageval").mkdir()
    shutil.copy(ROOT / ".gitattributes", repo / ".gitattributes")
    shutil.copy(ROOT / NOTEBOOK, repo / NOTEBOOK)
    (repo / "rageval" / "x.py").write_text("X = 1\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    commit(repo)
    return repo


def save_with_outputs(path: Path) -> None:
    """What JupyterLab's Run all + Save leaves: a real kernel's outputs, execution counts, timing
    metadata and the kernel's language_info (the first code cells only: the rest needs a run)."""
    nb = nbformat.read(path, as_version=4)
    executed = nbformat.v4.new_notebook(metadata=nb.metadata)
    executed.cells = [
        nbformat.v4.new_code_cell('print("saved output")\n1 + 1', id=nb.cells[1].id, metadata=nb.cells[1].metadata)
    ]
    NotebookClient(executed, kernel_name="python3", record_timing=True).execute()
    cell = executed.cells[0]
    nb.cells[1].outputs, nb.cells[1].execution_count = cell.outputs, cell.execution_count
    nb.cells[1].metadata["execution"] = cell.metadata["execution"]
    nb.metadata["language_info"] = executed.metadata["language_info"]
    nbformat.write(nb, path)


def test_with_the_filter_a_notebook_saved_with_outputs_leaves_git_clean(repo):
    install_notebook_filter(repo)
    assert git(repo, "status", "--porcelain") == ""  # the committed notebooks are already stripped
    before = (repo / NOTEBOOK).read_text()
    save_with_outputs(repo / NOTEBOOK)
    saved = (repo / NOTEBOOK).read_text()
    assert saved != before and '"saved output' in saved and '"version":' in saved
    assert git(repo, "diff") == "" and git(repo, "diff", "HEAD") == ""
    # git status takes a changed file size as a change without filtering (a git shortcut): it lists
    # the notebook until `git add` refreshes the index, which stages nothing.
    git(repo, "add", NOTEBOOK)
    assert git(repo, "status", "--porcelain") == "" and git(repo, "diff", "--cached") == ""
    commit(repo, "-a", "--allow-empty")
    assert git(repo, "show", "--stat", "--format=", "HEAD") == ""
    assert dirty_files(repo) == []
    # Installing twice changes nothing; a source edit still shows, without its outputs.
    install_notebook_filter(repo)
    nb = json.loads(saved)
    nb["cells"][1]["source"].append("\nextra = 1")
    (repo / NOTEBOOK).write_text(json.dumps(nb, indent=1))
    assert git(repo, "status", "--porcelain") == f" M {NOTEBOOK}\n"
    diff = git(repo, "diff")
    assert '+    "extra = 1"' in diff and "saved output" not in diff


def test_without_the_filter_git_sees_outputs_but_the_run_stays_clean(repo):
    save_with_outputs(repo / NOTEBOOK)
    assert git(repo, "status", "--porcelain") == f" M {NOTEBOOK}\n"
    assert dirty_files(repo / "rageval") == []
    state = git_state(repo)
    assert state["rageval.git.dirty"] == "false" and "rageval.git.dirty_files" not in state
    assert dirty_warning(repo) is None and git_diff(repo) == b""


def test_real_changes_are_named_warned_about_and_only_they_are_in_the_patch(repo):
    (repo / "rageval" / "x.py").write_text("X = 2\n")
    save_with_outputs(repo / NOTEBOOK)  # output-only: left out
    (repo / "params").mkdir()
    (repo / "params" / "new.yaml").write_text("a: 1\n")  # untracked: not part of the code
    assert dirty_files(repo / "params") == ["rageval/x.py"]
    state = git_state(repo / "params")
    assert state["rageval.git.dirty"] == "true" and state["rageval.git.dirty_files"] == "rageval/x.py"
    assert dirty_warning(repo) == (
        "warning: the working tree has uncommitted changes in rageval/x.py; this run is recorded as dirty with their diff"
    )
    patch = git_diff(repo / "params")
    assert b"+X = 2" in patch and b"evaluate.ipynb" not in patch
    # The notebook's source changes too: now it counts, and the patch applies to HEAD.
    nb = json.loads((repo / NOTEBOOK).read_text())
    nb["cells"][2]["source"].append("\nprint(1)")
    (repo / NOTEBOOK).write_text(json.dumps(nb, indent=1))
    assert dirty_files(repo) == [NOTEBOOK, "rageval/x.py"]
    patch = git_diff(repo)
    (repo / "patch.diff").write_bytes(patch)
    git(repo, "stash", "-q")
    git(repo, "apply", "patch.diff")
    assert (repo / "rageval" / "x.py").read_text() == "X = 2\n" and "print(1)" in (repo / NOTEBOOK).read_text()


def test_the_patch_is_gits_own_when_nbdime_or_the_filter_drive_diffs(repo):
    install_notebook_filter(repo)
    git(repo, "config", "diff.ipynb.command", "false")  # an external driver that would break the patch
    nb = json.loads((repo / NOTEBOOK).read_text())
    nb["cells"][2]["source"].append("\nprint(1)")
    (repo / NOTEBOOK).write_text(json.dumps(nb, indent=1))
    patch = git_diff(repo)
    assert patch.startswith(b"diff --git a/notebooks/evaluate.ipynb") and b'+    "print(1)"' in patch


def test_notebook_source_ignores_everything_papermill_does_not_execute():
    nb = nbformat.read(ROOT / NOTEBOOK, as_version=4)
    other = nbformat.from_dict(json.loads(nbformat.writes(nb)))
    other.cells[2].outputs = [nbformat.v4.new_output("stream", text="x")]
    other.cells[2].execution_count = 3
    other.cells[2].id = "changed"
    other.metadata["language_info"]["version"] = "3.11.9"
    assert notebook_source(nbformat.writes(nb)) == notebook_source(nbformat.writes(other))
    other.cells[1].metadata["tags"] = []  # the parameters cell is no longer marked
    assert notebook_source(nbformat.writes(nb)) != notebook_source(nbformat.writes(other))
    assert notebook_source("not json") is None


def test_outside_git_the_state_is_unknown_and_setup_refuses(tmp_path):
    assert dirty_files(tmp_path) is None
    assert git_state(tmp_path) == {"rageval.git.commit": "unknown", "rageval.git.dirty": "unknown"}
    with pytest.raises(RagevalError, match="not inside a git checkout"):
        install_notebook_filter(tmp_path)


def test_the_setup_git_command_installs_the_filter(repo):
    import rageval.cli.checkout  # noqa: F401  (registers the command until cli/app.py imports it)

    result = CliRunner().invoke(app, ["setup-git", str(repo)])
    assert result.exit_code == 0, result.output
    assert "filter.nbstripout.clean" in result.output
    assert "--keep-id" in git(repo, "config", "--local", "filter.nbstripout.clean")
    assert git(repo, "check-attr", "filter", "--", NOTEBOOK).strip().endswith("nbstripout")
