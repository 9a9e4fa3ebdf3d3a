"""Issue 28 item 4: cache entries verified on read. The environment list a run seals
(environment.txt) comes from a cache entry whose first line is the list's sha256: a truncated or
edited entry is rebuilt from the installed distributions, never sealed (it held 3 of 222 packages).
The retrieval cache (rageval/retrieval/cache.py) checks every payload file against entry.json."""

from __future__ import annotations

from pathlib import Path

from rageval.hashing import sha256_bytes
from rageval.retrieval.cache import Cache
from rageval.tracking.records import environment


def test_a_truncated_environment_entry_is_rebuilt_not_sealed(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("RAGEVAL_CACHE", str(tmp_path))
    full = environment()
    lines = full.splitlines()
    assert len(lines) > 50 and any(line.startswith("pandas==") for line in lines)
    (entry,) = (tmp_path / "environment").glob("*.txt")
    head = entry.read_text().partition("\n")[0]
    assert head == f"sha256 {sha256_bytes(full.encode())}"
    assert environment() == full  # read back from the entry

    entry.write_text(head + "\n" + "\n".join(lines[:3]) + "\n")  # truncated; the digest no longer matches
    assert environment() == full
    assert entry.read_text() == f"{head}\n{full}"  # and the entry is whole again
    entry.write_text("\n".join(lines[:3]) + "\n")  # an entry of the old format (no digest): rebuilt
    assert environment() == full
    entry.write_bytes(b"\xff\xfe broken")  # not text at all
    assert environment() == full


def test_a_cache_payload_changed_behind_its_entry_is_rebuilt(tmp_path: Path):
    cache = Cache(tmp_path)
    builds: list[Path] = []

    def build(folder: Path) -> None:
        builds.append(folder)
        (folder / "index.bin").write_bytes(b"the real index" * 100)

    first = cache.get_or_build("bm25", {"corpus": "c1"}, build)
    assert not first.hit and (first.path / "index.bin").read_bytes() == b"the real index" * 100
    (first.path / "index.bin").write_bytes(b"the real index" * 50)  # truncated
    again = cache.get_or_build("bm25", {"corpus": "c1"}, build)
    assert not again.hit and len(builds) == 2
    assert (again.path / "index.bin").read_bytes() == b"the real index" * 100
    (again.path / "entry.json").unlink()  # a partial entry
    third = cache.get_or_build("bm25", {"corpus": "c1"}, build)
    assert not third.hit and len(builds) == 3
    assert cache.get_or_build("bm25", {"corpus": "c1"}, build).hit and len(builds) == 3
