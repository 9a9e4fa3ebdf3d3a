"""The ``rageval`` command: a typer app whose commands are thin calls into :mod:`rageval.workflows`."""

from rageval.cli.app import app, main

__all__ = ["app", "main"]
