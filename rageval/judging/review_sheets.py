"""The review folder on disk: ``review.json`` (what ``rageval review start`` selected, and from
which runs), the sheet reviewers fill (``review.csv`` and ``review.jsonl``) and the side-by-side
detail (``side_by_side.csv``); filled sheets read back as rows with their lines. Every CSV cell is
made safe to open in a spreadsheet (:func:`rageval.safety.csv_bytes`: formulas neutralised)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from rageval.csvfiles import read_table
from rageval.errors import InputError, Problem
from rageval.io import file_problem, make_folder, read_json
from rageval.safety import csv_bytes, safe_frame

REVIEW_FILE = "review.json"
REVIEW_CSV = "review.csv"
REVIEW_JSONL = "review.jsonl"
DETAIL_CSV = "side_by_side.csv"


def write_review(
    folder: str | Path, manifest: dict[str, Any], sheet: pd.DataFrame, detail: pd.DataFrame
) -> dict[str, Path]:
    """Write the review folder; refuses a folder holding a review already."""
    folder = Path(folder)
    if (folder / REVIEW_FILE).exists():
        raise InputError(
            Problem(
                file=str(folder / REVIEW_FILE), message="a review exists here already", fix="choose a new --out folder"
            )
        )
    make_folder(folder, InputError)
    paths = {
        "manifest": folder / REVIEW_FILE,
        "csv": folder / REVIEW_CSV,
        "jsonl": folder / REVIEW_JSONL,
        "detail": folder / DETAIL_CSV,
    }
    paths["manifest"].write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    paths["csv"].write_bytes(csv_bytes(sheet))
    paths["jsonl"].write_text(jsonl(sheet), encoding="utf-8")
    paths["detail"].write_bytes(csv_bytes(detail))
    return paths


def jsonl(frame: pd.DataFrame) -> str:
    """``frame`` as JSON lines, control sequences stripped from its text (JSON is never a formula)."""
    records = safe_frame(frame).astype(object).where(frame.notna(), None).to_dict(orient="records")
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def read_review(folder: str | Path) -> dict[str, Any]:
    """``review.json`` of a review folder."""
    path = Path(folder) / REVIEW_FILE
    if file_problem(path) is not None:
        raise InputError(
            Problem(file=str(path), message="no review here", fix="give the folder `rageval review start` wrote")
        )
    data = read_json(path, InputError)
    if not isinstance(data, dict) or "queries" not in data:
        raise InputError(
            Problem(file=str(path), message="not a review manifest", fix="give the folder `rageval review start` wrote")
        )
    return data


def sheet_rows(paths: Sequence[str | Path]) -> tuple[list[tuple[str, list[tuple[int, dict[str, Any]]]]], list[Problem]]:
    """The rows (with lines) of each filled sheet (``.csv`` or ``.jsonl``), and what kept a file unread."""
    out, problems = [], []
    for path in paths:
        rows, found = read_table(path)
        problems.extend(found)
        out.append((str(path), rows))
    if not paths:
        problems.append(Problem(file="<sheets>", message="no sheet given", fix="give the filled review sheets"))
    return out, problems
