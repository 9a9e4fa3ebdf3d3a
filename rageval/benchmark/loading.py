"""A versioned benchmark on disk: load, validate and hash it.

A benchmark is a folder holding ``benchmark.yaml``, ``documents.jsonl`` (the corpus snapshot) and
``cases.jsonl`` (queries with graded judgments). ``benchmark.yaml`` names the corpus version the
judgments were made against and the sha256 of every file, so a run can refuse judgments that do
not match its corpus. Validation reports every problem at once; the rules of a version against its
predecessor (and of its ``labelChunking``) are :mod:`rageval.benchmark.lineage`; the provenance
blocks and their retention dates, :mod:`rageval.benchmark.provenance`.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from rageval.benchmark.columns import Documents, DocumentText, read_documents
from rageval.benchmark.lineage import check_label_chunking, check_lineage
from rageval.benchmark.lookalike import collisions, lookalike_key, shown
from rageval.benchmark.provenance import Provenance, provenance_problems, retention_problems
from rageval.benchmark.schema import (
    BENCHMARK_FILE,
    CASES_FILE,
    DEFAULT_RUBRIC,
    DOCUMENTS_FILE,
    JUDGMENT_NOTES_FILE,
    BenchmarkSpec,
    Case,
    Document,
    Judgment,
)
from rageval.errors import BenchmarkError, Problem
from rageval.hashing import sha256_file, sha256_text
from rageval.io import file_problem, is_file, make_folder, read_jsonl, read_yaml
from rageval.validation import key_part_problem, problems_from_validation, shorten

DATA_FILES = (DOCUMENTS_FILE, CASES_FILE)
# Hashed like the data files where present: written by `rageval judge adjudicate`.
OPTIONAL_FILES = (JUDGMENT_NOTES_FILE,)
# A slice label becomes the MLflow keys ``slice/<label>/<measure>``: room left for the measure's part.
SLICE_KEY_ROOM = len("slice/") + 1 + 64
HASH_FIX = (
    "files are immutable once a version is published: restore the file, or publish the change as "
    "a new version (bump `version`, then run `rageval benchmark hash PATH --write`)"
)


@dataclass(frozen=True)
class Benchmark:
    """A validated benchmark. Build it with :func:`load_benchmark`."""

    path: Path
    spec: BenchmarkSpec
    documents: Mapping[str, Document]  # a Documents (columns) when loaded; any mapping when built in memory
    cases: tuple[Case, ...]
    file_hashes: dict[str, str] = field(default_factory=dict)

    def cases_for(self, split: str | None) -> list[Case]:
        """Cases of one split (all cases for ``None``)."""
        if split is None:
            return list(self.cases)
        if split not in self.spec.splits:
            raise BenchmarkError(
                Problem(
                    file=str(self.path / BENCHMARK_FILE),
                    field="splits",
                    message=f"split '{shorten(split)}' is not declared (splits: {', '.join(self.spec.splits)})",
                    fix="choose one of the declared splits",
                )
            )
        return [case for case in self.cases if case.split == split]

    def document_texts(self) -> Iterable[Document | DocumentText]:
        """Every document's ID, title and text, for chunking: read off the columns when loaded."""
        return self.documents.texts() if isinstance(self.documents, Documents) else self.documents.values()

    def provenance_of(self, case: Case) -> Provenance | None:
        """The case's own provenance block, else benchmark.yaml's default."""
        return case.provenance or self.spec.provenance

    def qrels(self, split: str | None = None) -> dict[str, dict[str, int]]:
        """Document-level qrels ``{query id: {document id: grade}}``; a document judged on several
        spans takes its highest grade. Unanswerable cases appear with an empty mapping."""
        out: dict[str, dict[str, int]] = {}
        for case in self.cases_for(split):
            grades: dict[str, int] = {}
            for judgment in case.relevant:
                grades[judgment.documentId] = max(judgment.grade, grades.get(judgment.documentId, judgment.grade))
            out[case.queryId] = grades
        return out

    @cached_property
    def hashes(self) -> dict[str, str]:
        """Content hashes of the corpus, the cases and the qrels derived from them."""
        lines = sorted(
            f"{case.queryId}\t{j.documentId}\t{j.grade}\t{j.start}\t{j.end}"
            for case in self.cases
            for j in case.relevant
        )
        return {
            "corpus": self.file_hashes.get(DOCUMENTS_FILE, ""),
            "cases": self.file_hashes.get(CASES_FILE, ""),
            "qrels": sha256_text("\n".join(lines)),
        }


# --------------------------------------------------------------------------- validation


def validate_benchmark(
    path: str | Path, *, retention: bool = True, today: dt.date | None = None
) -> tuple[Benchmark | None, list[Problem]]:
    """Check a benchmark folder completely; return it (when sound) and every problem found.

    A case past its retention date (as of ``today``, default the current date) is a problem unless
    ``retention`` is False: starting the new version that retires it must still be possible."""
    root = Path(path)
    problems: list[Problem] = []
    try:
        is_folder = root.is_dir()
    except (OSError, ValueError):
        is_folder = False
    if not is_folder:
        problem = file_problem(root)
        if problem is None or problem.message == "file not found":
            message = "not a folder" if problem is None else "folder not found"
            problem = Problem(file=str(root), message=message, fix="give the benchmark's folder")
        return None, [problem]

    spec, spec_lines = _read_spec(root, problems)
    file_hashes = _check_hashes(root, spec, spec_lines, problems)
    rubric = spec.rubric if spec else DEFAULT_RUBRIC

    documents = _read_documents(root / DOCUMENTS_FILE, problems)
    cases = _read_cases(root / CASES_FILE, problems)
    _check_cases(cases, documents, spec, rubric, problems)
    _check_provenance(cases, spec, spec_lines, (today or dt.date.today()) if retention else None, problems)
    if spec is not None:
        check_label_chunking(spec, spec_lines, problems)
        check_lineage(root, spec, spec_lines, cases, problems)

    if problems or spec is None:
        return None, problems
    benchmark = Benchmark(
        path=root.resolve(),
        spec=spec,
        documents=documents,
        cases=tuple(case for _, case in cases),
        file_hashes=file_hashes,
    )
    return benchmark, []


def load_benchmark(path: str | Path, *, retention: bool = True, today: dt.date | None = None) -> Benchmark:
    """Load and validate a benchmark; raise :class:`BenchmarkError` listing every problem."""
    benchmark, problems = validate_benchmark(path, retention=retention, today=today)
    if benchmark is None:
        raise BenchmarkError(problems)
    return benchmark


def _read_spec(root: Path, problems: list[Problem]) -> tuple[BenchmarkSpec | None, dict[tuple[Any, ...], int]]:
    try:
        data, lines = read_yaml(root / BENCHMARK_FILE, BenchmarkError)
    except BenchmarkError as exc:
        problems.extend(Problem(**{**p.__dict__, "file": BENCHMARK_FILE}) for p in exc.problems)
        return None, {}
    if not isinstance(data, dict):
        problems.append(Problem(file=BENCHMARK_FILE, line=1, message="expected a mapping of keys"))
        return None, lines
    try:
        return BenchmarkSpec.model_validate(data), lines
    except ValidationError as exc:
        problems.extend(problems_from_validation(exc, file=BENCHMARK_FILE, model=BenchmarkSpec, lines=lines, line=1))
        return None, lines


def _check_hashes(
    root: Path, spec: BenchmarkSpec | None, lines: dict[tuple[Any, ...], int], problems: list[Problem]
) -> dict[str, str]:
    actual = hash_files(root)
    for name in DATA_FILES:
        if name not in actual:
            problems.append(Problem(file=name, message="file not found", fix=f"every benchmark holds {name}"))
    if spec is None:
        return actual
    for name in actual:
        if name not in spec.files:
            problems.append(
                Problem(
                    file=BENCHMARK_FILE,
                    line=lines.get(("files",)),
                    field=f"files.{name}",
                    message="no sha256 recorded for this file",
                    fix="run `rageval benchmark hash PATH --write`",
                )
            )
    for name, expected in spec.files.items():
        found = actual.get(name) or (sha256_file(root / name) if is_file(root / name) else None)
        where = lines.get(("files", name))
        if found is None:
            problems.append(
                Problem(file=BENCHMARK_FILE, line=where, field=f"files.{name}", message="listed file does not exist")
            )
        elif found != expected:
            problems.append(
                Problem(
                    file=BENCHMARK_FILE,
                    line=where,
                    field=f"files.{name}",
                    message=f"{name} has sha256 {found[:12]}…, benchmark.yaml records {expected[:12]}…",
                    fix=HASH_FIX,
                )
            )
    return actual


def _read_models(path: Path, model: type[BaseModel], problems: list[Problem], what: str) -> list[tuple[int, Any]]:
    if not path.exists():
        return []  # reported by the hash check
    rows, read_problems = read_jsonl(path, file=path.name)
    problems.extend(read_problems)
    out = []
    for number, value in rows:
        try:
            out.append((number, model.model_validate(value)))
        except ValidationError as exc:
            problems.extend(problems_from_validation(exc, file=path.name, model=model, line=number))
    if not rows and not read_problems:
        problems.append(
            Problem(file=path.name, message=f"the file holds no {what}", fix=f"write one {what[:-1]} as JSON per line")
        )
    return out


def _first_lines(rows: Iterable[tuple[int, str]], file: str, what: str, problems: list[Problem]) -> None:
    seen: dict[str, int] = {}
    for number, key in rows:
        if key in seen:
            problems.append(
                Problem(
                    file=file,
                    line=number,
                    field="id" if what == "document" else "queryId",
                    message=f"duplicate {what} ID '{shorten(key)}' (first on line {seen[key]})",
                    fix="IDs must be unique",
                )
            )
        else:
            seen[key] = number


def _read_documents(path: Path, problems: list[Problem]) -> Documents:
    documents, lines = read_documents(path, problems)
    _first_lines(lines, path.name, "document", problems)
    _lookalike_lines(lines, path.name, problems)
    return documents


def _lookalike_lines(documents: list[tuple[int, str]], file: str, problems: list[Problem]) -> None:
    """Two document IDs a reader cannot tell apart (Unicode forms, invisible characters, surrounding
    whitespace): a judgment or a run would match one of them by chance."""
    lines: dict[str, int] = {}
    for number, doc_id in documents:
        lines.setdefault(doc_id, number)
    for group in collisions(doc_id for _, doc_id in documents):
        first, *others = group
        for other in others:
            problems.append(
                Problem(
                    file=file,
                    line=lines[other],
                    field="id",
                    message=f"document ID {shown(other)} looks the same as {shown(first)} (line {lines[first]}): "
                    "they differ only by Unicode form, invisible characters or surrounding whitespace",
                    fix="give each document an ID that reads differently (and write judgments and runs the same way)",
                )
            )


def _read_cases(path: Path, problems: list[Problem]) -> list[tuple[int, Case]]:
    cases = _read_models(path, Case, problems, "cases")
    _first_lines(((n, c.queryId) for n, c in cases), path.name, "query", problems)
    return cases


@dataclass(frozen=True)
class _CaseRules:
    """What every case is checked against: the corpus, the spec, the rubric; and where problems go."""

    documents: Documents
    spec: BenchmarkSpec | None
    rubric: dict[int, str]
    problems: list[Problem]

    @property
    def passage_unit(self) -> bool:
        return self.spec is None or self.spec.relevanceUnit == "passage"

    def problem(self, line: int, where: str, message: str, fix: str | None = None) -> None:
        self.problems.append(Problem(file=CASES_FILE, line=line, field=where, message=message, fix=fix))


def _check_cases(
    cases: list[tuple[int, Case]],
    documents: Documents,
    spec: BenchmarkSpec | None,
    rubric: dict[int, str],
    problems: list[Problem],
) -> None:
    rules = _CaseRules(documents, spec, rubric, problems)
    for line, case in cases:
        _check_case_fields(line, case, rules)
        seen_units: dict[tuple[str, int | None, int | None], tuple[int, int]] = {}
        for index, item in enumerate(case.relevant):
            _check_judgment(line, index, item, seen_units, rules)


def _check_case_fields(line: int, case: Case, rules: _CaseRules) -> None:
    """A case's corpus version, split and slice labels."""
    spec = rules.spec
    if spec is not None and case.corpusVersion != spec.corpusVersion:
        rules.problem(
            line,
            "corpusVersion",
            f"judged against corpus '{shorten(case.corpusVersion)}', but the snapshot is '{spec.corpusVersion}'",
            "re-judge the case against this corpus, or migrate its labels",
        )
    if spec is not None and case.split not in spec.splits:
        rules.problem(
            line,
            "split",
            f"split '{shorten(case.split)}' is not declared in benchmark.yaml",
            f"use one of: {', '.join(spec.splits)}",
        )
    for index, label in enumerate(case.slice):
        wrong = key_part_problem(label, SLICE_KEY_ROOM)
        if wrong:
            rules.problem(
                line,
                f"slice[{index}]",
                f"slice label {shorten(repr(label))} {wrong}",
                "rename the slice: letters, digits, '-' and '_' make the plainest keys",
            )


def _check_judgment(
    line: int,
    index: int,
    item: Judgment,
    seen_units: dict[tuple[str, int | None, int | None], tuple[int, int]],
    rules: _CaseRules,
) -> None:
    """One judgment of a case: its grade, its document, its span, and whether the case judged its unit before."""
    where = f"relevant[{index}]"
    documents = rules.documents
    if item.grade not in rules.rubric:
        grades = ", ".join(str(g) for g in sorted(rules.rubric))
        rules.problem(line, f"{where}.grade", f"grade {item.grade} is outside the rubric", f"use one of {grades}")
    if len(documents) and item.documentId not in documents:
        alike = next((d for d in documents if lookalike_key(d) == lookalike_key(item.documentId)), None)
        rules.problem(
            line,
            f"{where}.documentId",
            f"unknown document '{shorten(item.documentId)}'"
            + (f" ({shown(item.documentId)}); documents.jsonl has the look-alike {shown(alike)}" if alike else ""),
            "write the ID exactly as documents.jsonl does" if alike else "judge a document of documents.jsonl",
        )
        return
    if (item.start is None) != (item.end is None):
        rules.problem(line, where, "give both start and end, or neither")
        return
    if item.span is not None:
        start, end = item.span
        if not rules.passage_unit:
            rules.problem(
                line,
                where,
                "start/end given, but the benchmark's relevanceUnit is 'document'",
                "drop the offsets or make the unit 'passage'",
            )
            return
        length = documents.text_length(item.documentId)
        if not (start < end <= length):
            rules.problem(
                line,
                f"{where}.end" if end > length else f"{where}.start",
                f"offsets {start}–{end} fall outside document '{shorten(item.documentId)}' "
                f"(text length {length}) or are empty",
                "offsets are character positions into the document's text, start < end",
            )
    unit = (item.documentId, item.start, item.end) if rules.passage_unit else (item.documentId, None, None)
    if unit in seen_units:
        first, grade = seen_units[unit]
        what = f"document '{shorten(item.documentId)}'" + (f" {item.start}–{item.end}" if item.span else "")
        grades = f" with grades {grade} and {item.grade}" if grade != item.grade else ""
        rules.problem(
            line,
            f"{where}.documentId",
            f"{what} is judged twice (relevant[{first}] and relevant[{index}]){grades}",
            "keep one judgment per document" + (" and span" if rules.passage_unit else ""),
        )
        return
    seen_units[unit] = (index, item.grade)


def _check_provenance(
    cases: list[tuple[int, Case]],
    spec: BenchmarkSpec | None,
    lines: dict[tuple[Any, ...], int],
    today: dt.date | None,
    problems: list[Problem],
) -> None:
    """Each provenance block, the default included; then retention (``today`` None: not checked)."""
    default = spec.provenance if spec is not None else None
    spec_line = lines.get(("provenance",))
    if default is not None:
        problems.extend(provenance_problems(default, file=BENCHMARK_FILE, line=spec_line, field="provenance"))
    for line, case in cases:
        if case.provenance is not None:
            problems.extend(provenance_problems(case.provenance, file=CASES_FILE, line=line, field="provenance"))
    if today is None:
        return
    problems.extend(
        retention_problems(
            cases,
            default,
            today,
            cases_file=CASES_FILE,
            spec_file=BENCHMARK_FILE,
            spec_line=lines.get(("provenance", "retention"), spec_line),
        )
    )


# --------------------------------------------------------------------------- writing


def relative_path(target: Path, start: Path) -> str:
    """``target`` relative to the folder ``start``, with forward slashes (stored in benchmark.yaml)."""
    return Path(os.path.relpath(target.resolve(), start.resolve())).as_posix()


def hash_files(path: str | Path) -> dict[str, str]:
    """sha256 of the data files (and the optional hashed files present) of a benchmark folder."""
    root = Path(path)
    return {name: sha256_file(root / name) for name in DATA_FILES + OPTIONAL_FILES if (root / name).is_file()}


def write_hashes(path: str | Path) -> dict[str, str]:
    """Record the current sha256 of every data file in ``benchmark.yaml`` (rewrites the file)."""
    root = Path(path)
    data, _ = read_yaml(root / BENCHMARK_FILE, BenchmarkError)
    if not isinstance(data, dict):
        raise BenchmarkError(
            Problem(file=str(root / BENCHMARK_FILE), line=1, message="expected a mapping of keys", fix="see the README")
        )
    data["files"] = hash_files(root)
    (root / BENCHMARK_FILE).write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return data["files"]


def write_benchmark(
    path: str | Path, spec: dict[str, Any], documents: Iterable[Document], cases: Iterable[Case]
) -> Path:
    """Write a new benchmark folder (used by importers); refuses to overwrite one."""
    root = Path(path)
    if (root / BENCHMARK_FILE).exists():
        raise BenchmarkError(
            Problem(
                file=str(root / BENCHMARK_FILE),
                message="a benchmark already exists here",
                fix="versions are append-only: choose a new --out folder",
            )
        )
    make_folder(root, BenchmarkError)
    for name, rows in ((DOCUMENTS_FILE, documents), (CASES_FILE, cases)):
        with (root / name).open("w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row.model_dump(mode="json", exclude_none=True), ensure_ascii=False) + "\n")
    spec = {**spec, "files": hash_files(root)}
    (root / BENCHMARK_FILE).write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return root
