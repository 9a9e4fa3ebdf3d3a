"""Real services for the tests: one PostgreSQL cluster and one ``mlflow server`` per test session.

Use the session fixture ``mlflow_server`` (imported by conftest.py, so every test module has it)::

    def test_x(mlflow_server):
        Tracker(mlflow_server.tracking_uri)        # http://127.0.0.1:PORT, artifacts proxied
        mlflow_server.backend_store_uri            # postgresql+psycopg2://…@127.0.0.1:PORT/mlflow

It is a :class:`rageval.execution.server.TrackingServer`, started on first use (about 10 s) and
stopped, PostgreSQL included, when the session ends. Tests share it, so give each test its own
experiment name (:func:`fresh_experiment`). Where PostgreSQL's binaries or psycopg2 are absent the
tests that ask for it are skipped — unless ``RAGEVAL_REQUIRE_SERVICES`` is set (CI sets it), where
they fail: there a missing service is a broken machine, not a reason to skip.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from rageval.errors import TrackingError
from rageval.execution.server import TrackingServer, postgres_bindir, require_psycopg2, tracking_server

REQUIRE = "RAGEVAL_REQUIRE_SERVICES"


def services_missing() -> str | None:
    """Why the services cannot start here (None when they can)."""
    try:
        require_psycopg2()
        postgres_bindir()
    except TrackingError as error:
        return str(error)
    return None


def require_services() -> None:
    """Skip (or, under ``RAGEVAL_REQUIRE_SERVICES``, fail) the test when the services cannot start."""
    missing = services_missing()
    if missing is None:
        return
    if os.environ.get(REQUIRE):
        pytest.fail(f"{REQUIRE} is set but the tracking server cannot start: {missing}")
    pytest.skip(f"no PostgreSQL here ({missing}); set {REQUIRE}=1 to make this a failure")


def fresh_experiment(prefix: str = "t") -> str:
    """An experiment name no other test uses (the server is shared by the whole session)."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def service_folder() -> Path:
    """A folder for the cluster that PostgreSQL's own user can enter when the tests run as root
    (pytest's tmp folders sit under a 0700 folder of root's)."""
    folder = Path(tempfile.mkdtemp(prefix="rageval-test-server-"))
    folder.chmod(0o755)
    return folder


@pytest.fixture(scope="session")
def mlflow_server() -> Iterator[TrackingServer]:
    """A real PostgreSQL + ``mlflow server`` on 127.0.0.1 for the session (see the module's docstring)."""
    require_services()
    folder = service_folder()
    try:
        with tracking_server(folder) as running:
            yield running
    finally:
        shutil.rmtree(folder, ignore_errors=True)
