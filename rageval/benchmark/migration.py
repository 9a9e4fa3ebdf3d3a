"""Chunk labels when the chunking changes: proposals by character overlap, a review, and the qrels
a passage-level evaluation uses.

Which chunking the labels were made for: a benchmark's judgments are character spans of their
documents, and chunk grades are derived from them by overlap (:func:`rageval.benchmark.chunking.chunk_qrels`).
When the spans were cut on the chunks of one chunking (``rageval judge adjudicate`` turns pooled
chunks into spans), ``benchmark.yaml`` records that chunking as ``labelChunking`` (its hash and
configuration). Under that chunking the derived grades are exact; under another one a chunk may
share only a few characters with a judged span and still inherit its grade.

``migrate_labels(benchmark, A, B)`` proposes, for every chunk of chunking B that overlaps a judged
span (or a judged document), the grade it would inherit, its overlap score and the judgments it
comes from, each ``proposed``, in ``chunk-labels-<hash of B>.jsonl`` in the benchmark folder. A
reviewer sets ``decision`` to accept or reject per row (and may change ``grade``);
``review_labels`` then marks those rows ``reviewed``.

:func:`chunk_qrels_for` is what a passage-level evaluation calls:

1. a review file for the chunking exists: its accepted rows (on a non-release split, also the rows
   still proposed); on the release split any row still ``proposed`` is refused;
2. else the labels were made for this chunking, or the benchmark records no ``labelChunking``:
   the derived chunk qrels, as ever;
3. else (labels made for another chunking, nothing migrated): derived qrels on other splits,
   refused on the release split.

Document-level measures never use any of this.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from rageval.benchmark.chunking import Chunk, chunk_document, chunk_qrels, config_hash
from rageval.benchmark.loading import Benchmark
from rageval.benchmark.schema import BENCHMARK_FILE, RELEASE_SPLIT, Case, ChunkingConfig, LabelProposal, ProposalSource
from rageval.benchmark.spans import covers
from rageval.errors import BenchmarkError, ConfigError, EvaluationError, Problem
from rageval.hashing import sha256_file
from rageval.io import read_jsonl, read_yaml
from rageval.validation import problems_from_validation

REVIEW_PREFIX = "chunk-labels-"


def review_path(benchmark: Benchmark | str | Path, chunking: ChunkingConfig | str) -> Path:
    """The review file of ``chunking`` (a config or its hash) in the benchmark's folder."""
    root = benchmark.path if isinstance(benchmark, Benchmark) else Path(benchmark)
    digest = chunking if isinstance(chunking, str) else config_hash(chunking)
    return root / f"{REVIEW_PREFIX}{digest}.jsonl"


def load_chunking(path: str | Path) -> ChunkingConfig:
    """A chunking from a run's params file (its ``chunking`` section; the default chunking where it
    has none) or from a YAML file holding only chunking keys."""
    path = Path(path)
    data, lines = read_yaml(path, ConfigError)
    if data is None:
        raise ConfigError(
            Problem(
                file=str(path),
                message="the file is empty",
                fix="write chunking keys (method, tokenizer, size, ...), or {} for the default chunking",
            )
        )
    if not isinstance(data, dict):
        raise ConfigError(
            Problem(file=str(path), line=1, message="expected a mapping of chunking keys or a params file")
        )
    params = "retrieval" in data or "version" in data or "chunking" in data
    section, prefix = (data.get("chunking") or {}, ("chunking",)) if params else (data, ())
    try:
        return ChunkingConfig.model_validate(section)
    except ValidationError as exc:
        raise ConfigError(
            problems_from_validation(exc, file=str(path), model=ChunkingConfig, lines=lines, prefix=prefix)
        ) from None


# --------------------------------------------------------------------------- proposals


def _chunking_of(chunk_id: str) -> str:
    return chunk_id.rsplit("#", 1)[-1].rsplit("-", 1)[0]


def _overlap(chunk_start: int, chunk_end: int, start: int, end: int) -> tuple[int, float]:
    """Shared characters, and their share of the shorter of the two spans: 1.0 when the chunk holds
    the whole judged span or lies wholly inside it."""
    shared = min(chunk_end, end) - max(chunk_start, start)
    if shared <= 0:
        return 0, 0.0
    return shared, shared / min(chunk_end - chunk_start, end - start)


def propose(cases: Iterable[Case], chunks: Iterable[Chunk], source_hash: str) -> list[LabelProposal]:
    """Proposals for ``chunks`` (one chunking) from the cases' judgments, without provenance chunks.

    A chunk is proposed when the judgments grade it (:func:`chunk_qrels`: it covers a judged span);
    its proposed grade is the one they give it, its sources are the judgments it covers, and its
    overlap the best score among the sources of that grade."""
    by_parent: dict[str, list[Chunk]] = {}
    for chunk in chunks:
        by_parent.setdefault(chunk.parent_id, []).append(chunk)
    out = []
    for case in cases:
        documents = dict.fromkeys(j.documentId for j in case.relevant)
        graded = chunk_qrels([case], [c for d in documents for c in by_parent.get(d, [])])[case.queryId]
        found: dict[str, tuple[Chunk, list[ProposalSource]]] = {}
        for judgment in case.relevant:
            for chunk in by_parent.get(judgment.documentId, []):
                if chunk.chunk_id not in graded:
                    continue
                if judgment.span is None:
                    # A document judgment covers every chunk of the document entirely.
                    score = 1.0
                elif covers(chunk.start, chunk.end, *judgment.span):
                    score = _overlap(chunk.start, chunk.end, *judgment.span)[1]
                else:
                    continue
                source = ProposalSource(
                    documentId=judgment.documentId,
                    grade=judgment.grade,
                    start=judgment.start,
                    end=judgment.end,
                    overlap=round(score, 4),
                )
                found.setdefault(chunk.chunk_id, (chunk, []))[1].append(source)
        for chunk, sources in sorted(found.values(), key=lambda pair: (pair[0].parent_id, pair[0].position)):
            grade = graded[chunk.chunk_id]
            of_grade = [s.overlap for s in sources if s.grade == grade] or [max(s.overlap for s in sources)]
            out.append(
                LabelProposal(
                    queryId=case.queryId,
                    chunkId=chunk.chunk_id,
                    documentId=chunk.parent_id,
                    start=chunk.start,
                    end=chunk.end,
                    grade=grade,
                    overlap=max(of_grade),
                    sources=sources,
                    fromChunking=source_hash,
                    toChunking=_chunking_of(chunk.chunk_id),
                )
            )
    return out


def migrate_labels(
    benchmark: Benchmark, source: ChunkingConfig, target: ChunkingConfig, *, force: bool = False
) -> tuple[Path, list[LabelProposal]]:
    """Write the proposals for ``target``'s chunks into the benchmark's review file.

    ``source`` must be the chunking the labels were made for where the benchmark records one. Where
    a review file exists, a row whose chunk and judgments are unchanged keeps its review (status,
    decision, grade, note); ``force`` discards every review and starts over."""
    source_hash, target_hash = config_hash(source), config_hash(target)
    recorded = benchmark.spec.labelChunking
    spec_file = str(benchmark.path / BENCHMARK_FILE)
    if recorded is not None and recorded.hash != source_hash:
        raise BenchmarkError(
            Problem(
                file=spec_file,
                field="labelChunking",
                message=f"the labels were made for chunking {recorded.hash}, not {source_hash} (--from)",
                fix="migrate from the chunking recorded in labelChunking",
            )
        )
    if source_hash == target_hash:
        raise BenchmarkError(
            Problem(
                file="--to", message=f"--from and --to are the same chunking ({source_hash})", fix="nothing to migrate"
            )
        )
    path = review_path(benchmark, target)
    previous = {} if force or not path.exists() else {(r.queryId, r.chunkId): r for _, r in read_review(path)}
    judged = {j.documentId for case in benchmark.cases for j in case.relevant}
    documents = [benchmark.documents[doc] for doc in sorted(judged)]
    new_chunks = [chunk for document in documents for chunk in chunk_document(document, target, target_hash)]
    old_chunks = [chunk for document in documents for chunk in chunk_document(document, source, source_hash)]
    old_labels = chunk_qrels(benchmark.cases, old_chunks)
    old_by_parent: dict[str, list[Chunk]] = {}
    for chunk in old_chunks:
        old_by_parent.setdefault(chunk.parent_id, []).append(chunk)

    proposals = []
    for proposal in propose(benchmark.cases, new_chunks, source_hash):
        labelled = old_labels.get(proposal.queryId, {})
        from_chunks = [
            old.chunk_id
            for old in old_by_parent.get(proposal.documentId, [])
            if old.chunk_id in labelled and old.start < proposal.end and proposal.start < old.end
        ]
        proposal = proposal.model_copy(update={"fromChunks": from_chunks})
        kept = previous.get((proposal.queryId, proposal.chunkId))
        if kept is not None and kept.fromChunking == source_hash and _sources_key(kept) == _sources_key(proposal):
            proposal = kept  # an unchanged proposal keeps its review
        proposals.append(proposal)
    _write_rows(path, proposals)
    return path, proposals


def _write_rows(path: Path, rows: Iterable[LabelProposal]) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row.model_dump(mode="json"), ensure_ascii=False) + "\n")


def record_decision(path: Path, position: int, decision: LabelProposal, date: dt.date | None = None) -> LabelProposal:
    """Write one reviewer's decision on row ``position`` (0-based) of a review file: ``decision``
    holds its ``decision``, ``grade``, ``reviewer`` and ``note``; the row becomes ``reviewed`` on
    ``date``. The file is read again first (rows decided meanwhile are kept), checked whole, and
    replaced atomically; a row whose chunk or sources differ from ``decision``'s is refused."""
    rows = [row for _, row in read_review(path)]
    if not 0 <= position < len(rows) or (rows[position].queryId, rows[position].chunkId) != (
        decision.queryId,
        decision.chunkId,
    ):
        raise BenchmarkError(
            Problem(
                file=str(path),
                line=position + 1,
                message=f"row {position + 1} is not the label of {decision.queryId} / {decision.chunkId} any more",
                fix="reload the review (the file was re-proposed meanwhile)",
            )
        )
    kept = {"decision", "grade", "reviewer", "note"}
    rows[position] = rows[position].model_copy(
        update={**decision.model_dump(include=kept), "status": "reviewed", "reviewedOn": date or dt.date.today()}
    )
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=path.suffix)
    os.close(handle)
    try:
        _write_rows(Path(temporary), rows)
        read_review(temporary)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    return rows[position]


def read_review(path: str | Path) -> list[tuple[int, LabelProposal]]:
    """Rows of a review file with their lines; every bad line is reported."""
    path = Path(path)
    rows, problems = read_jsonl(path)
    problems = [Problem(**{**p.__dict__, "file": str(path)}) for p in problems]
    out = []
    seen: dict[tuple[str, str], int] = {}
    for line, value in rows:
        try:
            row = LabelProposal.model_validate(value)
        except ValidationError as exc:
            problems.extend(problems_from_validation(exc, file=str(path), line=line, model=LabelProposal))
            continue
        if row.status == "reviewed" and row.decision is None:
            problems.append(
                Problem(
                    file=str(path),
                    line=line,
                    field="decision",
                    message="reviewed without a decision",
                    fix="set decision to accept or reject",
                )
            )
        key = (row.queryId, row.chunkId)
        if key in seen:
            problems.append(
                Problem(
                    file=str(path),
                    line=line,
                    field="chunkId",
                    message=f"chunk {row.chunkId} is listed twice for case {row.queryId} (first on line {seen[key]})",
                    fix="keep one row",
                )
            )
        seen.setdefault(key, line)
        out.append((line, row))
    if problems:
        raise BenchmarkError(problems)
    return out


@dataclass(frozen=True)
class ReviewSummary:
    path: Path
    reviewed: int
    accepted: int
    rejected: int
    proposed: int  # rows still without a decision


def review_labels(
    benchmark: Benchmark,
    target: ChunkingConfig,
    decisions: Mapping[tuple[str, str], Literal["accept", "reject"]] | None = None,
    *,
    reviewer: str | None = None,
    date: dt.date | None = None,
) -> ReviewSummary:
    """Mark every row that has a decision as ``reviewed`` (by ``reviewer`` on ``date``).

    Decisions come from the file (a reviewer edited ``decision``) or from ``decisions``, keyed by
    (query ID, chunk ID), which override the file. Rows without a decision stay ``proposed``."""
    path = review_path(benchmark, target)
    if not path.is_file():
        raise BenchmarkError(
            Problem(
                file=str(path), message="no review file for this chunking", fix="run `rageval migrate-labels` first"
            )
        )
    rows = read_review(path)
    decisions = dict(decisions or {})
    known = {(row.queryId, row.chunkId) for _, row in rows}
    unknown = sorted(set(decisions) - known)
    if unknown:
        raise BenchmarkError(
            Problem(
                file=str(path),
                message=f"decisions for rows that are not in the file: {unknown[:3]}",
                fix="decide on rows of this file",
            )
        )
    date = date or dt.date.today()
    updated = []
    for _, row in rows:
        decision = decisions.get((row.queryId, row.chunkId), row.decision)
        if decision is not None and (row.status == "proposed" or decision != row.decision):
            row = row.model_copy(
                update={
                    "decision": decision,
                    "status": "reviewed",
                    "reviewer": reviewer or row.reviewer,
                    "reviewedOn": date,
                }
            )
        updated.append(row)
    _write_rows(path, updated)
    return ReviewSummary(
        path=path,
        reviewed=sum(r.status == "reviewed" for r in updated),
        accepted=sum(r.decision == "accept" for r in updated if r.status == "reviewed"),
        rejected=sum(r.decision == "reject" for r in updated if r.status == "reviewed"),
        proposed=sum(r.status == "proposed" for r in updated),
    )


# --------------------------------------------------------------------------- qrels for evaluation


@dataclass(frozen=True)
class ChunkLabels:
    """Chunk qrels and where they came from: ``derived`` from the spans, or ``migrated`` from a
    review file (``file`` and its ``sha256``, for the run record). ``status``: ``exact`` (derived
    for the chunking the labels were made for), ``derived`` (no chunking recorded, or another
    one off the release split), ``reviewed`` (every row used was reviewed) or ``proposed``."""

    qrels: dict[str, dict[str, int]]
    source: Literal["derived", "migrated"]
    chunking: str
    file: Path | None = None
    sha256: str | None = None
    status: Literal["exact", "derived", "proposed", "reviewed"] = "derived"


def chunk_labels(
    benchmark: Benchmark, chunks: Sequence[Chunk], chunking_config: ChunkingConfig, split: str | None
) -> ChunkLabels:
    """Chunk-level qrels for ``chunks`` (cut with ``chunking_config``) on ``split``; see the module
    docstring for the rules. Raises :class:`BenchmarkError` on the release split where the labels
    for this chunking are unreviewed."""
    digest = config_hash(chunking_config)
    stray = next((c.chunk_id for c in chunks if _chunking_of(c.chunk_id) != digest), None)
    if stray is not None:
        raise EvaluationError(f"chunk '{stray}' was not cut with the given chunking ({digest})")
    cases = benchmark.cases_for(split)
    path = review_path(benchmark, digest)
    recorded = benchmark.spec.labelChunking
    if not path.is_file():
        if recorded is None or recorded.hash == digest:
            return ChunkLabels(
                chunk_qrels(cases, chunks), "derived", digest, status="exact" if recorded is not None else "derived"
            )
        if split == RELEASE_SPLIT:
            raise BenchmarkError(
                Problem(
                    file=str(benchmark.path / BENCHMARK_FILE),
                    field="labelChunking",
                    message=f"the passage labels were made for chunking {recorded.hash}; chunking {digest} has no "
                    f"reviewed labels ({path.name} does not exist), so chunk-level measures on '{RELEASE_SPLIT}' are refused",
                    fix=f"run `rageval migrate-labels {benchmark.path} --from <chunking {recorded.hash}> --to <this chunking>`, "
                    "review the file, then evaluate again (document-level measures are unaffected)",
                )
            )
        return ChunkLabels(chunk_qrels(cases, chunks), "derived", digest, status="derived")

    rows = read_review(path)
    _check_current(path, rows, cases, benchmark, chunks)
    ids = {case.queryId for case in cases}
    used = [(line, row) for line, row in rows if row.queryId in ids]
    pending = [line for line, row in used if row.status == "proposed"]
    if pending and split == RELEASE_SPLIT:
        shown = ", ".join(map(str, pending[:8])) + (", …" if len(pending) > 8 else "")
        raise BenchmarkError(
            Problem(
                file=str(path),
                message=f"{len(pending)} chunk labels of '{RELEASE_SPLIT}' cases are still 'proposed' (lines {shown}); "
                f"chunk-level measures on '{RELEASE_SPLIT}' use reviewed labels only",
                fix=f"set decision to accept or reject on each row (grade may be changed), then run "
                f"`rageval migrate-labels {benchmark.path} --to <this chunking> --review` (document-level measures are unaffected)",
            )
        )
    qrels: dict[str, dict[str, int]] = {case.queryId: {} for case in cases}
    for _, row in used:
        if row.decision != "reject":
            qrels[row.queryId][row.chunkId] = row.grade
    return ChunkLabels(qrels, "migrated", digest, path, sha256_file(path), "proposed" if pending else "reviewed")


def chunk_qrels_for(
    benchmark: Benchmark, chunks: Sequence[Chunk], chunking_config: ChunkingConfig, split: str | None
) -> dict[str, dict[str, int]]:
    """The chunk qrels a passage-level evaluation of ``split`` uses (see :func:`chunk_labels`)."""
    return chunk_labels(benchmark, chunks, chunking_config, split).qrels


def _check_current(
    path: Path,
    rows: Sequence[tuple[int, LabelProposal]],
    cases: Sequence[Case],
    benchmark: Benchmark,
    chunks: Sequence[Chunk],
) -> None:
    """The review file must still describe these cases and chunks: the proposals recomputed now
    must pair the same chunks with the same judgments (a re-judged case or a changed corpus makes
    it stale)."""
    ids = {case.queryId for case in cases}
    fresh = {
        (p.queryId, p.chunkId): _sources_key(p)
        for p in propose(cases, chunks, rows[0][1].fromChunking if rows else "0" * 12)
    }
    filed = {(row.queryId, row.chunkId): (line, _sources_key(row)) for line, row in rows if row.queryId in ids}
    stale = [f"line {line}: {key[1]}" for key, (line, sources) in filed.items() if fresh.get(key) != sources]
    missing = sorted(key for key in fresh if key not in filed)
    if stale or missing:
        detail = "; ".join(stale[:3] + [f"no row for {q} / {c}" for q, c in missing[:3]])
        raise BenchmarkError(
            Problem(
                file=str(path),
                message=f"the review file no longer matches the judgments or the corpus ({len(stale)} stale rows, "
                f"{len(missing)} chunks without a row: {detail})",
                fix="run `rageval migrate-labels` again (unchanged rows keep their review), then review the new rows",
            )
        )


def _sources_key(proposal: LabelProposal) -> tuple[tuple[str, int, int | None, int | None], ...]:
    return tuple(sorted((s.documentId, s.grade, s.start, s.end) for s in proposal.sources))
