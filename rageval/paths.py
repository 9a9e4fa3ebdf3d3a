"""Where rageval's files live: the project root, the default tracking store and the cache folder.
Nothing else in rageval decides a location.

The project is, first, a team's project made by ``rageval init`` that holds the working directory
(the nearest folder up from it with a :data:`PROJECT_MARKER` file): its ``notebooks/``, ``mlruns/``
and ``.rageval-cache/`` are then the ones used, whichever way rageval is installed. Otherwise it is
the rageval checkout rageval runs from (an editable install), else the working directory."""

from __future__ import annotations

import os
from pathlib import Path

# The file `rageval init` writes at a team project's root (see docs/team-repository.md).
PROJECT_MARKER = ".rageval-project"


def team_project(start: Path | None = None) -> Path | None:
    """The team project holding ``start`` (default: the working directory), if any."""
    here = (start or Path.cwd()).resolve()
    return next((folder for folder in (here, *here.parents) if (folder / PROJECT_MARKER).is_file()), None)


def source_checkout() -> Path | None:
    """The rageval checkout this rageval runs from (an editable install); None when installed."""
    package = Path(__file__).resolve().parent
    return package.parent if (package.parent / "pyproject.toml").is_file() else None


def project_root() -> Path:
    """The team project holding the working directory, else the checkout rageval runs from
    (editable install), else the working directory."""
    return team_project() or source_checkout() or Path.cwd().resolve()


def package_notebooks() -> Path | None:
    """The notebooks of the rageval that runs (its checkout's ``notebooks/``), which ``rageval
    init`` copies into a team project; None for an installed rageval (the wheel holds none)."""
    checkout = source_checkout()
    return checkout / "notebooks" if checkout is not None else None


def default_notebook() -> Path:
    """The evaluation notebook ``rageval run`` executes unless told another."""
    return project_root() / "notebooks" / "evaluate.ipynb"


def default_store() -> Path:
    """The folder of the project's local tracking store (sqlite database and artifacts)."""
    return project_root() / "mlruns"


def default_tracking_uri() -> str:
    """``MLFLOW_TRACKING_URI``, else the project's sqlite store, by absolute path."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{default_store() / 'mlflow.db'}"


def artifact_root_for(uri: str) -> str | None:
    """Artifacts of a local sqlite store sit beside its database, by absolute URI."""
    if uri.startswith("sqlite:///"):
        return (Path(uri.removeprefix("sqlite:///")).parent / "artifacts").resolve().as_uri()
    return None


def default_cache_dir() -> Path:
    """The content-addressed cache: ``RAGEVAL_CACHE``, else ``.rageval-cache/`` in the project."""
    return Path(os.environ.get("RAGEVAL_CACHE") or project_root() / ".rageval-cache")
