"""Adjudication: the final grade of each pooled item (the assessors' where they agree, the
adjudicator's where given), written into the next benchmark version with its changelog and notes."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

from rageval.benchmark.loading import Benchmark
from rageval.benchmark.schema import (
    JUDGE_ASSESSOR_PREFIXES,
    RELEASE_SPLIT,
    Case,
    ChangeAction,
    ChangelogEntry,
    Judgment,
)
from rageval.benchmark.versions import next_version, write_version
from rageval.csvfiles import read_table
from rageval.errors import BenchmarkError, Problem
from rageval.judging.schema import (
    POOL_FILE,
    AdjudicationRow,
    At,
    PoolItem,
    PoolManifest,
    outside_rubric,
    valid_rows,
)
from rageval.judging.sheets import label_span
from rageval.validation import shorten


def read_adjudication(path: str | Path, manifest: PoolManifest) -> list[tuple[int, AdjudicationRow]]:
    """An adjudication file (CSV or JSONL: itemId, grade, note, and optionally start, end): one final
    grade per pooled item."""
    rows, problems = read_table(path)
    out: list[tuple[int, AdjudicationRow]] = []
    seen: dict[str, int] = {}  # item -> line of its row
    check = partial(_adjudication_problem, manifest=manifest, seen=seen)
    for line, row in valid_rows(
        rows, AdjudicationRow, str(path), problems, integers=["grade", "start", "end"], check=check
    ):
        seen[row.itemId] = line
        out.append((line, row))
    if problems:
        raise BenchmarkError(problems)
    return out


def _adjudication_problem(row: AdjudicationRow, at: At, manifest: PoolManifest, seen: dict[str, int]) -> Problem | None:
    """The first thing wrong with one adjudication row (``at`` places the problem), or None."""
    if manifest.item(row.itemId) is None:
        return at(
            field="itemId", message=f"unknown item '{shorten(row.itemId)}'", fix="use an itemId of the pool's sheet"
        )
    if row.itemId in seen:
        return at(
            field="itemId",
            message=f"item '{shorten(row.itemId)}' is adjudicated twice (first on line {seen[row.itemId]})",
            fix="keep one row per item",
        )
    if (row.start is None) != (row.end is None) or (
        row.start is not None and row.end is not None and row.end <= row.start
    ):
        return at(
            field="start",
            message=f"the evidence {row.start}-{row.end} is not a span (give both start and end, start < end)",
            fix="give the evidence's character offsets in the item's document, or leave both empty",
        )
    return outside_rubric(row.grade, manifest, at)


@dataclass(frozen=True)
class Verdict:
    """The final grade of one pooled item and how it was reached."""

    item: PoolItem
    grade: int
    labels: tuple[tuple[str, int, str], ...]  # assessor, grade, notes
    adjudication: AdjudicationRow | None
    # The judged span: the evidence the assessors selected (or the adjudicator gave) in a passage
    # pool, else the pooled passage; None for a whole document.
    span: tuple[int, int] | None = None


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
    by_item, selected = _labels_by_item(manifest, labels)
    problems = []
    out = []
    for item in manifest.items:
        given = tuple(sorted(by_item.get(item.itemId, [])))
        row = decided.get(item.itemId)
        if row is not None:
            span, problem = _evidence(manifest, item, row.grade, given, selected.get(item.itemId, {}), row, file)
            out.append(Verdict(item, row.grade, given, row, span))
            problems.extend([problem] if problem else [])
        elif (
            given
            and manifest.split == RELEASE_SPLIT
            and all(a.startswith(JUDGE_ASSESSOR_PREFIXES) for a, _, _ in given)
        ):
            problems.append(_judges_only(item, given, file))
        elif given and len({grade for _, grade, _ in given}) == 1:
            span, problem = _evidence(manifest, item, given[0][1], given, selected.get(item.itemId, {}), None, file)
            out.append(Verdict(item, given[0][1], given, None, span))
            problems.extend([problem] if problem else [])
        elif given:
            problems.append(_disagreement(item, given, file))
    if problems:
        raise BenchmarkError(problems)
    return out


def _labels_by_item(
    manifest: PoolManifest, labels: pd.DataFrame
) -> tuple[dict[str, list[tuple[str, int, str]]], dict[str, dict[str, tuple[int, int] | None]]]:
    """Each item's labels (assessor, grade, notes) and the evidence each assessor selected; a label of
    an item outside the pool is an error."""
    by_item: dict[str, list[tuple[str, int, str]]] = {}
    selected: dict[str, dict[str, tuple[int, int] | None]] = {}  # item -> assessor -> evidence
    for row in labels.itertuples(index=False):
        if manifest.item(row.item_id) is None:
            raise BenchmarkError(
                Problem(
                    file=str(row.source),
                    field="itemId",
                    message=f"item '{shorten(row.item_id)}' is not in this pool",
                    fix="import sheets of this pool",
                )
            )
        by_item.setdefault(row.item_id, []).append((row.assessor, int(row.grade), row.notes))
        selected.setdefault(row.item_id, {})[row.assessor] = label_span(row)
    return by_item, selected


def _judges_only(item: PoolItem, given: tuple[tuple[str, int, str], ...], file: str) -> Problem:
    """A release item labelled by judges alone: it needs a human decision."""
    spread = ", ".join(f"{assessor} {grade}" for assessor, grade, _ in given)
    return Problem(
        file=file,
        field="itemId",
        message=f"item '{shorten(item.itemId)}' (case {item.queryId}) has only judge labels ({spread}): "
        f"a judge's label never enters the frozen {RELEASE_SPLIT} split without a human decision",
        fix=f"add a row: {item.itemId},<final grade>,<note> (or a human assessor's label)",
    )


def _disagreement(item: PoolItem, given: tuple[tuple[str, int, str], ...], file: str) -> Problem:
    """An item the assessors grade differently and nobody adjudicated."""
    spread = ", ".join(f"{assessor} {grade}" for assessor, grade, _ in given)
    return Problem(
        file=file,
        field="itemId",
        message=f"item '{shorten(item.itemId)}' (case {item.queryId}): the assessors disagree ({spread}) and it is not adjudicated",
        fix=f"add a row: {item.itemId},<final grade>,<note>",
    )


def _evidence(
    manifest: PoolManifest,
    item: PoolItem,
    grade: int,
    given: tuple[tuple[str, int, str], ...],
    selected: dict[str, tuple[int, int] | None],
    row: AdjudicationRow | None,
    file: str,
) -> tuple[tuple[int, int] | None, Problem | None]:
    """The span a verdict judges, and the problem where it cannot be told. In a passage pool: the
    adjudicator's ``start``/``end``, else the evidence every assessor who found the item relevant
    selected (a label without a selection stands for the pooled passage), else the pooled passage
    (a grade 0 judges the passage as pooled). In a document pool: the document (the selections stay in
    ``labels.jsonl``)."""
    pooled = (item.start, item.end) if item.start is not None and item.end is not None else None
    if manifest.relevanceUnit != "passage" or pooled is None:
        return pooled, None
    if row is not None and row.start is not None and row.end is not None:
        return (row.start, row.end), None
    if grade == 0:
        return pooled, None
    spans = {selected.get(assessor) or pooled for assessor, label_grade, _ in given if label_grade > 0}
    if len(spans) <= 1:
        return (spans.pop() if spans else pooled), None
    shown = ", ".join(
        f"{assessor} {a}-{b}" for assessor, (a, b) in sorted((k, v or pooled) for k, v in selected.items())
    )
    return pooled, Problem(
        file=file,
        field="start",
        message=f"item '{shorten(item.itemId)}' (case {item.queryId}): the assessors selected different evidence ({shown})",
        fix=f"add a row: {item.itemId},<final grade>,<note>,<start>,<end> (the evidence to judge)",
    )


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
    _check_pooled_on(manifest, benchmark)
    date = date or dt.date.today()
    version = version or next_version(benchmark.spec.version)
    by_case: dict[str, list[Verdict]] = {}
    final = verdicts(manifest, labels, adjudication, file=file)
    _check_spans(final, benchmark, file)
    for verdict in final:
        by_case.setdefault(verdict.item.queryId, []).append(verdict)

    added: list[str] = []
    rejudged: list[str] = []
    cases = []
    notes: list[dict[str, Any]] = []
    for case in benchmark.cases:
        relevant, gained, changed = _judge(case, by_case.get(case.queryId, []), version, date, notes)
        if changed:
            rejudged.append(case.queryId)
        elif gained:
            added.append(case.queryId)
        cases.append(case.model_copy(update={"relevant": relevant}) if (gained or changed) else case)

    reason = f"pooled judgments {date.isoformat()} (pool of {len(manifest.runs)} runs at depth {manifest.depth}, split {manifest.split})"
    actions: tuple[tuple[ChangeAction, list[str]], ...] = (("judgments-added", added), ("re-judged", rejudged))
    changes = [
        ChangelogEntry(version=version, date=date, action=action, cases=ids, reason=reason)
        for action, ids in actions
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


def _check_spans(final: Sequence[Verdict], benchmark: Benchmark, file: str) -> None:
    """Every judged span lies inside its document's text."""
    problems = []
    for verdict in final:
        document = benchmark.documents.get(verdict.item.documentId)
        if verdict.span is not None and document is not None and verdict.span[1] > len(document.text):
            a, b = verdict.span
            problems.append(
                Problem(
                    file=file,
                    field="end",
                    message=f"item '{shorten(verdict.item.itemId)}': the evidence {a}-{b} runs past the end of "
                    f"document '{shorten(document.id)}' ({len(document.text)} characters)",
                    fix="select the evidence again in `rageval judge label-view` (or correct start/end)",
                )
            )
    if problems:
        raise BenchmarkError(problems)


def _check_pooled_on(manifest: PoolManifest, benchmark: Benchmark) -> None:
    """A pool is adjudicated into the version it was made on: same name, version and cases."""
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


def _judge(
    case: Case, final: Sequence[Verdict], version: str, date: dt.date, notes: list[dict[str, Any]]
) -> tuple[list[Judgment], bool, bool]:
    """A case's judgments with its verdicts applied, whether it gained one and whether one changed
    grade; the note of each new or changed judgment is appended to ``notes``."""
    relevant = list(case.relevant)
    gained = changed = False
    for verdict in final:
        item = verdict.item
        start, end = verdict.span if verdict.span is not None else (None, None)
        judgment = Judgment(documentId=item.documentId, grade=verdict.grade, start=start, end=end)
        same = [i for i, j in enumerate(relevant) if (j.documentId, j.start, j.end) == (item.documentId, start, end)]
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
                "start": start,
                "end": end,
                **({"pooled": [item.start, item.end]} if (start, end) != (item.start, item.end) else {}),
                "grade": verdict.grade,
                "labels": [{"assessor": a, "grade": g, "notes": n} for a, g, n in verdict.labels],
                "adjudication": _adjudication_note(verdict.adjudication),
            }
        )
    return relevant, gained, changed


def _adjudication_note(row: AdjudicationRow | None) -> dict[str, Any] | None:
    """An adjudication row as its note records it (``start``/``end`` only where given)."""
    if row is None:
        return None
    return row.model_dump(exclude={key for key in ("start", "end") if getattr(row, key) is None})
