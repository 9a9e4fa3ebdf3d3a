"""The ``rageval`` command: one typer app, one module per command group (each command a thin call
into :mod:`rageval.workflows` or a pure package)."""

from __future__ import annotations

import gc

# Importing a command group registers its commands on the app.
from rageval.cli import (  # noqa: F401
    benchmark,
    checkout,
    compare,
    judge,
    metrics,
    online,
    queries,
    registry,
    release,
    review,
    runs,
    server,
    shadow,
)
from rageval.cli.common import app
from rageval.execution.preload import tune_process
from rageval.tracking.connect import bound_store_retries


def main() -> None:  # pragma: no cover
    """The ``rageval`` command's entry point: this process is the command's own, so it is tuned for
    speed here (:func:`~rageval.execution.preload.tune_process`) and its calls to a tracking server
    bounded (:func:`~rageval.tracking.connect.bound_store_retries`), never on import."""
    tune_process()
    bound_store_retries()  # a tracking server that does not answer fails a call in about a minute, not ten
    try:
        app()
    finally:
        # The process ends here. Its last garbage collection would walk every object mlflow, pandas
        # and matplotlib made, only to free them with the process: about 0.8 s of every command
        # that opened a store (measured). Frozen objects are skipped; destructors still run.
        gc.freeze()
