"""Relevance judging: pools from runs, blind assessor sheets, imported labels and adjudication.

The way judgments travel::

    runs' rankings ─ pool ─▶ pool.json (provenance) + sheet.csv / sheet.jsonl (blind, seeded order)
    assessors fill copies of the sheet ─ import_sheets ─▶ labels.jsonl ─ evaluation.agreement ─▶ report
    labels + adjudication file ─ adjudicate ─▶ a new benchmark version with the new judgments

An *item* is one (case, unit) pair, where the unit is the benchmark's relevance unit: a passage
(a chunk's character span in its parent document) or a whole document. Its ID is a hash of the
pair, so the sheet says nothing about which system, chunking or rank found it; that provenance
stays in ``pool.json``.

One module per step: :mod:`~rageval.judging.pooling` (pool, targeted-search items),
:mod:`~rageval.judging.sheets` (pool and sheets on disk, labels in and out),
:mod:`~rageval.judging.adjudication` (verdicts, the new version); the files' models are in
:mod:`~rageval.judging.schema`.
"""

from __future__ import annotations

from rageval.judging.adjudication import Verdict, adjudicate, read_adjudication, verdicts
from rageval.judging.pooling import Pool, chunking_of, item_id, pool, read_extra, rubric_text
from rageval.judging.schema import (
    LABELS_FILE,
    POOL_FILE,
    SHEET_COLUMNS,
    SHEET_CSV,
    SHEET_JSONL,
    AdjudicationRow,
    ExtraItem,
    Found,
    LabelRecord,
    PoolItem,
    PoolManifest,
    SheetRow,
)
from rageval.judging.sheets import LABEL_COLUMNS, import_sheets, read_labels, read_pool, write_labels, write_pool

__all__ = [
    "LABELS_FILE",
    "LABEL_COLUMNS",
    "POOL_FILE",
    "SHEET_COLUMNS",
    "SHEET_CSV",
    "SHEET_JSONL",
    "AdjudicationRow",
    "ExtraItem",
    "Found",
    "LabelRecord",
    "Pool",
    "PoolItem",
    "PoolManifest",
    "SheetRow",
    "Verdict",
    "adjudicate",
    "chunking_of",
    "import_sheets",
    "item_id",
    "pool",
    "read_adjudication",
    "read_extra",
    "read_labels",
    "read_pool",
    "rubric_text",
    "verdicts",
    "write_labels",
    "write_pool",
]
