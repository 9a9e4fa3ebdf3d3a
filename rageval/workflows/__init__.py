"""Orchestration: run, sweep, compare, gate, demo and reproduce. Each workflow is given its
:class:`~rageval.tracking.store.Tracker` and calls the pure packages; the CLI is a thin layer above."""

from rageval.lazy import skip_iri_grammar

# Every module here that reads or runs a notebook (nbformat, papermill, nbconvert, nbdime) is in
# this package, whether the CLI or a notebook's kernel (the papermill door) imports it.
skip_iri_grammar()
