"""The one door for the text files users write: YAML, JSON, JSON lines and plain lines (the TREC
formats; CSV sheets are :mod:`rageval.csvfiles`, on the same rules), each read with the line of every
record so that a problem names its file and line.

Every reader here holds the same rules, so that no format is stricter or laxer than another:

- **Encoding.** UTF-8, with or without a byte-order mark (Excel's "CSV UTF-8" writes one); the
  mark is never part of the first value, and a mark starting a later line (files joined) is an
  error. Any other byte sequence is an error naming the file, the line and the byte offset of the
  first byte that is not UTF-8, never a silently replaced character.
- **Files.** A missing file, a folder given as a file, a file that cannot be read: one problem
  naming it, never an ``OSError``.
- **Keys.** A key given twice in one YAML mapping or JSON object is an error naming both lines
  (YAML and JSON would silently keep the last one).
- **YAML aliases** may add at most :data:`ALIAS_BUDGET` values to a document (a "billion laughs"
  document is refused in milliseconds), and may not refer to themselves; collections may nest at
  most :data:`DEPTH_LIMIT` deep (PyYAML's own scanner is quadratic in flow depth).
- **Values.** JSON's ``NaN``/``Infinity`` extensions, numbers too large for a float, lone UTF-16
  surrogates (``"\\ud800"``), and control characters escaped into YAML values are errors: they would
  turn into wrong numbers or crash a later writer.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from rageval.errors import InputError, Problem

BOM = b"\xef\xbb\xbf"
UTF8_FIX = "save the file as UTF-8 (with or without a byte-order mark)"
# How many values YAML anchors and aliases may add to a document beyond those written out.
ALIAS_BUDGET = 10_000
# How deep YAML collections may nest (rageval's own files nest a few levels).
DEPTH_LIMIT = 100
Lines = dict[tuple[Any, ...], int]
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


# --------------------------------------------------------------------------- files and bytes


def file_problem(path: Path, file: str | None = None) -> Problem | None:
    """Why ``path`` cannot be read as a file (missing, a folder, not accessible), or None."""
    file = str(path) if file is None else file
    try:
        if path.is_file():
            return None
        if path.is_dir():
            return Problem(file=file, message="is a folder, not a file", fix="give the path of the file itself")
    except (OSError, ValueError) as exc:  # a name too long, a NUL byte in the name
        return Problem(file=file, message=f"cannot be read: {_reason(exc)}", fix="check the path")
    return Problem(file=file, message="file not found", fix="check the path")


def is_file(path: Path) -> bool:
    """``path.is_file()``, False for a name the system refuses (too long, a NUL byte) as for a missing file."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def make_folder(path: Path, error: type[InputError] = InputError) -> Path:
    """Create the folder ``path`` (and its parents) to write into; a file in the way, or a folder
    that cannot be made, raises ``error`` naming it."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise error(
            Problem(file=str(path), message="is a file, not a folder", fix="choose a folder to write into")
        ) from None
    except (OSError, ValueError) as exc:
        raise error(
            Problem(file=str(path), message=f"cannot be made: {_reason(exc)}", fix="choose another folder")
        ) from None
    return path


def read_bytes(path: Path, file: str | None = None) -> bytes:
    """The bytes of a file; raises :class:`InputError` naming it when it cannot be read."""
    file = str(path) if file is None else file
    problem = file_problem(path, file)
    if problem is None:
        try:
            return path.read_bytes()
        except OSError as exc:
            problem = Problem(file=file, message=f"cannot be read: {_reason(exc)}", fix="check the file's permissions")
    raise InputError(problem)


def decode(data: bytes, file: str) -> str:
    """UTF-8 bytes as text, a leading byte-order mark dropped; raises :class:`InputError` naming the
    line and byte offset of the first byte that is not UTF-8."""
    skip = len(BOM) if data.startswith(BOM) else 0
    try:
        return data[skip:].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(_not_utf8(file, data, skip + exc.start, exc.reason, 1, 0)) from None


def _not_utf8(file: str, data: bytes, at: int, reason: str, first_line: int, base: int) -> Problem:
    """The problem of a byte that is not UTF-8 at ``at`` of ``data`` (``data`` starts at byte
    ``base`` of the file, on line ``first_line``)."""
    before = data[:at]
    line = first_line + before.count(b"\n") + len(re.findall(rb"\r(?!\n)", before))
    return Problem(
        file=file,
        line=line,
        message=f"not UTF-8: byte 0x{data[at]:02x} at byte offset {base + at} ({reason})",
        fix=UTF8_FIX,
    )


def read_text(path: Path, error: type[InputError] = InputError, file: str | None = None) -> str:
    """A whole file as text (UTF-8, byte-order mark dropped); every failure raises ``error``."""
    file = str(path) if file is None else file
    try:
        return decode(read_bytes(path, file), file)
    except InputError as exc:
        raise error(exc.problems) from None


def read_lines(path: Path, problems: list[Problem], file: str | None = None) -> Iterator[tuple[int, str]]:
    """The lines of a UTF-8 file, numbered from 1, without their line ends (``\\n``, ``\\r\\n`` or
    a lone ``\\r``, as Python's text files count them), blank lines included; streamed.

    A file that cannot be read, or a line that is not UTF-8, adds one problem to ``problems`` and
    ends the lines: the caller reports what it found and raises."""
    file = str(path) if file is None else file
    problem = file_problem(path, file)
    if problem is not None:
        problems.append(problem)
        return
    try:
        handle = path.open("rb")
    except OSError as exc:
        problems.append(Problem(file=file, message=f"cannot be read: {_reason(exc)}", fix="check the path"))
        return
    number, offset = 1, 0
    with handle:
        for raw in handle:
            skip = len(BOM) if offset == 0 and raw.startswith(BOM) else 0
            try:
                text = raw[skip:].decode("utf-8")
            except UnicodeDecodeError as exc:
                problems.append(_not_utf8(file, raw, skip + exc.start, exc.reason, number, offset))
                return
            if text.startswith("\ufeff"):  # a mark that is not the file's first bytes: files joined?
                problems.append(
                    Problem(
                        file=file,
                        line=number,
                        message=f"a byte-order mark at the start of line {number}, inside the file "
                        "(were files joined with their marks?)",
                        fix="remove it: it would become part of the line's first value",
                    )
                )
                return
            offset += len(raw)
            text = text[:-1] if text.endswith("\n") else text
            text = text[:-1] if text.endswith("\r") else text
            for piece in text.split("\r") if "\r" in text else (text,):
                yield number, piece
                number += 1


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc)


# --------------------------------------------------------------------------- JSON


class _JSONValueError(ValueError):
    """A JSON value rageval refuses (a repeated key, NaN, a number out of range)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _JSONValueError(f"key '{key}' appears twice in one object (JSON keeps only the last)")
        out[key] = value
    return out


def _no_constant(name: str) -> float:
    raise _JSONValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _JSONValueError(f"number {text[:40]} is out of range")
    return value


def parse_json(text: str, file: str, line: int | None = None) -> Any:
    """One JSON value; raises :class:`InputError` naming the file and line (and column) of what is
    wrong: malformed JSON, a repeated key, ``NaN``/``Infinity``, a lone surrogate escape."""
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant, parse_float=_finite)
    except json.JSONDecodeError as exc:
        where = (line or 1) + exc.lineno - 1
        raise InputError(
            Problem(file=file, line=where, message=f"malformed JSON: {exc.msg} at column {exc.colno}")
        ) from None
    except _JSONValueError as exc:
        raise InputError(Problem(file=file, line=line or 1, message=str(exc), fix="write valid JSON")) from None
    except ValueError as exc:  # an integer with more digits than Python converts
        raise InputError(Problem(file=file, line=line or 1, message=f"malformed JSON: {exc}")) from None
    except RecursionError:
        raise InputError(Problem(file=file, line=line or 1, message="JSON nested too deeply")) from None
    if "\\u" in text and not _encodable(value):
        raise InputError(
            Problem(
                file=file,
                line=line or 1,
                message="a \\u escape that is not a character (a lone UTF-16 surrogate such as \\ud800)",
                fix="escape characters outside the basic plane as a surrogate pair, or write them as UTF-8",
            )
        )
    return value


def _encodable(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return False
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


def read_json(path: Path, error: type[InputError] = InputError, file: str | None = None) -> Any:
    """A file holding one JSON value; every failure raises ``error`` naming the file and line."""
    file = str(path) if file is None else file
    try:
        return parse_json(read_text(path, InputError, file), file)
    except InputError as exc:
        raise error(exc.problems) from None


def read_jsonl(path: Path, file: str | None = None) -> tuple[list[tuple[int, dict[str, Any]]], list[Problem]]:
    """Read a JSON-lines file: (line number, object) pairs and a problem per malformed line (one for
    a file that cannot be read or is not UTF-8). Blank lines are skipped."""
    problems: list[Problem] = []
    rows = list(iter_jsonl(path, problems, file))
    return rows, problems


def iter_jsonl(path: Path, problems: list[Problem], file: str | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """:func:`read_jsonl`, streamed: each (line number, object) as it is read; problems added to ``problems``."""
    file = str(path) if file is None else file
    for number, raw in read_lines(path, problems, file):
        if not raw.strip():
            continue
        try:
            value = parse_json(raw, file, number)
        except InputError as exc:
            problems.extend(exc.problems)
            continue
        if not isinstance(value, dict):
            problems.append(
                Problem(
                    file=file,
                    line=number,
                    message=f"expected a JSON object, got {_json_type(value)}",
                    fix="write one JSON object {...} per line",
                )
            )
            continue
        yield number, value


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


# --------------------------------------------------------------------------- YAML


class _Refused(Exception):
    """A YAML document rageval refuses although YAML accepts it."""

    def __init__(self, line: int | None, message: str, fix: str, field: str | None = None) -> None:
        super().__init__(message)
        self.line, self.message, self.fix, self.field = line, message, fix, field


try:  # libyaml's parser where PyYAML has it: ten times faster, and it bounds nesting itself
    from yaml import CSafeLoader as _SafeLoader
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml import SafeLoader as _SafeLoader


class _Loader(_SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping (both lines named)."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # merged keys may be overridden: that is what a merge is for
            key = self.construct_object(key_node, deep=True)
            try:
                hash(key)
            except TypeError:
                continue  # an unhashable key: PyYAML itself refuses it below
            line = key_node.start_mark.line + 1
            if key in seen:
                lines = f"on line {line}" if seen[key] == line else f"on lines {seen[key]} and {line}"
                name = str(key) if len(str(key)) <= 60 else f"{str(key)[:50]}…"
                raise _Refused(
                    line,
                    f"key '{name}' is given twice ({lines})",
                    "keep one of them: YAML would silently use the last",
                    field=name,
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, TypeError, OverflowError) as exc:  # a date or a tagged value that does not exist
            raise _Refused(node.start_mark.line + 1, f"not a valid value: {exc}", "check the value") from None


def _children(node: Node) -> list[Node]:
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, SequenceNode):
        return list(node.value)
    return []


def _check_nodes(root: Node) -> None:
    """Refuse aliases that refer to themselves or expand the document beyond :data:`ALIAS_BUDGET`,
    and scalars holding lone surrogates or control characters. Linear in the nodes written."""
    sizes: dict[int, int] = {}
    on_path: set[int] = {id(root)}
    shared: Node | None = None
    stack: list[tuple[Node, Iterator[Node], int]] = [(root, iter(_children(root)), 1)]
    while stack:
        node, children, total = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            on_path.discard(id(node))
            sizes[id(node)] = total
            if isinstance(node, ScalarNode):
                _check_scalar(node)
            if stack:
                parent, rest, count = stack[-1]
                stack[-1] = (parent, rest, count + total)
            continue
        if id(child) in on_path:
            raise _Refused(
                child.start_mark.line + 1,
                "an alias refers to the anchor that contains it (a recursive document)",
                "write the values out",
            )
        if id(child) in sizes:
            shared = shared or child
            stack[-1] = (node, children, total + sizes[id(child)])
            continue
        if len(stack) >= DEPTH_LIMIT:
            raise _Refused(
                child.start_mark.line + 1, f"nested more than {DEPTH_LIMIT} levels deep", "flatten the document"
            )
        on_path.add(id(child))
        stack.append((child, iter(_children(child)), 1))
    expanded, written = sizes[id(root)], len(sizes)
    if expanded - written > ALIAS_BUDGET:
        where = shared.start_mark.line + 1 if shared is not None else None
        raise _Refused(
            where,
            f"anchors and aliases expand the document's {written} values to {expanded}; "
            f"rageval accepts at most {ALIAS_BUDGET} more than are written",
            "write the values out, or reuse fewer anchors",
        )


def _check_scalar(node: ScalarNode) -> None:
    value = node.value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _Refused(
            node.start_mark.line + 1,
            "a \\u escape that is not a character (a lone UTF-16 surrogate such as \\ud800)",
            "write the character itself, or escape it with \\U and eight digits",
        ) from None
    control = _CONTROL.search(value)
    if control:
        raise _Refused(
            node.start_mark.line + 1,
            f"a control character (U+{ord(control.group()):04X}) in a value",
            "remove it: no rageval value holds control characters",
        )


def _key_lines(root: Node) -> Lines:
    """Each key path of the document (keys and list positions) → its 1-based line. Walks what the
    aliases expand to, which :func:`_check_nodes` has bounded."""
    lines: Lines = {}
    stack: list[tuple[Node, tuple[Any, ...]]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, MappingNode):
            for key, value in node.value:
                if not isinstance(key, ScalarNode):
                    continue
                line = key.start_mark.line + 1
                if re.fullmatch(r"-?[0-9]+", key.value):
                    lines.setdefault(path + (int(key.value),), line)
                lines.setdefault(path + (key.value,), line)
                stack.append((value, path + (key.value,)))
        elif isinstance(node, SequenceNode):
            for index, item in enumerate(node.value):
                lines.setdefault(path + (index,), item.start_mark.line + 1)
                stack.append((item, path + (index,)))
    return lines


def parse_yaml(
    text: str, file: str, error: type[InputError] = InputError, field: str | None = None
) -> tuple[Any, Lines]:
    """One YAML document and the line of each key path; every problem raises ``error`` naming the
    file (and ``field``, for a value given on the command line) and the line."""

    def refuse(line: int | None, message: str, fix: str | None = None, where: str | None = None) -> InputError:
        return error(Problem(file=file, line=line, field=where or field, message=message, fix=fix))

    depth = 0
    for bracket in re.finditer(r"[\[\]{}]", text):  # PyYAML's own scanner is quadratic in flow depth
        depth += 1 if bracket.group() in "[{" else -1
        if depth > DEPTH_LIMIT:
            line = text.count("\n", 0, bracket.start()) + 1
            raise refuse(line, f"nested more than {DEPTH_LIMIT} levels deep", "flatten the document")
    try:
        loader = _Loader(text)
    except yaml.YAMLError as exc:  # the reader: a character YAML does not allow
        raise _reader_problem(exc, text, refuse) from None
    try:
        root = loader.get_single_node()
        if root is None:
            return None, {}
        _check_nodes(root)
        lines = _key_lines(root)  # before construction: merge keys rewrite the nodes
        data = loader.construct_document(root)
    except _Refused as exc:
        raise refuse(exc.line, exc.message, exc.fix, exc.field) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "syntax error"
        raise refuse(mark.line + 1 if mark else None, f"not valid YAML: {problem}") from None
    except yaml.YAMLError as exc:  # the reader: a character YAML does not allow
        raise _reader_problem(exc, text, refuse) from None
    except RecursionError:
        raise refuse(None, "nested too deeply", "flatten the document") from None
    finally:
        loader.dispose()
    return data, lines


def _reader_problem(exc: yaml.YAMLError, text: str, refuse: Any) -> InputError:
    position = getattr(exc, "position", None)
    line = text.count("\n", 0, position) + 1 if isinstance(position, int) else None
    character = getattr(exc, "character", None)
    if isinstance(character, int):
        return refuse(line, f"the character U+{character:04X} is not allowed in YAML", "remove it")
    return refuse(line, f"not valid YAML: {exc}", "check the file")


def read_yaml(path: Path, error: type[InputError]) -> tuple[Any, Lines]:
    """Parse a YAML file (see :func:`parse_yaml`); every problem raises ``error`` naming the file and line."""
    return parse_yaml(read_text(path, error), str(path), error)
