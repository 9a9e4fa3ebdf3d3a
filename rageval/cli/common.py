"""What every command group shares: the typer apps, the option types, and how a command fails.

A failure the user can cause is a :class:`~rageval.errors.RagevalError`: :func:`fail` prints it
(every problem with its file, line and fix) and exits 2 for bad input, else 1. Anything else that
escapes a command is a bug: the root group prints one line asking for a report and exits 70, with
the traceback only under ``rageval --debug``. Everything printed passes through :func:`echo`, which
strips terminal control sequences (IDs, queries and messages come from user files).
"""

from __future__ import annotations

import datetime as dt
import enum
import logging
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from typer.core import TyperGroup

from rageval.analysis.formats import FORMATS
from rageval.benchmark.schema import CHANGE_ACTIONS, LEVELS
from rageval.errors import InputError, ParameterError, Problem, RagevalError
from rageval.evaluation.contract import DUPLICATE_POLICIES, GAINS, NO_RELEVANT_POLICIES, TIE_POLICIES
from rageval.safety import strip_control

if TYPE_CHECKING:
    from rageval.tracking.store import Tracker

INTERNAL_ERROR = 70  # sysexits' EX_SOFTWARE: not the user's input, a bug to report
QUIET_LOGGERS = ("mlflow.store.db.utils", "alembic")  # what a command sets to WARNING as it starts


class RagevalGroup(TyperGroup):
    """The root command group: a :class:`RagevalError` that escapes a command is printed as
    :func:`fail` prints it, and any other exception as one line (its traceback under ``--debug``).
    Its help texts are plain text: ``[default: …]`` is shown, not read as rich markup."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.rich_markup_mode == "rich":
            _escape_markup(self)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, typer.TyperException):  # exits, usage errors: typer's own
            raise
        except BrokenPipeError:  # the reader left (`rageval runs | head`): typer exits 1 quietly
            raise
        except RagevalError as error:
            fail(error)
        except Exception as error:
            internal_error(error, debug=bool(ctx.params.get("debug")))


def _escape_markup(command: Any) -> None:
    """Escape rich markup in the help of ``command``, its parameters and every command under it
    (the help texts are plain text; rich would drop ``[default: …]`` as an unknown tag)."""
    from rich.markup import escape

    if command.help:
        command.help = escape(command.help)
    for param in command.params:
        if getattr(param, "help", None):
            param.help = escape(param.help)
    for sub in getattr(command, "commands", {}).values():
        _escape_markup(sub)


app = typer.Typer(
    cls=RagevalGroup,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    help="Evaluate the retrieval stage of RAG systems: versioned benchmarks, papermill runs, sealed MLflow runs.",
)


@app.callback()
def _global_options(
    debug: Annotated[
        bool, typer.Option("--debug", help="on an internal error, print its traceback (for a bug report)")
    ] = False,
) -> None:
    """Options before the command, e.g. ``rageval --debug metrics ...`` (read by :class:`RagevalGroup`)."""
    # A command may create a new sqlite store, which logs its alembic migrations at INFO: not a rageval
    # user's concern. Set here, as a command starts, not when a Tracker opens (a library user's loggers).
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


benchmark_app = typer.Typer(no_args_is_help=True, help="Validate, hash, import and export benchmarks.")
import_app = typer.Typer(no_args_is_help=True, help="Import a real collection as a rageval benchmark.")
app.add_typer(benchmark_app, name="benchmark")
benchmark_app.add_typer(import_app, name="import")

TrackingUri = Annotated[
    str | None,
    typer.Option(
        "--tracking-uri", help="MLflow tracking URI [default: $MLFLOW_TRACKING_URI, else the project's mlruns/]"
    ),
]
# Options the evaluation commands (run, sweep) share.
Timeout = Annotated[int | None, typer.Option(help="per-cell timeout in seconds")]
RunExperiment = Annotated[str | None, typer.Option(help="MLflow experiment [default: the benchmark name]")]
EvaluateNotebook = Annotated[
    Path | None, typer.Option(help="the notebook to execute [default: notebooks/evaluate.ipynb]")
]
DateOption = Annotated[str | None, typer.Option(help="YYYY-MM-DD recorded in the changelog [default: today]")]
judge_app = typer.Typer(no_args_is_help=True, help="Pool, import, measure agreement on and adjudicate judgments.")
app.add_typer(judge_app, name="judge")


def choices(name: str, values: tuple[str, ...]) -> type[enum.Enum]:
    """An option type offering exactly ``values`` (typer shows and checks them): the CLI reads each
    choice list from the module that owns it, as the models do."""
    return enum.Enum(name, {value: value for value in values}, type=str)  # type: ignore[return-value]


Level = choices("Level", LEVELS)
TiePolicy = choices("TiePolicy", TIE_POLICIES)
DuplicatePolicy = choices("DuplicatePolicy", DUPLICATE_POLICIES)
Gain = choices("Gain", GAINS)
NoRelevantPolicy = choices("NoRelevantPolicy", NO_RELEVANT_POLICIES)
ChangeAction = choices("ChangeAction", CHANGE_ACTIONS)
ResultFormat = choices("ResultFormat", FORMATS)


def echo(text: object = "", *, err: bool = False) -> None:
    """Print ``text`` without terminal control sequences (tabs and newlines kept)."""
    typer.echo(strip_control(str(text)), err=err)


def fail(error: RagevalError) -> NoReturn:
    """Print the error (every problem with its file, line and fix) and exit: 2 for bad input, else 1."""
    echo(f"error: {error}", err=True)
    raise typer.Exit(2 if isinstance(error, InputError) else 1)


def internal_error(error: Exception, *, debug: bool) -> NoReturn:
    """One line for an exception rageval did not expect (a bug), the traceback before it with ``debug``."""
    if debug:
        echo("".join(traceback.format_exception(error)).rstrip(), err=True)
    detail = " ".join(f"{type(error).__name__}: {error}".split())
    if len(detail) > 300:
        detail = detail[:299] + "…"
    hint = "" if debug else "; rerun with `rageval --debug ...` for the traceback"
    echo(f"error: internal error ({detail}), please report it{hint}", err=True)
    raise typer.Exit(INTERNAL_ERROR)


def input_file(path: Path, option: str, fix: str) -> Path:
    """``path`` if it is an existing file; a folder or a missing path is an :class:`InputError`."""
    if path.is_dir():
        raise InputError(Problem(file=str(path), field=option, message="is a folder, not a file", fix=fix))
    if not path.is_file():
        raise InputError(Problem(file=str(path), field=option, message="file not found", fix=fix))
    return path


def input_folder(path: Path, option: str, fix: str) -> Path:
    """``path`` if it is an existing folder; a file or a missing path is an :class:`InputError`."""
    if path.is_file():
        raise InputError(Problem(file=str(path), field=option, message="is a file, not a folder", fix=fix))
    if not path.is_dir():
        raise InputError(Problem(file=str(path), field=option, message="folder not found", fix=fix))
    return path


def output_file(path: Path, option: str) -> Path:
    """``path`` if a file can be written there: not a folder, in a folder that exists."""
    if path.is_dir():
        raise InputError(
            Problem(file=str(path), field=option, message="is a folder", fix=f"give a file path, e.g. {path / 'out'}")
        )
    if not path.parent.is_dir():
        raise InputError(
            Problem(file=str(path), field=option, message=f"folder {path.parent} does not exist", fix="create it first")
        )
    return path


def open_tracker(tracking_uri: str | None) -> Tracker:
    """The store a command works on: ``--tracking-uri``, else $MLFLOW_TRACKING_URI, else the project's."""
    from rageval.tracking.store import Tracker

    return Tracker(tracking_uri)


def parse_pairs(values: list[str], option: str) -> dict[str, str]:
    out = {}
    for value in values:
        key, sep, item = value.partition("=")
        if not sep or not key or not item:
            raise typer.BadParameter(f"expected KEY=VALUE, got {value!r}", param_hint=option)
        out[key] = item
    return out


# What a notebook parameter may be: what papermill writes back as Python literals.
_PARAMETER_TYPES = (str, int, float, bool, type(None))


def parse_notebook_parameters(values: list[str], option: str = "--parameter") -> dict[str, Any]:
    """``-p NAME=VALUE`` options → parameters, each VALUE read as YAML (``top_n=5`` is a number,
    ``note=text`` a string, ``measures=[AP, RR]`` a list). Invalid YAML, or a value papermill cannot
    pass (a date, say), is a :class:`ParameterError` naming the parameter and the fix. Values are
    read under the rules of every YAML rageval reads (:func:`rageval.io.parse_yaml`: duplicate keys
    refused, aliases bounded), as ``--set`` values are."""
    from rageval.io import parse_yaml

    out: dict[str, Any] = {}
    problems = []
    for name, text in parse_pairs(values, option).items():
        try:
            value, _ = parse_yaml(text, option, ParameterError, field=name)
        except ParameterError as exc:
            problems += [
                Problem(
                    file=option,
                    field=name,
                    message=f"{text!r} is not a YAML value ({p.message.removeprefix('not valid YAML: ')})",
                    fix=p.fix or f"quote text that holds YAML syntax, e.g. -p '{name}=\"{text}\"'",
                )
                for p in exc.problems
            ]
            continue
        bad = _unsupported(value)
        if bad is not None:
            problems.append(
                Problem(
                    file=option,
                    field=name,
                    message=f"{text!r} reads as a YAML {bad}, which a notebook parameter cannot hold",
                    fix=f"quote it as text, e.g. -p '{name}=\"{text}\"', or give a number, list or mapping",
                )
            )
            continue
        out[name] = value
    if problems:
        raise ParameterError(problems)
    return out


def _unsupported(value: Any) -> str | None:
    """The type name of the first part of ``value`` that is no plain scalar, list or mapping, else None."""
    if isinstance(value, _PARAMETER_TYPES):
        return None
    if isinstance(value, list):
        return next((bad for item in value if (bad := _unsupported(item)) is not None), None)
    if isinstance(value, dict):
        return next((bad for key, item in value.items() if (bad := _unsupported(key) or _unsupported(item))), None)
    return type(value).__name__


def parse_grade_map(values: list[str]) -> dict[int, int]:
    try:
        return {int(k): int(v) for k, v in parse_pairs(values, "--grade-map").items()}
    except ValueError:
        raise typer.BadParameter("grades must be integers, e.g. 4=3", param_hint="--grade-map") from None


def parse_date(value: str | None) -> dt.date | None:
    if value is None:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise typer.BadParameter(f"expected YYYY-MM-DD, got {value!r}", param_hint="--date") from None
