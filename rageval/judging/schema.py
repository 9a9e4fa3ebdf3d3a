"""The files assessors and adjudicators fill in, as strict models."""

from __future__ import annotations

from pydantic import Field, StrictInt, StrictStr

from rageval.validation import Slug, Strict


class SheetRow(Strict):
    """One row of an assessment sheet (CSV or JSONL). An assessor fills ``assessor``, ``grade`` and
    ``notes``; the other columns are context and may be deleted. A row without a grade is skipped."""

    itemId: Slug
    queryId: Slug
    query: StrictStr | None = None
    title: StrictStr | None = None
    text: StrictStr | None = None
    rubric: StrictStr | None = None
    assessor: StrictStr | None = None
    grade: StrictInt | None = None
    notes: StrictStr | None = None


class ExtraItem(Strict):
    """One line of a ``judge pool --add`` file: an item found by targeted human search."""

    queryId: Slug
    documentId: Slug
    start: StrictInt | None = Field(default=None, ge=0)
    end: StrictInt | None = Field(default=None, ge=0)
    note: StrictStr | None = None


class AdjudicationRow(Strict):
    """One row of an adjudication file (CSV or JSONL): the final grade of a pooled item."""

    itemId: Slug
    grade: StrictInt
    note: StrictStr | None = None
