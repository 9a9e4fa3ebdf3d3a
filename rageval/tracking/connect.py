"""Opening a tracking store: the client, a new sqlite store's creation, and what a store that does
not answer looks like.

MLflow retries a request to a tracking server for minutes (7 retries, a 120 s timeout each, backoff
doubling from 2 s): a sweep whose server died waited 245–495 s in every member. The ``rageval``
command bounds that for its own process (:func:`bound_store_retries`, called by the entry point,
never on import): a store that does not answer fails a call within :data:`STORE_CALL_BOUND_S`.
A user's own environment variables win. A library user keeps MLflow's defaults unless they set them.

A new sqlite store is created once, under a file lock, and atomically: its tables are made in a
temporary file beside it, which is renamed into place only when the migration has finished, so an
interrupted first migration (a full disk, a kill) leaves no half-made store behind.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from filelock import FileLock, Timeout

from rageval.errors import TrackingError
from rageval.hashing import sha256_bytes
from rageval.paths import artifact_root_for

if TYPE_CHECKING:
    from mlflow import MlflowClient

# MLflow's own knobs (mlflow.environment_variables), read at each request. Worst case per call:
# (1 + 2 retries) × 20 s timeout for a server that hangs; about 1 + 2 s of backoff (+ jitter) for one
# that refuses connections or answers 5xx (PostgreSQL down behind it).
STORE_RETRIES = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0.5",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "20",
}
STORE_CALL_BOUND_S = 3 * 20 + 1 + 2 + 1
# How long a command waits for a sqlite store another process holds write-locked.
SQLITE_LOCK_WAIT_S = 15.0
# Ending a run FAILED tries once more (1 s later) when the store is locked: each try already waits
# MLflow's own 20 s sqlite busy timeout, so a failure waits at most about 41 s for a lock to go.
FAIL_RETRIES = 1


def bound_store_retries(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Set :data:`STORE_RETRIES` in ``environ`` (this process's environment) where the user has not
    set them; returns what was set. For the ``rageval`` command's own process only."""
    environ = os.environ if environ is None else environ
    chosen = {}
    for key, value in STORE_RETRIES.items():
        if key not in environ:
            environ[key] = chosen[key] = value
    return chosen


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI (``None`` for any other store)."""
    return Path(uri.removeprefix("sqlite:///")) if uri.startswith("sqlite:///") else None


def creation_lock(uri: str) -> FileLock:
    """The lock under which this machine's processes create runs in the store at ``uri`` (beside a
    sqlite database, else in the temporary folder). Created one at a time, each run starts in a
    later millisecond than every run created before it and finds that run in the store already: the
    runs that started before one (its name's number, its release-evaluation count) are then exactly
    those created before it. Two workers of a sweep starting members at once otherwise took the same
    millisecond, and the same count. Processes on other machines are not serialized by it."""
    database = sqlite_path(uri)
    if database is not None:
        return FileLock(database.parent / f".{database.name}.runs.lock")
    return FileLock(Path(tempfile.gettempdir()) / f"rageval-runs-{sha256_bytes(uri.encode())[:16]}.lock")


def open_client(uri: str) -> MlflowClient:
    """An ``MlflowClient`` on ``uri``; a new sqlite store is created atomically first."""
    from mlflow import MlflowClient

    database = sqlite_path(uri)
    if database is not None and not database.exists():
        create_sqlite_store(database)
    try:
        client = MlflowClient(tracking_uri=uri)
    except Exception as exc:
        if unreachable(exc) is None:
            raise
        raise store_failure(uri, "opening the store", exc) from None
    return cast("MlflowClient", GuardedClient(client, uri))


class GuardedClient:
    """An ``MlflowClient`` whose calls fail with a clear :class:`TrackingError` (what failed, which
    store, the fix: :func:`store_failure`) when the store does not answer or cannot write — never
    MLflow's or SQLAlchemy's traceback. Any other error (a run that does not exist) passes as is."""

    def __init__(self, client: MlflowClient, uri: str) -> None:
        self._client, self._uri = client, uri

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not callable(attribute):
            return attribute

        def guarded(*args: Any, **kwargs: Any) -> Any:
            try:
                return attribute(*args, **kwargs)
            except Exception as exc:
                if unreachable(exc) is None:
                    raise
                raise store_failure(self._uri, name.replace("_", " "), exc) from None

        return guarded


def create_sqlite_store(database: Path) -> None:
    """Make a sqlite store's tables in a temporary file and rename it to ``database`` once they all
    exist: parallel commands wait on one lock, and a failed or killed creation leaves nothing that
    a later command would take for a store."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    try:
        database.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(database.parent / f".{database.name}.lock", timeout=SQLITE_LOCK_WAIT_S * 8)
        with lock:
            if database.exists():  # another process made it while this one waited
                return
            partial = database.parent / f".{database.name}.creating"
            partial.unlink(missing_ok=True)  # a creation killed earlier
            try:
                store = SqlAlchemyStore(f"sqlite:///{partial}", artifact_root_for(f"sqlite:///{database}"))
                store.engine.dispose()
                os.replace(partial, database)
            finally:
                with contextlib.suppress(OSError):
                    partial.unlink(missing_ok=True)
    except Timeout:
        raise TrackingError(
            f"could not create the store {database}: another process has been creating it for over "
            f"{SQLITE_LOCK_WAIT_S * 8:.0f} s; if none is, delete {database.parent / ('.' + database.name + '.lock')}"
        ) from None
    except OSError as exc:
        raise TrackingError(
            f"could not create the store {database}: {exc.strerror or exc} ({exc.filename or database.parent}); "
            "free space or give a writable --tracking-uri; nothing was created"
        ) from None
    except Exception as exc:  # noqa: BLE001 - the migration's own errors (sqlite full, read-only) come as several types
        raise TrackingError(
            f"could not create the store {database}: {' '.join(str(exc).split())[:300]}; "
            "free space or give a writable --tracking-uri; nothing was created"
        ) from None


def unreachable(exc: BaseException) -> str | None:
    """Why a store call failed if the store itself did not answer or refused to work (a server
    down, a database locked, read-only or full) — ``None`` for an answer such as "no such run"."""
    text = " ".join(str(exc).split())
    lowered = text.lower()
    signs = (
        "failed with exception",  # MLflow's words for any request that got no answer
        "max retries exceeded",
        "connection broken",
        "connection aborted",
        "connection reset",
        "connection refused",
        "failed to establish a new connection",
        "read timed out",
        "connectionerror",
        "remotedisconnected",
        "database is locked",
        "readonly database",
        "unable to open database file",
        "read-only",
        "disk i/o error",
        "database or disk is full",
        "no space left",
        "internal server error",
        "status code 500",
        "status code 502",
        "status code 503",
        "status code 504",
    )
    return text[:300] if any(sign in lowered for sign in signs) else None


def locked(exc: BaseException) -> bool:
    """Whether ``exc`` is a sqlite store write-locked by another process."""
    return "database is locked" in str(exc)


def store_failure(uri: str, action: str, exc: BaseException) -> TrackingError:
    """A clear error for a store that could not do ``action``: what failed, which store, the fix."""
    why = unreachable(exc) or " ".join(str(exc).split())[:300]
    lowered = why.lower()
    database = sqlite_path(uri)
    if "database is locked" in lowered:
        fix = f"another process holds {database} write-locked; let it finish (or stop it) and run the command again"
    elif "readonly" in lowered or "read-only" in lowered or "unable to open database file" in lowered:
        fix = f"{database or uri} is read-only: read commands (runs, verify, export-run) work; give a writable --tracking-uri to write"
    elif "full" in lowered or "no space" in lowered:
        fix = f"the disk holding {database or uri} is full: free space and run the command again"
    elif database is None:
        fix = f"the tracking server {uri} does not answer: check it runs (`rageval server`) and run the command again"
    else:
        fix = "check the store's file and run the command again"
    return TrackingError(f"the store {uri} failed while {action}: {why}; {fix}")


def probe(client: MlflowClient) -> str | None:
    """Why the store behind ``client`` does not answer a small read now (``None`` when it does)."""
    try:
        client.search_experiments(max_results=1)
    except Exception as exc:  # noqa: BLE001 - any failure to answer is the answer
        return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
    return None
