"""The content-addressed cache: atomic entries, corrupt or partial entries rebuilt, parallel
builders build once."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

import pytest

from rageval.retrieval.cache import ENTRY, Cache

KEY = {"corpus": "abc", "chunking": "def", "settings": {"k1": 0.9}}


def write_payload(folder: Path, text: str = "payload") -> None:
    (folder / "data.txt").write_text(text)


def test_a_second_lookup_hits_and_a_new_key_misses(tmp_path):
    cache = Cache(tmp_path)
    built = []
    first = cache.get_or_build("thing", KEY, lambda f: (built.append(1), write_payload(f)))
    second = cache.get_or_build("thing", KEY, lambda f: (built.append(1), write_payload(f)))
    assert (first.hit, second.hit, len(built)) == (False, True, 1)
    assert (second.path / "data.txt").read_text() == "payload" and (second.path / ENTRY).is_file()
    other = cache.get_or_build("thing", {**KEY, "settings": {"k1": 1.2}}, write_payload)
    assert other.hit is False and other.path != first.path


def test_corrupt_and_partial_entries_are_rebuilt_never_used(tmp_path):
    cache = Cache(tmp_path)
    entry = cache.get_or_build("thing", KEY, write_payload).path
    (entry / "data.txt").write_text("tampered")
    again = cache.get_or_build("thing", KEY, write_payload)
    assert again.hit is False and (again.path / "data.txt").read_text() == "payload"
    (again.path / ENTRY).unlink()  # an entry without its record is partial
    third = cache.get_or_build("thing", KEY, write_payload)
    assert third.hit is False and (third.path / ENTRY).is_file()
    (third.path / ENTRY).write_text("{not json")
    assert cache.get_or_build("thing", KEY, write_payload).hit is False


def test_a_failing_build_leaves_nothing_behind(tmp_path):
    cache = Cache(tmp_path)

    def explode(folder: Path) -> None:
        write_payload(folder)
        raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError, match="out of memory"):  # the build's own error, not swallowed
        cache.get_or_build("thing", KEY, explode)
    leftovers = [p for p in (tmp_path / "thing").iterdir() if not p.name.endswith(".lock")]
    assert leftovers == []
    assert cache.get_or_build("thing", KEY, write_payload).hit is False


def _slow_builder(root: str, counter: str) -> bool:
    def build(folder: Path) -> None:
        with open(counter, "a") as handle:
            handle.write(f"{os.getpid()}\n")
        time.sleep(0.5)
        write_payload(folder)

    return Cache(root).get_or_build("thing", KEY, build).hit


def test_parallel_builders_build_once(tmp_path):
    counter = tmp_path / "builds.txt"
    context = multiprocessing.get_context("spawn")
    with context.Pool(3) as pool:
        hits = pool.starmap(_slow_builder, [(str(tmp_path / "cache"), str(counter))] * 3)
    assert len(counter.read_text().splitlines()) == 1
    assert sorted(hits) == [False, True, True]
