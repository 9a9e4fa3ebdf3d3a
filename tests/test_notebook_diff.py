"""`rageval diff-notebooks`: two runs' executed notebooks diffed as a reader compares them (the
configuration as YAML lines, outputs as text), and nbdime's complete diff behind --full."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT
from typer.testing import CliRunner

from rageval.cli import app
from rageval.tracking.store import Tracker
from rageval.workflows.notebook_diff import (
    diff_notebook_files,
    diff_reduced,
    download_notebooks,
    html_lines,
    parameter_lines,
    reduce_notebook,
)
from rageval.workflows.run import RunRequest, execute_run

CONFIG = "version: 1\nname: bm25\nretrieval:\n  stages:\n  - type: bm25\n    k1: 0.9\n    b: 0.4\nfinal_k: 5\n"


def styler_html(uuid: str, values: list[str]) -> str:
    """A table as pandas' Styler writes it: header rows for the columns and the index's name."""
    rows = "".join(
        f'<tr><th id="T_{uuid}_level0_row{i}" class="row_heading">{name}</th>'
        f'<td id="T_{uuid}_row{i}_col0" class="data">{value}</td></tr>\n'
        for i, (name, value) in enumerate(zip(["nDCG@10", "R@5"], values, strict=True))
    )
    return (
        f'<style type="text/css">\n#T_{uuid}_row0_col0 {{ color: red }}\n</style>\n<table id="T_{uuid}">\n'
        '<thead><tr><th class="blank">&nbsp;</th><th class="col_heading">mean</th></tr>\n'
        '<tr><th class="index_name">measure</th><th class="blank">&nbsp;</th></tr></thead>\n'
        f"<tbody>\n{rows}</tbody></table>"
    )


def executed(config: str = CONFIG, values=("0.5970", "0.4206"), png: str = "iVBORw0KGgoAAAA") -> nbformat.NotebookNode:
    """A notebook as papermill leaves it: parameters, an injected-parameters cell, outputs, timings."""
    nb = nbformat.v4.new_notebook(metadata={"papermill": {"start_time": "2026-12-01T10:00:00", "duration": 9.1}})
    nb.cells = [
        nbformat.v4.new_code_cell("config_yaml = None", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(
            f'# Parameters\nconfig_yaml = {config!r}\nrun_id = "r1"\n', metadata={"tags": ["injected-parameters"]}
        ),
        nbformat.v4.new_code_cell("display(styled(result.summary))\nresult.counts()", execution_count=4),
        nbformat.v4.new_code_cell("overview(result)", execution_count=5),
    ]
    nb.cells[1].source = nb.cells[1].source.replace("'", '"')
    nb.cells[2].outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={"text/html": styler_html("1a2b3", list(values)), "text/plain": "<Styler at 0x7f00aa11>"},
        ),
        nbformat.v4.new_output("stream", name="stderr", text="a warning\n"),
    ]
    nb.cells[3].outputs = [
        nbformat.v4.new_output(
            "execute_result", data={"image/png": png, "text/plain": "<Figure size 1100x380>"}, execution_count=5
        )
    ]
    for cell in nb.cells:
        cell.metadata["papermill"] = {"duration": 1.5, "start_time": "2026-12-01T10:00:01"}
        cell.metadata["execution"] = {"iopub.execute_input": "2026-12-01T10:00:01Z"}
    return nb


def write(nb: nbformat.NotebookNode, path: Path) -> Path:
    nbformat.write(nb, path)
    return path


def test_parameters_show_as_yaml_lines():
    lines = parameter_lines('# Parameters\nconfig_yaml = "a: 1\\nb:\\n  c: 2\\n"\nrun_id = "r1"\nk = 3\n')
    assert lines == ["# Parameters", 'config_yaml = """', "a: 1", "b:", "  c: 2", '"""', 'run_id = "r1"', "k = 3"]


def test_styler_tables_read_a_row_per_line_with_their_header():
    lines, columns = html_lines(styler_html("abcde", ["0.5", "0.25"]))
    assert lines == ["measure | mean", "nDCG@10 | 0.5", "R@5 | 0.25"] and columns == "measure | mean"


def test_notebooks_differing_in_timings_ids_counts_and_styler_ids_differ_in_nothing(tmp_path):
    nb = executed()
    other = copy.deepcopy(nb)
    other.metadata["papermill"] = {"start_time": "2026-12-02T11:00:00", "duration": 12.0}
    for index, cell in enumerate(other.cells):
        cell.id = f"other-{index}"
        cell.metadata["papermill"]["duration"] = 7.0
        cell.execution_count = (cell.execution_count or 0) + 10
    html = other.cells[2].outputs[0].data
    html["text/html"] = html["text/html"].replace("T_1a2b3", "T_9f8e7")
    html["text/plain"] = "<Styler at 0x7fffee00>"
    other.cells[3].outputs[0].execution_count = 99
    assert diff_notebook_files(write(nb, tmp_path / "a.ipynb"), write(other, tmp_path / "b.ipynb"), ("A", "B")) == ""
    assert diff_notebook_files(tmp_path / "a.ipynb", tmp_path / "a.ipynb", ("A", "A")) == ""


def test_a_changed_key_a_changed_number_and_a_changed_image_each_take_a_line(tmp_path):
    old = write(executed(), tmp_path / "a.ipynb")
    new = write(
        executed(CONFIG.replace("k1: 0.9", "k1: 1.2"), ("0.5881", "0.4206"), "iVBORw0KGgoBBBB"), tmp_path / "b.ipynb"
    )
    text = diff_notebook_files(old, new, ("runA:evaluate.ipynb", "runB:evaluate.ipynb"))
    assert text.splitlines() == [
        "--- runA:evaluate.ipynb",
        "+++ runB:evaluate.ipynb",
        "## modified /cells/1/source (injected parameters)",
        "@@ -7,3 +7,3 @@",
        "   - type: bm25",
        "-    k1: 0.9",
        "+    k1: 1.2",
        "     b: 0.4",
        "",
        "## modified /cells/2/outputs/0 (text/html; columns measure | mean)",
        "@@ -1,3 +1,3 @@",
        " measure | mean",
        "~nDCG@10 | 0.5970 → 0.5881",
        " R@5 | 0.4206",
        "",
        "## modified /cells/3/outputs/0: image changed (image/png 0.0 KB → image/png 0.0 KB)",
    ]


def test_an_added_cell_does_not_shift_the_others_and_long_changes_are_cut(tmp_path):
    nb = executed()
    other = copy.deepcopy(nb)
    other.cells.insert(2, nbformat.v4.new_markdown_cell("## New section"))
    other.cells[1].source += "".join(f"extra_{i} = {i}\n" for i in range(60))
    lines = diff_reduced(reduce_notebook(nb), reduce_notebook(other), max_lines=10)
    assert "## added /cells/2 (markdown)" in lines and "+## New section" in lines
    assert not any("outputs" in line for line in lines)  # the later cells matched by source
    assert any(line.startswith("… ") and "--full" in line for line in lines)
    everything = diff_reduced(reduce_notebook(nb), reduce_notebook(other), max_lines=0)
    assert "+extra_59 = 59" in everything and "+extra_59 = 59" not in lines


def without_header(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith(("---", "+++"))]


@pytest.fixture(scope="module")
def two_runs(store) -> tuple[str, str]:
    """Two sealed runs of the BM25 configuration that differ in one key (k1)."""
    tracker = Tracker(store)
    bm25 = ROOT / "params" / "bm25.yaml"
    base = execute_run(RunRequest(bm25), tracker).run_id
    changed = execute_run(RunRequest(bm25, overrides=["retrieval.stages.0.k1=1.2"]), tracker).run_id
    return base, changed


@pytest.fixture(scope="module")
def full_diff(two_runs, store) -> str:
    """`rageval diff-notebooks --full` of the two runs (nbdime's whole diff), made once for the tests
    that read it."""
    base, changed = two_runs
    full = CliRunner().invoke(app, ["diff-notebooks", base, changed, "--full", "--tracking-uri", store])
    assert full.exit_code == 0, full.output
    return full.output


@pytest.mark.e2e
def test_two_runs_differing_in_one_key_show_that_key_and_are_short(two_runs, full_diff, store):
    base, changed = two_runs
    result = CliRunner().invoke(app, ["diff-notebooks", base, changed, "--tracking-uri", store])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[:2] == [f"--- {base}:evaluate.ipynb", f"+++ {changed}:evaluate.ipynb"]
    section = lines[2 : lines.index("", 2)]
    assert section[0] == "## modified /cells/2/source (injected parameters)"
    assert [x for x in section if x and x[0] in "+-"] == [
        "-    k1: 0.9",
        "+    k1: 1.2",
        f'-run_id = "{base}"',
        f'+run_id = "{changed}"',
    ]
    assert "iVBOR" not in result.output and "/metadata" not in result.output and "execution_count" not in result.output
    # Measured on the demo's k1/b pair: 1,387 lines from nbdime, 120 here.
    assert len(lines) < len(full_diff.splitlines()) / 5, result.output


@pytest.mark.e2e
def test_full_is_nbdimes_own_diff(two_runs, full_diff, store, tmp_path):
    base, changed = two_runs
    old, new = download_notebooks(Tracker(store), (base, changed), tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "nbdime", "diff", "-M", "-I", "-D", "--no-color", str(old), str(new)],
        capture_output=True,
        text=True,
        check=True,
    )
    expected = done.stdout.replace(str(old), f"{base}:{old.name}").replace(str(new), f"{changed}:{new.name}")
    # nbdime's header carries each file's modification time, which differs between the two downloads.
    assert without_header(full_diff.strip()) == without_header(expected.strip())
    assert "## modified /cells/2/source:" in full_diff and "k1: 1.2" in full_diff
