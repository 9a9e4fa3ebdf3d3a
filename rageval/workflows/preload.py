"""What a notebook kernel imports before it reports ready (:mod:`rageval.workflows.kernels`,
:mod:`rageval.workflows.forkserver`): only the imports move earlier; nothing the notebook computes
changes."""

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


def preload(modules: Sequence[str] = PRELOAD) -> None:
    """Import ``modules`` (run in a starting kernel, before it reports ready); a module that fails to
    import is left for the notebook to import, and report, itself. The imported objects live as
    long as the kernel: frozen, later collections skip them."""
    import gc

    from rageval.lazy import fewer_collections

    fewer_collections()
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001, S112 - a head start only; the notebook's own import reports the error
            continue
    gc.freeze()
