"""Hypothesis strategies for hostile files: arbitrary bytes, byte-level edits of a valid file (a
BOM, invalid UTF-8, NUL and control bytes, truncation, lines dropped, repeated or swapped, huge
values) and structured edits of its records (a key dropped, repeated, renamed or retyped; YAML
aliases), all starting from a valid file of the reader's format."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import yaml
from hypothesis import strategies as st

BOM = b"\xef\xbb\xbf"
NOT_UTF8 = [b"\xff", b"\xc3", b"\xe9", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"\x80"]
PUNCTUATION = [
    b"\x00",
    b"\r",
    b"\n",
    b"\t",
    b'"',
    b"'",
    b"#",
    b":",
    b"- ",
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b"\\u",
    b"\\ud800",
]
TOKENS = [
    b"&a ",
    b"*a",
    b"!!python/object:os.system ",
    b"<<: ",
    b"NaN",
    b"-Infinity",
    b"1e999",
    b"\xc2\xa0",
    b"\xe2\x80\xa8",
]
NUMBERS = ["", "nan", "inf", "-0", "+1", "1_0", "٣", "²", "0x10", "1e999", "9" * 30, "2.0", "-1", " 1 "]
WEIRD: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    1.5,
    2**70,
    "",
    " ",
    "..",
    "x" * 5000,
    "\u0000",
    "\ud800",
    "é" * 50,
    [],
    [1, "a"],
    {},
    {"k": [1, {"x": None}]},
    float("nan"),
    float("inf"),
    "2024-13-45",
]


def _insert(data: bytes, at: float, payload: bytes) -> bytes:
    cut = int(at * len(data))
    return data[:cut] + payload + data[cut:]


@st.composite
def byte_edit(draw: st.DrawFn, data: bytes) -> bytes:
    """One byte-level edit of ``data``."""
    at = draw(st.floats(0, 1))
    kind = draw(
        st.sampled_from(["bom", "not-utf8", "punct", "token", "bytes", "huge", "truncate", "delete", "lines", "crlf"])
    )
    if kind == "bom":
        return BOM + data
    if kind == "not-utf8":
        return _insert(data, at, draw(st.sampled_from(NOT_UTF8)))
    if kind == "punct":
        return _insert(data, at, draw(st.sampled_from(PUNCTUATION)))
    if kind == "token":
        return _insert(data, at, draw(st.sampled_from(TOKENS)))
    if kind == "bytes":
        return _insert(data, at, draw(st.binary(min_size=1, max_size=16)))
    if kind == "huge":
        return _insert(
            data,
            at,
            draw(st.sampled_from([b"x", b"9", b" ", b"[", b"\n", b"a\t"]))
            * draw(st.sampled_from([300, 70_000, 300_000])),
        )
    if kind == "truncate":
        return data[: int(at * len(data))]
    if kind == "delete":
        end = int(at * len(data))
        return data[: max(0, end - draw(st.integers(1, 40)))] + data[end:]
    if kind == "crlf":
        return data.replace(b"\n", b"\r\n")
    lines = data.split(b"\n")
    i, j = (draw(st.integers(0, max(0, len(lines) - 1))) for _ in range(2))
    edit = draw(st.sampled_from(["drop", "repeat", "swap"]))
    if edit == "drop":
        del lines[i]
    elif edit == "repeat":
        lines.insert(j, lines[i])
    else:
        lines[i], lines[j] = lines[j], lines[i]
    return b"\n".join(lines)


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _yaml_text(value: Any) -> bytes:
    text = yaml.safe_dump(value, allow_unicode=True, sort_keys=False)
    return (text if _encodes(text) else yaml.safe_dump(value, sort_keys=False)).encode()


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += _paths(item, (*path, index))
    return out


def _edit_value(draw: st.DrawFn, value: Any) -> Any:
    """A copy of ``value`` with one key dropped, renamed or retyped somewhere inside."""
    value = json.loads(json.dumps(value, default=str))
    paths = [p for p in _paths(value) if p]
    if not paths:
        return draw(st.sampled_from(WEIRD))
    path = draw(st.sampled_from(paths))
    parent = value
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    kind = draw(st.sampled_from(["drop", "retype", "rename", "retype", "text"]))
    if kind == "drop":
        del parent[last]
    elif kind == "rename" and isinstance(parent, dict):
        parent[f"{last}x"] = parent.pop(last)
    elif kind == "text":
        parent[last] = draw(st.sampled_from(NUMBERS)) if draw(st.booleans()) else draw(st.text(max_size=12))
    else:
        parent[last] = draw(st.sampled_from(WEIRD))
    return value


def _json_text(value: Any, repeat: bool) -> str:
    """JSON, with the first key of an object repeated when ``repeat`` (JSON keeps the last); a
    lone surrogate is written as its escape."""
    text = json.dumps(value, ensure_ascii=False)
    if not _encodes(text):
        text = json.dumps(value)
    if repeat and isinstance(value, dict) and value:
        key = next(iter(value))
        text = "{" + f"{json.dumps(key)}: 0, " + text[1:]
    return text


@st.composite
def structured_edit(draw: st.DrawFn, data: bytes, kind: str) -> bytes:
    """One edit of the records of a valid ``data`` of format ``kind``."""
    text = data.decode("utf-8")
    if kind == "jsonl":
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        index = draw(st.integers(0, len(rows) - 1))
        if draw(st.booleans()):
            rows[index] = _edit_value(draw, rows[index])
        lines = [_json_text(row, repeat=(i == index and draw(st.booleans()))) for i, row in enumerate(rows)]
        return ("\n".join(lines) + "\n").encode()
    if kind == "json":
        return _json_text(_edit_value(draw, json.loads(text)), repeat=draw(st.booleans())).encode()
    if kind == "yaml":
        value = yaml.safe_load(text)
        choice = draw(st.sampled_from(["edit", "repeat", "alias"]))
        if choice == "edit":
            return _yaml_text(_edit_value(draw, value))
        if choice == "repeat":
            line = draw(
                st.sampled_from([x for x in text.splitlines() if x and not x.startswith((" ", "#"))] or ["a: 1"])
            )
            return (text + "\n" + line + "\n").encode()
        width, depth = draw(st.integers(2, 9)), draw(st.integers(1, 8))
        key = draw(st.sampled_from([k for k in value] if isinstance(value, dict) and value else ["a"]))
        bomb = f"l0: &l0 [{', '.join(['x'] * width)}]\n" + "".join(
            f"l{d}: &l{d} [{', '.join([f'*l{d - 1}'] * width)}]\n" for d in range(1, depth)
        )
        body = (
            yaml.safe_dump({k: v for k, v in (value or {}).items() if k != key}, sort_keys=False)
            if isinstance(value, dict)
            else ""
        )
        return (bomb + body + f"{key}: *l{depth - 1}\n").encode()
    if kind == "csv":
        rows = list(csv.reader(io.StringIO(text, newline="")))
        header, body = rows[0], rows[1:]
        choice = draw(st.sampled_from(["cell", "header", "extra", "drop-column"]))
        if choice == "cell" and body:
            row = draw(st.integers(0, len(body) - 1))
            column = draw(st.integers(0, len(header) - 1))
            body[row][column] = draw(st.sampled_from(NUMBERS)) if draw(st.booleans()) else draw(st.text(max_size=20))
        elif choice == "header":
            header[draw(st.integers(0, len(header) - 1))] = draw(
                st.sampled_from([header[0], "", "colour", "\ufeffitemId"])
            )
        elif choice == "extra" and body:
            body[draw(st.integers(0, len(body) - 1))].append("surplus")
        else:
            column = draw(st.integers(0, len(header) - 1))
            header.pop(column)
            for row in body:
                if len(row) > column:
                    row.pop(column)
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows([header, *body])
        return out.getvalue().encode("utf-8", "surrogatepass")
    # Plain lines (TREC formats): one field of one line replaced.
    lines = text.splitlines()
    index = draw(st.integers(0, len(lines) - 1))
    parts = lines[index].split()
    if parts:
        position = draw(st.integers(0, len(parts) - 1))
        parts[position] = (
            draw(st.sampled_from(NUMBERS)) if draw(st.booleans()) else draw(st.text(min_size=0, max_size=12))
        )
    lines[index] = " ".join(parts) if draw(st.booleans()) else "\t".join(parts)
    return ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")


def hostile(data: bytes, kind: str) -> st.SearchStrategy[bytes]:
    """Arbitrary bytes, or one to three edits (byte-level or structured) of the valid ``data``."""
    edited = st.one_of(byte_edit(data), structured_edit(data, kind))

    @st.composite
    def chain(draw: st.DrawFn) -> bytes:
        current = draw(edited)
        for _ in range(draw(st.integers(0, 2))):
            current = draw(byte_edit(current))
        return current

    return st.one_of(st.binary(max_size=600), chain())


OVERRIDE_KEYS = [
    "name",
    "final_k",
    "split",
    "benchmark",
    "description",
    "chunking.size",
    "chunking.tokenizer",
    "retrieval",
    "retrieval.stages",
    "retrieval.stages.0",
    "retrieval.stages.0.k1",
    "retrieval.stages.0.tokenizer.stemmer",
    "retrieval.stages.1.type",
    "evaluation.measures",
    "evaluation.measures.0",
    "context.max_tokens",
    "name.x",
    "final_k.0",
    "a..b",
    ".",
    "",
]


@st.composite
def override(draw: st.DrawFn) -> str:
    """One ``--set`` text: a real or broken key path, ``=`` (or not), and a YAML-ish value."""
    key = draw(st.one_of(st.sampled_from(OVERRIDE_KEYS), st.text(max_size=20)))
    value = draw(
        st.one_of(
            st.sampled_from(
                [
                    "1",
                    "-1",
                    "0.5",
                    "null",
                    "[RR, nDCG@5]",
                    "{a: 1, a: 2}",
                    "&a [*a]",
                    "2024-13-45",
                    '"\\0"',
                    "x" * 1000,
                    "[" * 150,
                ]
            ),
            st.text(max_size=30),
            st.sampled_from(NUMBERS),
        )
    )
    return f"{key}{draw(st.sampled_from(['=', '=', '', '==']))}{value}"
