"""Judgment pooling, assessment sheets, label import and adjudication.

The way judgments travel::

    runs' rankings ─ pool ─▶ pool.json (provenance) + sheet.csv / sheet.jsonl (blind, seeded order)
    assessors fill copies of the sheet ─ import_sheets ─▶ labels.jsonl ─ evaluation.agreement ─▶ report
    labels + adjudication file ─ adjudicate ─▶ a new benchmark version with the new judgments

An *item* is one (case, unit) pair, where the unit is the benchmark's relevance unit: a passage
(a chunk's character span in its parent document) or a whole document. Its ID is a hash of the
pair, so the sheet says nothing about which system, chunking or rank found it; that provenance
stays in ``pool.json``.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import pandas as pd
from pydantic import Field, StrictInt, StrictStr, ValidationError

from rageval.benchmark.chunking import Chunk, chunk_document, chunk_qrels, config_hash
from rageval.benchmark.loading import Benchmark
from rageval.benchmark.schema import Case, ChangelogEntry, ChunkingConfig, Judgment
from rageval.errors import BenchmarkError, Problem
from rageval.io import read_jsonl, read_table
from rageval.judging.schema import AdjudicationRow, ExtraItem, SheetRow
from rageval.validation import Slug, Strict, problems_from_validation

POOL_FILE = "pool.json"
SHEET_CSV = "sheet.csv"
SHEET_JSONL = "sheet.jsonl"
LABELS_FILE = "labels.jsonl"
SHEET_COLUMNS = list(SheetRow.model_fields)
LABEL_COLUMNS = ["item_id", "query_id", "assessor", "grade", "notes", "source"]


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


@dataclass(frozen=True)
class Pool:
    """A pool: its manifest and its assessment sheet rows, in the seeded order."""

    manifest: PoolManifest
    sheet: list[SheetRow]


def item_id(query_id: str, document_id: str, start: int | None, end: int | None) -> str:
    """Stable and blind: the same pair gives the same ID in every pool, and the ID names no system."""
    digest = hashlib.sha256(f"{query_id}\t{document_id}\t{start}\t{end}".encode()).hexdigest()
    return f"i{digest[:11]}"


def chunking_of(chunk_id: str) -> str:
    """The chunking hash inside a chunk ID ``{parent}#{hash}-{position}``."""
    return chunk_id.rsplit("#", 1)[-1].rsplit("-", 1)[0]


def rubric_text(rubric: Mapping[int, str]) -> str:
    return "; ".join(f"{grade}: {text}" for grade, text in sorted(rubric.items()))


# --------------------------------------------------------------------------- pooling


def pool(
    rankings: Mapping[str, pd.DataFrame],
    benchmark: Benchmark,
    split: str,
    depth: int,
    extra: Sequence[tuple[int, ExtraItem]] | None = None,
    seed: int = 0,
    *,
    chunking: ChunkingConfig | Sequence[ChunkingConfig] = (),
    extra_file: str = "extra",
) -> Pool:
    """Pool the unjudged items of the top ``depth`` of each run's rankings (``RANKING_COLUMNS``),
    plus ``extra`` items from targeted search (see :func:`read_extra`).

    At passage level ``chunking`` gives the chunking(s) the runs used: a passage is a chunk's span
    of its parent, and a chunk counts as judged when the span judgments already grade it (as
    :func:`rageval.benchmark.chunking.chunk_qrels` derives). At document level an item is a parent document.
    """
    if depth <= 0:
        raise BenchmarkError(Problem(file="--depth", message=f"depth must be positive (got {depth})"))
    cases = {case.queryId: case for case in benchmark.cases_for(split)}
    passage = benchmark.spec.relevanceUnit == "passage"
    configs = [chunking] if isinstance(chunking, ChunkingConfig) else list(chunking)
    by_hash = {config_hash(config): config for config in configs}

    top = {name: _top(frame, name, depth, cases, split, passage) for name, frame in rankings.items()}
    chunks = _chunks_for(top, benchmark, by_hash) if passage else {}
    judged = chunk_qrels(cases.values(), chunks.values()) if passage else {}
    doc_qrels = benchmark.qrels(split)

    items: dict[str, dict[str, Any]] = {}
    titles: dict[str, str] = {}

    def add(
        query_id: str, document_id: str, start: int | None, end: int | None, found: Found, digest: str | None
    ) -> None:
        key = item_id(query_id, document_id, start, end)
        entry = items.setdefault(
            key,
            {
                "itemId": key,
                "queryId": query_id,
                "documentId": document_id,
                "start": start,
                "end": end,
                "chunking": digest,
                "slice": list(cases[query_id].slice),
                "found": [],
            },
        )
        if all(f.run != found.run for f in entry["found"]):
            entry["found"].append(found)

    for name, frame in top.items():
        for query_id, chunk_id_, parent_id, rank in frame.itertuples(index=False, name=None):
            if passage:
                chunk = chunks[chunk_id_]
                if chunk_id_ in judged.get(query_id, {}):
                    continue
                found = Found(run=name, rank=int(rank))
                add(query_id, parent_id, chunk.start, chunk.end, found, chunking_of(chunk_id_))
                titles.setdefault(item_id(query_id, parent_id, chunk.start, chunk.end), _title(benchmark, chunk))
            elif parent_id not in doc_qrels.get(query_id, {}):
                add(query_id, parent_id, None, None, Found(run=name, rank=int(rank)), None)

    for line, extra_item in extra or ():
        case = cases[extra_item.queryId]
        if _covered(case, extra_item, passage):
            continue
        add(
            extra_item.queryId,
            extra_item.documentId,
            extra_item.start,
            extra_item.end,
            Found(run=f"{extra_file}:{line}"),
            None,
        )

    ordered = sorted(items)
    order = np.random.default_rng(seed).permutation(len(ordered))
    pooled = [PoolItem.model_validate(items[ordered[i]]) for i in order]
    used = {item.chunking for item in pooled if item.chunking}
    manifest = PoolManifest(
        benchmark=benchmark.spec.name,
        version=benchmark.spec.version,
        cases=benchmark.file_hashes.get("cases.jsonl", ""),
        path=str(benchmark.path),
        relevanceUnit=benchmark.spec.relevanceUnit,
        split=split,
        depth=depth,
        seed=seed,
        created=dt.date.today(),
        runs=list(rankings),
        rubric=dict(benchmark.spec.rubric),
        chunkings={digest: by_hash[digest].model_dump(mode="json") for digest in sorted(used)},
        items=pooled,
    )
    rubric = rubric_text(benchmark.spec.rubric)
    sheet = []
    for item in pooled:
        document = benchmark.documents[item.documentId]
        text = document.text if item.start is None else document.text[item.start : item.end]
        sheet.append(
            SheetRow(
                itemId=item.itemId,
                queryId=item.queryId,
                query=cases[item.queryId].query,
                title=titles.get(item.itemId, document.title),
                text=text,
                rubric=rubric,
            )
        )
    return Pool(manifest=manifest, sheet=sheet)


def _top(
    frame: pd.DataFrame, name: str, depth: int, cases: Mapping[str, Case], split: str, passage: bool
) -> pd.DataFrame:
    """The top ``depth`` of a ranking; at document level each parent once, at its best chunk's
    place, ranks renumbered (as document-level evaluation sees the ranking)."""
    missing = {"query_id", "rank", "chunk_id", "parent_id"} - set(frame.columns)
    if missing:
        raise BenchmarkError(
            Problem(
                file=name, message=f"rankings lack the columns {sorted(missing)}", fix="pass a run's rankings frame"
            )
        )
    top = frame[["query_id", "chunk_id", "parent_id", "rank"]].sort_values(["query_id", "rank"], kind="stable")
    if not passage:
        top = top.drop_duplicates(["query_id", "parent_id"], keep="first")
        top = top.assign(rank=top.groupby("query_id", sort=False).cumcount() + 1)
    top = top[top["rank"] <= depth]
    unknown = sorted(set(top["query_id"]) - set(cases))
    if unknown:
        raise BenchmarkError(
            Problem(
                file=name,
                message=f"ranks queries that are not cases of split '{split}': {', '.join(map(str, unknown[:5]))}",
                fix="pool runs made on the same benchmark version and split",
            )
        )
    return top


def _chunks_for(
    top: Mapping[str, pd.DataFrame], benchmark: Benchmark, by_hash: Mapping[str, ChunkingConfig]
) -> dict[str, Chunk]:
    """The chunks the runs ranked, rebuilt from their parents under the given chunkings."""
    wanted: dict[str, set[str]] = {}
    for name, frame in top.items():
        for chunk_id_ in frame["chunk_id"].unique():
            digest = chunking_of(str(chunk_id_))
            if digest not in by_hash:
                raise BenchmarkError(
                    Problem(
                        file=name,
                        message=f"chunk '{chunk_id_}' comes from chunking {digest}, not among the chunkings given "
                        f"({', '.join(by_hash) or 'none'})",
                        fix="pass the chunking configuration of every pooled run",
                    )
                )
            wanted.setdefault(digest, set()).update(frame.loc[frame["chunk_id"] == chunk_id_, "parent_id"])
    out: dict[str, Chunk] = {}
    for digest, parents in wanted.items():
        for parent in sorted(parents):
            for chunk in chunk_document(benchmark.documents[parent], by_hash[digest], digest):
                out[chunk.chunk_id] = chunk
    for name, frame in top.items():
        absent = sorted(set(frame["chunk_id"]) - set(out))
        if absent:
            raise BenchmarkError(
                Problem(
                    file=name, message=f"unknown chunks {absent[:3]}", fix="pool runs made on this benchmark's corpus"
                )
            )
    return out


def _title(benchmark: Benchmark, chunk: Chunk) -> str:
    return " > ".join(part for part in (benchmark.documents[chunk.parent_id].title, *chunk.headings) if part)


def _covered(case: Case, item: ExtraItem, passage: bool) -> bool:
    """An extra item is judged already when a judgment of its case covers its whole span."""
    for judgment in case.relevant:
        if judgment.documentId != item.documentId:
            continue
        if not passage or not judgment.has_span:
            return True
        if item.start is not None and judgment.start <= item.start and item.end <= judgment.end:
            return True
    return False


def read_extra(path: str | Path, benchmark: Benchmark, split: str) -> list[tuple[int, ExtraItem]]:
    """Read a ``--add`` file (JSON lines of queryId, documentId[, start, end]) and check each line."""
    path = Path(path)
    if not path.is_file():
        raise BenchmarkError(Problem(file=str(path), message="file not found", fix="check the --add path"))
    rows, problems = read_jsonl(path)
    cases = {case.queryId for case in benchmark.cases_for(split)}
    passage = benchmark.spec.relevanceUnit == "passage"
    out = []
    for line, value in rows:
        try:
            item = ExtraItem.model_validate(value)
        except ValidationError as exc:
            problems.extend(problems_from_validation(exc, file=str(path), line=line, model=ExtraItem))
            continue

        def problem(field: str, message: str, fix: str, line: int = line) -> None:
            problems.append(Problem(file=str(path), line=line, field=field, message=message, fix=fix))

        if item.queryId not in cases:
            problem(
                "queryId", f"'{item.queryId}' is not a case of split '{split}'", "use a query ID of the pooled split"
            )
            continue
        document = benchmark.documents.get(item.documentId)
        if document is None:
            problem("documentId", f"unknown document '{item.documentId}'", "use a document of documents.jsonl")
            continue
        if (item.start is None) != (item.end is None):
            problem("start", "give both start and end, or neither", "offsets are character positions, end exclusive")
            continue
        if item.start is not None:
            if not passage:
                problem("start", "offsets given, but the benchmark's relevanceUnit is 'document'", "drop start/end")
                continue
            if not item.start < item.end <= len(document.text):
                problem(
                    "end",
                    f"offsets {item.start}–{item.end} fall outside document '{item.documentId}' "
                    f"(text length {len(document.text)}) or are empty",
                    "offsets are character positions into the document's text, start < end",
                )
                continue
        out.append((line, item))
    if problems:
        raise BenchmarkError(problems)
    return out


# --------------------------------------------------------------------------- files


def write_pool(result: Pool, out: str | Path) -> dict[str, Path]:
    """Write ``pool.json``, ``sheet.csv`` and ``sheet.jsonl`` into ``out``; refuses an existing pool."""
    folder = Path(out)
    if (folder / POOL_FILE).exists():
        raise BenchmarkError(
            Problem(file=str(folder / POOL_FILE), message="a pool exists here already", fix="choose a new --out folder")
        )
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"pool": folder / POOL_FILE, "csv": folder / SHEET_CSV, "jsonl": folder / SHEET_JSONL}
    paths["pool"].write_text(result.manifest.model_dump_json(indent=1) + "\n", encoding="utf-8")
    rows = [row.model_dump(mode="json") for row in result.sheet]
    with paths["csv"].open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=SHEET_COLUMNS)
        writer.writeheader()
        writer.writerows({k: ("" if v is None else v) for k, v in row.items()} for row in rows)
    with paths["jsonl"].open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return paths


def read_pool(path: str | Path) -> PoolManifest:
    """Read ``pool.json`` (or the pool folder holding it)."""
    path = Path(path)
    if path.is_dir():
        path = path / POOL_FILE
    if not path.is_file():
        raise BenchmarkError(
            Problem(file=str(path), message="no pool here", fix="give the folder `rageval judge pool` wrote")
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return PoolManifest.model_validate(data)
    except json.JSONDecodeError as exc:
        raise BenchmarkError(Problem(file=str(path), line=exc.lineno, message=f"malformed JSON: {exc.msg}")) from None
    except ValidationError as exc:
        raise BenchmarkError(problems_from_validation(exc, file=str(path), model=PoolManifest)) from None


def _integers(value: dict[str, Any], fields: Sequence[str]) -> dict[str, Any]:
    """CSV cells are text: whole numbers in integer fields become integers (others fail validation)."""
    out = dict(value)
    for name in fields:
        cell = out.get(name)
        if isinstance(cell, str) and cell.strip().lstrip("-").isdigit():
            out[name] = int(cell.strip())
    return out


# --------------------------------------------------------------------------- import


def import_sheets(manifest: PoolManifest, paths: Sequence[str | Path]) -> pd.DataFrame:
    """Read several assessors' sheets into labels (``LABEL_COLUMNS``, one row per assessor and item).

    Every bad row is reported, with file and line: unknown item or case IDs, a grade outside the
    rubric, a label without an assessor, and a second label for one item by the same assessor.
    Rows without a grade are not labels and are skipped."""
    problems: list[Problem] = []
    seen: dict[tuple[str, str], str] = {}
    labels = []
    grades = ", ".join(str(g) for g in sorted(manifest.rubric))
    for path in paths:
        rows, read_problems = read_table(path)
        problems.extend(read_problems)
        for line, value in rows:
            try:
                row = SheetRow.model_validate(_integers(value, ["grade"]))
            except ValidationError as exc:
                problems.extend(problems_from_validation(exc, file=str(path), line=line, model=SheetRow))
                continue

            def problem(field: str, message: str, fix: str, line: int = line, path: str | Path = path) -> None:
                problems.append(Problem(file=str(path), line=line, field=field, message=message, fix=fix))

            item = manifest.item(row.itemId)
            if item is None:
                problem("itemId", f"unknown item '{row.itemId}'", "keep the itemId column of the sheet as written")
                continue
            if item.queryId != row.queryId:
                problem(
                    "queryId",
                    f"item '{row.itemId}' belongs to case '{item.queryId}', not '{row.queryId}'",
                    "keep the queryId column as written",
                )
                continue
            if row.grade is None:
                continue
            if row.grade not in manifest.rubric:
                problem("grade", f"grade {row.grade} is outside the rubric", f"use one of {grades}")
                continue
            assessor = (row.assessor or "").strip()
            if not assessor:
                problem("assessor", "a grade without an assessor", "write the assessor's name in the assessor column")
                continue
            where = f"{path}:{line}"
            if (row.itemId, assessor) in seen:
                problem(
                    "itemId",
                    f"'{assessor}' labelled item '{row.itemId}' already at {seen[row.itemId, assessor]}",
                    "keep one label per item and assessor",
                )
                continue
            seen[row.itemId, assessor] = where
            labels.append((row.itemId, row.queryId, assessor, row.grade, row.notes or "", where))
    if problems:
        raise BenchmarkError(problems)
    frame = pd.DataFrame(labels, columns=LABEL_COLUMNS)
    return frame.astype({"grade": np.int64})


def write_labels(labels: pd.DataFrame, path: str | Path) -> Path:
    path = Path(path)
    with path.open("w", encoding="utf-8") as handle:
        for row in labels[LABEL_COLUMNS].itertuples(index=False):
            record = {
                "itemId": row.item_id,
                "queryId": row.query_id,
                "assessor": row.assessor,
                "grade": int(row.grade),
                "notes": row.notes,
                "source": row.source,
            }
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path


class LabelRecord(Strict):
    """One line of ``labels.jsonl`` (written by ``rageval judge import``)."""

    itemId: Slug
    queryId: Slug
    assessor: Slug
    grade: StrictInt
    notes: StrictStr = ""
    source: StrictStr = ""


def read_labels(path: str | Path) -> pd.DataFrame:
    path = Path(path)
    if not path.is_file():
        raise BenchmarkError(Problem(file=str(path), message="file not found", fix="run `rageval judge import` first"))
    rows, problems = read_jsonl(path)
    records = []
    for line, value in rows:
        try:
            records.append(LabelRecord.model_validate(value))
        except ValidationError as exc:
            problems.extend(problems_from_validation(exc, file=str(path), line=line, model=LabelRecord))
    if problems:
        raise BenchmarkError(problems)
    frame = pd.DataFrame(
        [(r.itemId, r.queryId, r.assessor, r.grade, r.notes, r.source) for r in records], columns=LABEL_COLUMNS
    )
    return frame.astype({"grade": np.int64})


# --------------------------------------------------------------------------- adjudication


def read_adjudication(path: str | Path, manifest: PoolManifest) -> list[tuple[int, AdjudicationRow]]:
    """An adjudication file (CSV or JSONL: itemId, grade, note): one final grade per pooled item."""
    rows, problems = read_table(path)
    out: list[tuple[int, AdjudicationRow]] = []
    seen: dict[str, int] = {}
    grades = ", ".join(str(g) for g in sorted(manifest.rubric))
    for line, value in rows:
        try:
            row = AdjudicationRow.model_validate(_integers(value, ["grade"]))
        except ValidationError as exc:
            problems.extend(problems_from_validation(exc, file=str(path), line=line, model=AdjudicationRow))
            continue
        if manifest.item(row.itemId) is None:
            problems.append(
                Problem(
                    file=str(path),
                    line=line,
                    field="itemId",
                    message=f"unknown item '{row.itemId}'",
                    fix="use an itemId of the pool's sheet",
                )
            )
        elif row.itemId in seen:
            problems.append(
                Problem(
                    file=str(path),
                    line=line,
                    field="itemId",
                    message=f"item '{row.itemId}' is adjudicated twice (first on line {seen[row.itemId]})",
                    fix="keep one row per item",
                )
            )
        elif row.grade not in manifest.rubric:
            problems.append(
                Problem(
                    file=str(path),
                    line=line,
                    field="grade",
                    message=f"grade {row.grade} is outside the rubric",
                    fix=f"use one of {grades}",
                )
            )
        else:
            seen[row.itemId] = line
            out.append((line, row))
    if problems:
        raise BenchmarkError(problems)
    return out


@dataclass(frozen=True)
class Verdict:
    """The final grade of one pooled item and how it was reached."""

    item: PoolItem
    grade: int
    labels: tuple[tuple[str, int, str], ...]  # assessor, grade, notes
    adjudication: AdjudicationRow | None


def verdicts(
    manifest: PoolManifest,
    labels: pd.DataFrame,
    adjudication: Sequence[tuple[int, AdjudicationRow]],
    file: str = "adjudication",
) -> list[Verdict]:
    """Final grades: the adjudicated grade where there is one, else the assessors' grade where they
    all agree. An item the assessors disagree on needs an adjudication row; an item nobody labelled
    stays unjudged."""
    decided = {row.itemId: row for _, row in adjudication}
    by_item: dict[str, list[tuple[str, int, str]]] = {}
    for row in labels.itertuples(index=False):
        if manifest.item(row.item_id) is None:
            raise BenchmarkError(
                Problem(
                    file=str(row.source),
                    field="itemId",
                    message=f"item '{row.item_id}' is not in this pool",
                    fix="import sheets of this pool",
                )
            )
        by_item.setdefault(row.item_id, []).append((row.assessor, int(row.grade), row.notes))
    problems = []
    out = []
    for item in manifest.items:
        given = tuple(sorted(by_item.get(item.itemId, [])))
        row = decided.get(item.itemId)
        if row is not None:
            out.append(Verdict(item, row.grade, given, row))
        elif given and len({grade for _, grade, _ in given}) == 1:
            out.append(Verdict(item, given[0][1], given, None))
        elif given:
            spread = ", ".join(f"{assessor} {grade}" for assessor, grade, _ in given)
            problems.append(
                Problem(
                    file=file,
                    field="itemId",
                    message=f"item '{item.itemId}' (case {item.queryId}): the assessors disagree ({spread}) and it is not adjudicated",
                    fix=f"add a row: {item.itemId},<final grade>,<note>",
                )
            )
    if problems:
        raise BenchmarkError(problems)
    return out


def adjudicate(
    benchmark: Benchmark,
    manifest: PoolManifest,
    labels: pd.DataFrame,
    adjudication: Sequence[tuple[int, AdjudicationRow]],
    *,
    version: str | None = None,
    out: str | Path | None = None,
    date: dt.date | None = None,
    file: str = "adjudication",
) -> Path:
    """Write version n+1 of ``benchmark`` holding the pooled judgments; returns its folder.

    A passage item becomes a span judgment (its chunk's offsets in the parent), a document item a
    document judgment. A judgment of the same unit that exists already is replaced when its grade
    changed. The changelog lists the cases that gained judgments ("judgments-added") or had one
    changed ("re-judged"), with the reason "pooled judgments <date>"; assessor notes and
    adjudication notes go to ``judgment-notes.jsonl``. At passage level, when the benchmark does not
    record yet which chunking its labels were made on, the pool's chunking is recorded
    (``labelChunking``) if the pool used exactly one.
    """
    from rageval.benchmark.versions import next_version, write_version

    if (manifest.benchmark, manifest.version) != (
        benchmark.spec.name,
        benchmark.spec.version,
    ) or manifest.cases != benchmark.file_hashes.get("cases.jsonl"):
        raise BenchmarkError(
            Problem(
                file=POOL_FILE,
                message=f"the pool was made on {manifest.benchmark} {manifest.version} (cases sha256 {manifest.cases[:12]}…), "
                f"not on {benchmark.spec.name} {benchmark.spec.version} ({benchmark.file_hashes.get('cases.jsonl', '')[:12]}…)",
                fix="adjudicate into the version the pool was made on",
            )
        )
    date = date or dt.date.today()
    version = version or next_version(benchmark.spec.version)
    final = verdicts(manifest, labels, adjudication, file=file)
    by_case: dict[str, list[Verdict]] = {}
    for verdict in final:
        by_case.setdefault(verdict.item.queryId, []).append(verdict)

    added: list[str] = []
    rejudged: list[str] = []
    cases = []
    notes = []
    for case in benchmark.cases:
        relevant = list(case.relevant)
        gained = changed = False
        for verdict in by_case.get(case.queryId, []):
            item = verdict.item
            judgment = Judgment(documentId=item.documentId, grade=verdict.grade, start=item.start, end=item.end)
            same = [
                i
                for i, j in enumerate(relevant)
                if (j.documentId, j.start, j.end) == (item.documentId, item.start, item.end)
            ]
            if same and all(relevant[i].grade == verdict.grade for i in same):
                continue
            if same:
                relevant = [j for i, j in enumerate(relevant) if i not in same]
                changed = True
            else:
                gained = True
            relevant.append(judgment)
            notes.append(
                {
                    "version": version,
                    "date": date.isoformat(),
                    "queryId": case.queryId,
                    "itemId": item.itemId,
                    "documentId": item.documentId,
                    "start": item.start,
                    "end": item.end,
                    "grade": verdict.grade,
                    "labels": [{"assessor": a, "grade": g, "notes": n} for a, g, n in verdict.labels],
                    "adjudication": None if verdict.adjudication is None else verdict.adjudication.model_dump(),
                }
            )
        if changed:
            rejudged.append(case.queryId)
        elif gained:
            added.append(case.queryId)
        cases.append(case.model_copy(update={"relevant": relevant}) if (gained or changed) else case)

    reason = f"pooled judgments {date.isoformat()} (pool of {len(manifest.runs)} runs at depth {manifest.depth}, split {manifest.split})"
    changes = [
        ChangelogEntry(version=version, date=date, action=action, cases=ids, reason=reason)
        for action, ids in (("judgments-added", added), ("re-judged", rejudged))
        if ids
    ]
    updates: dict[str, Any] = {}
    if (
        benchmark.spec.relevanceUnit == "passage"
        and benchmark.spec.labelChunking is None
        and len(manifest.chunkings) == 1
    ):
        ((digest, config),) = manifest.chunkings.items()
        updates["labelChunking"] = {"hash": digest, "config": config}
    return write_version(benchmark, version, cases=cases, changes=changes, notes=notes, spec_updates=updates, out=out)
