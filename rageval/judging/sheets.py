"""The pool on disk and the labels that come back: ``pool.json`` and the blind sheets
(``sheet.csv``, ``sheet.jsonl``) written, assessors' filled sheets imported into labels, and
``labels.jsonl`` written and read. A sheet's CSV is made safe to open in a spreadsheet: a cell that
would start a formula (``=``, ``+``, ``-``, ``@``, a tab) gets a leading apostrophe
(:func:`rageval.safety.csv_bytes`), which the import takes off again."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import ValidationError

from rageval.benchmark.schema import JUDGE_ASSESSOR_PREFIXES
from rageval.csvfiles import read_table
from rageval.errors import BenchmarkError, Problem
from rageval.io import file_problem, make_folder, read_json, read_jsonl
from rageval.judging.pooling import Pool
from rageval.judging.schema import (
    POOL_FILE,
    SHEET_COLUMNS,
    SHEET_CSV,
    SHEET_JSONL,
    At,
    LabelRecord,
    PoolManifest,
    SheetRow,
    outside_rubric,
    valid_rows,
)
from rageval.safety import csv_bytes, neutralise_formula
from rageval.validation import problems_from_validation, shorten

# A labels frame: one row per assessor and item; ``source`` is the sheet's file:line.
LABEL_COLUMNS = ["item_id", "query_id", "assessor", "grade", "notes", "source"]
# Optional columns of a labels frame: the evidence the assessor selected in the item's document
# (``rageval judge label-view``), absent or null where they graded the pooled unit as it is.
SPAN_COLUMNS = ["start", "end"]
# The integer columns of a sheet (CSV cells are text).
SHEET_INTEGERS = ["grade", "start", "end"]


def write_pool(result: Pool, out: str | Path) -> dict[str, Path]:
    """Write ``pool.json``, ``sheet.csv`` and ``sheet.jsonl`` into ``out``; refuses an existing pool."""
    folder = Path(out)
    if (folder / POOL_FILE).exists():
        raise BenchmarkError(
            Problem(file=str(folder / POOL_FILE), message="a pool exists here already", fix="choose a new --out folder")
        )
    make_folder(folder, BenchmarkError)
    paths = {"pool": folder / POOL_FILE, "csv": folder / SHEET_CSV, "jsonl": folder / SHEET_JSONL}
    rows = [row.model_dump(mode="json") for row in result.sheet]
    # Each file whole or not at all, pool.json last: a process killed half way leaves no pool.json,
    # so the folder is not taken for a pool, and writing the pool again there completes it.
    _write_whole(paths["csv"], sheet_csv(result.sheet))
    _write_whole(paths["jsonl"], "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode())
    _write_whole(paths["pool"], (result.manifest.model_dump_json(indent=1) + "\n").encode())
    return paths


def _write_whole(path: Path, data: bytes) -> None:
    partial = path.with_name(f".{path.name}.partial")
    with partial.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(partial, path)


def sheet_csv(rows: Sequence[SheetRow]) -> bytes:
    """An assessment sheet as CSV (``SHEET_COLUMNS``), every text cell safe to open in a spreadsheet."""
    frame = pd.DataFrame([row.model_dump(mode="json") for row in rows], columns=SHEET_COLUMNS, dtype=object)
    return csv_bytes(frame.where(frame.notna(), ""))


def restored(value: object) -> object:
    """A cell of a sheet's CSV as it was before :func:`sheet_csv` neutralised it: ``'=x`` → ``=x``
    (a spreadsheet drops the apostrophe itself on saving; a text editor keeps it)."""
    if isinstance(value, str) and value.startswith("'") and neutralise_formula(value[1:]) == value:
        return value[1:]
    return value


def read_pool(path: str | Path) -> PoolManifest:
    """Read ``pool.json`` (or the pool folder holding it)."""
    path = Path(path)
    if path.is_dir():
        path = path / POOL_FILE
    if file_problem(path) is not None:
        raise BenchmarkError(
            Problem(file=str(path), message="no pool here", fix="give the folder `rageval judge pool` wrote")
        )
    data = read_json(path, BenchmarkError)
    try:
        return PoolManifest.model_validate(data)
    except ValidationError as exc:
        raise BenchmarkError(problems_from_validation(exc, file=str(path), model=PoolManifest)) from None


# --------------------------------------------------------------------------- labels


def import_sheets(manifest: PoolManifest, paths: Sequence[str | Path]) -> pd.DataFrame:
    """Read several assessors' sheets into labels (``LABEL_COLUMNS``, one row per assessor and item).

    Every bad row is reported, with file and line: unknown item or case IDs, a grade outside the
    rubric, a label without an assessor, and a second label for one item by the same assessor.
    Rows without a grade are not labels and are skipped."""
    problems: list[Problem] = []
    seen: dict[tuple[str, str], str] = {}  # (item, assessor) -> file:line of the first label
    labels: list[tuple[str, str, str, int, str, str, int | None, int | None]] = []
    check = partial(_sheet_problem, manifest=manifest, seen=seen)
    for path in paths:
        before, errors = len(labels), len(problems)
        rows, read_problems = read_table(path)
        problems.extend(read_problems)
        rows = [(line, {key: restored(value) for key, value in row.items()}) for line, row in rows]
        for line, row in valid_rows(rows, SheetRow, str(path), problems, integers=SHEET_INTEGERS, check=check):
            if row.grade is not None:  # a row without a grade is context, not a label
                where = f"{path}:{line}"
                seen[row.itemId, row.assessor_name] = where
                labels.append(
                    (row.itemId, row.queryId, row.assessor_name, row.grade, row.notes or "", where, row.start, row.end)
                )
        if len(labels) == before and len(problems) == errors:
            problems.append(
                Problem(
                    file=str(path),
                    field="grade",
                    message=f"no row of the sheet has a grade ({len(rows)} row(s)): is this the blank sheet?",
                    fix="fill in the grade (and assessor) columns, or leave the sheet out",
                )
            )
    if not paths:
        problems.append(Problem(file="<sheets>", message="no sheet given", fix="give the filled sheets to import"))
    if problems:
        raise BenchmarkError(problems)
    frame = pd.DataFrame(labels, columns=LABEL_COLUMNS + SPAN_COLUMNS)
    return frame.astype({"grade": np.int64, "start": "Int64", "end": "Int64"})


def label_span(row: Any) -> tuple[int, int] | None:
    """The evidence a labels-frame row selected (a row of ``itertuples``), or None."""
    start, end = getattr(row, "start", None), getattr(row, "end", None)
    if start is None or end is None or pd.isna(start) or pd.isna(end):
        return None
    return int(start), int(end)


def _sheet_problem(row: SheetRow, at: At, manifest: PoolManifest, seen: dict[tuple[str, str], str]) -> Problem | None:
    """The first thing wrong with one sheet row (``at`` places the problem), or None. The IDs are
    checked on every row; the label itself only where a grade is given."""
    item = manifest.item(row.itemId)
    if item is None:
        return at(
            field="itemId",
            message=f"unknown item '{shorten(row.itemId)}'",
            fix="keep the itemId column of the sheet as written",
        )
    if item.queryId != row.queryId:
        return at(
            field="queryId",
            message=f"item '{shorten(row.itemId)}' belongs to case '{shorten(item.queryId)}', not '{shorten(row.queryId)}'",
            fix="keep the queryId column as written",
        )
    if row.grade is None:
        return None
    if (row.start is None) != (row.end is None) or (
        row.start is not None and row.end is not None and row.end <= row.start
    ):
        return at(
            field="start",
            message=f"the evidence {row.start}-{row.end} is not a span (give both start and end, start < end)",
            fix="select the evidence again in `rageval judge label-view`, or clear both columns",
        )
    wrong = outside_rubric(row.grade, manifest, at)
    if wrong:
        return wrong
    assessor = row.assessor_name
    if not assessor:
        return at(
            field="assessor",
            message="a grade without an assessor",
            fix="write the assessor's name in the assessor column",
        )
    if assessor.startswith(JUDGE_ASSESSOR_PREFIXES):
        return at(
            field="assessor",
            message=f"'{shorten(assessor)}' is a judge's mark ({'…, '.join(JUDGE_ASSESSOR_PREFIXES)}…); "
            "a sheet holds human labels",
            fix="write the human assessor's name; judge labels come from `rageval judge prelabel`",
        )
    if (row.itemId, assessor) in seen:
        return at(
            field="itemId",
            message=f"'{assessor}' labelled item '{shorten(row.itemId)}' already at {seen[row.itemId, assessor]}",
            fix="keep one label per item and assessor",
        )
    return None


def write_labels(labels: pd.DataFrame, path: str | Path) -> Path:
    """Write a labels frame (``LABEL_COLUMNS``) as ``labels.jsonl``, one :class:`LabelRecord` a line."""
    path = Path(path)
    with path.open("w", encoding="utf-8") as handle:
        for row in labels.itertuples(index=False):
            record: dict[str, Any] = {
                "itemId": row.item_id,
                "queryId": row.query_id,
                "assessor": row.assessor,
                "grade": int(row.grade),
                "notes": row.notes,
                "source": row.source,
            }
            span = label_span(row)
            if span is not None:
                record["start"], record["end"] = span
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path


def read_labels(path: str | Path) -> pd.DataFrame:
    """Read ``labels.jsonl`` back into a labels frame (``LABEL_COLUMNS``); every bad line is reported."""
    path = Path(path)
    missing = file_problem(path)
    if missing is not None:
        raise BenchmarkError(
            Problem(file=str(path), message=missing.message, fix="run `rageval judge import` first, or check the path")
        )
    rows, problems = read_jsonl(path)
    records = [record for _, record in valid_rows(rows, LabelRecord, str(path), problems)]
    if problems:
        raise BenchmarkError(problems)
    frame = pd.DataFrame(
        [(r.itemId, r.queryId, r.assessor, r.grade, r.notes, r.source, r.start, r.end) for r in records],
        columns=LABEL_COLUMNS + SPAN_COLUMNS,
    )
    return frame.astype({"grade": np.int64, "start": "Int64", "end": "Int64"})
