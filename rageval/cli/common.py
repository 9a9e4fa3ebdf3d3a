"""What every command group shares: the typer apps, the option types, and how a command fails."""

from __future__ import annotations

import datetime as dt
import enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from rageval.benchmark.schema import CHANGE_ACTIONS, LEVELS
from rageval.errors import InputError, RagevalError
from rageval.evaluation.contract import DUPLICATE_POLICIES, GAINS, TIE_POLICIES

if TYPE_CHECKING:
    from rageval.tracking.store import Tracker

app = typer.Typer(
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    help="Evaluate the retrieval stage of RAG systems: versioned benchmarks, papermill runs, sealed MLflow runs.",
)
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
EvaluateNotebook = Annotated[Path | None, typer.Option(help="[default: notebooks/evaluate.ipynb]")]
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
ChangeAction = choices("ChangeAction", CHANGE_ACTIONS)


def fail(error: RagevalError) -> NoReturn:
    """Print the error (every problem with its file, line and fix) and exit: 2 for bad input, else 1."""
    typer.echo(f"error: {error}", err=True)
    raise typer.Exit(2 if isinstance(error, InputError) else 1)


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
