"""Issue 28 item 4: cache entries verified on read. The environment list a run seals
(environment.txt) comes from a cache entry whose first line is the list's sha256: a truncated or
edited entry is rebuilt from the installed distributions, never sealed (it held 3 of 222 packages).
The retrieval cache (rageval/retrieval/cache.py) checks every payload file against entry.json."""

from __future__ import annotations

from pathlib import Path

from rageval.hashing import sha256_bytes
from rageval.retrieval.cache import Cache
from rageval.tracking.environment import environment


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


def test_a_payload_forged_with_its_digest_is_rebuilt_under_a_seal_key(tmp_path: Path, monkeypatch):
    """The issue's BM25 case: payload and entry.json rewritten together. With a seal key the entry
    carries an HMAC the forger cannot make, so the forged entry is rebuilt; without one it is used
    (the documented limit: only a rebuild with an empty cache exposes it)."""
    import json

    from rageval.hashing import sha256_file
    from rageval.keys import KEY_ENV, KEY_FILE_ENV

    monkeypatch.delenv(KEY_FILE_ENV, raising=False)
    builds: list[Path] = []

    def build(folder: Path) -> None:
        builds.append(folder)
        (folder / "index.bin").write_bytes(b"the real index")

    def forge(path: Path) -> None:
        (path / "index.bin").write_bytes(b"a forged index")
        record = json.loads((path / "entry.json").read_text())
        record["files"]["index.bin"] = sha256_file(path / "index.bin")
        (path / "entry.json").write_text(json.dumps(record, sort_keys=True))

    monkeypatch.delenv(KEY_ENV, raising=False)
    plain = Cache(tmp_path / "plain")
    forge(plain.get_or_build("bm25", {"corpus": "c1"}, build).path)
    used = plain.get_or_build("bm25", {"corpus": "c1"}, build)
    assert used.hit and (used.path / "index.bin").read_bytes() == b"a forged index"  # the limit, shown

    monkeypatch.setenv(KEY_ENV, "a team's seal key")
    signed = Cache(tmp_path / "signed")
    entry = signed.get_or_build("bm25", {"corpus": "c1"}, build)
    assert "hmac" in json.loads((entry.path / "entry.json").read_text())
    assert signed.get_or_build("bm25", {"corpus": "c1"}, build).hit
    forge(entry.path)
    rebuilt = signed.get_or_build("bm25", {"corpus": "c1"}, build)
    assert not rebuilt.hit and (rebuilt.path / "index.bin").read_bytes() == b"the real index"
    monkeypatch.setenv(KEY_ENV, "another key")  # signed under another key: not trusted either
    assert not signed.get_or_build("bm25", {"corpus": "c1"}, build).hit
