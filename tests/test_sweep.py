"""Sweeps: expansion and validation before any run, the release rule, and real sweeps with
failing and interrupted members."""

from __future__ import annotations

import io
import os
import signal
import threading
import time
from pathlib import Path

import nbformat
import pandas as pd
import pytest
import yaml
from conftest import ROOT

from rageval.config.sweep import SweepConfig, expand, load_sweep
from rageval.errors import BenchmarkError, ConfigError, SweepError
from rageval.tracking.store import Tracker
from rageval.workflows.members import Progress, progress_kind
from rageval.workflows.sweep import SweepRequest, run_sweep

BM25 = ROOT / "params" / "bm25.yaml"


def sweep_file(tmp_path: Path, name: str = "sweep.yaml", **data) -> Path:
    body = {"version": 1, "name": "t", "base": str(BM25), **data}
    path = tmp_path / name
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


# --------------------------------------------------------------------------- expansion and validation


def test_grid_then_variants_with_readable_names():
    spec = SweepConfig.model_validate(
        {
            "version": 1,
            "name": "s",
            "base": "b.yaml",
            "grid": {"retrieval.stages.0.k1": [0.9, 1.2], "retrieval.stages.0.b": [0.4, 0.75]},
            "variants": [{"name": "no-stem", "set": {"retrieval.stages.0.tokenizer.stemmer": None}}],
        }
    )
    members = expand(spec)
    assert [m[0] for m in members] == ["k1=0.9,b=0.4", "k1=0.9,b=0.75", "k1=1.2,b=0.4", "k1=1.2,b=0.75", "no-stem"]
    assert members[1][1] == ("retrieval.stages.0.k1=0.9", "retrieval.stages.0.b=0.75")
    assert members[4][1] == ("retrieval.stages.0.tokenizer.stemmer=null",)


def test_ambiguous_grid_keys_keep_their_path():
    spec = SweepConfig.model_validate(
        {
            "version": 1,
            "name": "s",
            "base": "b.yaml",
            "grid": {"retrieval.stages.0.candidates": [5], "retrieval.stages.1.candidates": [7]},
        }
    )
    assert expand(spec)[0][0] == "retrieval.stages.0.candidates=5,retrieval.stages.1.candidates=7"


def test_members_load_as_run_overrides(tmp_path):
    path = sweep_file(
        tmp_path,
        grid={"retrieval.stages.0.k1": [1.2, 1.5]},
        variants=[{"name": "base", "set": {}}],
        benchmark=str(ROOT / "rageval" / "demo"),
    )
    sweep = load_sweep(path)
    assert [m.name for m in sweep.members] == ["k1=1.2", "k1=1.5", "base"]
    assert [m.config.retrieval.stages[0].k1 for m in sweep.members] == [1.2, 1.5, 0.9]
    assert sweep.split == "dev" and sweep.base == BM25.resolve() and len(sweep.sha256) == 64


def test_every_problem_is_reported_with_the_sweep_file_and_line(tmp_path):
    path = sweep_file(
        tmp_path,
        variants=[
            {"name": "typo", "set": {"retrieval.stages.0.k2": 1.0}},
            {"name": "bad-b", "set": {"retrieval.stages.0.b": 2}},
            {"name": "same", "set": {}},
            {"name": "same-again", "set": {"retrieval.stages.0.k1": 0.9}},
            {"name": "typo", "set": {}},
        ],
    )
    with pytest.raises(ConfigError) as raised:
        load_sweep(path)
    problems = raised.value.problems
    assert [(p.line, p.field) for p in problems] == [
        (5, "member typo"),
        (8, "member bad-b"),
        (13, "member same-again"),
        (16, "typo"),
    ]
    assert all(p.file == str(path) for p in problems)
    assert "--set retrieval.stages.0.k2=1.0" in problems[0].message and "unknown key 'k2'" in problems[0].message
    assert "less than or equal to 1" in problems[1].message
    assert (
        problems[2].message == "the same configuration as member same" and problems[3].message == "member name repeats"
    )


def test_a_sweep_file_is_strict(tmp_path):
    path = sweep_file(tmp_path, variant=[{"name": "x"}])
    with pytest.raises(ConfigError) as raised:
        load_sweep(path)
    (problem,) = raised.value.problems
    assert (problem.line, problem.field, problem.message) == (4, "variant", "unknown key 'variant'")
    assert (
        problem.fix == "allowed keys here: version, name, description, base, grid, variants, benchmark, split, workers"
    )
    with pytest.raises(ConfigError, match="a sweep needs a grid, variants or both"):
        load_sweep(sweep_file(tmp_path, name="empty.yaml", grid={}))


def test_sweep_values_an_override_cannot_carry_name_their_line(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text(
        f"version: 1\nname: t\nbase: {BM25}\ngrid:\n  final_k: [5, 2024-01-01]\n"
        "variants:\n  - name: v\n    set: {evaluation.abstain_below: .nan}\n"
    )
    with pytest.raises(ConfigError) as raised:
        load_sweep(path)
    assert [(p.line, p.field) for p in raised.value.problems] == [
        (5, "grid.final_k[1]"),
        (8, "variants[0].set.evaluation.abstain_below"),
    ]
    assert raised.value.problems[0].message.startswith("datetime.date(2024, 1, 1) cannot be an override value")


def test_a_grid_of_a_million_members_is_refused_before_expanding(tmp_path):
    grid = {f"retrieval.stages.0.k{i}": list(range(10)) for i in range(6)}
    started = time.perf_counter()
    with pytest.raises(ConfigError) as raised:
        load_sweep(sweep_file(tmp_path, grid=grid))
    assert time.perf_counter() - started < 1
    (problem,) = raised.value.problems
    assert "the sweep has 1000000 members (1000000 grid combinations), more than 1000" in problem.message


def test_a_sweep_on_release_needs_release(tmp_path, store):
    path = sweep_file(tmp_path, split="release", variants=[{"name": "base", "set": {}}])
    before = {r.run_id for r in Tracker(store).runs()}
    with pytest.raises(ConfigError) as raised:
        run_sweep(SweepRequest(path), tracker=Tracker(store))
    (problem,) = raised.value.problems
    assert problem.field == "split" and problem.line == 4 and "frozen 'release' split" in problem.message
    assert "pass --release" in problem.fix
    assert {r.run_id for r in Tracker(store).runs()} == before  # refused before any run exists
    assert load_sweep(path, release=True).split == "release"


def test_a_sweep_with_an_undeclared_split_creates_no_run(tmp_path):
    path = sweep_file(tmp_path, split="nosuch", variants=[{"name": "base", "set": {}}])
    tracker = Tracker(f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}")
    with pytest.raises(BenchmarkError, match="nosuch"):
        run_sweep(SweepRequest(path), tracker=tracker)
    assert tracker.runs() == []  # refused before the parent exists


def test_progress_prints_plain_lines_off_a_terminal():
    out = io.StringIO()
    bar = Progress(3, 2, out)
    bar.event("start", "a")
    bar.event("start", "b")
    bar.event("sealed", "a")
    bar.event("failed", "b")
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("a: sealed | sweep: 1/3 configs, 1 sealed, 0 failed, 1 running")
    assert lines[1].startswith("b: failed | sweep: 2/3 configs, 1 sealed, 1 failed, 0 running")


# --------------------------------------------------------------------------- real sweeps


def notebook_with_cell(tmp_path: Path, source: str, name: str, keep_rest: bool = True) -> Path:
    """The evaluation notebook with ``source`` right after its parameters cell."""
    notebook = nbformat.read(ROOT / "notebooks" / "evaluate.ipynb", as_version=4)
    at = next(i for i, c in enumerate(notebook.cells) if "parameters" in c.metadata.get("tags", [])) + 1
    rest = notebook.cells[at:] if keep_rest else []
    notebook.cells = [*notebook.cells[:at], nbformat.v4.new_code_cell(source), *rest]
    path = tmp_path / name
    nbformat.write(notebook, path)
    return path


@pytest.fixture(scope="module")
def release_sweep(tmp_path_factory, store):
    tmp = tmp_path_factory.mktemp("sweep")
    notebook = notebook_with_cell(
        tmp,
        'if config_yaml and "planted-failure" in config_yaml:\n    raise RuntimeError("planted failure")',
        "planted.ipynb",
    )
    path = sweep_file(
        tmp,
        split="release",
        workers=2,
        variants=[
            {"name": "baseline", "set": {}},
            {"name": "broken", "set": {"description": "planted-failure"}},
            {"name": "textbook", "set": {"retrieval.stages.0.k1": 1.2, "retrieval.stages.0.b": 0.75}},
        ],
    )
    progress = io.StringIO()
    request = SweepRequest(path, release=True, experiment="sweep-tests", notebook=notebook)
    outcome = run_sweep(request, tracker=Tracker(store), progress=progress)
    return outcome, progress.getvalue()


@pytest.mark.e2e
def test_a_sweep_seals_its_members_and_names_the_failure(release_sweep, store):
    outcome, progress = release_sweep
    tracker = Tracker(store)
    statuses = {m.name: m.status for m in outcome.members}
    assert statuses == {"baseline": "sealed", "broken": "FAILED", "textbook": "sealed"}
    parent = tracker.run(outcome.parent_run_id)
    assert parent.status == "FAILED" and not parent.sealed and "broken" in parent.tags["rageval.error"]
    assert parent.tags["rageval.kind"] == "sweep" and parent.tags["rageval.split"] == "release"
    assert "rageval.sweep.release" not in parent.tags  # the split says it: --release is required for it
    assert "rageval.sweep.sha256" not in parent.tags and parent.metrics == {}
    assert "1 of 3 members did not seal: broken" in parent.tags["rageval.error"]
    assert set(parent.params) == {"workers"}  # the split: the tag; the file and its sha256: sweep.yaml, summary.json
    children = {c.tags["rageval.sweep.member"]: c for c in tracker.children(outcome.parent_run_id)}
    assert set(children) == {"baseline", "broken", "textbook"}
    for name in ("baseline", "textbook"):
        child = children[name]
        assert child.sealed and tracker.verify(child.run_id) == []
        # the sweep is MLflow's parent tag alone (rageval.sweep.parent before 2026-12, still read)
        assert child.tags["mlflow.parentRunId"] == outcome.parent_run_id and "rageval.sweep.parent" not in child.tags
        assert "rageval.sweep.release" not in child.tags and "split" not in child.params
        assert child.tags["rageval.split"] == "release" and child.tags["rageval.config.family"] == "bm25-baseline"
        assert child.name == f"t/{name}@release" and child.tags["rageval.config.label"] == f"t/{name}"
        assert child.tags["rageval.kind"] == "evaluation"
    assert children["broken"].status == "FAILED" and not children["broken"].sealed
    assert "planted failure" in children["broken"].tags["rageval.error"]
    # every release evaluation is counted, failed ones too, in start order
    counts = sorted(int(c.tags["rageval.release.evaluations"]) for c in children.values())
    assert counts == [counts[0], counts[0] + 1, counts[0] + 2]  # the store is shared: earlier runs may count
    assert "broken: failed" in progress and "3/3 configs, 2 sealed, 1 failed" in progress
    root = Path(parent.artifact_uri.removeprefix("file://"))
    summary = pd.read_csv(root / "summary.csv").set_index("name")
    assert summary.loc["broken", "status"] == "FAILED" and "planted failure" in summary.loc["broken", "error"]
    assert summary.loc["textbook", "overrides"] == "retrieval.stages.0.k1=1.2 retrieval.stages.0.b=0.75"
    assert (root / "sweep.yaml").is_file() and (root / "summary.json").is_file()
    with pytest.raises(SweepError, match="1 of 3 member.s. did not seal: broken: FAILED") as raised:
        outcome.check()
    assert raised.value.failed == ["broken"]


@pytest.mark.e2e
def test_an_interrupted_sweep_kills_running_members_and_never_starts_the_rest(tmp_path, store):
    notebook = notebook_with_cell(tmp_path, "import time\ntime.sleep(120)", "sleepy.ipynb", keep_rest=False)
    path = sweep_file(
        tmp_path,
        workers=2,
        variants=[
            {"name": "one", "set": {}},
            {"name": "two", "set": {"retrieval.stages.0.k1": 1.2}},
            {"name": "three", "set": {"retrieval.stages.0.k1": 1.5}},
        ],
    )
    tracker = Tracker(store)
    parents: list[str] = []

    def interrupt_when_both_run() -> None:
        deadline = time.time() + 120
        while time.time() < deadline:
            if parents and len(tracker.children(parents[0])) == 2:
                time.sleep(3)  # let both kernels reach the sleeping cell
                os.kill(os.getpid(), signal.SIGTERM)
                return
            time.sleep(0.5)

    killer = threading.Thread(target=interrupt_when_both_run, daemon=True)
    killer.start()
    outcome = run_sweep(
        SweepRequest(path, experiment="sweep-tests", notebook=notebook),
        tracker=Tracker(store),
        progress=io.StringIO(),
        on_parent=parents.append,
    )
    killer.join(timeout=5)
    assert outcome.interrupted
    assert {m.name: m.status for m in outcome.members} == {"one": "KILLED", "two": "KILLED", "three": "not started"}
    parent = tracker.run(outcome.parent_run_id)
    assert parent.status == "KILLED" and not parent.sealed and "1 never started" in parent.tags["rageval.error"]
    children = tracker.children(outcome.parent_run_id)
    assert len(children) == 2 and all(c.status == "KILLED" and not c.sealed for c in children)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL or callable(signal.getsignal(signal.SIGTERM))


def test_the_sweep_command_refuses_release_without_the_flag(tmp_path, store):
    from typer.testing import CliRunner

    from rageval.cli import app

    path = sweep_file(tmp_path, split="release", variants=[{"name": "base", "set": {}}])
    result = CliRunner().invoke(app, ["sweep", str(path), "--tracking-uri", store])
    assert result.exit_code == 2
    assert f"{path}:4: split: the sweep evaluates on the frozen 'release' split" in result.output
    assert "pass --release" in result.output


@pytest.mark.e2e
def test_diff_notebooks_shows_parameters_and_outputs_without_metadata(release_sweep, store):
    from typer.testing import CliRunner

    from rageval.cli import app

    outcome, _ = release_sweep
    runs = {m.name: m.run_id for m in outcome.members}
    result = CliRunner().invoke(app, ["diff-notebooks", runs["baseline"], runs["textbook"], "--tracking-uri", store])
    assert result.exit_code == 0, result.output
    assert (
        f"--- {runs['baseline']}:planted.ipynb" in result.output
        and f"+++ {runs['textbook']}:planted.ipynb" in result.output
    )
    assert "k1: 1.2" in result.output and f'+run_id = "{runs["textbook"]}"' in result.output
    assert "/outputs/" in result.output and "/metadata" not in result.output


def test_notebook_slots_are_granted_in_member_order_skip_a_failed_member_and_give_way_to_a_cancel():
    from rageval.execution.slots import NotebookSlot, NotebookSlots

    slots = NotebookSlots(1)
    granted: list[int] = []
    first, second, third = NotebookSlot(slots, 0), NotebookSlot(slots, 1), NotebookSlot(slots, 2)

    def take(slot: NotebookSlot, ticket: int) -> None:
        assert slot.acquire()
        granted.append(ticket)

    late = threading.Thread(target=take, args=(third, 2))
    late.start()  # asks first, but its turn comes after 0 and 1
    time.sleep(0.3)
    assert granted == []
    assert first.acquire()
    granted.append(0)
    second.release()  # member 1 failed before its run: skipped, never held
    first.release()
    late.join(timeout=5)
    assert granted == [0, 2]
    third.release()
    third.release()  # idempotent

    cancel = threading.Event()
    busy, waiting = NotebookSlot(slots, 3), NotebookSlot(slots, 4)
    assert busy.acquire(cancel)
    cancel.set()
    assert waiting.acquire(cancel) is False  # interrupted while it waited: no place, no run
    waiting.release()
    busy.release()


class OneAtATime:
    """A third SweepExecutor: members one after another in this thread, and a Ctrl-C after the first."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def open(self, sweep, notebook, workers):
        self.calls.append(f"open {workers}")
        return 1, {"sweep.executor": "one-at-a-time"}

    def map(self, jobs, tracker, bar):
        self.calls.append("map " + ",".join(job.name for job in jobs))
        bar.event("start", jobs[0].name)
        result = jobs[0].run(tracker)
        bar.event(progress_kind(result), jobs[0].name)
        yield result
        raise KeyboardInterrupt  # pressed while the second member waited

    def cancel(self):
        self.calls.append("cancel")

    def stop(self):
        self.calls.append("stop")
        return []

    def settle(self, tracker, parent, results):
        self.calls.append("settle " + ",".join(f"{n}={r.status}" for n, r in sorted(results.items())))

    def close(self):
        self.calls.append("close")


def test_the_sweep_driver_runs_any_executor_and_records_its_interruption(tmp_path, store):
    path = sweep_file(
        tmp_path, variants=[{"name": "one", "set": {}}, {"name": "two", "set": {"retrieval.stages.0.k1": 1.2}}]
    )
    executor = OneAtATime()
    outcome = run_sweep(
        SweepRequest(path, experiment="sweep-executor"),
        tracker=Tracker(store),
        progress=io.StringIO(),
        executor=executor,
    )
    assert executor.calls == ["open None", "map one,two", "stop", "settle one=sealed,two=not started", "close"]
    assert outcome.interrupted and {m.name: m.status for m in outcome.members} == {
        "one": "sealed",
        "two": "not started",
    }
    tracker = Tracker(store)
    parent = tracker.run(outcome.parent_run_id)
    assert (
        parent.status == "KILLED"
        and "1 sealed" in parent.tags["rageval.error"]
        and "1 never started" in parent.tags["rageval.error"]
    )
    assert parent.params["sweep.executor"] == "one-at-a-time" and parent.params["workers"] == "1"
    (child,) = tracker.children(outcome.parent_run_id)
    assert child.sealed and child.tags["rageval.sweep.member"] == "one" and tracker.verify(child.run_id) == []
