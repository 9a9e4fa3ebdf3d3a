"""TREC formats: qrels, run files and topics, read with line-precise errors and written back."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from rageval.errors import InputError, Problem


def read_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """``qid iter docno rel`` lines → ``{qid: {docno: rel}}``. Trailing fields (comments) are kept out."""
    path = Path(path)
    qrels: dict[str, dict[str, int]] = {}
    problems = []
    for number, line in _lines(path):
        parts = line.split()
        if len(parts) < 4:
            problems.append(Problem(file=str(path), line=number, message="expected 'query iteration document grade'"))
            continue
        try:
            grade = int(parts[3])
        except ValueError:
            problems.append(
                Problem(file=str(path), line=number, field="grade", message=f"grade {parts[3]!r} is not an integer")
            )
            continue
        qrels.setdefault(parts[0], {})[parts[2]] = grade
    if problems:
        raise InputError(problems)
    return qrels


def read_run(path: str | Path) -> pd.DataFrame:
    """``qid Q0 docno rank score tag`` lines → a frame ``query_id, doc_id, rank, score, tag, line``."""
    path = Path(path)
    rows = []
    problems = []
    for number, line in _lines(path):
        parts = line.split()
        if len(parts) < 6:
            problems.append(Problem(file=str(path), line=number, message="expected 'query Q0 document rank score tag'"))
            continue
        try:
            rows.append((parts[0], parts[2], int(parts[3]), float(parts[4]), parts[5], number))
        except ValueError:
            problems.append(Problem(file=str(path), line=number, message="rank must be an integer and score a number"))
    if problems:
        raise InputError(problems)
    return pd.DataFrame(rows, columns=["query_id", "doc_id", "rank", "score", "tag", "line"])


def read_topics(path: str | Path, field: str = "title") -> dict[str, str]:
    """Topics as TREC SGML (``<top><num>…<title>…<desc>…``) or as ``qid<TAB>text`` lines.

    ``field`` picks ``title``, ``desc``, ``narr`` or a ``+``-joined combination for SGML topics.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8", errors="replace")
    if "<top>" not in text.lower():
        topics = {}
        for number, line in _lines(path):
            qid, sep, query = line.partition("\t")
            if not sep:
                raise InputError(Problem(file=str(path), line=number, message="expected 'query id<TAB>query text'"))
            topics[qid.strip()] = query.strip()
        return topics
    wanted = field.split("+")
    topics = {}
    for block in re.findall(r"<top>(.*?)</top>", text, flags=re.S | re.I):
        fields = _sgml_fields(block)
        num = re.sub(r"^\s*Number:\s*", "", fields.get("num", ""), flags=re.I).strip()
        parts = [re.sub(r"^\s*(Description|Narrative):\s*", "", fields.get(f, ""), flags=re.I).strip() for f in wanted]
        topics[num] = " ".join(p for p in parts if p)
    return topics


def _sgml_fields(block: str) -> dict[str, str]:
    # Classic TREC topics leave tags unclosed: a field runs until the next tag.
    pieces = re.split(r"<(/?)(num|title|desc|narr)>", block, flags=re.I)
    fields: dict[str, str] = {}
    for i in range(1, len(pieces) - 2, 3):
        closing, name, body = pieces[i], pieces[i + 1].lower(), pieces[i + 2]
        if not closing:
            fields[name] = " ".join(body.split())
    return fields


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


def _lines(path: Path):
    try:
        handle = path.open(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise InputError(Problem(file=str(path), message="file not found", fix="check the path")) from None
    with handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                yield number, line.rstrip("\n")
