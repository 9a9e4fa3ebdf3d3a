"""TREC formats: qrels, run files and topics, read with line-precise errors and written back.

The readers are as strict as trec_eval's fields allow: numbers are ASCII (``1_0``, ``٣`` or
``nan`` are refused, never read as another number), fields are split on ASCII blanks, a document
judged twice with different grades is an error naming both lines, and a file without records is
an error. :func:`read_qrels_and_run` reads a pair and refuses a run that shares no query with the
qrels (every measure would be a silent zero).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import pandas as pd

from rageval.errors import InputError, Problem
from rageval.io import read_lines, read_text
from rageval.validation import shorten

_INTEGER = re.compile(r"-?[0-9]+")
_NUMBER = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
_BLANKS = re.compile(r"[ \t\x0b\x0c]+")
_INT64 = 2**63
TOPIC_FIELDS = ("title", "desc", "narr")


def whole_number(text: str, bound: int = 2**31) -> int | None:
    """``text`` as an integer when it is ASCII digits (an optional ``-``) below ``bound`` in size."""
    if not _INTEGER.fullmatch(text) or len(text) > 20 or abs(int(text)) >= bound:
        return None
    return int(text)


def _fields(line: str) -> list[str]:
    """The blank-separated fields of a line; only ASCII blanks separate (as trec_eval's C code)."""
    return line.split() if line.isascii() else [part for part in _BLANKS.split(line) if part]


def _records(path: Path, problems: list[Problem]) -> Iterator[tuple[int, list[str]]]:
    for number, line in read_lines(path, problems):
        parts = _fields(line)
        if parts:
            yield number, parts


def read_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """``qid iter docno rel`` lines → ``{qid: {docno: rel}}``. Lines starting with ``#`` are
    comments (as trec_eval reads them); fields after the fourth are ignored."""
    path = Path(path)
    file = str(path)
    qrels: dict[str, dict[str, int]] = {}
    first: dict[tuple[str, str], tuple[int, str]] = {}  # (query, document) -> line and iteration
    problems: list[Problem] = []
    for number, parts in _records(path, problems):
        if parts[0].startswith("#"):
            continue
        if len(parts) < 4:
            problems.append(
                Problem(
                    file=file,
                    line=number,
                    message=f"expected 'query iteration document grade', found {len(parts)} field(s)",
                    fix="write four blank-separated fields per line",
                )
            )
            continue
        qid, iteration, docno, text = parts[:4]
        grade = whole_number(text)
        if grade is None:
            problems.append(
                Problem(
                    file=file,
                    line=number,
                    field="grade",
                    message=f"grade {text[:40]!r} is not an integer",
                    fix="write the grade as a whole number, e.g. 0, 1, 2",
                )
            )
            continue
        grades = qrels.setdefault(qid, {})
        if docno in grades and grades[docno] != grade:
            line, old_iteration = first[qid, docno]
            judges = f" (iterations {old_iteration} and {iteration})" if old_iteration != iteration else ""
            problems.append(
                Problem(
                    file=file,
                    line=number,
                    field="grade",
                    message=f"query '{shorten(qid)}' judges document '{shorten(docno)}' {grades[docno]} on line {line} "
                    f"and {grade} here{judges}",
                    fix="keep one grade per query and document (merge judge groups before evaluating)",
                )
            )
            continue
        first.setdefault((qid, docno), (number, iteration))
        grades[docno] = grade
    if not problems and not qrels:
        problems.append(
            Problem(
                file=file, message="no judgments in the file", fix="give a qrels file: 'query 0 document grade' lines"
            )
        )
    if problems:
        raise InputError(problems)
    return qrels


def read_run(path: str | Path) -> pd.DataFrame:
    """``qid Q0 docno rank score tag`` lines → a frame ``query_id, doc_id, rank, score, tag, line``."""
    path = Path(path)
    file = str(path)
    rows = []
    problems: list[Problem] = []
    for number, parts in _records(path, problems):
        if len(parts) < 6:
            problems.append(
                Problem(
                    file=file,
                    line=number,
                    message=f"expected 'query Q0 document rank score tag', found {len(parts)} field(s)",
                    fix="write six blank-separated fields per line",
                )
            )
            continue
        rank, score = parts[3], parts[4]
        position = whole_number(rank, _INT64)
        if position is None:
            problems.append(
                Problem(
                    file=file,
                    line=number,
                    field="rank",
                    message=f"rank {rank[:40]!r} is not an integer",
                    fix="write the rank as a whole number",
                )
            )
            continue
        if not _NUMBER.fullmatch(score) or abs(float(score)) == float("inf"):
            problems.append(
                Problem(
                    file=file,
                    line=number,
                    field="score",
                    message=f"score {score[:40]!r} is not a finite number",
                    fix="write the score as a decimal number, e.g. 12.5 or 1e-3",
                )
            )
            continue
        rows.append((parts[0], parts[2], position, float(score), parts[5], number))
    if not problems and not rows:
        problems.append(
            Problem(
                file=file, message="no results in the file", fix="give a run: 'query Q0 document rank score tag' lines"
            )
        )
    if problems:
        raise InputError(problems)
    return pd.DataFrame(rows, columns=["query_id", "doc_id", "rank", "score", "tag", "line"])


def check_shared_queries(
    run: pd.DataFrame,
    qrels: Mapping[str, Mapping[str, int]],
    *,
    run_file: str,
    qrels_file: str,
    relevance: int = 1,
) -> None:
    """Refuse a run and qrels that cannot give a number: no query of the run is judged, or no
    judged query has a document at ``relevance`` or above (every measure would be 0 or undefined).
    A run that ranks some unjudged queries is fine: they are not evaluated."""
    ranked = set(run["query_id"].astype(str))
    shared = ranked & set(qrels)
    if not shared:
        examples = ", ".join(sorted(ranked)[:3])
        raise InputError(
            Problem(
                file=run_file,
                field="query",
                message=f"none of the run's {len(ranked)} queries ({examples}, …) is judged in {qrels_file}",
                fix="evaluate a run made on the queries of these qrels (query IDs must match exactly)",
            )
        )
    if not any(grade >= relevance for grades in qrels.values() for grade in grades.values()):
        raise InputError(
            Problem(
                file=qrels_file,
                field="grade",
                message=f"no query has a document judged {relevance} or higher: every measure would be undefined",
                fix="give qrels with relevant documents, or lower --relevance",
            )
        )


def read_qrels_and_run(
    qrels: str | Path, run: str | Path, *, relevance: int = 1
) -> tuple[dict[str, dict[str, int]], pd.DataFrame]:
    """Read a qrels file and a run file (:func:`read_qrels`, :func:`read_run`) and check that they
    can give a number (:func:`check_shared_queries`); problems of both files are reported at once."""
    problems: list[Problem] = []
    judged: dict[str, dict[str, int]] = {}
    frame = pd.DataFrame()
    try:
        judged = read_qrels(qrels)
    except InputError as exc:
        problems += exc.problems
    try:
        frame = read_run(run)
    except InputError as exc:
        problems += exc.problems
    if problems:
        raise InputError(problems)
    check_shared_queries(frame, judged, run_file=str(run), qrels_file=str(qrels), relevance=relevance)
    return judged, frame


# --------------------------------------------------------------------------- topics


def read_topics(path: str | Path, field: str = "title") -> dict[str, str]:
    """Topics as TREC SGML (``<top><num>…<title>…<desc>…``) or as ``qid<TAB>text`` lines.

    ``field`` picks ``title``, ``desc``, ``narr`` or a ``+``-joined combination for SGML topics.
    A topic without text, a topic number given twice with different texts, and a file without
    topics are errors naming the file and line.
    """
    path = Path(path)
    wanted = field.split("+")
    unknown = [name for name in wanted if name not in TOPIC_FIELDS]
    if unknown:
        raise InputError(
            Problem(
                file="--field",
                field="field",
                message=f"unknown topic field(s) {', '.join(map(repr, unknown))}",
                fix=f"use {', '.join(TOPIC_FIELDS)} or a '+'-joined combination, e.g. title+desc",
            )
        )
    text = read_text(path)
    found = _sgml_topics(text, str(path), wanted) if "<top>" in text.lower() else _line_topics(path)
    problems: list[Problem] = []
    topics: dict[str, str] = {}
    first: dict[str, int] = {}
    for line, num, query in found:
        if not num:
            problems.append(Problem(file=str(path), line=line, field="num", message="a topic without a number"))
        elif not query:
            problems.append(
                Problem(
                    file=str(path),
                    line=line,
                    field=field,
                    message=f"topic '{shorten(num)}' has no {field} text",
                    fix="write its text, or read another --field",
                )
            )
        elif num in topics and topics[num] != query:
            problems.append(
                Problem(
                    file=str(path),
                    line=line,
                    field="num",
                    message=f"topic '{shorten(num)}' is given twice with different texts (first on line {first[num]})",
                    fix="keep one",
                )
            )
        else:
            first.setdefault(num, line)
            topics[num] = query
    if not problems and not topics:
        problems.append(
            Problem(
                file=str(path), message="no topics in the file", fix="give <top> blocks or 'query id<TAB>text' lines"
            )
        )
    if problems:
        raise InputError(problems)
    return topics


def _line_topics(path: Path) -> Iterator[tuple[int, str, str]]:
    problems: list[Problem] = []
    for number, line in read_lines(path, problems):
        if not line.strip():
            continue
        qid, sep, query = line.partition("\t")
        if not sep:
            problems.append(
                Problem(
                    file=str(path), line=number, message="expected 'query id<TAB>query text'", fix="separate by a tab"
                )
            )
            break
        yield number, qid.strip(), query.strip()
    if problems:
        raise InputError(problems)


def _sgml_topics(text: str, file: str, wanted: list[str]) -> Iterator[tuple[int, str, str]]:
    """(line, number, text) of each ``<top>`` block, in one pass over the text (linear in its size)."""
    line, seen, start = 1, 0, None
    for tag in re.finditer(r"<(/?)top>", text, flags=re.I):
        line += text.count("\n", seen, tag.start())
        seen = tag.start()
        if not tag.group(1):
            if start is not None:
                raise InputError(
                    Problem(file=file, line=line, message="a <top> inside a <top>", fix="close it with </top>")
                )
            start, start_line = tag.end(), line
            continue
        if start is None:
            raise InputError(Problem(file=file, line=line, message="a </top> without its <top>", fix="remove it"))
        fields = _sgml_fields(text[start : tag.start()])
        num = re.sub(r"^\s*Number:\s*", "", fields.get("num", ""), flags=re.I).strip()
        parts = [re.sub(r"^\s*(Description|Narrative):\s*", "", fields.get(f, ""), flags=re.I).strip() for f in wanted]
        yield start_line, num, " ".join(p for p in parts if p)
        start = None
    if start is not None:
        raise InputError(Problem(file=file, line=start_line, message="a <top> without </top>", fix="close it"))


def _sgml_fields(block: str) -> dict[str, str]:
    # Classic TREC topics leave tags unclosed: a field runs until the next tag.
    pieces = re.split(r"<(/?)(num|title|desc|narr)>", block, flags=re.I)
    fields: dict[str, str] = {}
    for i in range(1, len(pieces) - 2, 3):
        closing, name, body = pieces[i], pieces[i + 1].lower(), pieces[i + 2]
        if not closing:
            fields[name] = " ".join(body.split())
    return fields


# --------------------------------------------------------------------------- writing


def write_qrels(qrels: Mapping[str, Mapping[str, int]], path: str | Path) -> Path:
    path = Path(path)
    with path.open("w", encoding="utf-8") as handle:
        for qid in sorted(qrels):
            for did in sorted(qrels[qid]):
                handle.write(f"{qid} 0 {did} {qrels[qid][did]}\n")
    return path


def write_run(run: pd.DataFrame, path: str | Path, tag: str = "rageval") -> Path:
    """Write ``query_id, doc_id, rank, score`` rows as a TREC run file, in rank order."""
    path = Path(path)
    frame = run.sort_values(["query_id", "rank"], kind="stable")
    with path.open("w", encoding="utf-8") as handle:
        for qid, did, rank, score in frame[["query_id", "doc_id", "rank", "score"]].itertuples(index=False):
            handle.write(f"{qid} Q0 {did} {int(rank)} {float(score):.6f} {tag}\n")
    return path
