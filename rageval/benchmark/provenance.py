"""Where a case's query came from and the terms of its use: the optional ``provenance`` block.

A case may carry ``provenance`` in ``cases.jsonl``; ``benchmark.yaml`` may carry a default one that
every case without its own inherits (a case's block replaces the default as a whole: no field
merge, so each block reads complete on its own). The block records references, never content:

- ``source``: one of :data:`SOURCES`; the kinds in :data:`USER_RECORD_SOURCES` are records of real
  users, whose use needs ``authorization`` (the reference of the approval: a DPA, a ticket);
- ``redaction``: the rule set's name and version (and the types it removed), never the removed text;
- ``retention``: the date after which the case may not be used: past it, validation fails until
  the case is retired (dropped in a new version, its changelog entry ``retired``);
- ``access``: who may see the raw record (roles or groups).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, Field, StrictStr, model_validator

from rageval.errors import Problem
from rageval.validation import Strict

# One source for the list of sources (the CLI, the docs and the diagnostics read it).
Source = Literal[
    "search-log",
    "support",
    "failed-navigation",
    "incident",
    "acceptance",
    "expert-written",
    "synthetic",
    "heading-generated",
]
SOURCES: tuple[str, ...] = get_args(Source)
# Records of real users (search logs, support tickets, failed navigation, incident reviews).
USER_RECORD_SOURCES: tuple[str, ...] = ("search-log", "support", "failed-navigation", "incident")
# A reference or a name: no spaces and no '@', so neither prose nor an e-mail address fits.
_REFERENCE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/#+-]{0,79}")


def _reference(value: str) -> str:
    # Nine digits in a row read as a phone, card or account number, not as an ID.
    if not _REFERENCE.fullmatch(value) or re.search(r"\d{9}", value):
        raise ValueError(
            "looks like text, not a reference (spaces, '@' or other characters, nine digits in a row, or over "
            "80 characters): "
            "record the name or ID of a rule set, approval or group, never the removed or raw text"
        )
    return value


Reference = Annotated[StrictStr, AfterValidator(_reference)]


class Redaction(Strict):
    """The redaction a query went through: which rules, which version, which types they removed."""

    rules: Reference = Field(description="the rule set's name, e.g. presidio-default")
    version: Reference
    types: list[Reference] = Field(default_factory=list, description="what was removed, e.g. email, phone")

    @model_validator(mode="before")
    @classmethod
    def _no_removed_text(cls, data: Any) -> Any:
        if isinstance(data, dict):
            extra = [key for key in data if key not in cls.model_fields]
            if extra:
                raise ValueError(
                    f"unknown key {', '.join(repr(k) for k in extra)}: a redaction records its rules, version and "
                    "types, never the removed text; keep only rules, version, types"
                )
        return data


class Provenance(Strict):
    """Where a query came from and the terms of its use (see the module's docstring)."""

    source: Source
    authorization: Reference | None = Field(default=None, description="the approval that allows this use")
    redaction: Redaction | None = None
    retention: dt.date | None = Field(default=None, strict=False, description="not used after this date")
    access: list[Reference] | None = Field(default=None, min_length=1, description="who may see the raw record")


def provenance_problems(provenance: Provenance, *, file: str, line: int | None, field: str) -> list[Problem]:
    """What a block's fields cannot say alone: a user-record source needs its authorization."""
    if provenance.source in USER_RECORD_SOURCES and provenance.authorization is None:
        return [
            Problem(
                file=file,
                line=line,
                field=f"{field}.authorization",
                message=f"source '{provenance.source}' is a record of real users, but no authorization is named",
                fix="add `authorization`: the reference of the approval that allows this use (e.g. DPA-2026-014)",
            )
        ]
    return []


def expired(provenance: Provenance | None, today: dt.date) -> bool:
    """Past its retention date (the date itself is the last day of use)."""
    return provenance is not None and provenance.retention is not None and provenance.retention < today


def retention_problems(
    cases: Iterable[tuple[int, Any]],
    default: Provenance | None,
    today: dt.date,
    *,
    cases_file: str,
    spec_file: str,
    spec_line: int | None,
) -> list[Problem]:
    """One problem per case past its own retention date, and one for the cases past the default's."""
    fix = (
        "retire it: `rageval benchmark new-version`, drop the case from the new cases.jsonl, "
        "`rageval benchmark log-change NEW retired --case ID --reason ...`; "
        "or, where the authorization was renewed, record the new date"
    )
    problems: list[Problem] = []
    inherited: list[str] = []
    for line, case in cases:
        if case.provenance is None:
            if expired(default, today):
                inherited.append(case.queryId)
        elif expired(case.provenance, today):
            problems.append(
                Problem(
                    file=cases_file,
                    line=line,
                    field="provenance.retention",
                    message=f"case '{case.queryId}' is past its retention date {case.provenance.retention} "
                    f"(today is {today}): it may no longer be used",
                    fix=fix,
                )
            )
    if inherited and default is not None:
        shown = ", ".join(inherited[:5]) + (f" and {len(inherited) - 5} more" if len(inherited) > 5 else "")
        problems.append(
            Problem(
                file=spec_file,
                line=spec_line,
                field="provenance.retention",
                message=f"{len(inherited)} case(s) inherit the retention date {default.retention}, which is past "
                f"(today is {today}): {shown}",
                fix=fix.replace("the case", "the cases"),
            )
        )
    return problems
