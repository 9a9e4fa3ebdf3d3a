"""The preprocessing steps of a documentation import: named, versioned, recorded in the benchmark.

Each step is one entry of :data:`STEPS` (its version and what it does); a benchmark lists the steps
that made its ``documents.jsonl`` as ``name/version`` (``benchmark.yaml``'s ``preprocessing``). A
step's version changes whenever its output for the same page would. The CLI's choices, the error
messages and docs/importing-docs.md all read this one dict.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, get_args

from rageval.errors import InputError, Problem


@dataclass(frozen=True)
class Step:
    version: int
    does: str

    def recorded(self, name: str) -> str:
        return f"{name}/{self.version}"


# In the order they are listed (they act on the token stream together, not one after another).
STEPS: dict[str, Step] = {
    "front-matter": Step(1, "YAML front matter becomes the page's title, acl, dates and metadata, not text"),
    "strip-heading-anchors": Step(1, "attribute lists ending a heading ({ #anchor }, {#id .class}) are dropped"),
    "expand-includes": Step(
        1, '{* path *} and --8<-- "path" are replaced by the file they name (code as a fenced block)'
    ),
    "admonitions-as-text": Step(
        1, "!!! kind \"Title\", ??? kind and /// kind | Title blocks become a 'Kind: Title' line and their body"
    ),
    "autodoc-as-text": Step(1, "mkautodoc / mkdocstrings lines (::: package.name) become the name they document"),
    "html-as-text": Step(1, "HTML blocks inside Markdown become their text; inline tags in prose are dropped"),
    "tables-as-rows": Step(1, "a table becomes one line per row: 'header: value; header: value'"),
    "tables-whole": Step(1, "a table is kept whole, as a Markdown pipe table"),
}
# The two ways a table can go; exactly one is recorded per import.
TableMode = Literal["rows", "whole"]
TABLE_MODES: tuple[str, ...] = get_args(TableMode)
TABLE_STEPS: dict[str, str] = {"rows": "tables-as-rows", "whole": "tables-whole"}
# Headings are always written as '# …' lines (setext headings included), so the chunker sees them.
ALWAYS = ("atx-headings/1",)


def chosen_steps(names: Iterable[str] | None, tables: str) -> tuple[str, ...]:
    """The step names an import applies: ``names`` (default: every step but the table steps) plus the
    table step ``tables`` names, in :data:`STEPS` order. An unknown name is an error listing the choices."""
    if tables not in TABLE_STEPS:
        raise InputError(
            Problem(
                file="--tables", message=f"unknown table mode '{tables}'", fix=f"use one of {', '.join(TABLE_MODES)}"
            )
        )
    choosable = [name for name in STEPS if name not in TABLE_STEPS.values()]
    wanted = set(choosable if names is None else names)
    unknown = sorted(wanted - set(choosable))
    if unknown:
        raise InputError(
            Problem(
                file="--steps",
                message=f"unknown step(s) {', '.join(unknown)}",
                fix=f"valid choices are {', '.join(choosable)} (tables: --tables {'|'.join(TABLE_MODES)})",
            )
        )
    wanted.add(TABLE_STEPS[tables])
    return tuple(name for name in STEPS if name in wanted)


def recorded(names: Iterable[str]) -> list[str]:
    """``name/version`` of each step, as benchmark.yaml lists them (the always-on heading step first)."""
    return [*ALWAYS, *(STEPS[name].recorded(name) for name in names)]


def from_record(record: Iterable[str]) -> tuple[tuple[str, ...], str] | None:
    """The step names and table mode a benchmark's recorded steps name, or None where a recorded step
    is unknown here or of another version (a re-import cannot repeat it)."""
    names = []
    for entry in record:
        if entry in ALWAYS:
            continue
        name, _, version = entry.partition("/")
        step = STEPS.get(name)
        if step is None or str(step.version) != version:
            return None
        names.append(name)
    tables = next((mode for mode, step in TABLE_STEPS.items() if step in names), "rows")
    return tuple(names), tables
