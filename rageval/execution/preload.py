"""What a process rageval starts for itself does to be quick — the ``rageval`` command
(:func:`rageval.cli.main`), the sweep's fork server (:mod:`rageval.execution.forkserver`) and the
notebook kernels rageval starts (:mod:`rageval.execution.kernels`): :func:`tune_process` and
:func:`preload`. Nothing here runs on import; each changes the whole process that calls it, so only
those entry points call them (a notebook opened by a user in their own kernel never does). Only the
imports move earlier; nothing a notebook computes changes."""

from __future__ import annotations

import importlib
from collections.abc import Sequence

# What the evaluation notebook imports before its first result (measured: about 1 s of its first code
# cell); the preload only moves these imports earlier, it changes nothing the notebook computes.
PRELOAD = (
    "rageval.workflows.door",
    "rageval.config.load",
    "rageval.experiment.run",
    "rageval.retrieval.lexical",  # the baseline's stage (bm25s); others are imported by the runs that use them
    "rageval.analysis.plots",
    "rageval.safety",
    "matplotlib_inline.backend_inline",
    "matplotlib.pyplot",
    "pandas.io.formats.style",  # the notebook's styled tables
)

# Python collects young objects every 700 net allocations by default. Importing mlflow, pandas and
# matplotlib allocates millions of objects that live as long as the process, and the collections
# walking them cost about 0.7 s of a `rageval run` (measured: 4.6 s → 3.9 s; 3.6 s with collection
# off). A larger first threshold keeps collecting cycles, fifty times less often.
GC_THRESHOLDS = (50_000, 20, 10)

# MLflow's settings for a process rageval owns (inherited by the kernels and servers it starts): no
# telemetry (everything offline) and no progress bars on stderr. A variable the user set is kept.
MLFLOW_ENVIRONMENT = {"MLFLOW_DISABLE_TELEMETRY": "true", "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}


def tune_process() -> None:
    """Settings for the whole calling process, which rageval owns: fewer garbage collections, MLflow
    offline and without progress bars, and jsonschema without ``rfc3987_syntax``. JupyterLab installs that module, and
    it compiles its lark grammars on import — about 0.8 s on a quiet 2-core machine, paid by every
    process that reads a notebook (nbformat → jsonschema), which imports it only to check the
    ``iri`` formats notebook schemas never use, and goes on without it. A process that imported
    it already keeps it."""
    import gc
    import os
    import sys

    gc.set_threshold(*GC_THRESHOLDS)
    for name, value in MLFLOW_ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]  # None: the import fails, as if absent


def preload(modules: Sequence[str] = PRELOAD) -> None:
    """Tune the process (:func:`tune_process`) and import ``modules`` — run in a kernel or fork server
    rageval starts, before it reports ready; a module that fails to import is left for the notebook
    to import, and report, itself. The imported objects live as long as the kernel: frozen, later
    collections skip them."""
    import gc

    tune_process()
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001, S112 - a head start only; the notebook's own import reports the error
            continue
    gc.freeze()
