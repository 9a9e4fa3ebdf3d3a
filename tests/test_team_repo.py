"""rageval as a tool inside a team's repository: ``rageval init`` lays a project out outside the
rageval checkout; a run there records rageval's own revision and the team repository's state of
the run's files (untracked ones dirty); ``rageval reproduce`` works from the team's repository and
refuses another rageval, naming both."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest
import yaml
from conftest import ROOT
from typer.testing import CliRunner

from rageval.benchmark.loading import validate_benchmark
from rageval.cli.common import app
from rageval.config.load import load_config
from rageval.errors import RagevalError, ReproductionError
from rageval.paths import PROJECT_MARKER, default_notebook, default_store, project_root
from rageval.tracking.store import Tracker
from rageval.workflows import reproduce as reproduce_module
from rageval.workflows.init import init_project
from rageval.workflows.provenance import RAGEVAL_VERSION, origin, source_tags
from rageval.workflows.reproduce import check_rageval, reproduce
from rageval.workflows.run import RunRequest, execute_run

TEAM_NOTE = "This is the team's own copy of the evaluation notebook."


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def make_team(folder: Path) -> Path:
    """A team project from `rageval init`, its notebook marked as the team's copy, committed."""
    init_project(folder)
    notebook = folder / "notebooks" / "evaluate.ipynb"
    nb = nbformat.read(notebook, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_markdown_cell(TEAM_NOTE))
    nbformat.write(nb, notebook)
    commit(folder, "rageval project")
    return folder


def test_init_lays_out_a_project_outside_the_checkout(tmp_path):
    team = tmp_path / "team"
    result = init_project(team)
    assert not team.is_relative_to(ROOT)
    assert set(result.written) == {
        PROJECT_MARKER,
        ".gitignore",
        ".gitattributes",
        "params/bm25.yaml",
        "notebooks/evaluate.ipynb",
        "notebooks/compare.ipynb",
        "benchmark/benchmark.yaml",
        "benchmark/documents.jsonl",
        "benchmark/cases.jsonl",
    }
    assert result.kept == [] and result.git_init
    benchmark, problems = validate_benchmark(team / "benchmark")
    assert problems == [] and benchmark is not None and len(benchmark.documents) == 1
    assert [c.queryId for c in benchmark.cases_for("dev")] == ["q-0001"]
    config = load_config(team / "params" / "bm25.yaml")
    assert Path(config.benchmark) == (team / "benchmark").resolve()
    assert (team / "notebooks" / "evaluate.ipynb").read_bytes() == (ROOT / "notebooks" / "evaluate.ipynb").read_bytes()
    assert git(team, "rev-parse", "--show-toplevel") == str(team.resolve())
    assert "--keep-id" in git(team, "config", "--local", "filter.nbstripout.clean")
    assert git(team, "check-attr", "filter", "--", "notebooks/evaluate.ipynb").endswith("nbstripout")
    assert {"mlruns/", ".rageval-cache/"} <= set((team / ".gitignore").read_text().splitlines())
    assert (
        result.next_commands()[0] == f"cd {team.resolve()}" and "rageval run params/bm25.yaml" in result.next_commands()
    )


def test_init_refuses_a_non_empty_folder_and_force_overwrites_nothing(tmp_path):
    team = tmp_path / "team"
    (team / "params").mkdir(parents=True)
    (team / "params" / "bm25.yaml").write_text("# ours\n")
    with pytest.raises(RagevalError, match="is not empty.*--force"):
        init_project(team)
    result = init_project(team, force=True)
    assert result.kept == ["params/bm25.yaml"] and "notebooks/evaluate.ipynb" in result.written
    assert (team / "params" / "bm25.yaml").read_text() == "# ours\n"


def test_the_init_command_prints_the_next_commands(tmp_path):
    result = CliRunner().invoke(app, ["init", str(tmp_path / "team")])
    assert result.exit_code == 0, result.output
    assert "wrote params/bm25.yaml" in result.output and "rageval run params/bm25.yaml" in result.output
    again = CliRunner().invoke(app, ["init", str(tmp_path / "team")])
    assert again.exit_code == 1 and "is not empty" in again.output and "Traceback" not in again.output


def test_inside_the_project_its_notebook_store_and_cache_are_used(tmp_path, monkeypatch):
    team = tmp_path / "team"
    init_project(team)
    monkeypatch.chdir(team / "params")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert project_root() == team.resolve()
    assert default_notebook() == team.resolve() / "notebooks" / "evaluate.ipynb"
    assert default_store() == team.resolve() / "mlruns"
    monkeypatch.chdir(tmp_path)  # outside it: the rageval checkout (an editable install) again
    assert project_root() == ROOT


def test_the_runs_own_files_make_it_dirty_tracked_or_untracked(tmp_path):
    team = make_team(tmp_path / "team")
    params = team / "params" / "bm25.yaml"
    head = git(team, "rev-parse", "HEAD")

    def state(file: Path = params) -> dict[str, str]:
        return origin(file, load_config(file)).tags()

    clean = state()
    assert "rageval.project.commit" not in clean and clean["rageval.project.dirty"] == "false"  # git.commit is it
    assert clean["rageval.git.commit"] == head and clean["rageval.git.dirty"] == "false"
    assert clean["rageval.project.root"] == str(team.resolve())
    (team / "notes.txt").write_text("not read by the run\n")  # untracked, not an input: clean
    assert state()["rageval.project.dirty"] == "false" and state()["rageval.git.dirty"] == "false"

    params.write_text(params.read_text().replace("k1: 0.9", "k1: 1.2"))  # a tracked change
    tracked = state()
    assert tracked["rageval.project.dirty"] == "true" and tracked["rageval.project.dirty_files"] == "params/bm25.yaml"
    assert tracked["rageval.git.dirty"] == "true"
    git(team, "checkout", "--", "params/bm25.yaml")

    extra = team / "params" / "bm25-b.yaml"  # an untracked params file (a clone's run recorded it clean)
    extra.write_text(params.read_text().replace("bm25-baseline", "bm25-b"))
    untracked = origin(extra, load_config(extra))
    tags = untracked.tags()
    assert tags["rageval.project.dirty"] == "true" and tags["rageval.project.dirty_files"] == "params/bm25-b.yaml"
    assert tags["rageval.git.dirty"] == "true" and tags["rageval.git.dirty_files"] == "params/bm25-b.yaml"
    assert "params/bm25-b.yaml" in (untracked.warning or "")
    # The recorded patch recreates the untracked file on the commit.
    patch = untracked.diff()
    assert b"new file mode" in patch and b"+name: bm25-b" in patch
    copy = tmp_path / "copy"
    git(team, "worktree", "add", "-q", "--detach", str(copy), head)
    (tmp_path / "p.diff").write_bytes(patch)
    git(copy, "apply", str(tmp_path / "p.diff"))
    assert (copy / "params" / "bm25-b.yaml").read_text() == extra.read_text()


def test_rageval_records_its_own_revision_or_installed():
    assert source_tags(None) == {"rageval.source.commit": "installed", "rageval.source.dirty": "installed"}


@pytest.fixture(scope="module")
def team_run(tmp_path_factory, store):
    """One run in a team project made by `rageval init`, from its folder; then a run of an
    untracked params file."""
    team = make_team(tmp_path_factory.mktemp("teams") / "team")
    warnings: dict[str, list[str]] = {"clean": [], "dirty": []}
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(team)
        run = execute_run(RunRequest(team / "params" / "bm25.yaml"), Tracker(store), warn=warnings["clean"].append)
        extra = team / "params" / "bm25-b.yaml"
        extra.write_text((team / "params" / "bm25.yaml").read_text().replace("bm25-baseline", "bm25-b"))
        dirty = execute_run(RunRequest(extra), Tracker(store), warn=warnings["dirty"].append).run_id
    return team, run.run_id, dirty, warnings


@pytest.mark.e2e
def test_a_team_run_records_both_revisions_and_runs_the_teams_notebook(team_run, store):
    team, run, dirty, warnings = team_run
    # The starter params draw no warning, the project is clean (rageval's own checkout may not be).
    assert not any("params/" in w or "the working tree" in w for w in warnings["clean"])
    (dirty_warning,) = warnings["dirty"]
    assert dirty_warning.startswith("warning: the working tree has uncommitted changes in params/bm25-b.yaml")
    tracker = Tracker(store)
    tags = tracker.run(run).tags
    head = git(team, "rev-parse", "HEAD")
    assert tags["rageval.version"] == RAGEVAL_VERSION
    assert tags["rageval.project.root"] == str(team.resolve())
    assert head == tags["rageval.git.commit"] and "rageval.project.commit" not in tags
    assert tags["rageval.project.dirty"] == "false" and tags["rageval.git.dirty"] == "false"
    rageval_head = git(ROOT, "rev-parse", "HEAD")
    assert tags["rageval.source.commit"] == rageval_head != head
    assert tags["rageval.source.dirty"] in ("true", "false")
    root = Path(tracker.run(run).artifact_uri.removeprefix("file://"))
    executed = nbformat.read(root / "notebook" / "evaluate.ipynb", as_version=4)
    assert executed.cells[0].source == TEAM_NOTE  # the project's copy ran, not the package's
    assert tracker.run(run).metrics["nDCG_at_5"] == 1.0  # the skeleton's one case finds its document
    dirty_tags = tracker.run(dirty).tags
    assert dirty_tags["rageval.project.dirty"] == "true"
    assert dirty_tags["rageval.project.dirty_files"] == "params/bm25-b.yaml"
    assert dirty_tags["rageval.git.dirty"] == "true"
    with pytest.raises(ReproductionError, match="dirty working tree"):
        reproduce(dirty, tracker=tracker)


@pytest.mark.e2e
def test_reproduce_from_the_team_repository_is_identical(team_run, store, monkeypatch):
    team, run, _, _ = team_run
    monkeypatch.chdir(team)
    # The team's benchmark working copy moves on: the reproduction reads the commit's.
    (team / "benchmark" / "documents.jsonl").write_text('{"id": "x", "title": "X", "text": "changed"}\n')
    try:
        result = reproduce(run, tracker=Tracker(store))
    finally:
        git(team, "checkout", "--", "benchmark")
    assert result.verdict == "identical"
    assert [(s.stage, s.identical, s.queries_changed) for s in result.stages] == [
        ("bm25", True, 0),
        ("context", True, 0),
    ]
    assert result.metric_differences["nDCG_at_5"] == 0.0
    tracker = Tracker(store)
    again = tracker.run(result.reproduction).tags
    assert again["rageval.git.commit"] == tracker.run(run).tags["rageval.git.commit"]
    assert again["rageval.source.commit"] == tracker.run(run).tags["rageval.source.commit"]
    assert git(team, "worktree", "list").count("\n") == 0


@pytest.mark.e2e
def test_reproduce_refuses_another_rageval_naming_both(team_run, store, monkeypatch):
    team, run, _, _ = team_run
    tags = Tracker(store).run(run).tags
    monkeypatch.setattr(reproduce_module, "RAGEVAL_VERSION", "9.9.9")
    monkeypatch.chdir(team)
    with pytest.raises(ReproductionError) as refused:
        reproduce(run, tracker=Tracker(store))
    message = str(refused.value)
    assert f"made with rageval {RAGEVAL_VERSION} (checkout commit {tags['rageval.source.commit'][:12]}" in message
    assert "this is rageval 9.9.9" in message and "pip install" in message
    other = {**tags, "rageval.source.commit": "installed", "rageval.source.dirty": "installed"}
    monkeypatch.setattr(reproduce_module, "RAGEVAL_VERSION", RAGEVAL_VERSION)
    with pytest.raises(ReproductionError, match=rf"made with rageval {RAGEVAL_VERSION} \(installed\); this is"):
        check_rageval(run, other)
    check_rageval(run, tags)  # the very rageval that made it passes


def test_the_starter_params_are_valid_yaml_with_the_benchmark_beside(tmp_path):
    team = tmp_path / "team"
    init_project(team)
    data = yaml.safe_load((team / "params" / "bm25.yaml").read_text())
    assert data["benchmark"] == "../benchmark" and data["retrieval"]["stages"][0]["type"] == "bm25"
    spec = yaml.safe_load((team / "benchmark" / "benchmark.yaml").read_text())
    assert (
        json.loads((team / "benchmark" / "cases.jsonl").read_text())["relevant"][0]["documentId"] == "getting-started"
    )
    assert spec["splits"] == ["dev", "release"]
    shutil.rmtree(team / ".git")  # inside another repository, init makes no repository of its own
    git(tmp_path, "init", "-q")
    nested = init_project(tmp_path / "nested")
    assert not nested.git_init and not (tmp_path / "nested" / ".git").exists()
