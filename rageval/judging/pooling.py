"""Pooling: the unjudged top of several runs' rankings, plus items found by targeted search, as one
blind pool: its manifest (the provenance) and its sheet rows in a seeded order."""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rageval.benchmark.chunking import Chunk, chunk_document, chunk_qrels, config_hash
from rageval.benchmark.loading import Benchmark
from rageval.benchmark.schema import Case, ChunkingConfig
from rageval.errors import BenchmarkError, Problem
from rageval.io import file_problem, read_jsonl
from rageval.judging.schema import At, ExtraItem, Found, PoolItem, PoolManifest, SheetRow, valid_rows
from rageval.validation import absent_columns, shorten

# The deepest pool: assessors judge every pooled item, so deeper than this is a typo.
MAX_POOL_DEPTH = 1000


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
    _check_depth(depth)
    cases = {case.queryId: case for case in benchmark.cases_for(split)}
    passage = benchmark.spec.relevanceUnit == "passage"
    configs = [chunking] if isinstance(chunking, ChunkingConfig) else list(chunking)
    by_hash = {config_hash(config): config for config in configs}

    top = {name: _top(frame, name, depth, cases, split, passage) for name, frame in rankings.items()}
    collected = _Collected(benchmark, split, cases, _chunks_for(top, benchmark, by_hash) if passage else None)
    for name, frame in top.items():
        collected.ranked(name, frame)
    for line, extra_item in extra or ():
        if not _covered(cases[extra_item.queryId], extra_item, passage):
            found = Found(run=f"{extra_file}:{line}")
            collected.add(extra_item.queryId, extra_item.documentId, extra_item.start, extra_item.end, found, None)

    pooled = _seeded_order(collected.items, seed)
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
    return Pool(manifest=manifest, sheet=_sheet(pooled, benchmark, cases, titles=collected.titles))


def _check_depth(depth: int) -> None:
    if not 0 < depth <= MAX_POOL_DEPTH:
        raise BenchmarkError(
            Problem(
                file="--depth",
                message=f"depth must be from 1 to {MAX_POOL_DEPTH} (got {depth})",
                fix=f"pool the top K of each run with K at most {MAX_POOL_DEPTH}: assessors judge every pooled item",
            )
        )


def _seeded_order(items: Mapping[str, dict[str, Any]], seed: int) -> list[PoolItem]:
    """The pooled items in the sheet's order: a seeded permutation of the sorted IDs, blind to rank
    and run, reproducible."""
    ordered = sorted(items)
    order = np.random.default_rng(seed).permutation(len(ordered))
    return [PoolItem.model_validate(items[ordered[i]]) for i in order]


class _Collected:
    """The pool's items as they are found (one per query and span or document, with every run that
    found it), and their titles; ``chunks``: the runs' chunks at passage level, None at document level."""

    def __init__(
        self, benchmark: Benchmark, split: str, cases: Mapping[str, Case], chunks: Mapping[str, Chunk] | None
    ) -> None:
        self.benchmark, self.cases, self.chunks = benchmark, cases, chunks
        self.judged = chunk_qrels(cases.values(), chunks.values()) if chunks is not None else {}
        self.doc_qrels = benchmark.qrels(split)
        self.items: dict[str, dict[str, Any]] = {}
        self.titles: dict[str, str] = {}

    def add(
        self, query_id: str, document_id: str, start: int | None, end: int | None, found: Found, digest: str | None
    ) -> None:
        key = item_id(query_id, document_id, start, end)
        entry = self.items.setdefault(
            key,
            {
                "itemId": key,
                "queryId": query_id,
                "documentId": document_id,
                "start": start,
                "end": end,
                "chunking": digest,
                "slice": list(self.cases[query_id].slice),
                "found": [],
            },
        )
        if all(f.run != found.run for f in entry["found"]):
            entry["found"].append(found)

    def ranked(self, name: str, frame: pd.DataFrame) -> None:
        """The unjudged items of one run's top rows."""
        for query_id, chunk_id_, parent_id, rank in frame.itertuples(index=False, name=None):
            if self.chunks is not None:
                chunk = self.chunks[chunk_id_]
                if chunk_id_ in self.judged.get(query_id, {}):
                    continue
                found = Found(run=name, rank=int(rank))
                self.add(query_id, parent_id, chunk.start, chunk.end, found, chunking_of(chunk_id_))
                key = item_id(query_id, parent_id, chunk.start, chunk.end)
                self.titles.setdefault(key, _title(self.benchmark, chunk))
            elif parent_id not in self.doc_qrels.get(query_id, {}):
                self.add(query_id, parent_id, None, None, Found(run=name, rank=int(rank)), None)


def _sheet(
    pooled: Sequence[PoolItem], benchmark: Benchmark, cases: Mapping[str, Case], titles: Mapping[str, str]
) -> list[SheetRow]:
    """The assessors' rows: query, title and text of each item, and the rubric; nothing of its provenance."""
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
    return sheet


def _top(
    frame: pd.DataFrame, name: str, depth: int, cases: Mapping[str, Case], split: str, passage: bool
) -> pd.DataFrame:
    """The top ``depth`` of a ranking; at document level each parent once, at its best chunk's
    place, ranks renumbered (as document-level evaluation sees the ranking)."""
    missing = absent_columns(frame, ("query_id", "rank", "chunk_id", "parent_id"))
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
                message=f"ranks queries that are not cases of split '{shorten(split)}': {', '.join(map(str, unknown[:5]))}",
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
        if not passage or judgment.span is None:
            return True
        start, end = judgment.span
        if item.start is not None and item.end is not None and start <= item.start and item.end <= end:
            return True
    return False


# --------------------------------------------------------------------------- targeted search


def read_extra(path: str | Path, benchmark: Benchmark, split: str) -> list[tuple[int, ExtraItem]]:
    """Read a ``--add`` file (JSON lines of queryId, documentId[, start, end]) and check each line."""
    path = Path(path)
    missing = file_problem(path)
    if missing is not None:
        raise BenchmarkError(Problem(file=str(path), message=missing.message, fix="check the --add path"))
    rows, problems = read_jsonl(path)
    cases = {case.queryId for case in benchmark.cases_for(split)}
    check = partial(_extra_problem, benchmark=benchmark, cases=cases, split=split)
    out = list(valid_rows(rows, ExtraItem, str(path), problems, check=check))
    if problems:
        raise BenchmarkError(problems)
    return out


def _extra_problem(item: ExtraItem, at: At, benchmark: Benchmark, cases: set[str], split: str) -> Problem | None:
    """The first thing wrong with one ``--add`` line (``at`` places the problem), or None."""
    if item.queryId not in cases:
        return at(
            field="queryId",
            message=f"'{shorten(item.queryId)}' is not a case of split '{shorten(split)}'",
            fix="use a query ID of the pooled split",
        )
    document = benchmark.documents.get(item.documentId)
    if document is None:
        return at(
            field="documentId",
            message=f"unknown document '{shorten(item.documentId)}'",
            fix="use a document of documents.jsonl",
        )
    if (item.start is None) != (item.end is None):
        return at(
            field="start",
            message="give both start and end, or neither",
            fix="offsets are character positions, end exclusive",
        )
    if item.start is None or item.end is None:
        return None
    if benchmark.spec.relevanceUnit != "passage":
        return at(
            field="start",
            message="offsets given, but the benchmark's relevanceUnit is 'document'",
            fix="drop start/end",
        )
    if not item.start < item.end <= len(document.text):
        return at(
            field="end",
            message=f"offsets {item.start}–{item.end} fall outside document '{shorten(item.documentId)}' "
            f"(text length {len(document.text)}) or are empty",
            fix="offsets are character positions into the document's text, start < end",
        )
    return None
