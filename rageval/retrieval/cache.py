"""A content-addressed cache for expensive, deterministic builds (BM25 indexes, document embeddings).

An entry's address is the sha256 of its key (corpus hash, chunking hash, model identity, stage
config …), so a changed input is a different entry, never a stale one. An entry is a folder of
payload files plus ``entry.json`` holding the key and each payload's sha256:

- written into a temporary folder beside it and renamed into place, so a reader never sees a
  partial entry;
- verified on every read; a corrupt or partial entry is moved aside and rebuilt, never used;
- signed, when a seal key is set (:mod:`rageval.keys`): ``entry.json`` carries the HMAC of its key
  and payload hashes, so a payload rewritten together with its hash by someone without the key is
  rebuilt, not used (without a key, only a rebuild with an empty cache exposes such a forgery);
- built under a per-entry file lock, so parallel runs (a sweep) needing the same entry build it
  once and the others read it.

The cache lives in ``RAGEVAL_CACHE`` if set, else ``<project>/.rageval-cache``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from rageval.hashing import sha256_file
from rageval.keys import seal_key
from rageval.paths import default_cache_dir

ENTRY = "entry.json"


def key_digest(key: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()


@dataclass(frozen=True)
class CacheResult:
    path: Path  # the entry's folder, verified
    hit: bool  # True: read from the cache; False: built now
    digest: str


class Cache:
    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else default_cache_dir()

    def entry_dir(self, kind: str, key: Mapping[str, Any]) -> Path:
        return self.root / kind / key_digest(key)

    def get_or_build(self, kind: str, key: Mapping[str, Any], build: Callable[[Path], None]) -> CacheResult:
        """The verified entry for ``key``; on a miss ``build(folder)`` writes the payload files."""
        target = self.entry_dir(kind, key)
        digest = target.name
        if self._valid(target, key):
            return CacheResult(target, True, digest)
        target.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(target.parent / f".{digest}.lock"):
            if self._valid(target, key):  # built by a parallel run while we waited
                return CacheResult(target, True, digest)
            if target.exists():
                self._discard(target)
            staging = Path(tempfile.mkdtemp(prefix=f".{digest}.", dir=target.parent))
            try:
                build(staging)
                files = {
                    p.relative_to(staging).as_posix(): sha256_file(p) for p in sorted(staging.rglob("*")) if p.is_file()
                }
                record: dict[str, Any] = {"key": key, "files": files}
                signing = seal_key()
                if signing is not None:
                    record["hmac"] = signing.sign(_signed(record))
                (staging / ENTRY).write_text(json.dumps(record, sort_keys=True, default=str))
                os.rename(staging, target)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
        return CacheResult(target, False, digest)

    def _valid(self, target: Path, key: Mapping[str, Any]) -> bool:
        """Present, for this key, and every payload file with its recorded hash."""
        entry = target / ENTRY
        if not entry.is_file():
            if target.exists():
                self._discard(target)
            return False
        try:
            record = json.loads(entry.read_text())
            ok = json.loads(json.dumps(key, sort_keys=True, default=str)) == record["key"] and all(
                (target / name).is_file() and sha256_file(target / name) == sha for name, sha in record["files"].items()
            )
            signing = seal_key()
            if ok and signing is not None:  # unsigned, or signed under another key: not ours to trust
                ok = hmac.compare_digest(str(record.get("hmac", "")), signing.sign(_signed(record)))
        except (OSError, ValueError, KeyError, TypeError):
            ok = False
        if not ok:
            self._discard(target)
        return ok

    @staticmethod
    def _discard(target: Path) -> None:
        # Renamed aside first: a reader racing with us never opens a half-deleted entry.
        aside = target.with_name(f".{target.name}.corrupt-{uuid.uuid4().hex[:8]}")
        try:
            os.rename(target, aside)
        except OSError:
            return
        shutil.rmtree(aside, ignore_errors=True)


def _signed(record: Mapping[str, Any]) -> bytes:
    """What an entry's HMAC covers: its key and its payloads' hashes."""
    return json.dumps({"key": record["key"], "files": record["files"]}, sort_keys=True, default=str).encode()
