"""The strict base of every user-written model, and the glue that turns pydantic's validation errors
into :class:`~rageval.errors.Problem` values naming file, line and field.

Every package's models (benchmark files, stage configs, run configurations, policies, sheets) derive
from :class:`Strict`: unknown keys are errors, values are not coerced, models are frozen.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import cache, partial
from typing import Annotated, Any, TypeVar, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError

from rageval.errors import Problem


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


Slug = Annotated[StrictStr, Field(min_length=1)]
Sha256 = Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")]

# --------------------------------------------------------------------------- error locations

_FIXES = {
    "extra_forbidden": "remove it or check its spelling",
    "missing": "add it",
}


def field_path(loc: tuple[Any, ...]) -> str:
    """``('relevant', 0, 'grade')`` → ``relevant[0].grade``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def tagged_models(model: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """The members of every discriminated union reachable from ``model``, by tag value
    (``{"bm25": BM25Config, ...}``): pydantic puts the tag into error locations, users never wrote it."""
    out: dict[str, type[BaseModel]] = {}
    seen: set[type[BaseModel]] = set()

    def visit(annotation: Any, discriminator: str | None = None) -> None:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if discriminator is not None:
                tag = get_args(annotation.model_fields[discriminator].annotation)
                if tag:
                    out[str(tag[0])] = annotation
            if annotation not in seen:
                seen.add(annotation)
                for info in annotation.model_fields.values():
                    visit(info.annotation, info.discriminator if isinstance(info.discriminator, str) else None)
            return
        if get_origin(annotation) is Annotated:
            inner, *extra = get_args(annotation)
            found = next((m.discriminator for m in extra if isinstance(getattr(m, "discriminator", None), str)), None)
            visit(inner, found or discriminator)
            return
        for arg in get_args(annotation):
            visit(arg, discriminator)

    visit(model)
    return out


def problems_from_validation(
    error: ValidationError,
    *,
    file: str,
    line: int | None = None,
    model: type[BaseModel],
    lines: dict[tuple[Any, ...], int] | None = None,
    prefix: tuple[Any, ...] = (),
) -> list[Problem]:
    """Turn ``model``'s validation error into problems; an unknown key's fix lists the keys allowed
    there. ``lines`` maps a key path to its line in a YAML file."""
    allowed = allowed_keys(model)
    problems = []
    tags = tagged_models(model)
    for err in error.errors(include_url=False):
        # A tagged union puts its tag ('bm25') into the location; users never wrote it.
        raw = tuple(err["loc"])
        tagged = [p for i, p in enumerate(raw) if p in tags and i and isinstance(raw[i - 1], int)]
        loc = prefix + tuple(p for i, p in enumerate(raw) if not (p in tags and i and isinstance(raw[i - 1], int)))
        kind = err["type"]
        where = line if line is not None or loc else 1  # a problem of the whole document: its start
        if lines is not None:
            for depth in range(len(loc), 0, -1):
                if loc[:depth] in lines:
                    where = lines[loc[:depth]]
                    break
        if kind == "extra_forbidden":
            message = f"unknown key '{loc[-1]}'"
            fix = _FIXES[kind]
            path = re.sub(r"\[\d+\]", "", field_path(loc[len(prefix) : -1]))
            # A mapping of models (a gate's measures) lists its value model's keys under the mapping's own path.
            keys = allowed.get(path) or allowed.get(path.rpartition(".")[0])
            if tagged and isinstance(loc[-2], int):  # a stage's own key: list that stage type's keys
                keys = list(tags[tagged[-1]].model_fields)
            if keys:
                fix = f"allowed keys here: {', '.join(keys)}"
        elif kind == "missing":
            message = "missing required key"
            fix = _FIXES[kind]
        else:
            message = err["msg"].removeprefix("Value error, ")
            if "input" in err and kind not in ("value_error",) and not isinstance(err["input"], (dict, list)):
                message += f" (got {shorten(repr(err['input']))})"
            fix = None
        problems.append(Problem(file=file, line=where, field=field_path(loc) or None, message=message, fix=fix))
    return problems


M = TypeVar("M", bound=BaseModel)


def validated(
    data: Any,
    lines: dict[tuple[Any, ...], int],
    file: str,
    model: type[M],
    error: type[Exception],
    *,
    what: str = "keys",
) -> M:
    """A parsed YAML document (``read_yaml``'s data and key lines) validated as ``model``. Not a
    mapping, or not valid, raises ``error`` with every problem naming the file, line and field."""
    if not isinstance(data, dict):
        raise error(Problem(file=file, line=1, message=f"expected a mapping of {what}"))
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise error(problems_from_validation(exc, file=file, model=model, lines=lines)) from None


@cache
def allowed_keys(model: type[BaseModel]) -> dict[str, list[str]]:
    """The keys allowed at each path of ``model`` (``""``, ``"relevant"``, ``"retrieval.stages"``…),
    found by walking its nested models, list items and unions included."""
    out: dict[str, list[str]] = {}

    def models_in(annotation: Any) -> list[type[BaseModel]]:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return [annotation]
        return [found for arg in get_args(annotation) for found in models_in(arg)]

    def walk(current: type[BaseModel], path: str) -> None:
        keys = [info.alias or name for name, info in current.model_fields.items()]
        out.setdefault(path, []).extend(k for k in keys if k not in out.get(path, []))
        for name, info in current.model_fields.items():
            for nested in models_in(info.annotation):
                key = info.alias or name
                walk(nested, f"{path}.{key}" if path else key)

    walk(model, "")
    return out


# --------------------------------------------------------------------------- MLflow keys

# MLflow keys allow letters, digits, '_', '-', '.', ' ', ':' and '/', at most 250 characters, and
# refuse a key that reads as another path ('a/./b', 'a/../b'). Everything a user names that becomes
# part of a key is written so that it reads well and can be read back exactly: characters MLflow
# allows stay as they are ('_', ' ' and ':' included), '@' becomes '_at_' (MLflow's own convention:
# precision_at_k), the characters measure syntax and sweep labels use become words ('=' '_eq_',
# ',' '_and_', '(' '_of_', ')' '_end', '/' '_per_'), anything else '_uXXXX_' (its code point).
# A literal '_' that would start one of those words is itself written '_u005f_', so decoding is
# unambiguous. Measure names, slice labels, stage names and run labels all go through this pair.
KEY_LENGTH = 250
_KEY_CHARS = re.compile(r"[A-Za-z0-9.\- :]")
_WORDS = {"@": "_at_", "=": "_eq_", ",": "_and_", "(": "_of_", ")": "_end", "/": "_per_"}
_TOKEN = re.compile("|".join(re.escape(w) for w in _WORDS.values()) + r"|_u([0-9a-f]{4,6})_")
_CHARS = {word: char for char, word in _WORDS.items()}


def metric_key(text: str) -> str:
    """``nDCG@10`` → ``nDCG_at_10``, ``k1=1.2,b=0.75`` → ``k1_eq_1.2_and_b_eq_0.75``: ``text`` as a
    part of an MLflow key, readable and reversible (:func:`key_text` undoes it)."""
    out = ""  # built from the end: whether a literal '_' needs escaping depends on what follows it
    for char in reversed(text):
        if char == "_":
            out = ("_u005f_" if _TOKEN.match("_" + out) else "_") + out
        elif char in _WORDS:
            out = _WORDS[char] + out
        elif _KEY_CHARS.match(char):
            out = char + out
        else:
            out = f"_u{ord(char):04x}_" + out
    return out


def key_text(key: str) -> str:
    """``nDCG_at_10`` → ``nDCG@10``: the text :func:`metric_key` wrote."""

    def undo(match: re.Match[str]) -> str:
        code = match.group(1)
        return chr(int(code, 16)) if code else _CHARS[match.group(0)]

    return _TOKEN.sub(undo, key)


def key_part_problem(text: str, room: int) -> str | None:
    """Why ``text`` cannot be one ``/``-separated part of an MLflow key that leaves ``room``
    characters for the rest of the key (completing "'text' …"), or None."""
    key = metric_key(text)
    if key in (".", ".."):
        return "would read as a folder in an MLflow key (MLflow refuses it)"
    if len(key) > KEY_LENGTH - room:
        return f"is {len(key)} characters long as a part of an MLflow key, more than the {KEY_LENGTH - room} that fit"
    return None


def shorten(text: str, limit: int = 80) -> str:
    """``text`` cut to ``limit`` characters, marked where cut: a huge value never floods a message."""
    return text if len(text) <= limit else f"{text[: limit - 12]}… ({len(text)} characters)"


# --------------------------------------------------------------------------- rows of a file

Row = TypeVar("Row", bound=BaseModel)
# Places a problem at a file and line: called with field, message and fix.
At = Callable[..., Problem]


def valid_rows(
    rows: Iterable[tuple[int, dict[str, Any]]],
    model: type[Row],
    file: str,
    problems: list[Problem],
    integers: Sequence[str] = (),
    check: Callable[[Row, At], Problem | None] | None = None,
) -> Iterator[tuple[int, Row]]:
    """Each row that validates as ``model`` and passes ``check``, with its line; the problems of
    the others go to ``problems``. Lazily: a row is validated and checked only once the caller has
    handled the one before, so problems stay in line order and ``check`` sees what the caller
    recorded of earlier rows (a duplicate is found against them)."""
    for line, value in rows:
        try:
            row = model.model_validate(integer_cells(value, integers))
        except ValidationError as exc:
            problems.extend(problems_from_validation(exc, file=file, line=line, model=model))
            continue
        wrong = check(row, partial(Problem, file=file, line=line)) if check else None
        if wrong:
            problems.append(wrong)
            continue
        yield line, row


_WHOLE = re.compile(r"\s*-?[0-9]{1,18}\s*")


def integer_cells(value: dict[str, Any], fields: Sequence[str]) -> dict[str, Any]:
    """CSV cells are text: whole numbers (ASCII digits) in integer fields become integers; anything
    else (``2.0``, ``٣``, ``1_0``) stays text and fails validation, never read as another number."""
    out = dict(value)
    for name in fields:
        cell = out.get(name)
        if isinstance(cell, str) and _WHOLE.fullmatch(cell):
            out[name] = int(cell.strip())
    return out


def absent_columns(frame: Any, needed: Iterable[str]) -> list[str]:
    """The ``needed`` columns a table (a DataFrame) lacks, in the order asked: the one check every
    reader of runs and rankings makes before it trusts a frame's layout."""
    present = set(frame.columns)
    return [name for name in needed if name not in present]
