"""The labeling view: a local page on 127.0.0.1 over an assessor sheet (``rageval judge label-view``).

The assessor reads an item's document with the pooled passage highlighted, selects the evidence
with the mouse, picks a grade of the pool's rubric, adds a note and saves. The server checks the
label (offsets inside the document, the grade in the rubric, an assessor named) and rewrites the
sheet atomically in its own format, CSV (:func:`~rageval.judging.sheets.sheet_csv`) or JSONL, so
that ``rageval judge import`` reads it back: before a save replaces the file, the new sheet must
pass :func:`~rageval.judging.sheets.import_sheets`. Offsets are Python string indices (code
points); the page converts its selection to them. Every text reaches the page as JSON and is set
as text (``textContent``), never as HTML.

The same page reviews a label-migration file (``chunk-labels-<hash>.jsonl``, see
:mod:`rageval.benchmark.migration`): each proposed chunk label is shown in its document with the
judged span it came from, and the reviewer accepts or rejects it, or changes its grade
(:class:`ReviewSheet`).
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.resources import files
from pathlib import Path
from typing import Any, Literal

from pydantic import StrictInt, StrictStr, ValidationError

from rageval.benchmark.loading import load_benchmark
from rageval.benchmark.migration import REVIEW_PREFIX, read_review, record_decision
from rageval.benchmark.schema import Document
from rageval.csvfiles import read_table
from rageval.errors import BenchmarkError, InputError, Problem
from rageval.judging.schema import POOL_FILE, PoolManifest, SheetRow, valid_rows
from rageval.judging.sheets import SHEET_INTEGERS, import_sheets, read_pool, restored, sheet_csv
from rageval.validation import Strict, problems_from_validation, shorten

HOST = "127.0.0.1"
PAGE = "labelview.html"
MAX_BODY = 1_000_000  # bytes of one save request


class Label(Strict):
    """What the page sends on Save: one assessor's label of one item."""

    assessor: StrictStr
    grade: StrictInt
    notes: StrictStr = ""
    start: StrictInt
    end: StrictInt


class Decision(Strict):
    """What the page sends on Save in a migration review: one reviewer's decision on one row."""

    assessor: StrictStr  # the reviewer
    grade: StrictInt
    notes: StrictStr = ""
    decision: Literal["accept", "reject"]


@dataclass(frozen=True)
class SheetSource:
    """Where a labeling session reads and writes: the sheet, its pool and the benchmark folder."""

    sheet: Path
    pool: Path | None = None
    benchmark: Path | None = None


class LabelSheet:
    """An assessor sheet on disk with its pool and the pooled documents; :meth:`save` rewrites it."""

    def __init__(self, source: SheetSource) -> None:
        self.path = source.sheet
        pool = source.pool or source.sheet.parent / POOL_FILE
        if not pool.exists():
            fix = "keep the sheet beside its pool.json, or give --pool"
            raise InputError(Problem(file=str(pool), message="no pool here", fix=fix))
        self.manifest: PoolManifest = read_pool(pool)
        benchmark = load_benchmark(source.benchmark or self.manifest.path, retention=False)
        self.documents: Mapping[str, Document] = benchmark.documents
        self.rows = read_sheet(self.path)
        self._lock = threading.Lock()

    def summary(self) -> dict[str, Any]:
        """The sheet's items (ID, case, query, grade so far) and the rubric, for the item list."""
        self.rows = read_sheet(self.path)
        items = [
            {"itemId": r.itemId, "queryId": r.queryId, "query": r.query or "", "title": r.title or "", "grade": r.grade}
            for r in self.rows
        ]
        rubric = [{"grade": g, "text": t} for g, t in sorted(self.manifest.rubric.items())]
        return {"sheet": str(self.path), "mode": "label", "items": items, "rubric": rubric}

    def save_json(self, item_id: str, body: bytes) -> dict[str, Any]:
        row = self.save(item_id, _parsed(Label, body))
        return {"saved": row.model_dump(mode="json"), "sheet": str(self.path)}

    def item(self, item_id: str) -> dict[str, Any]:
        """One item as the page shows it: the query, the whole document, the pooled span, the label so far."""
        row = self._row(item_id)
        pooled = self.manifest.item(item_id)
        if pooled is None:
            raise InputError(
                Problem(file=str(self.path), field="itemId", message=f"item '{shorten(item_id)}' is not in the pool")
            )
        document = self.documents.get(pooled.documentId)
        if document is None:
            raise InputError(
                Problem(
                    file=str(self.manifest.path),
                    message=f"document '{shorten(pooled.documentId)}' of item '{shorten(item_id)}' "
                    "is not in the benchmark",
                    fix="give the benchmark the pool was made from (--benchmark)",
                )
            )
        start, end = pooled.start or 0, len(document.text) if pooled.end is None else pooled.end
        return {
            **row.model_dump(mode="json", include={"itemId", "queryId", "query", "assessor", "grade", "notes"}),
            "documentId": document.id,
            "title": document.title or "",
            "text": document.text,
            "pooled": [start, end],
            "selected": [row.start, row.end] if row.start is not None and row.end is not None else [start, end],
        }

    def save(self, item_id: str, label: Label) -> SheetRow:
        """Write ``label`` into the item's row; the sheet on disk changes only if the new one imports."""
        item = self.item(item_id)
        if not 0 <= label.start < label.end <= len(item["text"]):
            raise InputError(
                Problem(
                    file=str(self.path),
                    field="start/end",
                    message=f"the selection {label.start}-{label.end} is not a span of the document "
                    f"(0-{len(item['text'])})",
                    fix="select some text of the document",
                )
            )
        with self._lock:  # the file as it is now: rows labelled elsewhere since the start are kept
            rows = [
                row.model_copy(update=label.model_dump()) if row.itemId == item_id else row
                for row in read_sheet(self.path)
            ]
            _write_checked(self.path, rows, self.manifest)
            self.rows = rows
        return self._row(item_id)

    def _row(self, item_id: str) -> SheetRow:
        found = next((row for row in self.rows if row.itemId == item_id), None)
        if found is None:
            raise InputError(
                Problem(file=str(self.path), field="itemId", message=f"no item '{shorten(item_id)}' in this sheet")
            )
        return found


def _parsed(model: type[Strict], body: bytes) -> Any:
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        raise InputError(problems_from_validation(exc, file="<label>", model=model)) from None


class ReviewSheet:
    """A label-migration review file (``chunk-labels-<hash>.jsonl`` in a benchmark folder) in the
    page: an item is a row, its passage the migrated chunk (yellow), its evidence the judged span
    the label came from (green); Save records accept or reject, the grade and a note
    (:func:`~rageval.benchmark.migration.record_decision`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        benchmark = load_benchmark(path.parent, retention=False)
        self.documents: Mapping[str, Document] = benchmark.documents
        self.queries = {case.queryId: case.query for case in benchmark.cases}
        self.rubric = dict(benchmark.spec.rubric)
        self.rows = [row for _, row in read_review(path)]
        self._lock = threading.Lock()  # one save at a time: each rewrites the whole file

    def summary(self) -> dict[str, Any]:
        self.rows = [row for _, row in read_review(self.path)]
        items = [
            {
                "itemId": f"row-{n + 1}",
                "queryId": row.queryId,
                "query": self.queries.get(row.queryId, ""),
                "title": f"{row.chunkId} ({row.status}{', ' + row.decision if row.decision else ''})",
                "grade": row.grade if row.status == "reviewed" else None,
            }
            for n, row in enumerate(self.rows)
        ]
        rubric = [{"grade": g, "text": t} for g, t in sorted(self.rubric.items())]
        return {"sheet": str(self.path), "mode": "review", "items": items, "rubric": rubric}

    def _position(self, item_id: str) -> int:
        number = item_id.removeprefix("row-")
        if not number.isdigit() or not 0 < int(number) <= len(self.rows):
            raise InputError(Problem(file=str(self.path), message=f"no row '{shorten(item_id)}' in this review"))
        return int(number) - 1

    def item(self, item_id: str) -> dict[str, Any]:
        row = self.rows[self._position(item_id)]
        document = self.documents.get(row.documentId)
        if document is None:
            message = f"document '{shorten(row.documentId)}' is not in the benchmark"
            raise InputError(Problem(file=str(self.path), message=message, fix="run `rageval migrate-labels` again"))
        source = next((s for s in row.sources if s.start is not None and s.end is not None), None)
        evidence = [source.start, source.end] if source else [0, len(document.text)]
        return {
            "itemId": item_id,
            "queryId": row.queryId,
            "query": self.queries.get(row.queryId, ""),
            "assessor": row.reviewer,
            "grade": row.grade,
            "notes": row.note or "",
            "decision": row.decision,
            "documentId": document.id,
            "title": f"{document.title or ''} · chunk {row.chunkId}, overlap {row.overlap:.2f}",
            "text": document.text,
            "pooled": [row.start, row.end],
            "selected": evidence,
        }

    def save_json(self, item_id: str, body: bytes) -> dict[str, Any]:
        decision = _parsed(Decision, body)
        where = Problem(file=str(self.path), line=self._position(item_id) + 1, message="")
        if decision.grade not in self.rubric:
            grades = ", ".join(map(str, sorted(self.rubric)))
            message = f"grade {decision.grade} is outside the rubric ({grades})"
            raise InputError(replace(where, field="grade", message=message, fix="pick a grade of the rubric"))
        if not decision.assessor.strip():
            raise InputError(
                replace(where, field="reviewer", message="a decision without a reviewer", fix="write your name")
            )
        position = self._position(item_id)
        update = {"decision": decision.decision, "grade": decision.grade, "reviewer": decision.assessor.strip()}
        proposal = self.rows[position].model_copy(update={**update, "note": decision.notes or None})
        try:
            with self._lock:
                saved = record_decision(self.path, position, proposal)
        except BenchmarkError as exc:
            raise InputError(exc.problems) from None
        self.rows[position] = saved
        return {"saved": saved.model_dump(mode="json"), "sheet": str(self.path)}


def open_sheet(source: SheetSource) -> LabelSheet | ReviewSheet:
    """The labeling session for ``source``: a migration review file, or an assessor sheet."""
    if source.sheet.name.startswith(REVIEW_PREFIX) and source.sheet.suffix == ".jsonl":
        return ReviewSheet(source.sheet)
    return LabelSheet(source)


def read_sheet(path: Path) -> list[SheetRow]:
    """The rows of a sheet (CSV or JSONL) as written or filled so far; every bad row is reported."""
    rows, problems = read_table(path)
    if path.suffix == ".csv":
        rows = [(line, {key: restored(value) for key, value in row.items()}) for line, row in rows]
    valid = [row for _, row in valid_rows(rows, SheetRow, str(path), problems, integers=SHEET_INTEGERS)]
    if not valid and not problems:
        problems.append(
            Problem(file=str(path), message="the sheet has no rows", fix="give a sheet `rageval judge pool` wrote")
        )
    if problems:
        raise BenchmarkError(problems)
    return valid


def sheet_bytes(rows: list[SheetRow], suffix: str) -> bytes:
    """A sheet in the format of its file: CSV made safe for spreadsheets, or JSON lines."""
    if suffix == ".csv":
        return sheet_csv(rows)
    return "".join(json.dumps(row.model_dump(mode="json"), ensure_ascii=False) + "\n" for row in rows).encode()


def _write_checked(path: Path, rows: list[SheetRow], manifest: PoolManifest) -> None:
    """Write ``rows`` beside ``path``, import them as ``judge import`` would, then replace ``path``."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=path.suffix)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(sheet_bytes(rows, path.suffix))
        try:
            import_sheets(manifest, [temporary])
        except BenchmarkError as exc:
            raise InputError([replace(p, file=str(path)) for p in exc.problems]) from None
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


# --------------------------------------------------------------------------- the server


def serve(sheet: LabelSheet | ReviewSheet, port: int = 0) -> ThreadingHTTPServer:
    """A server for ``sheet`` on 127.0.0.1 (``port`` 0: a free one); call ``serve_forever`` on it."""
    handler = type("Handler", (_Handler,), {"sheet": sheet})
    return ThreadingHTTPServer((HOST, port), handler)


class _Handler(BaseHTTPRequestHandler):
    sheet: LabelSheet | ReviewSheet

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        """Quiet: the CLI says where the page is; requests are not news."""

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        if self.path in ("/", "/index.html"):
            self._send(200, files("rageval.judging").joinpath(PAGE).read_bytes(), "text/html; charset=utf-8")
        elif self.path == "/api/sheet":
            self._json(200, self.sheet.summary())
        elif self.path.startswith("/api/items/"):
            self._answer(lambda: self.sheet.item(self.path.removeprefix("/api/items/")))
        else:
            self._json(404, {"problems": [f"no page {shorten(self.path)}"]})

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        if not self.path.startswith("/api/items/"):
            self._json(404, {"problems": [f"no page {shorten(self.path)}"]})
            return
        item_id = self.path.removeprefix("/api/items/")
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._json(413, {"problems": ["the request is too large"]})
            return
        self._answer(lambda: self._save(item_id, self.rfile.read(length)))

    def _save(self, item_id: str, body: bytes) -> dict[str, Any]:
        return self.sheet.save_json(item_id, body)

    def _answer(self, make: Any) -> None:
        try:
            self._json(200, make())
        except InputError as exc:
            self._json(400, {"problems": [str(p) for p in exc.problems]})

    def _json(self, status: int, body: dict[str, Any]) -> None:
        self._send(status, json.dumps(body, ensure_ascii=False).encode(), "application/json; charset=utf-8")

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)
