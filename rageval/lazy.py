"""Lazy exports for a package ``__init__``: each public name is imported from its module on first
use, so importing the package costs nothing until a name is needed (PEP 562)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def exports(package: str, names: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, whose public ``names`` map to their modules."""
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # later look-ups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted({*names, *namespace.get("__all__", ())})

    return __getattr__, __dir__


def skip_iri_grammar() -> None:
    """Keep jsonschema from importing ``rfc3987_syntax`` (JupyterLab installs it), which compiles
    its lark grammars on import: about 0.8 s on a quiet 2-core machine, paid by every process that
    reads a notebook (nbformat → jsonschema). jsonschema imports it only to check the ``iri``
    formats, which notebook schemas never use, and goes on without it. A process that imported it
    already keeps it."""
    import sys

    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]  # None: the import fails, as if absent


# Python collects young objects every 700 net allocations by default. Importing mlflow, pandas and
# matplotlib allocates millions of objects that live as long as the process, and the collections
# walking them cost about 0.7 s of a `rageval run` (measured: 4.6 s → 3.9 s; 3.6 s with collection
# off). A larger first threshold keeps collecting cycles, fifty times less often.
GC_THRESHOLDS = (50_000, 20, 10)


def fewer_collections() -> None:
    """Collect garbage less often in a process that imports the whole stack (the CLI, a kernel)."""
    import gc

    gc.set_threshold(*GC_THRESHOLDS)
