"""The ``rageval`` command: one typer app, one module per command group (each command a thin call
into :mod:`rageval.workflows` or a pure package)."""

from __future__ import annotations

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


def main() -> None:  # pragma: no cover
    app()
