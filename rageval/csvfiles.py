"""Sheets a person fills — CSV (as Excel and LibreOffice save it) or JSON lines — read with the line
of every record, on :mod:`rageval.io`'s rules (encoding, files, a header naming a column twice)."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Any

from rageval.errors import InputError, Problem
from rageval.io import file_problem, read_jsonl, read_text


def read_table(path: str | Path) -> tuple[list[tuple[int, dict[str, Any]]], list[Problem]]:
    """Rows of a CSV (header first; blank cells are absent values) or JSONL file, with their lines.

    A CSV row's line is where the record starts: quoted cells may span several lines. A header that
    names a column twice is a problem (the last would silently win), and so is a row with more cells
    than the header."""
    path = Path(path)
    if path.suffix == ".jsonl":
        return read_jsonl(path)
    if path.suffix != ".csv":
        problem = file_problem(path) or Problem(
            file=str(path), message=f"unknown sheet format '{path.suffix}'", fix="use .csv or .jsonl"
        )
        return [], [problem]
    try:
        text = read_text(path)
    except InputError as exc:
        return [], exc.problems
    return _csv_rows(text, str(path))


def _csv_rows(text: str, file: str) -> tuple[list[tuple[int, dict[str, Any]]], list[Problem]]:
    records: list[tuple[int, dict[str, Any]]] = []
    found: list[Problem] = []
    if not text.strip():
        return records, found  # no header, no rows: the caller says whether that is wrong
    limit = csv.field_size_limit()
    # A cell may be as long as the file (a document's text): the limit is raised for this read only.
    csv.field_size_limit(max(limit, len(text) + 1))
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""), restkey="\0extra")
        header = reader.fieldnames or []
        repeated = sorted({name for name in header if header.count(name) > 1})
        if repeated:
            return [], [
                Problem(
                    file=file,
                    line=1,
                    field=repeated[0],
                    message=f"the header names column(s) {', '.join(repeated)} more than once",
                    fix="keep one column of each name",
                )
            ]
        if len(header) == 1 and re.search(r"[;\t|]", header[0]):
            return [], [
                Problem(
                    file=file,
                    line=1,
                    message=f"the header is one column, {header[0][:60]!r}: the sheet is not comma-separated",
                    fix="save the sheet as CSV with commas as separators (Excel: 'CSV UTF-8 (comma delimited)')",
                )
            ]
        start = 2
        for record in reader:
            line, start = start, reader.line_num + 1
            if "\0extra" in record:
                found.append(
                    Problem(
                        file=file,
                        line=line,
                        message="more cells than the header has columns",
                        fix="quote cells that hold commas",
                    )
                )
                continue
            records.append((line, {k: v for k, v in record.items() if v not in ("", None)}))
    except csv.Error as exc:
        found.append(Problem(file=file, line=start, message=f"malformed CSV: {exc}", fix="check the quoting"))
    finally:
        csv.field_size_limit(limit)
    return records, found
