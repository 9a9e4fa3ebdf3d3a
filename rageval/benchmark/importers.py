"""Import TREC collections into rageval's benchmark format, and what every importer shares (the
benchmark spec, grade mapping, cases); BEIR folders are :mod:`rageval.benchmark.beir`."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import Field, StrictStr, ValidationError

from rageval.benchmark.loading import write_benchmark
from rageval.benchmark.schema import DEFAULT_RUBRIC, RELEASE_SPLIT, Case, Document, Judgment
from rageval.benchmark.trec import read_qrels, read_topics
from rageval.errors import BenchmarkError, InputError, Problem
from rageval.hashing import sha256_file
from rageval.io import read_jsonl, read_text
from rageval.progress import SILENT, Reporter
from rageval.validation import Slug, Strict, problems_from_validation, shorten, valid_rows


def benchmark_spec(name: str, version: str, corpus_version: str, splits: list[str], description: str) -> dict[str, Any]:
    return {
        "name": name,
        "version": version,
        "description": description,
        "corpusVersion": corpus_version,
        "relevanceUnit": "document",
        "rubric": dict(DEFAULT_RUBRIC),
        "splits": splits,
    }


def map_grade(grade: int, grade_map: Mapping[int, int], file: str, line: int | None) -> Problem | None:
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


def build_cases(
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


@dataclass(frozen=True, kw_only=True)
class TrecImport:
    """TREC topics + qrels + a document collection, to import as benchmark ``name`` ``version`` in
    ``out``. ``field``: the topic field that is the query; a stable ``release_fraction`` of the
    queries (by hash of the query ID) go to ``release``, the rest to ``dev``; ``corpus_version``
    (default: the documents file's name and hash); ``grade_map``: TREC grade → benchmark grade."""

    topics: str | Path
    qrels: str | Path
    documents: str | Path
    out: str | Path
    name: str
    version: str
    field: str = "title"
    release_fraction: float = 0.0
    corpus_version: str | None = None
    grade_map: Mapping[int, int] | None = None


def import_trec(request: TrecImport, reporter: Reporter = SILENT) -> Path:
    """Import a TREC collection (see :class:`TrecImport`). ``reporter`` gets the steps and a bar
    over the documents."""
    r = request
    if not 0 <= r.release_fraction <= 1:
        raise BenchmarkError(
            Problem(
                file="--release-fraction",
                field="release_fraction",
                message=f"the release share must be between 0 and 1 (got {r.release_fraction})",
                fix="e.g. --release-fraction 0.3",
            )
        )
    docs_path = Path(r.documents)
    docs = _trec_documents(docs_path, reporter)
    corpus_version = r.corpus_version or f"{docs_path.stem}-{sha256_file(docs_path)[:12]}"
    try:
        reporter.step(f"read {Path(r.topics).name}")
        texts = read_topics(r.topics, field=r.field)
        reporter.step(f"read {Path(r.qrels).name}")
        judgments = read_qrels(r.qrels)
    except InputError as exc:
        raise BenchmarkError(exc.problems) from None
    judged = _trec_judged(judgments, r)
    reporter.step("build cases")
    cases = build_cases(texts, judged, corpus_version, {d.id for d in docs}, str(r.qrels))
    splits = ["dev", "release"] if r.release_fraction > 0 else ["dev"]
    description = f"Imported from TREC files {Path(r.topics).name} ({r.field}), {Path(r.qrels).name}, {docs_path.name}"
    reporter.step("write benchmark")
    return write_benchmark(r.out, benchmark_spec(r.name, r.version, corpus_version, splits, description), docs, cases)


def _trec_judged(judgments: Mapping[str, Mapping[str, int]], r: TrecImport) -> dict[str, tuple[str, dict[str, int]]]:
    """Each query's split and its grades mapped by ``grade_map``; a grade it does not map, or one
    outside the rubric, is a problem naming the qrels file and the query."""
    grade_map = dict(r.grade_map or {})
    judged: dict[str, tuple[str, dict[str, int]]] = {}
    problems = []
    for qid, grades in judgments.items():
        split = RELEASE_SPLIT if release_split(qid, r.release_fraction) else "dev"
        for grade in set(grades.values()):
            wrong = map_grade(grade, grade_map, str(r.qrels), None)
            if wrong is not None:
                problems.append(replace(wrong, message=f"{wrong.message} (query '{shorten(qid)}')"))
        judged[qid] = (split, {d: grade_map.get(g, g) for d, g in grades.items()})
    if problems:
        raise BenchmarkError(problems)
    return judged
