"""Plain papermill as a door: notebooks/evaluate.ipynb with ``record`` True seals the run ``rageval run``
would; its parameters are one typed model, checked in the kernel before any work."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Optional

import nbformat
import papermill
import pytest
import yaml
from conftest import ROOT

from rageval.errors import ParameterError
from rageval.tracking.store import Tracker
from rageval.workflows.door import EvaluateParameters, parameters_from, recorded_run, resolve, type_name
from rageval.workflows.reproduce import NOT_RESULTS
from rageval.workflows.run import RunRequest, execute_run

NOTEBOOK = ROOT / "notebooks" / "evaluate.ipynb"
BM25 = ROOT / "params" / "bm25.yaml"
BIN = Path(sys.executable).parent
FIELDS = list(EvaluateParameters.model_fields)


def runs_in(store: str) -> set[str]:
    return {r.run_id for r in Tracker(store).runs()}


def papermill_cli(*args: str, cwd: Path, store: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MLFLOW_TRACKING_URI": store}
    return subprocess.run(
        [str(BIN / "papermill"), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


# --------------------------------------------------------------------------- the parameters, one source


def test_the_parameters_cell_declares_exactly_the_model_with_its_types_and_defaults():
    declared = papermill.inspect_notebook(str(NOTEBOOK))
    assert list(declared) == FIELDS
    for name, info in declared.items():
        field = EvaluateParameters.model_fields[name]
        assert ast.literal_eval(info["default"]) == field.default, name
        assert info["inferred_type_name"] == type_name(name), name
        # the cell's annotation is the model's type (papermill cannot read `str | None`, hence Optional)
        typing = {"Optional": Optional, "str": str, "bool": bool, "list": list}
        assert eval(info["inferred_type_name"], {"__builtins__": {}}, typing) == field.annotation, name
        assert info["help"], f"{name} has no comment for --help-notebook"


def test_the_docs_table_lists_every_parameter_with_its_type():
    text = (ROOT / "docs" / "papermill.md").read_text()
    for name in FIELDS:
        assert f"| `{name}` | `{type_name(name)}` |" in text, name


def test_an_unknown_parameter_is_refused_naming_it_and_every_valid_one():
    with pytest.raises(ParameterError) as raised:
        parameters_from({"config_path": "params/bm25.yaml", "k1": 1.5})
    (problem,) = raised.value.problems
    assert problem.field == "k1" and "1.5" in problem.message
    assert all(f"{name}: {type_name(name)}" in problem.fix for name in FIELDS)


@pytest.mark.parametrize(
    ("given", "field", "expected"),
    [({"record": "yes"}, "record", "bool"), ({"overrides": "final_k=3"}, "overrides", "list[str]")],
)
def test_a_mistyped_parameter_is_refused_with_its_expected_type(given, field, expected):
    with pytest.raises(ParameterError) as raised:
        parameters_from(given)
    (problem,) = raised.value.problems
    assert problem.field == field and problem.fix.startswith(f"expected {expected};")


def test_the_kernels_own_names_are_not_parameters():
    import json

    namespace = {
        "In": ["", "x = 1"],
        "Out": {},
        "get_ipython": print,
        "exit": object(),
        "_": 3,
        "_i1": "x",
        "json": json,  # a module
        "Optional": Optional,  # the parameters cell's import
        "result": object(),  # a value from running the cells before, in JupyterLab
        "record": False,
    }
    assert parameters_from(namespace) == EvaluateParameters()


@pytest.mark.parametrize(
    ("given", "field"),
    [
        ({"record": True, "config_yaml": "name: x"}, "record"),  # the nested kernel of a recorded run
        ({"record": True, "run_id": "abc"}, "record"),
        ({"record": True, "handoff": "/tmp/x"}, "handoff"),
        ({"config_yaml": "name: x", "overrides": ["final_k=3"]}, "overrides"),
    ],
)
def test_combinations_that_would_record_twice_or_be_ignored_are_refused(given, field):
    with pytest.raises(ParameterError) as raised:
        parameters_from(given)
    assert raised.value.problems[0].field == field


def test_a_relative_path_is_tried_in_the_working_directory_then_the_repository_root(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT / "notebooks")
    assert resolve("params/bm25.yaml", "config_path") == ROOT / "params" / "bm25.yaml"
    assert resolve("../params/bm25.yaml", "config_path") == Path("../params/bm25.yaml")  # as written
    (tmp_path / "params").mkdir()
    (tmp_path / "params" / "bm25.yaml").write_text("mine")
    monkeypatch.chdir(tmp_path)
    assert resolve("params/bm25.yaml", "config_path") == Path("params/bm25.yaml")  # the working directory wins
    with pytest.raises(ParameterError, match="not found in the working directory"):
        resolve("params/nope.yaml", "config_path")


def test_rageval_run_refuses_a_mistyped_or_recording_notebook_parameter_before_a_run_exists(store):
    before = runs_in(store)
    with pytest.raises(ParameterError, match=r"record: expected bool \(got 'yes'\)"):
        execute_run(RunRequest(BM25, notebook_parameters={"record": "yes"}), Tracker(store))
    with pytest.raises(ParameterError, match=r"overrides: expected list\[str\]"):
        execute_run(RunRequest(BM25, notebook_parameters={"overrides": [1]}), Tracker(store))
    with pytest.raises(ParameterError, match="record: rageval run records the run itself"):
        execute_run(RunRequest(BM25, notebook_parameters={"record": True}), Tracker(store))
    assert runs_in(store) == before


def test_a_notebook_that_recorded_nothing_has_no_run_to_read_back(tmp_path):
    plain = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")])
    nbformat.write(plain, tmp_path / "plain.ipynb")
    with pytest.raises(ParameterError, match="no recorded run"):
        recorded_run(tmp_path / "plain.ipynb")


# --------------------------------------------------------------------------- real papermill, real store


@pytest.fixture(scope="module")
def recorded(store, tmp_path_factory):
    """``rageval run params/bm25.yaml``, then the papermill command, both from the repository root, on one store."""
    reference = subprocess.run(
        [str(BIN / "rageval"), "run", "params/bm25.yaml", "--tracking-uri", store],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert reference.returncode == 0, reference.stderr[-3000:]
    (reference_id,) = re.findall(r"^run (\w+) sealed", reference.stdout, re.MULTILINE)
    out = tmp_path_factory.mktemp("door") / "out.ipynb"
    done = papermill_cli(
        "notebooks/evaluate.ipynb", str(out), "-p", "config_path", "params/bm25.yaml", "-p", "record", "True",
        cwd=ROOT, store=store,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return reference_id, recorded_run(out), out


@pytest.mark.e2e
def test_the_record_command_seals_a_run_that_verify_accepts(recorded, store):
    _, run_id, out = recorded
    info = Tracker(store).run(run_id)
    assert info.status == "FINISHED" and info.sealed
    verified = subprocess.run(
        [str(BIN / "rageval"), "verify", run_id, "--tracking-uri", store], capture_output=True, text=True, timeout=120
    )
    assert verified.returncode == 0 and f"run {run_id}: intact" in verified.stdout, verified.stderr
    text = "".join(
        o.get("data", {}).get("text/plain", "")
        for c in nbformat.read(out, as_version=4).cells
        for o in c.get("outputs", [])
    )
    assert f"run {run_id} sealed" in text and f"rageval verify {run_id}" in text


@pytest.mark.e2e
def test_the_record_is_the_one_rageval_run_makes(recorded, store):
    reference_id, run_id, out = recorded
    tracker = Tracker(store)
    a, b = tracker.run(reference_id), tracker.run(run_id)
    assert (
        a.tags.keys() == b.tags.keys() and a.params.keys() == b.params.keys() and a.metrics.keys() == b.metrics.keys()
    )
    assert a.params == b.params
    # Which process, when, the numbered name, whether the cache was warm, the latency measured (with
    # the load it ran under), and the seal over all that.
    differs = {"mlflow.runName", "rageval.owner", "rageval.seal", "rageval.latency"}
    differs.add("rageval.cache")  # the second run finds the first one's index cached
    assert {k: v for k, v in a.tags.items() if k not in differs} == {
        k: v for k, v in b.tags.items() if k not in differs and not k.startswith("rageval.cache.")
    }
    measures = [k for k in a.metrics if not k.startswith(NOT_RESULTS)]  # the timings differ
    assert measures and {k: a.metrics[k] for k in measures} == {k: b.metrics[k] for k in measures}

    def files(info) -> set[str]:
        root = Path(info.artifact_uri.removeprefix("file://"))
        return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}

    assert files(a) == files(b) and "notebook/evaluate.ipynb" in files(b)
    # The outer notebook shows the result the nested kernel recorded (handed back, not recomputed).
    shown = "".join(
        o.get("data", {}).get("text/html", "")
        for c in nbformat.read(out, as_version=4).cells
        for o in c.get("outputs", [])
    )
    assert f"{b.metrics['nDCG_at_10']:.4f}" in shown


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("parameter", "named"), [(("k1", "1.5"), "k1: unknown notebook parameter"), (("record", "yes"), "record: Input")]
)
def test_a_bad_parameter_fails_the_papermill_command_before_a_run_exists(parameter, named, store, tmp_path):
    before = runs_in(store)
    done = papermill_cli(str(NOTEBOOK), str(tmp_path / "out.ipynb"), "-p", *parameter, cwd=ROOT, store=store)
    assert done.returncode != 0
    assert named in done.stderr and all(name in done.stderr for name in FIELDS)
    assert runs_in(store) == before


@pytest.mark.e2e
def test_from_notebooks_the_default_config_resolves_and_nothing_is_recorded(store, tmp_path):
    before = runs_in(store)
    done = papermill_cli("evaluate.ipynb", str(tmp_path / "out.ipynb"), cwd=ROOT / "notebooks", store=store)
    assert done.returncode == 0, done.stderr[-3000:]
    assert runs_in(store) == before
    with pytest.raises(ParameterError, match="no recorded run"):
        recorded_run(tmp_path / "out.ipynb")


@pytest.mark.e2e
def test_a_papermill_loop_gives_one_sealed_run_per_configuration(store, tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    run_ids = []
    for k1 in (0.6, 1.2):  # two configurations make a loop; each notebook run costs seconds
        out = tmp_path / f"k1-{k1}.ipynb"
        papermill.execute_notebook(
            str(NOTEBOOK),
            str(out),
            parameters={
                "config_path": "params/bm25.yaml",
                "record": True,
                "overrides": [f"retrieval.stages.0.k1={k1}"],
            },
            progress_bar=False,
        )
        run_ids.append(recorded_run(out))
    tracker = Tracker(store)
    assert len(set(run_ids)) == 2
    for run_id, k1 in zip(run_ids, (0.6, 1.2), strict=True):
        info = tracker.run(run_id)
        assert info.sealed and tracker.verify(run_id) == []
        # the resolved configuration is the artifact config.yaml (the params are a readable few)
        recorded = yaml.safe_load((Path(info.artifact_uri.removeprefix("file://")) / "config.yaml").read_text())
        assert recorded["retrieval"]["stages"][0]["k1"] == k1 and info.params["pipeline"] == "bm25"
        assert f"retrieval.stages.0.k1={k1}" in info.params["rageval.overrides"]
