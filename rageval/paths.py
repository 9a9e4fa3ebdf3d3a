"""Where rageval's files live: the project root, the default tracking store and the cache folder.
Nothing else in rageval decides a location."""

from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path:
    """The checkout rageval runs from (editable install), else the working directory."""
    package = Path(__file__).resolve().parent
    return package.parent if (package.parent / "pyproject.toml").is_file() else Path.cwd().resolve()


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
