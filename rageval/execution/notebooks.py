"""Papermill execution: check parameters against the `parameters` cell, then run in a private kernel.

Papermill only warns about an unknown parameter and injects parameters even into a notebook
without a `parameters` cell; here both are errors raised before any cell runs. Each execution
gets a kernel on IPC sockets under a fresh temporary folder: no TCP warning, and parallel runs
never share a socket path.
"""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from rageval.errors import NotebookExecutionError, ParameterError, Problem
from rageval.execution.kernels import WarmKernel, ipc_kernel_manager
from rageval.io import read_text
from rageval.progress import ENV_VAR

if TYPE_CHECKING:
    from rageval.tracking.store import Tracker


_NOTEBOOK_FIX = "give a Jupyter notebook (.ipynb), e.g. notebooks/evaluate.ipynb or notebooks/compare.ipynb"


def read_notebook(path: str | Path) -> Any:
    """The notebook at ``path`` (nbformat 4). A folder, a missing file, or a file that is not a
    Jupyter notebook is a :class:`ParameterError` naming the file and, for JSON, the line."""
    import json

    import nbformat

    path = Path(path)

    def refuse(message: str, line: int | None = None, field: str | None = None) -> ParameterError:
        return ParameterError(Problem(file=str(path), line=line, field=field, message=message, fix=_NOTEBOOK_FIX))

    if path.is_dir():
        raise refuse("is a folder, not a notebook")
    if not path.is_file():
        raise ParameterError(Problem(file=str(path), message="notebook not found", fix="check the path"))
    text = read_text(path, ParameterError)  # UTF-8, else the line and byte offset (rageval.io's rule)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise refuse(f"not a notebook: not JSON ({exc.msg})", line=exc.lineno) from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise refuse("not a notebook: no list of cells", field="cells")
    if not isinstance(data.get("nbformat"), int) or data["nbformat"] < 4:
        raise refuse("not a notebook of format 4 or later (JupyterLab's)", field="nbformat")
    for number, cell in enumerate(data["cells"]):
        if not isinstance(cell, dict) or not isinstance(cell.get("cell_type"), str) or "source" not in cell:
            raise refuse("not a notebook cell (a mapping with cell_type and source)", field=f"cells[{number}]")
    try:
        return nbformat.reads(text, as_version=4)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # nbformat's own refusals
        raise refuse(f"not a valid notebook: {' '.join(str(exc).split())[:200]}") from None


def notebook_parameters(path: str | Path) -> dict[str, Any]:
    """The parameters a notebook declares in its `parameters` cell, with their defaults."""
    return {name: info["default"] for name, info in _declared(Path(path)).items()}


def _declared(path: Path) -> dict[str, dict[str, Any]]:
    """papermill's reading of the `parameters` cell: per name, its default, annotation and help."""
    notebook = read_notebook(path)
    if not any("parameters" in cell.get("metadata", {}).get("tags", []) for cell in notebook.cells):
        raise ParameterError(
            Problem(
                file=str(path), message="no cell is tagged 'parameters'", fix="tag the cell that defines the parameters"
            )
        )
    import papermill

    try:
        declared = papermill.inspect_notebook(str(path))
    except ValueError as exc:  # no kernel or language in the notebook's metadata
        raise ParameterError(
            Problem(
                file=str(path),
                field="metadata",
                message=str(exc),
                fix="save it from JupyterLab with the Python 3 kernel",
            )
        ) from None
    return dict(declared)


def check_parameters(path: str | Path, given: Mapping[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    """Refuse unknown parameters, values of another type than the parameters cell's annotation
    (``record: bool = False``), and required ones the notebook does not declare; returns the
    declared parameters with their defaults."""
    declared = _declared(Path(path))
    problems = [
        Problem(
            file=str(path),
            field=name,
            message="unknown notebook parameter",
            fix=f"declared parameters: {', '.join(declared) or 'none'}",
        )
        for name in given
        if name not in declared
    ]
    from pydantic import ConfigDict, PydanticSchemaGenerationError, TypeAdapter, ValidationError

    # Annotations as papermill reads them ("None": no annotation). Its pattern admits only names,
    # brackets and commas, and only the builtins a parameter can carry are known to the eval below.
    known = {"str": str, "int": int, "float": float, "bool": bool, "list": list, "dict": dict, "Optional": Optional}
    for name, info in declared.items():
        if name not in given or info["inferred_type_name"] in ("None", "NoneType"):
            continue
        try:
            annotation = eval(info["inferred_type_name"], {"__builtins__": {}}, known)  # the names above only
            adapter = TypeAdapter(annotation, config=ConfigDict(strict=True))
        except (NameError, SyntaxError, TypeError, PydanticSchemaGenerationError):
            continue  # not a plain type (a name the notebook imports itself): papermill checks nothing either
        try:
            adapter.validate_python(given[name])
        except ValidationError:
            problems.append(
                Problem(
                    file=str(path),
                    field=name,
                    message=f"expected {info['inferred_type_name']} (got {given[name]!r})",
                    fix="give a value of that type",
                )
            )
    problems += [
        Problem(
            file=str(path),
            field=name,
            message="the notebook's parameters cell does not declare this parameter",
            fix=f"add `{name} = None` to it",
        )
        for name in required
        if name not in declared and name not in given
    ]
    if problems:
        raise ParameterError(problems)
    return {name: info["default"] for name, info in declared.items()}


def execute_notebook(
    path: str | Path,
    output: str | Path,
    parameters: Mapping[str, Any],
    *,
    cwd: str | Path | None = None,
    timeout: int | None = None,
    progress: str | Path | None = None,
    kernel: WarmKernel | None = None,
) -> None:
    """Execute ``path`` into ``output`` with ``parameters``. A cell error raises papermill's
    ``PapermillExecutionError``; ``output`` then holds the partial executed notebook. ``progress``:
    the channel file the kernel reports its steps to (:mod:`rageval.progress`), never its outputs.
    ``kernel``: a warm kernel started for this execution (its own working directory and progress
    channel; ``cwd`` and ``progress`` must then be left out); without one papermill starts a kernel."""
    import papermill

    if kernel is not None:
        if cwd is not None or progress is not None:
            raise ValueError("a warm kernel has its working directory and progress channel already")
        _register_warm_engine()
    papermill.execute_notebook(
        str(path),
        str(output),
        parameters=dict(parameters),
        kernel_name="python3",
        # papermill's cwd= chdirs the whole process, which races between parallel runs in threads
        # (a sweep); the kernel's working directory is set through its resources instead.
        cwd=None,
        resources={"metadata": {"path": str(kernel.cwd if kernel else cwd or Path(path).parent)}},
        progress_bar=False,
        log_output=False,
        execution_timeout=timeout,
        kernel_manager_class=ipc_kernel_manager({ENV_VAR: str(progress)} if progress else None),
        # The last cell has run and its outputs are in: a graceful shutdown only waits (up to 1 s).
        shutdown_kernel="immediate",
        **({"engine_name": WARM_ENGINE, "km": kernel.manager()} if kernel is not None else {}),
    )


WARM_ENGINE = "rageval-warm"


@functools.cache
def _register_warm_engine() -> None:
    """papermill's engine for a started kernel (:mod:`rageval.execution.warm_engine`, which imports
    papermill), registered once, when a notebook first runs on a warm kernel."""
    from papermill.engines import papermill_engines

    from rageval.execution.warm_engine import WarmEngine

    papermill_engines.register(WARM_ENGINE, WarmEngine)


def failure(exc: BaseException) -> tuple[str, dict[str, Any]]:
    """One line saying what failed, and the fields of a :class:`NotebookExecutionError`: for a cell
    error, papermill's cell index, exception name and value (the traceback stays in error.txt)."""
    cell = getattr(exc, "cell_index", None)
    if cell is not None and hasattr(exc, "ename"):
        fields = {"cell_index": cell, "ename": exc.ename, "evalue": exc.evalue}
        return f"cell {cell} raised {exc.ename}: {exc.evalue}", fields
    return f"{type(exc).__name__}: {exc}", {}


def notebook_timings(path: Path) -> dict[str, float]:
    """Kernel start-up: from papermill's start to the first cell's start."""
    import nbformat

    notebook = nbformat.read(path, as_version=4)
    start = notebook.metadata.get("papermill", {}).get("start_time")
    cells = [c.metadata.get("papermill", {}).get("start_time") for c in notebook.cells if c.cell_type == "code"]
    cells = [c for c in cells if c]
    if not start or not cells:
        return {}
    first = min(datetime.fromisoformat(c) for c in cells)
    return {"kernel_start": (first - datetime.fromisoformat(start)).total_seconds()}


def execute_into(
    tracker: Tracker, run_id: str, notebook: Path, parameters: Mapping[str, Any], timeout: int | None
) -> None:
    """Execute ``notebook`` logging into ``run_id``, attach it and seal; FAILED on any error."""
    with tempfile.TemporaryDirectory(prefix="rageval-nb-") as tmp:
        executed = Path(tmp) / notebook.name
        try:
            execute_notebook(
                notebook, executed, {**parameters, "run_id": run_id, "tracking_uri": tracker.uri}, timeout=timeout
            )
            tracker.log_file(run_id, f"notebook/{notebook.name}", executed)
        except BaseException as exc:
            message, fields = failure(exc)
            tracker.fail(run_id, message, executed if executed.exists() else None, details=str(exc))
            if isinstance(exc, Exception):
                raise NotebookExecutionError(f"run {run_id} FAILED: {message}", run_id=run_id, **fields) from exc
            raise
