"""The run's environment: the installed distributions, one ``name==version`` a line, cached."""

from __future__ import annotations

import json
import os
from pathlib import Path

from rageval.hashing import sha256_bytes
from rageval.paths import default_cache_dir


def _verified_text(path: Path) -> str | None:
    """A cached text written as ``sha256 HEX`` then the text, when the digest matches; else None."""
    try:
        head, _, text = path.read_text(encoding="utf-8").partition("\n")
    except (OSError, UnicodeDecodeError):
        return None
    return text if head == f"sha256 {sha256_bytes(text.encode())}" else None


def environment() -> str:
    """Installed distributions, one ``name==version`` a line: the run's environment.

    Reading every distribution's metadata takes about 0.3 s (several hundred packages), so the list
    is kept in the cache under a key of the interpreter and the modification times of its import
    folders: installing, removing or upgrading a package changes its folder's time, and a new key."""
    import sys
    from importlib.metadata import distributions

    # Where distributions are installed (not the script's or working folder, whose times change often).
    folders = sorted({p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and os.path.isdir(p)})
    key = sha256_bytes(json.dumps([sys.executable, [(f, os.stat(f).st_mtime_ns) for f in folders]]).encode())
    cached = default_cache_dir() / "environment" / f"{key[:32]}.txt"
    # The entry's first line is the sha256 of the list: a truncated or edited entry is rebuilt, never used.
    known = _verified_text(cached)
    if known is not None:
        return known
    names = sorted({f"{d.metadata['Name']}=={d.version}" for d in distributions() if d.metadata["Name"]}, key=str.lower)
    text = "\n".join(names) + "\n"
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(f"sha256 {sha256_bytes(text.encode())}\n{text}", encoding="utf-8")
        partial.replace(cached)  # atomic: a parallel run reads the whole list or none
    except OSError:
        pass  # a read-only cache only costs the scan
    return text
