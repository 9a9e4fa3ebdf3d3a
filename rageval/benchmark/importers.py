"""Import real collections into rageval's benchmark format: BEIR folders and TREC files."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from pydantic import Field, StrictStr, ValidationError

from rageval.benchmark.loading import write_benchmark
from rageval.benchmark.schema import DEFAULT_RUBRIC, IMPORT_SPLITS, RELEASE_SPLIT, Case, Document, Judgment
from rageval.benchmark.trec import read_qrels, read_topics, whole_number
from rageval.errors import BenchmarkError, InputError, Problem
from rageval.hashing import sha256_file
from rageval.io import file_problem, read_jsonl, read_lines, read_text
from rageval.progress import SILENT, Reporter
from rageval.validation import Slug, Strict, problems_from_validation, shorten, valid_rows

Record = TypeVar("Record", bound="BeirRecord")


def _spec(name: str, version: str, corpus_version: str, splits: list[str], description: str) -> dict[str, Any]:
    return {
        "name": name,
        "version": version,
        "description": description,
        "corpusVersion": corpus_version,
        "relevanceUnit": "document",
        "rubric": dict(DEFAULT_RUBRIC),
        "splits": splits,
    }


def _map_grade(grade: int, grade_map: Mapping[int, int], file: str, line: int | None) -> Problem | None:
    """The problem of a grade that maps outside the 0–3 rubric, or None."""
    mapped = grade_map.get(grade, grade)
    if mapped in DEFAULT_RUBRIC:
        return None
    return Problem(
        file=file,
        line=line,
        field="grade",
        message=f"grade {grade} is outside the 0–3 rubric",
        fix="map it explicitly, e.g. --grade-map 4=3 (a recorded decision, not a guess)",
    )


def _build_cases(
    queries: Mapping[str, str],
    judged: Mapping[str, tuple[str, dict[str, int]]],
    corpus_version: str,
    known_docs: set[str],
    qrels_file: str,
) -> list[Case]:
    cases = []
    problems = []
    for qid, (split, grades) in sorted(judged.items(), key=lambda item: _natural(item[0])):
        if qid not in queries:
            problems.append(
                Problem(file=qrels_file, field="query-id", message=f"query '{shorten(qid)}' has judgments but no text")
            )
            continue
        unknown = sorted(d for d in grades if d not in known_docs)
        if unknown:
            problems.append(
                Problem(
                    file=qrels_file,
                    field="corpus-id",
                    message=f"query '{shorten(qid)}' judges unknown documents: {', '.join(shorten(u) for u in unknown[:5])}",
                )
            )
            continue
        try:
            cases.append(
                Case(
                    queryId=qid,
                    query=queries[qid],
                    corpusVersion=corpus_version,
                    relevant=[Judgment(documentId=d, grade=g) for d, g in grades.items()],
                    split=split,
                )
            )
        except ValidationError as exc:
            problems.extend(problems_from_validation(exc, file=qrels_file, model=Case, prefix=(qid,)))
    if problems:
        raise BenchmarkError(problems)
    return cases


def _natural(key: str) -> tuple[int, str]:
    return (int(key), "") if key.isdigit() else (1 << 62, key)


# --------------------------------------------------------------------------- BEIR


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


def _beir_qrels(
    path: Path,
    split: str,
    grade_map: Mapping[int, int],
    judged: dict[str, tuple[str, dict[str, int]]],
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
        parts = line.split("\t")
        if header and parts[0] == "query-id":
            header = False
            continue
        header = False
        if len(parts) != 3:
            problems.append(
                Problem(
                    file=file,
                    line=number,
                    message=f"expected query-id, corpus-id, score separated by tabs, found {len(parts)} field(s)",
                    fix="write three tab-separated fields per line",
                )
            )
            continue
        qid, did, score = (part.strip() for part in parts)
        grade = whole_number(score)
        if grade is None:
            problems.append(
                Problem(
                    file=file,
                    line=number,
                    field="score",
                    message=f"score {score[:40]!r} is not an integer",
                    fix="BEIR scores are whole-number grades, e.g. 0, 1, 2",
                )
            )
            continue
        wrong = _map_grade(grade, grade_map, file, number)
        if wrong is not None:
            problems.append(wrong)
            continue
        mapped = grade_map.get(grade, grade)
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


def import_beir(
    source: str | Path,
    out: str | Path,
    *,
    name: str,
    version: str,
    splits: Mapping[str, str],
    corpus_version: str | None = None,
    grade_map: Mapping[int, int] | None = None,
    extra_splits: Sequence[str] = (),
    reporter: Reporter = SILENT,
) -> Path:
    """Import a BEIR folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``).

    ``splits`` maps a BEIR qrels split to a benchmark split, e.g. ``{"train": "dev", "test": "release"}``.
    A benchmark split is ``dev`` or ``release`` unless named in ``extra_splits`` (a split nothing else
    of rageval knows is declared on purpose, never by a typo). Only judged queries become cases; a
    query judged in two mapped splits, a document judged twice with different grades, a record
    without its ``text`` and an ``_id`` that is not a string are errors. ``reporter`` gets the
    steps (reading, checking, writing) and a bar over each file's records.
    """
    source = Path(source)
    grade_map = dict(grade_map or {})
    problems: list[Problem] = []
    if not source.is_dir():
        raise BenchmarkError(
            file_problem(source)
            or Problem(file=str(source), message="is a file, not a folder", fix="give a BEIR folder")
        )
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
    if problems:
        raise BenchmarkError(problems)
    corpus_file = source / "corpus.jsonl"
    documents = [
        Document(id=d.id, title=d.title, text=d.text, metadata=d.metadata)
        for _, d in _beir_rows(corpus_file, BeirDocument, problems, reporter, "documents")
    ]
    queries_file = source / "queries.jsonl"
    queries = {q.id: (line, q.text) for line, q in _beir_rows(queries_file, BeirQuery, problems, reporter, "queries")}
    judged: dict[str, tuple[str, dict[str, int]]] = {}
    for beir_split, split in splits.items():
        _beir_qrels(source / "qrels" / f"{beir_split}.tsv", split, grade_map, judged, problems, reporter)
    for qid in judged:
        if qid in queries and not queries[qid][1].strip():
            problems.append(
                Problem(
                    file=str(queries_file),
                    line=queries[qid][0],
                    field="text",
                    message=f"query '{shorten(qid)}' is judged but its text is empty",
                    fix="write the query's text, or drop its judgments",
                )
            )
    if problems:
        raise BenchmarkError(problems)
    reporter.step("build cases")
    corpus_version = corpus_version or f"{source.name}-{sha256_file(corpus_file)[:12]}"
    texts = {qid: text for qid, (_, text) in queries.items()}
    cases = _build_cases(texts, judged, corpus_version, {d.id for d in documents}, str(source / "qrels"))
    mapping = ", ".join(f"{k}→{v}" for k, v in splits.items())
    description = f"Imported from BEIR folder {source.name} (qrels splits {mapping})"
    if grade_map:
        description += f"; grades mapped {', '.join(f'{k}→{v}' for k, v in sorted(grade_map.items()))}"
    spec = _spec(name, version, corpus_version, list(dict.fromkeys(splits.values())), description)
    reporter.step("write benchmark")
    return write_benchmark(out, spec, documents, cases)


def _available(source: Path) -> list[str]:
    return sorted(p.stem for p in (source / "qrels").glob("*.tsv") if p.is_file())


# --------------------------------------------------------------------------- TREC


class TrecJsonDocument(Strict):
    """One line of a JSON-lines collection given to the TREC importer (``id`` or ``_id``)."""

    id: Slug | None = None
    id_: Slug | None = Field(default=None, alias="_id")
    title: StrictStr = ""
    text: StrictStr
    metadata: dict[StrictStr, Any] = Field(default_factory=dict)


def _trec_documents(path: Path, reporter: Reporter = SILENT) -> list[Document]:
    """Documents as JSON lines (``id``/``_id``, ``title``, ``text``) or TREC SGML ``<DOC>`` blocks."""
    reporter.step(f"read {path.name}")
    text = read_text(path, BenchmarkError)
    problems: list[Problem] = []
    found: list[tuple[int, Document]] = []
    if text.lstrip().startswith("{"):
        rows, problems = read_jsonl(path)
        reporter.step("check documents")
        for number, row in valid_rows(reporter.bar(rows, desc="documents"), TrecJsonDocument, str(path), problems):
            key = row.id if row.id is not None else row.id_
            if key is None or (row.id is not None and row.id_ is not None):
                problems.append(
                    Problem(
                        file=str(path),
                        line=number,
                        field="id",
                        message="give the document's ID as id or as _id (one of them)",
                    )
                )
                continue
            found.append((number, Document(id=key, title=row.title, text=row.text, metadata=row.metadata)))
    else:
        reporter.step("check documents")
        found = list(reporter.bar(_sgml_documents(text, str(path), problems), desc="documents"))
    seen: dict[str, int] = {}
    for number, document in found:
        if document.id in seen:
            problems.append(
                Problem(
                    file=str(path),
                    line=number,
                    field="id",
                    message=f"document '{shorten(document.id)}' repeats (first on line {seen[document.id]})",
                    fix="IDs must be unique",
                )
            )
        seen.setdefault(document.id, number)
    if not found and not problems:
        problems.append(
            Problem(file=str(path), message="no documents in the file", fix="give <DOC> blocks or JSON lines")
        )
    if problems:
        raise BenchmarkError(problems)
    return [document for _, document in found]


def _sgml_documents(text: str, file: str, problems: list[Problem]) -> Iterator[tuple[int, Document]]:
    """``<DOC>`` blocks in one pass over the text (linear in its size), each with its first line."""
    line, seen, start = 1, 0, None
    for tag in re.finditer(r"<(/?)DOC>", text, flags=re.I):
        line += text.count("\n", seen, tag.start())
        seen = tag.start()
        if not tag.group(1):
            if start is not None:
                problems.append(
                    Problem(file=file, line=line, message="a <DOC> inside a <DOC>", fix="close it with </DOC>")
                )
                return
            start, start_line = tag.end(), line
            continue
        if start is None:
            problems.append(Problem(file=file, line=line, message="a </DOC> without its <DOC>", fix="remove it"))
            return
        fields = _tagged(text[start : tag.start()])
        start = None
        docno = fields.get("docno", "").strip()
        if not docno:
            problems.append(Problem(file=file, line=start_line, field="DOCNO", message="a <DOC> without <DOCNO>"))
            continue
        title = fields.get("title", fields.get("headline", ""))
        try:
            yield start_line, Document(id=docno, title=" ".join(title.split()), text=fields.get("text", "").strip())
        except ValidationError as exc:
            problems.extend(problems_from_validation(exc, file=file, line=start_line, model=Document))
    if start is not None:
        problems.append(Problem(file=file, line=start_line, message="a <DOC> without </DOC>", fix="close it"))


def _tagged(block: str) -> dict[str, str]:
    """The first closed ``<DOCNO>``, ``<TITLE>``, ``<HEADLINE>`` and ``<TEXT>`` of a block, by
    lower-case name; one pass over its tags."""
    pieces = re.split(r"<(/?)(DOCNO|TITLE|HEADLINE|TEXT)>", block, flags=re.I)
    out: dict[str, str] = {}
    open_name: str | None = None
    body: list[str] = []
    for i in range(1, len(pieces) - 2, 3):
        closing, name, after = pieces[i], pieces[i + 1].lower(), pieces[i + 2]
        if open_name is None and not closing:
            open_name, body = name, [after]
        elif open_name == name and closing:
            out.setdefault(name, "".join(body))
            open_name = None
        elif open_name is not None:
            body += [f"<{closing}{pieces[i + 1]}>", after]
    return out


def release_split(query_id: str, fraction: float) -> bool:
    """Stable assignment of a query to the release split: the same on every machine."""
    bucket = int(hashlib.sha256(query_id.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return bucket < fraction


def import_trec(
    *,
    topics: str | Path,
    qrels: str | Path,
    documents: str | Path,
    out: str | Path,
    name: str,
    version: str,
    field: str = "title",
    release_fraction: float = 0.0,
    corpus_version: str | None = None,
    grade_map: Mapping[int, int] | None = None,
    reporter: Reporter = SILENT,
) -> Path:
    """Import TREC topics + qrels + a document collection. Queries go to ``dev``, or to
    ``release`` for a stable ``release_fraction`` of them (by hash of the query ID). ``reporter``
    gets the steps and a bar over the documents."""
    grade_map = dict(grade_map or {})
    if not 0 <= release_fraction <= 1:
        raise BenchmarkError(
            Problem(
                file="--release-fraction",
                field="release_fraction",
                message=f"the release share must be between 0 and 1 (got {release_fraction})",
                fix="e.g. --release-fraction 0.3",
            )
        )
    docs_path = Path(documents)
    docs = _trec_documents(docs_path, reporter)
    corpus_version = corpus_version or f"{docs_path.stem}-{sha256_file(docs_path)[:12]}"
    try:
        reporter.step(f"read {Path(topics).name}")
        texts = read_topics(topics, field=field)
        reporter.step(f"read {Path(qrels).name}")
        judgments = read_qrels(qrels)
    except InputError as exc:
        raise BenchmarkError(exc.problems) from None
    judged: dict[str, tuple[str, dict[str, int]]] = {}
    problems = []
    for qid, grades in judgments.items():
        split = RELEASE_SPLIT if release_split(qid, release_fraction) else "dev"
        for grade in set(grades.values()):
            wrong = _map_grade(grade, grade_map, str(qrels), None)
            if wrong is not None:
                problems.append(replace(wrong, message=f"{wrong.message} (query '{shorten(qid)}')"))
        judged[qid] = (split, {d: grade_map.get(g, g) for d, g in grades.items()})
    if problems:
        raise BenchmarkError(problems)
    reporter.step("build cases")
    cases = _build_cases(texts, judged, corpus_version, {d.id for d in docs}, str(qrels))
    splits = ["dev", "release"] if release_fraction > 0 else ["dev"]
    description = f"Imported from TREC files {Path(topics).name} ({field}), {Path(qrels).name}, {docs_path.name}"
    reporter.step("write benchmark")
    return write_benchmark(out, _spec(name, version, corpus_version, splits, description), docs, cases)
