"""Orchestration: run, sweep, compare, gate, demo and reproduce. Each workflow is given its
:class:`~rageval.tracking.store.Tracker` and calls the pure packages; the CLI is a thin layer above."""
