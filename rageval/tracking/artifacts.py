"""The sha256 of every artifact a run holds, for its seal, without downloading what this process
wrote itself: each write is hashed as it is made (:class:`Written`), the store is only listed, and
only the files this process did not write (a notebook's kernel that logged into the run itself), or
that no longer have the size it wrote, are downloaded and hashed. ``rageval verify`` still
downloads everything: it trusts no record of a write."""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rageval.hashing import sha256_bytes


class Written:
    """Per run, the artifacts this process wrote: path → (sha256, size). Thread-safe (a sweep's
    members write from threads of one process)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[str, dict[str, tuple[str, int]]] = {}

    def add(self, run_id: str, files: Mapping[str, bytes]) -> None:
        hashed = {path: (sha256_bytes(data), len(data)) for path, data in files.items()}
        with self._lock:
            self._runs.setdefault(run_id, {}).update(hashed)

    def get(self, run_id: str) -> dict[str, tuple[str, int]]:
        with self._lock:
            return dict(self._runs.get(run_id, {}))

    def forget(self, run_id: str) -> None:
        with self._lock:
            self._runs.pop(run_id, None)


def listing(client: Any, run_id: str, path: str | None = None) -> dict[str, int]:
    """Every artifact file of a run: path → size (one listing call per folder)."""
    out: dict[str, int] = {}
    for info in client.list_artifacts(run_id, path):
        if info.is_dir:
            out.update(listing(client, run_id, info.path))
        else:
            out[info.path] = int(info.file_size or 0)
    return out


def artifact_hashes(client: Any, run_id: str, written: Mapping[str, tuple[str, int]]) -> dict[str, str]:
    """path → sha256 of every artifact of the run: from ``written`` where the stored file has the
    size written, else downloaded and hashed."""
    out: dict[str, str] = {}
    fetch = []
    for path, size in sorted(listing(client, run_id).items()):
        known = written.get(path)
        if known is not None and known[1] == size:
            out[path] = known[0]
        else:
            fetch.append(path)
    if fetch:
        with tempfile.TemporaryDirectory(prefix="rageval-seal-") as tmp:
            for path in fetch:
                local = client.download_artifacts(run_id, path, tmp)
                out[path] = sha256_bytes(Path(local).read_bytes())
    return dict(sorted(out.items()))
