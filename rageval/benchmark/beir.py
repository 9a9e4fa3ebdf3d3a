"""Import a BEIR folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``) into
rageval's benchmark format."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from pydantic import Field, StrictStr, ValidationError

from rageval.benchmark.importers import benchmark_spec, build_cases, map_grade
from rageval.benchmark.loading import write_benchmark
from rageval.benchmark.schema import IMPORT_SPLITS, Document
from rageval.benchmark.trec import whole_number
from rageval.errors import BenchmarkError, Problem
from rageval.hashing import sha256_file
from rageval.io import file_problem, read_jsonl, read_lines
from rageval.progress import SILENT, Reporter
from rageval.validation import Slug, Strict, problems_from_validation, shorten

Record = TypeVar("Record", bound="BeirRecord")
Judged = dict[str, tuple[str, dict[str, int]]]  # query ID → (benchmark split, document ID → grade)


class BeirRecord(Strict):
    id: Slug = Field(alias="_id")


class BeirDocument(BeirRecord):
    """One line of a BEIR ``corpus.jsonl``."""

    title: StrictStr
    text: StrictStr
    metadata: dict[StrictStr, Any] = Field(default_factory=dict)


class BeirQuery(BeirRecord):
    """One line of a BEIR ``queries.jsonl``."""

    text: StrictStr
    metadata: dict[StrictStr, Any] = Field(default_factory=dict)


ID_FIX = 'IDs are JSON strings: quote it, e.g. "_id": "12"'


def _beir_rows(
    path: Path, model: type[Record], problems: list[Problem], reporter: Reporter = SILENT, what: str = "records"
) -> list[tuple[int, Record]]:
    """The valid records of a BEIR JSON-lines file; each bad line (and a repeated ``_id``) is a problem."""
    reporter.step(f"read {path.name}")
    rows, read_problems = read_jsonl(path)
    problems.extend(read_problems)
    reporter.step(f"check {what}")
    out: list[tuple[int, Record]] = []
    seen: dict[str, int] = {}
    for number, value in reporter.bar(rows, desc=what):
        try:
            record = model.model_validate(value)
        except ValidationError as exc:
            for problem in problems_from_validation(exc, file=str(path), line=number, model=model):
                retyped = problem.field == "_id" and problem.message != "missing required key"
                problems.append(replace(problem, fix=ID_FIX) if retyped else problem)
            continue
        key = record.id
        if key in seen:
            problems.append(
                Problem(
                    file=str(path),
                    line=number,
                    field="_id",
                    message=f"_id '{shorten(key)}' repeats (first on line {seen[key]})",
                    fix="IDs must be unique",
                )
            )
            continue
        seen[key] = number
        out.append((number, record))
    if not out and not problems:
        problems.append(Problem(file=str(path), message="no records in the file", fix="give a BEIR JSON-lines file"))
    return out


def _qrel_row(line: str, file: str, number: int, grade_map: Mapping[int, int]) -> tuple[str, str, int] | Problem:
    """One qrels line as (query ID, document ID, mapped grade), or its problem."""
    parts = line.split("\t")
    if len(parts) != 3:
        return Problem(
            file=file,
            line=number,
            message=f"expected query-id, corpus-id, score separated by tabs, found {len(parts)} field(s)",
            fix="write three tab-separated fields per line",
        )
    qid, did, score = (part.strip() for part in parts)
    grade = whole_number(score)
    if grade is None:
        return Problem(
            file=file,
            line=number,
            field="score",
            message=f"score {score[:40]!r} is not an integer",
            fix="BEIR scores are whole-number grades, e.g. 0, 1, 2",
        )
    wrong = map_grade(grade, grade_map, file, number)
    return wrong if wrong is not None else (qid, did, grade_map.get(grade, grade))


def _beir_qrels(
    path: Path,
    split: str,
    grade_map: Mapping[int, int],
    judged: Judged,
    problems: list[Problem],
    reporter: Reporter = SILENT,
) -> None:
    """Read ``qrels/<split>.tsv`` (``query-id<TAB>corpus-id<TAB>score``, header optional) into ``judged``."""
    reporter.step(f"read qrels/{path.name}")
    file = str(path)
    lines: dict[tuple[str, str], int] = {}
    count = 0
    header = True
    for number, line in reporter.bar(read_lines(path, problems), desc="lines"):
        if not line.strip():
            continue
        if header and line.split("\t")[0] == "query-id":
            header = False
            continue
        header = False
        parsed = _qrel_row(line, file, number, grade_map)
        if isinstance(parsed, Problem):
            problems.append(parsed)
            continue
        qid, did, mapped = parsed
        if qid in judged and judged[qid][0] != split:
            problems.append(
                Problem(
                    file=file,
                    line=number,
                    field="query-id",
                    message=f"query '{shorten(qid)}' is judged in two splits ({judged[qid][0]} and {split})",
                    fix="map each query's qrels to one benchmark split",
                )
            )
            continue
        grades = judged.setdefault(qid, (split, {}))[1]
        if did in grades and grades[did] != mapped:
            where = f"line {lines[qid, did]}" if (qid, did) in lines else "another qrels file"
            problems.append(
                Problem(
                    file=file,
                    line=number,
                    field="score",
                    message=f"query '{shorten(qid)}' judges document '{shorten(did)}' {grades[did]} on {where} and {mapped} here",
                    fix="keep one grade per query and document",
                )
            )
            continue
        lines.setdefault((qid, did), number)
        grades[did] = mapped
        count += 1
    if count == 0 and not problems:
        problems.append(Problem(file=file, message="no judgments in the file", fix="give a qrels split with judgments"))


def _split_problems(source: Path, splits: Mapping[str, str], extra_splits: Sequence[str]) -> list[Problem]:
    """What is wrong with ``splits`` (BEIR qrels split → benchmark split) for the folder ``source``."""
    problems: list[Problem] = []
    available = _available(source)
    for beir_split, split in splits.items():
        if beir_split not in available:
            problems.append(
                Problem(
                    file=str(source / "qrels" / f"{beir_split}.tsv"),
                    field="--split",
                    message=f"qrels split '{beir_split}' not found",
                    fix=f"available: {', '.join(available) or 'none'}",
                )
            )
        if split not in (*IMPORT_SPLITS, *extra_splits):
            problems.append(
                Problem(
                    file="--split",
                    field=f"{beir_split}={split}",
                    message=f"'{shorten(split)}' is not a benchmark split rageval knows ({', '.join(IMPORT_SPLITS)})",
                    fix="map each BEIR split to dev or release, e.g. --split train=dev --split test=release "
                    "(declare another split name explicitly if you mean it)",
                )
            )
    if not splits:
        problems.append(Problem(file="--split", message="no split to import", fix="e.g. --split test=release"))
    return problems


@dataclass(frozen=True, kw_only=True)
class BeirImport:
    """A BEIR folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``) to import as
    benchmark ``name`` ``version`` in ``out``. ``splits`` maps a BEIR qrels split to a benchmark
    split, e.g. ``{"train": "dev", "test": "release"}``; a benchmark split is ``dev`` or ``release``
    unless named in ``extra_splits`` (a split nothing else of rageval knows is declared on purpose,
    never by a typo). ``corpus_version`` defaults to the folder's name and the corpus's hash;
    ``grade_map``: BEIR grade → benchmark grade."""

    source: str | Path
    out: str | Path
    name: str
    version: str
    splits: Mapping[str, str]
    corpus_version: str | None = None
    grade_map: Mapping[int, int] | None = None
    extra_splits: Sequence[str] = ()


def import_beir(request: BeirImport, reporter: Reporter = SILENT) -> Path:
    """Import a BEIR folder (see :class:`BeirImport`).

    Only judged queries become cases; a query judged in two mapped splits, a document judged twice
    with different grades, a record without its ``text`` and an ``_id`` that is not a string are
    errors. ``reporter`` gets the steps (reading, checking, writing) and a bar over each file's records.
    """
    source = Path(request.source)
    grade_map = dict(request.grade_map or {})
    _check_folder(source, request.splits, request.extra_splits)
    problems: list[Problem] = []
    corpus_file = source / "corpus.jsonl"
    documents = [
        Document(id=d.id, title=d.title, text=d.text, metadata=d.metadata)
        for _, d in _beir_rows(corpus_file, BeirDocument, problems, reporter, "documents")
    ]
    queries_file = source / "queries.jsonl"
    queries = {q.id: (line, q.text) for line, q in _beir_rows(queries_file, BeirQuery, problems, reporter, "queries")}
    judged: Judged = {}
    for beir_split, split in request.splits.items():
        _beir_qrels(source / "qrels" / f"{beir_split}.tsv", split, grade_map, judged, problems, reporter)
    problems.extend(_empty_judged_queries(queries_file, queries, judged))
    if problems:
        raise BenchmarkError(problems)
    reporter.step("build cases")
    corpus_version = request.corpus_version or f"{source.name}-{sha256_file(corpus_file)[:12]}"
    texts = {qid: text for qid, (_, text) in queries.items()}
    cases = build_cases(texts, judged, corpus_version, {d.id for d in documents}, str(source / "qrels"))
    spec = benchmark_spec(
        request.name,
        request.version,
        corpus_version,
        list(dict.fromkeys(request.splits.values())),
        _description(source, request.splits, grade_map),
    )
    reporter.step("write benchmark")
    return write_benchmark(request.out, spec, documents, cases)


def _check_folder(source: Path, splits: Mapping[str, str], extra_splits: Sequence[str]) -> None:
    """Refuse a ``source`` that is not a folder, or ``splits`` it cannot give, before reading anything."""
    if not source.is_dir():
        raise BenchmarkError(
            file_problem(source)
            or Problem(file=str(source), message="is a file, not a folder", fix="give a BEIR folder")
        )
    problems = _split_problems(source, splits, extra_splits)
    if problems:
        raise BenchmarkError(problems)


def _empty_judged_queries(queries_file: Path, queries: Mapping[str, tuple[int, str]], judged: Judged) -> list[Problem]:
    """A problem for each judged query whose text is empty (it could never be asked)."""
    return [
        Problem(
            file=str(queries_file),
            line=queries[qid][0],
            field="text",
            message=f"query '{shorten(qid)}' is judged but its text is empty",
            fix="write the query's text, or drop its judgments",
        )
        for qid in judged
        if qid in queries and not queries[qid][1].strip()
    ]


def _description(source: Path, splits: Mapping[str, str], grade_map: Mapping[int, int]) -> str:
    """The benchmark's description: where it came from, its split mapping and any grade mapping."""
    mapping = ", ".join(f"{k}→{v}" for k, v in splits.items())
    description = f"Imported from BEIR folder {source.name} (qrels splits {mapping})"
    if grade_map:
        description += f"; grades mapped {', '.join(f'{k}→{v}' for k, v in sorted(grade_map.items()))}"
    return description


def _available(source: Path) -> list[str]:
    return sorted(p.stem for p in (source / "qrels").glob("*.tsv") if p.is_file())
