"""The one door for the text files users write: YAML, JSON lines and CSV, each read with the line of
every record so that a problem names its file and line.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import yaml

from rageval.errors import Problem


def yaml_key_lines(text: str) -> dict[tuple[Any, ...], int]:
    """Map each key path of a YAML document to its 1-based line, for error messages."""
    lines: dict[tuple[Any, ...], int] = {}
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return lines

    def walk(node: yaml.Node, path: tuple[Any, ...]) -> None:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                key_value: Any = key.value
                if isinstance(key_value, str) and re.fullmatch(r"-?\d+", key_value):
                    lines[path + (int(key_value),)] = key.start_mark.line + 1
                lines[path + (key_value,)] = key.start_mark.line + 1
                walk(value, path + (key_value,))
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                lines[path + (index,)] = item.start_mark.line + 1
                walk(item, path + (index,))

    if root is not None:
        walk(root, ())
    return lines


def read_yaml(path: Path, error: type[Exception]) -> tuple[Any, dict[tuple[Any, ...], int]]:
    """Parse a YAML file; a syntax error becomes ``error`` naming the file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(Problem(file=str(path), message="file not found", fix="check the path")) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise error(
            Problem(
                file=str(path),
                line=mark.line + 1 if mark else None,
                message=f"not valid YAML: {getattr(exc, 'problem', exc)}",
            )
        ) from None
    return data, yaml_key_lines(text)


def read_jsonl(path: Path) -> tuple[list[tuple[int, dict[str, Any]]], list[Problem]]:
    """Read a JSON-lines file: (line number, object) pairs and a problem per malformed line."""
    rows: list[tuple[int, dict[str, Any]]] = []
    problems: list[Problem] = []
    with path.open(encoding="utf-8") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                value = json.loads(raw)
            except json.JSONDecodeError as exc:
                problems.append(
                    Problem(file=path.name, line=number, message=f"malformed JSON: {exc.msg} at column {exc.colno}")
                )
                continue
            if not isinstance(value, dict):
                problems.append(
                    Problem(file=path.name, line=number, message=f"expected a JSON object, got {type(value).__name__}")
                )
                continue
            rows.append((number, value))
    return rows, problems


def read_table(path: str | Path) -> tuple[list[tuple[int, dict[str, Any]]], list[Problem]]:
    """Rows of a CSV (header first; blank cells are absent values) or JSONL file, with their lines.

    A CSV row's line is where the record starts: quoted cells may span several lines."""
    path = Path(path)
    if not path.is_file():
        return [], [Problem(file=str(path), message="file not found", fix="check the path")]
    if path.suffix == ".jsonl":
        rows, problems = read_jsonl(path)
        return rows, [Problem(**{**p.__dict__, "file": str(path)}) for p in problems]
    if path.suffix != ".csv":
        return [], [Problem(file=str(path), message=f"unknown sheet format '{path.suffix}'", fix="use .csv or .jsonl")]
    records: list[tuple[int, dict[str, Any]]] = []
    found: list[Problem] = []
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle, restkey="\0extra")
        start = 2
        for record in reader:
            line, start = start, reader.line_num + 1
            if "\0extra" in record:
                found.append(Problem(file=str(path), line=line, message="more cells than the header has columns"))
                continue
            records.append((line, {k: v for k, v in record.items() if v not in ("", None)}))
    return records, found
