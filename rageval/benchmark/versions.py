"""Append-only benchmark versions: start a new version from the last one and record its changes.

A version is never edited into the next one: ``new_version`` copies a valid benchmark into a new
folder (by default the sibling ``<name>-v<version>``) whose ``benchmark.yaml`` names its predecessor
(relative path, version and the sha256 of its ``cases.jsonl``) and carries the changelog forward.
The user then edits the new ``cases.jsonl`` and lists each change with :func:`log_change`;
:func:`rageval.benchmark.validate_benchmark` refuses a case dropped, or a query or judgments changed,
that the changelog of this version does not list with a reason, and a new case not listed as added.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from rageval.benchmark.loading import Benchmark, hash_files, load_benchmark, relative_path
from rageval.benchmark.migration import REVIEW_PREFIX
from rageval.benchmark.schema import (
    BENCHMARK_FILE,
    CASES_FILE,
    DOCUMENTS_FILE,
    JUDGMENT_NOTES_FILE,
    Case,
    ChangelogEntry,
)
from rageval.errors import BenchmarkError, Problem
from rageval.io import read_yaml
from rageval.validation import problems_from_validation

# Label-migration review files travel with the version; rageval.benchmark.migration checks they still match.
CARRIED_GLOBS = (f"{REVIEW_PREFIX}*.jsonl",)


def default_folder(benchmark: Benchmark, version: str) -> Path:
    """Where a new version goes unless told: ``<name>-v<version>`` beside the benchmark's folder.
    A name or version that would make it another place (a path separator, ``..``) is refused."""
    spec_file = str(benchmark.path / BENCHMARK_FILE)
    for field, text, fix in (
        (
            "name",
            benchmark.spec.name,
            "rename the benchmark in benchmark.yaml, or give the new version's folder (--out)",
        ),
        ("version", version, "give a version without path characters, e.g. 1.1.0"),
    ):
        wrong = name_problem(text)
        if wrong:
            raise BenchmarkError(
                Problem(file=spec_file if field == "name" else "--version", field=field, message=wrong, fix=fix)
            )
    return benchmark.path.parent / f"{benchmark.spec.name}-v{version}"


def name_problem(text: str) -> str | None:
    """What keeps ``text`` from being one part of a folder name (a path separator, ``.`` or ``..``,
    a control character), or None."""
    if any(sep in text for sep in ("/", "\\")):
        return f"{text!r} holds a path separator: it would place the new version outside the benchmark's parent folder"
    if text in (".", "..") or any(ord(char) < 32 for char in text):
        return f"{text!r} cannot be part of a folder name"
    return None


def next_version(version: str) -> str:
    """``1.0.0`` → ``1.0.1``, ``v3`` → ``v4``: the last number in the version, plus one."""
    numbers = list(re.finditer(r"\d+", version))
    if not numbers:
        raise BenchmarkError(
            Problem(
                file=BENCHMARK_FILE,
                field="version",
                message=f"cannot derive the next version from '{version}' (it holds no number)",
                fix="give the new version explicitly (--version)",
            )
        )
    last = numbers[-1]
    return f"{version[: last.start()]}{int(last.group()) + 1}{version[last.end() :]}"


def new_version(path: str | Path, version: str, out: str | Path | None = None) -> Path:
    """Start version ``version`` from the valid benchmark at ``path``; returns the new folder. Cases
    past their retention date do not stop it: the new version is where they are retired."""
    benchmark = load_benchmark(path, retention=False)
    return write_version(benchmark, version, out=out)


def write_version(
    benchmark: Benchmark,
    version: str,
    *,
    cases: Sequence[Case] | None = None,
    changes: Sequence[ChangelogEntry] = (),
    notes: Iterable[Mapping[str, Any]] = (),
    spec_updates: Mapping[str, Any] | None = None,
    out: str | Path | None = None,
) -> Path:
    """Write ``benchmark`` as version ``version`` in a new folder, with ``cases`` (default: the same
    cases, byte for byte), ``changes`` appended to the changelog and ``notes`` appended to the
    judgment notes file. Refuses an existing folder that is not empty."""
    dest = _new_folder(benchmark, version, out)
    _copy_data(benchmark.path, dest, cases, notes)
    data, _ = read_yaml(benchmark.path / BENCHMARK_FILE, BenchmarkError)
    data = dict(data)
    data["version"] = version
    data["predecessor"] = {
        "path": relative_path(benchmark.path, dest),
        "version": benchmark.spec.version,
        "cases": benchmark.file_hashes[CASES_FILE],
    }
    data["changelog"] = [
        *(entry.model_dump() for entry in benchmark.spec.changelog),
        *(entry.model_dump() for entry in changes),
    ]
    data.update(spec_updates or {})
    data["files"] = hash_files(dest)
    _write_spec(dest, data)
    return dest


def _new_folder(benchmark: Benchmark, version: str, out: str | Path | None) -> Path:
    """The new version's folder, made empty; refuses the benchmark's own version, a version with path
    characters and a folder that holds anything."""
    if version == benchmark.spec.version:
        raise BenchmarkError(
            Problem(
                file=str(benchmark.path / BENCHMARK_FILE),
                field="version",
                message=f"'{version}' is the version of the benchmark itself",
                fix="give the new version a new number",
            )
        )
    wrong = name_problem(version)
    if wrong:
        raise BenchmarkError(
            Problem(file="--version", field="version", message=wrong, fix="give a version without path characters")
        )
    dest = Path(out) if out is not None else default_folder(benchmark, version)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise BenchmarkError(
            Problem(file=str(dest), message="exists already", fix="versions are append-only: choose a new --out folder")
        )
    dest.mkdir(parents=True, exist_ok=True)
    return dest


def _copy_data(source: Path, dest: Path, cases: Sequence[Case] | None, notes: Iterable[Mapping[str, Any]]) -> None:
    """Copy the data files from ``source`` to ``dest``: the documents, the cases (or ``cases``), the
    judgment notes with ``notes`` appended, and the carried files."""
    shutil.copyfile(source / DOCUMENTS_FILE, dest / DOCUMENTS_FILE)
    if cases is None:
        shutil.copyfile(source / CASES_FILE, dest / CASES_FILE)
    else:
        write_cases(dest / CASES_FILE, cases)
    notes = list(notes)
    if (source / JUDGMENT_NOTES_FILE).is_file():
        shutil.copyfile(source / JUDGMENT_NOTES_FILE, dest / JUDGMENT_NOTES_FILE)
    if notes:
        with (dest / JUDGMENT_NOTES_FILE).open("a", encoding="utf-8") as handle:
            for note in notes:
                handle.write(json.dumps(note, ensure_ascii=False, default=str) + "\n")
    for pattern in CARRIED_GLOBS:
        for carried in sorted(source.glob(pattern)):
            shutil.copyfile(carried, dest / carried.name)


def write_cases(path: Path, cases: Iterable[Case]) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for case in cases:
            handle.write(json.dumps(case.model_dump(mode="json", exclude_none=True), ensure_ascii=False) + "\n")


def log_change(
    path: str | Path, action: str, cases: Sequence[str], reason: str, date: dt.date | None = None
) -> ChangelogEntry:
    """Append a changelog entry for the benchmark's current version to its ``benchmark.yaml``.

    Only ``benchmark.yaml`` is rewritten; record edited data files with ``rageval benchmark hash --write``.
    """
    spec_path = Path(path) / BENCHMARK_FILE
    data, lines = read_yaml(spec_path, BenchmarkError)
    if not isinstance(data, dict) or not data.get("version"):
        raise BenchmarkError(Problem(file=str(spec_path), line=1, message="no `version` to record the change under"))
    raw = {
        "version": str(data["version"]),
        "date": date or dt.date.today(),
        "action": action,
        "cases": list(cases),
        "reason": reason,
    }
    try:
        entry = ChangelogEntry.model_validate(raw)
    except ValidationError as exc:
        raise BenchmarkError(problems_from_validation(exc, file=str(spec_path), model=ChangelogEntry)) from None
    data["changelog"] = [*(data.get("changelog") or []), entry.model_dump()]
    _write_spec(Path(path), data)
    return entry


def _write_spec(root: Path, data: dict[str, Any]) -> None:
    (root / BENCHMARK_FILE).write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
