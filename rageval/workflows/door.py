"""Plain papermill as a door into rageval: ``notebooks/evaluate.ipynb`` run by papermill records
exactly what ``rageval run`` records.

::

    papermill notebooks/evaluate.ipynb out.ipynb -p config_path params/bm25.yaml -p record True

The notebook's first code cell calls :func:`evaluate` with its ``globals()``. That checks every
parameter against :class:`EvaluateParameters` (the one list of the notebook's parameters and their
types; a test holds the parameters cell equal to it), so an unknown or mistyped parameter fails
before any work. With ``record`` True it calls :func:`rageval.workflows.run.execute_run` itself —
``rageval run``'s own code path: the pre-run checks, the run, the same notebook executed in a
nested kernel that hands its :class:`~rageval.experiment.run.ExperimentResult` back (``handoff``),
which ``execute_run`` logs and returns, the attached notebook and the seal — so the outer notebook
shows the very result that was recorded. The nested kernel has ``config_yaml`` set and ``record``
False: it cannot record again.
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from rageval.errors import ParameterError, Problem
from rageval.paths import project_root
from rageval.validation import Strict

if TYPE_CHECKING:
    from rageval.experiment.run import ExperimentResult
    from rageval.workflows.run import RunOutcome

NOTEBOOK = "notebooks/evaluate.ipynb"
# The MIME type of the output that names the recorded run; :func:`recorded_run` reads it back.
RUN_MIME = "application/vnd.rageval.run+json"
# Names IPython itself binds in a kernel's namespace.
IPYTHON_NAMES = frozenset({"In", "Out", "get_ipython", "exit", "quit", "open"})
# What papermill can inject: Python literals. A name bound to anything else (a module, a function,
# a result from an earlier run of the cells in JupyterLab) is the notebook's own, not a parameter.
_LITERALS = (str, int, float, bool, type(None), list, dict, tuple)


class EvaluateParameters(Strict):
    """The parameters of ``notebooks/evaluate.ipynb``: its parameters cell declares exactly these
    names, types and defaults (tested)."""

    config_path: str = "params/bm25.yaml"
    record: bool = False
    overrides: list[str] = []
    benchmark: str | None = None
    split: str | None = None
    experiment: str | None = None
    config_yaml: str | None = None
    run_id: str | None = None
    tracking_uri: str | None = None
    handoff: str | None = None


def type_name(name: str) -> str:
    """A parameter's type as its parameters cell writes it (``Optional[str]``: papermill's reader
    does not parse ``str | None``)."""
    annotation = EvaluateParameters.model_fields[name].annotation
    if annotation in (str, bool, int, float):
        return annotation.__name__
    text = str(annotation)
    return f"Optional[{text.removesuffix(' | None')}]" if text.endswith(" | None") else text


def signature() -> str:
    """``config_path: str, record: bool, …``: what an error lists as the valid parameters."""
    return ", ".join(f"{name}: {type_name(name)}" for name in EvaluateParameters.model_fields)


def parameters_from(namespace: Mapping[str, Any], notebook: str = NOTEBOOK) -> EvaluateParameters:
    """The notebook's parameters, read from its kernel's ``namespace`` (``globals()``). A name the
    model lacks, a value of the wrong type, or a combination that makes no sense is a
    :class:`ParameterError` naming the parameter, its expected type and the valid ones."""
    __tracebackhide__ = True  # IPython shows the cell and the error, not these frames
    given = {
        name: value
        for name, value in namespace.items()
        if not name.startswith("_") and name not in IPYTHON_NAMES and isinstance(value, _LITERALS)
    }
    valid = f"valid parameters: {signature()}"
    problems = [
        Problem(file=notebook, field=name, message=f"unknown notebook parameter (got {value!r})", fix=valid)
        for name, value in given.items()
        if name not in EvaluateParameters.model_fields
    ]
    if problems:
        raise ParameterError(problems)
    try:
        parameters = EvaluateParameters.model_validate(given)
    except ValidationError as exc:
        raise ParameterError(
            [
                Problem(
                    file=notebook,
                    field=".".join(str(p) for p in err["loc"]),
                    message=f"{err['msg']} (got {err['input']!r})",
                    fix=f"expected {type_name(str(err['loc'][0]))}; {valid}",
                )
                for err in exc.errors(include_url=False)
            ]
        ) from None
    _check_combination(parameters, notebook)
    return parameters


def _check_combination(parameters: EvaluateParameters, notebook: str) -> None:
    __tracebackhide__ = True

    def refuse(field: str, message: str, fix: str) -> ParameterError:
        return ParameterError(Problem(file=notebook, field=field, message=message, fix=fix))

    if parameters.record and (parameters.config_yaml is not None or parameters.run_id is not None):
        # The nested kernel of a recorded run (and `rageval run`'s) has these set: never record twice.
        raise refuse("record", "the run is already being recorded (config_yaml/run_id are set)", "leave record False")
    if parameters.record and parameters.handoff is not None:
        raise refuse("handoff", "is internal to record mode", "leave it unset")
    if parameters.config_yaml is not None:
        given = [f for f in ("overrides", "benchmark", "split") if getattr(parameters, f)]
        if given:
            raise refuse(given[0], "config_yaml is a resolved configuration", "give config_path with it instead")


def resolve(path: str, field: str, notebook: str = NOTEBOOK) -> Path:
    """A relative ``path`` is tried against the working directory, then the repository root, so the
    same parameter works from the root (papermill) and from notebooks/ (JupyterLab's kernel)."""
    given = Path(path).expanduser()
    if given.is_absolute() or given.exists():
        return given  # as written: the run's recorded config file reads as it would from `rageval run`
    rooted = project_root() / given
    if rooted.exists():
        return rooted
    raise ParameterError(
        Problem(
            file=notebook,
            field=field,
            message=f"{path} not found in the working directory ({Path.cwd()}) nor the repository root ({project_root()})",
            fix="give a path relative to either, or an absolute one",
        )
    )


def evaluate(namespace: Mapping[str, Any], notebook: str = NOTEBOOK) -> ExperimentResult:
    """What the evaluation notebook's first code cell does with its ``globals()``: check the
    parameters, then evaluate — recording a sealed run when ``record`` is True, logging into
    ``run_id`` when ``rageval run`` passed one, otherwise recording nothing."""
    __tracebackhide__ = True
    parameters = parameters_from(namespace, notebook)
    if parameters.record:
        return record(parameters)
    from rageval.config.load import config_from_yaml, load_config
    from rageval.experiment.run import run_experiment

    if parameters.config_yaml is not None:
        config = config_from_yaml(parameters.config_yaml)
    else:
        config = load_config(
            resolve(parameters.config_path, "config_path", notebook),
            parameters.overrides,
            benchmark=resolve(parameters.benchmark, "benchmark", notebook) if parameters.benchmark else None,
            split=parameters.split,
        )
    result = run_experiment(config)
    if parameters.run_id is not None and parameters.handoff is None:
        # Given a handoff, the process that started this kernel logs the result (its store is open).
        from rageval.tracking.store import Tracker

        Tracker(parameters.tracking_uri).log_result(parameters.run_id, result)
    if parameters.handoff is not None:
        # Written whole, then renamed: the process that started this kernel picks it up as soon as
        # it appears and logs it while the notebook draws its displays.
        handoff = Path(parameters.handoff)
        partial = handoff.with_name(handoff.name + ".part")
        partial.write_bytes(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
        partial.replace(handoff)
    return result


def record(parameters: EvaluateParameters, notebook: str = NOTEBOOK) -> ExperimentResult:
    """``rageval run`` from inside the notebook: :func:`~rageval.workflows.run.execute_run` on the
    project's evaluation notebook, in the store ``tracking_uri`` names (else MLFLOW_TRACKING_URI, else
    the project's, as the CLI opens it). Shows the run ID and returns the recorded result."""
    from rageval.tracking.store import Tracker
    from rageval.workflows.run import RunRequest, execute_run

    tracker = Tracker(parameters.tracking_uri)
    request = RunRequest(
        resolve(parameters.config_path, "config_path", notebook),
        overrides=parameters.overrides,
        benchmark=resolve(parameters.benchmark, "benchmark", notebook) if parameters.benchmark else None,
        split=parameters.split,
        experiment=parameters.experiment,
    )
    outcome = execute_run(request, tracker)
    result = outcome.result
    if result is None:  # pragma: no cover - the project's notebook always hands its result back
        raise ParameterError(
            Problem(
                file=notebook, message="the recorded notebook handed no result back", fix="use notebooks/evaluate.ipynb"
            )
        )
    show_run(outcome, tracker.uri, explicit_uri=parameters.tracking_uri is not None)
    return result


def show_figures(result: ExperimentResult) -> None:
    """Show the run's figures, each marked as such (:data:`~rageval.execution.handoff.FIGURE_METADATA`):
    drawn once, here in the notebook's kernel; ``rageval run`` records them from the executed
    notebook as they are shown, so the notebook and the run hold the very same PNGs."""
    import base64

    from IPython.display import display

    from rageval.analysis.plots import evaluation_pngs
    from rageval.execution.handoff import FIGURE_METADATA

    for name, data in evaluation_pngs(result).items():
        display({"image/png": base64.b64encode(data).decode()}, raw=True, metadata={FIGURE_METADATA: name})


def run_lines(outcome: RunOutcome, uri: str, explicit_uri: bool) -> list[str]:
    lines = [f"reaped {run_id}: now KILLED ({reason})" for run_id, reason in outcome.reaped]
    lines.append(
        f"run {outcome.run_id} sealed (experiment {outcome.experiment}, manifest sha256 {outcome.sealed[:12]}…)"
    )
    lines.append(f"verify: rageval verify {outcome.run_id}" + (f" --tracking-uri {uri}" if explicit_uri else ""))
    lines.append(f"store: {uri}")
    return lines


def show_run(outcome: RunOutcome, uri: str, explicit_uri: bool = False) -> None:
    """The run's lines as an output of the cell, with the run ID under :data:`RUN_MIME`."""
    text = "\n".join(run_lines(outcome, uri, explicit_uri))
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with the notebook stack
        get_ipython = None
    if get_ipython is None or get_ipython() is None:
        print(text)
        return
    from IPython.display import display

    bundle = {
        "text/plain": text,
        RUN_MIME: {"run_id": outcome.run_id, "experiment": outcome.experiment, "tracking_uri": uri},
    }
    display(bundle, raw=True)


def recorded_run(notebook: str | Path) -> str:
    """The ID of the run an executed evaluation notebook recorded (papermill with ``record`` True):
    for a loop over ``papermill.execute_notebook``. A notebook that recorded nothing is a
    :class:`ParameterError`."""
    from rageval.execution.notebooks import read_notebook

    for cell in read_notebook(notebook).cells:
        for output in cell.get("outputs", []):
            found = output.get("data", {}).get(RUN_MIME)
            if found:
                return str(found["run_id"])
    raise ParameterError(
        Problem(
            file=str(notebook),
            message="no recorded run in this notebook",
            fix="execute notebooks/evaluate.ipynb with -p record True (and check that it finished)",
        )
    )
