"""The files of judging as strict models: what assessors and adjudicators fill in (sheet rows,
adjudication rows, ``--add`` items), what rageval writes (``pool.json``, ``labels.jsonl``), and the
one loop that validates their rows with file and line."""

from __future__ import annotations

import datetime as dt
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import Field, StrictInt, StrictStr

from rageval.errors import Problem
from rageval.validation import At, Slug, Strict, integer_cells, valid_rows

__all__ = ["At", "integer_cells", "valid_rows"]  # re-exported: the row loop lives in rageval.validation

POOL_FILE = "pool.json"
SHEET_CSV = "sheet.csv"
SHEET_JSONL = "sheet.jsonl"
LABELS_FILE = "labels.jsonl"


class SheetRow(Strict):
    """One row of an assessment sheet (CSV or JSONL). An assessor fills ``assessor``, ``grade`` and
    ``notes``; the other columns are context and may be deleted. A row without a grade is skipped.
    ``start`` and ``end`` (optional) are the evidence the assessor selected, as character offsets
    in the item's document (``rageval judge label-view`` fills them)."""

    itemId: Slug
    queryId: Slug
    query: StrictStr | None = None
    title: StrictStr | None = None
    text: StrictStr | None = None
    rubric: StrictStr | None = None
    assessor: StrictStr | None = None
    grade: StrictInt | None = None
    notes: StrictStr | None = None
    start: StrictInt | None = Field(default=None, ge=0)
    end: StrictInt | None = Field(default=None, ge=0)

    @property
    def assessor_name(self) -> str:
        """The assessor column without surrounding blanks ('' where it is empty)."""
        return (self.assessor or "").strip()


SHEET_COLUMNS = list(SheetRow.model_fields)


class ExtraItem(Strict):
    """One line of a ``judge pool --add`` file: an item found by targeted human search."""

    queryId: Slug
    documentId: Slug
    start: StrictInt | None = Field(default=None, ge=0)
    end: StrictInt | None = Field(default=None, ge=0)
    note: StrictStr | None = None


class AdjudicationRow(Strict):
    """One row of an adjudication file (CSV or JSONL): the final grade of a pooled item, and
    optionally its evidence (``start``/``end`` in the item's document) where the assessors'
    selections differ."""

    itemId: Slug
    grade: StrictInt
    note: StrictStr | None = None
    start: StrictInt | None = Field(default=None, ge=0)
    end: StrictInt | None = Field(default=None, ge=0)


class LabelRecord(Strict):
    """One line of ``labels.jsonl`` (written by ``rageval judge import``)."""

    itemId: Slug
    queryId: Slug
    assessor: Slug
    grade: StrictInt
    notes: StrictStr = ""
    source: StrictStr = ""
    start: StrictInt | None = Field(default=None, ge=0, description="the evidence the assessor selected")
    end: StrictInt | None = Field(default=None, ge=0)


# --------------------------------------------------------------------------- pool manifest


class Found(Strict):
    """Where a pooled item came from: a run's key and rank, or a targeted-search file and line."""

    run: StrictStr
    rank: StrictInt | None = None


class PoolItem(Strict):
    itemId: Slug
    queryId: Slug
    documentId: Slug
    start: StrictInt | None = None
    end: StrictInt | None = None
    chunking: StrictStr | None = Field(default=None, description="hash of the chunking whose chunk this passage is")
    slice: list[StrictStr] = Field(default_factory=list)
    found: list[Found] = Field(min_length=1)


class PoolManifest(Strict):
    """``pool.json``: what was pooled from what; assessors never see it."""

    benchmark: Slug
    version: Slug
    cases: StrictStr = Field(description="sha256 of the benchmark's cases.jsonl")
    path: StrictStr = Field(description="the benchmark's folder when it was pooled")
    relevanceUnit: Literal["document", "passage"]
    split: Slug
    depth: StrictInt = Field(gt=0)
    seed: StrictInt
    created: dt.date = Field(strict=False)
    runs: list[StrictStr]
    rubric: dict[Annotated[int, Field(strict=False)], StrictStr]
    chunkings: dict[StrictStr, dict[StrictStr, Any]] = Field(default_factory=dict)
    items: list[PoolItem]

    @cached_property
    def _by_id(self) -> dict[str, PoolItem]:
        return {item.itemId: item for item in self.items}

    def item(self, item_id: str) -> PoolItem | None:
        return self._by_id.get(item_id)


# --------------------------------------------------------------------------- reading rows


def outside_rubric(grade: int, manifest: PoolManifest, at: At) -> Problem | None:
    """A grade the pool's rubric does not define, placed by ``at``; None for a rubric grade."""
    if grade in manifest.rubric:
        return None
    choices = ", ".join(str(g) for g in sorted(manifest.rubric))
    return at(field="grade", message=f"grade {grade} is outside the rubric", fix=f"use one of {choices}")
