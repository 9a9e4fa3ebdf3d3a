"""Import real collections into rageval's benchmark format: BEIR folders and TREC files."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rageval.benchmark.loading import write_benchmark
from rageval.benchmark.schema import DEFAULT_RUBRIC, Case, Document, Judgment
from rageval.benchmark.trec import read_qrels, read_topics
from rageval.errors import BenchmarkError, Problem
from rageval.hashing import sha256_file
from rageval.io import read_jsonl
from rageval.validation import problems_from_validation


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


def _map_grade(grade: int, grade_map: Mapping[int, int], file: str, line: int | None) -> int:
    mapped = grade_map.get(grade, grade)
    if mapped not in DEFAULT_RUBRIC:
        raise BenchmarkError(
            Problem(
                file=file,
                line=line,
                field="grade",
                message=f"grade {grade} is outside the 0–3 rubric",
                fix="map it explicitly, e.g. --grade-map 4=3 (a recorded decision, not a guess)",
            )
        )
    return mapped


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
                Problem(file=qrels_file, field="query-id", message=f"query '{qid}' has judgments but no text")
            )
            continue
        unknown = sorted(d for d in grades if d not in known_docs)
        if unknown:
            problems.append(
                Problem(
                    file=qrels_file,
                    field="corpus-id",
                    message=f"query '{qid}' judges unknown documents: {', '.join(unknown[:5])}",
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


def _beir_documents(path: Path) -> Iterator[Document]:
    rows, problems = read_jsonl(path)
    if problems:
        raise BenchmarkError(problems)
    for number, row in rows:
        try:
            yield Document(
                id=str(row["_id"]),
                title=row.get("title") or "",
                text=row.get("text") or "",
                metadata=row.get("metadata") or {},
            )
        except (KeyError, ValidationError) as exc:
            raise BenchmarkError(Problem(file=str(path), line=number, message=f"not a BEIR document: {exc}")) from None


def import_beir(
    source: str | Path,
    out: str | Path,
    *,
    name: str,
    version: str,
    splits: Mapping[str, str],
    corpus_version: str | None = None,
    grade_map: Mapping[int, int] | None = None,
) -> Path:
    """Import a BEIR folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``).

    ``splits`` maps a BEIR qrels split to a benchmark split, e.g. ``{"train": "dev", "test": "release"}``.
    Only judged queries become cases; a query judged in two mapped splits is an error.
    """
    source = Path(source)
    grade_map = dict(grade_map or {})
    corpus_file = source / "corpus.jsonl"
    if not corpus_file.is_file():
        raise BenchmarkError(Problem(file=str(corpus_file), message="file not found", fix="give a BEIR folder"))
    corpus_version = corpus_version or f"{source.name}-{sha256_file(corpus_file)[:12]}"
    documents = list(_beir_documents(corpus_file))
    rows, problems = read_jsonl(source / "queries.jsonl")
    if problems:
        raise BenchmarkError(problems)
    queries = {str(row["_id"]): row.get("text", "") for _, row in rows}

    judged: dict[str, tuple[str, dict[str, int]]] = {}
    for beir_split, split in splits.items():
        qrels_file = source / "qrels" / f"{beir_split}.tsv"
        if not qrels_file.is_file():
            raise BenchmarkError(
                Problem(file=str(qrels_file), message="qrels split not found", fix=f"available: {_available(source)}")
            )
        with qrels_file.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                parts = line.rstrip("\n").split("\t")
                if number == 1 and parts[0] == "query-id":
                    continue
                if len(parts) != 3:
                    raise BenchmarkError(
                        Problem(file=str(qrels_file), line=number, message="expected query-id, corpus-id, score")
                    )
                qid, did, score = parts
                grade = _map_grade(int(score), grade_map, str(qrels_file), number)
                if qid in judged and judged[qid][0] != split:
                    raise BenchmarkError(
                        Problem(file=str(qrels_file), line=number, message=f"query '{qid}' is judged in two splits")
                    )
                judged.setdefault(qid, (split, {}))[1][did] = grade
    cases = _build_cases(queries, judged, corpus_version, {d.id for d in documents}, str(source / "qrels"))
    mapping = ", ".join(f"{k}→{v}" for k, v in splits.items())
    description = f"Imported from BEIR folder {source.name} (qrels splits {mapping})"
    if grade_map:
        description += f"; grades mapped {', '.join(f'{k}→{v}' for k, v in sorted(grade_map.items()))}"
    spec = _spec(name, version, corpus_version, list(dict.fromkeys(splits.values())), description)
    return write_benchmark(out, spec, documents, cases)


def _available(source: Path) -> str:
    return ", ".join(sorted(p.stem for p in (source / "qrels").glob("*.tsv"))) or "none"


# --------------------------------------------------------------------------- TREC


def _trec_documents(path: Path) -> Iterator[Document]:
    """Documents as JSON lines (``id``/``_id``, ``title``, ``text``) or TREC SGML ``<DOC>`` blocks."""
    head = path.read_text(encoding="utf-8", errors="replace")
    if head.lstrip().startswith("{"):
        rows, problems = read_jsonl(path)
        if problems:
            raise BenchmarkError(problems)
        for _, row in rows:
            yield Document(
                id=str(row.get("id", row.get("_id"))),
                title=row.get("title") or "",
                text=row.get("text") or "",
                metadata=row.get("metadata") or {},
            )
        return
    for block in re.findall(r"<DOC>(.*?)</DOC>", head, flags=re.S | re.I):
        docno = re.search(r"<DOCNO>\s*(.*?)\s*</DOCNO>", block, flags=re.S | re.I)
        if not docno:
            raise BenchmarkError(Problem(file=str(path), message="a <DOC> without <DOCNO>"))
        title = re.search(r"<(?:TITLE|HEADLINE)>(.*?)</(?:TITLE|HEADLINE)>", block, flags=re.S | re.I)
        body = re.search(r"<TEXT>(.*?)</TEXT>", block, flags=re.S | re.I)
        yield Document(
            id=docno.group(1),
            title=" ".join(title.group(1).split()) if title else "",
            text=body.group(1).strip() if body else "",
        )


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
) -> Path:
    """Import TREC topics + qrels + a document collection. Queries go to ``dev``, or to
    ``release`` for a stable ``release_fraction`` of them (by hash of the query ID)."""
    grade_map = dict(grade_map or {})
    docs_path = Path(documents)
    corpus_version = corpus_version or f"{docs_path.stem}-{sha256_file(docs_path)[:12]}"
    docs = list(_trec_documents(docs_path))
    texts = read_topics(topics, field=field)
    judged: dict[str, tuple[str, dict[str, int]]] = {}
    for qid, grades in read_qrels(qrels).items():
        split = "release" if release_split(qid, release_fraction) else "dev"
        judged[qid] = (split, {d: _map_grade(g, grade_map, str(qrels), None) for d, g in grades.items()})
    cases = _build_cases(texts, judged, corpus_version, {d.id for d in docs}, str(qrels))
    splits = ["dev", "release"] if release_fraction > 0 else ["dev"]
    description = f"Imported from TREC files {Path(topics).name} ({field}), {Path(qrels).name}, {docs_path.name}"
    return write_benchmark(out, _spec(name, version, corpus_version, splits, description), docs, cases)
