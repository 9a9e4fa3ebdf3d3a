"""Chunkers with stable chunk IDs, and span judgments turned into chunk judgments.

A chunk ID is ``{parent id}#{config hash}-{position}``: a pure function of the parent document
ID, the chunking configuration and the chunk's position, so it is the same on every run and
machine, and the parent is always recoverable. Chunk offsets are character offsets into the
parent's text.

The markdown chunker cuts a document's token sequence into windows of at most ``size`` tokens
(``overlap`` tokens repeated, except across a heading), preferring to end a window, in this order, at a heading, at the end
of a block (paragraph, list, table, code block), at a line end. With ``code_blocks``/``tables`` set
to ``atomic`` no window ends inside such a block unless the block alone exceeds ``size``; then it is
cut at line ends. With ``headings`` the title and the heading path above a chunk are prefixed to
its indexed text (not to its offsets). Blocks come from the chunking's ``parser``, its version
(:mod:`rageval.benchmark.blocks`: markdown-it-py from version 2; version 1 kept for recorded runs).
"""

from __future__ import annotations

import bisect
import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from rageval.benchmark.blocks import Block, parse_blocks
from rageval.benchmark.columns import DocumentText
from rageval.benchmark.schema import LEGACY_CHUNK_PARSER, Case, ChunkingConfig, Document
from rageval.benchmark.spans import covers
from rageval.benchmark.tokenizers import get_tokenizer

# The chunking algorithm's version, by block parser (rageval.benchmark.blocks): part of the hash.
ALGORITHMS: dict[str, str] = {"rageval-1": "rageval-chunking/1", "markdown-it": "rageval-chunking/2"}


@dataclass(frozen=True, slots=True)
class Chunk:
    """One chunk. Slotted, and its indexed text built on demand: a corpus holds hundreds of
    thousands, and a stored ``index_text`` would be a second copy of every document's text."""

    chunk_id: str
    parent_id: str
    position: int
    start: int
    end: int
    text: str
    headings: tuple[str, ...]
    prefix: str  # title and heading path, indexed before the text ("" when headings are off)
    counted: int | None  # tokens, when chunking counted them; None (method none): counted when asked
    tokenizer: str

    @property
    def index_text(self) -> str:
        return f"{self.prefix}\n{self.text}" if self.prefix else self.text

    @property
    def tokens(self) -> int:
        return self.counted if self.counted is not None else len(get_tokenizer(self.tokenizer)(self.text))


def config_hash(config: ChunkingConfig) -> str:
    """12 hex digits identifying the chunking configuration and algorithm version. A version-1
    chunking hashes as it did before ``parser`` existed, so recorded chunk IDs stay valid."""
    fields = config.model_dump(mode="json")
    if config.parser == LEGACY_CHUNK_PARSER:
        del fields["parser"]
    payload = json.dumps({"algorithm": ALGORITHMS[config.parser], **fields}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:12]


def chunk_id(parent_id: str, config_digest: str, position: int) -> str:
    return f"{parent_id}#{config_digest}-{position}"


def parent_of(chunk_id_: str) -> str:
    return chunk_id_.rsplit("#", 1)[0]


# --------------------------------------------------------------------------- heading paths


def _heading_path(blocks: list[Block], start: int) -> tuple[str, ...]:
    """Headings above a chunk starting at ``start``; a heading the chunk begins with is its text."""
    path: list[tuple[int, str]] = []
    for block in blocks:
        if block.start > start:
            break
        if block.kind == "heading":
            path = [(lvl, t) for lvl, t in path if lvl < block.level]
            if block.start < start:
                path.append((block.level, block.title))
    return tuple(title for _, title in path)


# --------------------------------------------------------------------------- chunking


def chunk_document(document: Document | DocumentText, config: ChunkingConfig, digest: str | None = None) -> list[Chunk]:
    """Cut one document into chunks under ``config``."""
    digest = digest or config_hash(config)
    text = document.text
    if config.method == "none":  # one chunk, its tokens counted only if someone asks
        return [_make_chunk(document, config, digest, 0, 0, len(text), (), tokens=None)]
    spans = get_tokenizer(config.tokenizer)(text)
    if not spans:
        return [_make_chunk(document, config, digest, 0, 0, len(text), (), tokens=0)]

    blocks = parse_blocks(text, config.parser)
    windows = _windows(text, spans, blocks, config)
    chunks = []
    for position, (first, last) in enumerate(windows):
        start, end = spans[first][0], spans[last - 1][1]
        headings = _heading_path(blocks, start) if config.headings else ()
        chunks.append(_make_chunk(document, config, digest, position, start, end, headings, tokens=last - first))
    return chunks


def _make_chunk(
    document: Document | DocumentText,
    config: ChunkingConfig,
    digest: str,
    position: int,
    start: int,
    end: int,
    headings: tuple[str, ...],
    tokens: int | None,
) -> Chunk:
    body = document.text[start:end]
    parts = [document.title, *headings] if config.headings else []
    parts = [p for p in parts if p]
    return Chunk(
        chunk_id=chunk_id(document.id, digest, position),
        parent_id=document.id,
        position=position,
        start=start,
        end=end,
        text=body,
        headings=headings,
        prefix=" > ".join(parts),
        counted=tokens,
        tokenizer=config.tokenizer,
    )


class _Breaks(NamedTuple):
    """Token indices where a window may end, or must not."""

    headings: set[int]  # a section heading starts here
    blocks: set[int]  # another block starts here (and the document ends at the last token)
    lines: set[int]  # a line starts here
    inside_atomic: set[int]  # inside an atomic block: a window must not end here (unless forced)
    atomic_ranges: list[tuple[int, int]]  # the atomic blocks [first, last) small enough for one window


def _breaks(text: str, spans: list[tuple[int, int]], blocks: list[Block], config: ChunkingConfig) -> _Breaks:
    """Where the headings, blocks, lines and atomic blocks of ``text`` fall among its tokens."""
    starts = [s for s, _ in spans]

    def token_at(offset: int) -> int:
        return bisect.bisect_left(starts, offset)

    atomic_kinds = {k for k, rule in (("code", config.code_blocks), ("table", config.tables)) if rule == "atomic"}
    heading_breaks: set[int] = set()
    block_breaks: set[int] = set()
    inside_atomic: set[int] = set()
    atomic_ranges: list[tuple[int, int]] = []
    for block in blocks:
        first, last = token_at(block.start), token_at(block.end)
        if first >= last:
            continue
        (heading_breaks if block.kind == "heading" else block_breaks).add(first)
        if block.kind in atomic_kinds and last - first <= config.size:
            inside_atomic.update(range(first + 1, last))
            atomic_ranges.append((first, last))
    line_breaks = {token_at(m.end()) for m in re.finditer(r"\n", text)}
    block_breaks.add(len(spans))
    return _Breaks(heading_breaks, block_breaks, line_breaks, inside_atomic, atomic_ranges)


def _windows(
    text: str, spans: list[tuple[int, int]], blocks: list[Block], config: ChunkingConfig
) -> list[tuple[int, int]]:
    """Token windows ``[first, last)`` covering every token."""
    n = len(spans)
    # Unpacked into locals: window_end runs once or twice per window and reads them as closure cells.
    heading_breaks, block_breaks, line_breaks, inside_atomic, atomic_ranges = _breaks(text, spans, blocks, config)
    min_fill = max(1, config.size // 2)

    def window_end(first: int) -> int:
        limit = min(first + config.size, n)
        # Where the rest of the document fits, still end at a section heading if there is one.
        for candidates in (heading_breaks,) if limit == n else (heading_breaks, block_breaks, line_breaks):
            options = [t for t in candidates if first + min_fill <= t <= limit and t not in inside_atomic]
            if options:
                return max(options)
        if limit == n:
            return n
        # No natural break in the second half of the window: cut at the size limit, unless that
        # lands inside an atomic block, then at the last break before it.
        if limit in inside_atomic:
            options = [
                t for t in line_breaks | block_breaks | heading_breaks if first < t < limit and t not in inside_atomic
            ]
            return max(options) if options else limit
        return limit

    windows: list[tuple[int, int]] = []
    first = 0
    while first < n:
        last = window_end(first)
        if windows and last <= windows[-1][1]:
            # The overlap left no room for new text (an atomic block ahead): drop the overlap.
            first = windows[-1][1]
            last = window_end(first)
        windows.append((first, last))
        if last >= n:
            break
        # Overlap repeats the end of the previous window, but never across a section heading.
        nxt = last if last in heading_breaks else max(last - config.overlap, first + 1)
        for a_first, a_last in atomic_ranges:
            # Do not start a window inside an atomic block: start at its beginning instead.
            if a_first < nxt < a_last and a_first > first:
                nxt = a_first
        first = nxt
    return windows


def passage_id(parent_id: str, start: int, end: int) -> str:
    """The ID of a passage given by offsets (not one of rageval's chunks): never a chunk ID, since
    a chunk's suffix is a hexadecimal hash."""
    return f"{parent_id}#span:{start}-{end}"


def passage_chunk(document: Document, start: int, end: int, tokenizer: str) -> Chunk:
    """Another system's passage ``[start, end)`` of ``document``, as a chunk every step reads alike."""
    return Chunk(
        chunk_id=passage_id(document.id, start, end),
        parent_id=document.id,
        position=-1,
        start=start,
        end=end,
        text=document.text[start:end],
        headings=(),
        prefix="",
        counted=None,
        tokenizer=tokenizer,
    )


def chunk_corpus(documents: Iterable[Document | DocumentText], config: ChunkingConfig) -> list[Chunk]:
    """Chunk every document; chunks come out in document order, then position order. A benchmark's
    documents are read as ``benchmark.documents.texts()``: no :class:`Document` built for each."""
    digest = config_hash(config)
    return [chunk for document in documents for chunk in chunk_document(document, config, digest)]


# --------------------------------------------------------------------------- judgments


def chunk_qrels(cases: Iterable[Case], chunks: Iterable[Chunk]) -> dict[str, dict[str, int]]:
    """Chunk-level qrels from span judgments: which chunks the judgments grade, and how.

    A chunk takes the highest grade among the judged spans of its parent that it covers (the metric
    contract's rule: an overlap of at least half the shorter of the two, :func:`covers`; a chunk
    that is exactly a judged span, by those spans alone); a judgment without a span spans its whole
    document. A passage-level evaluation grades passages on the spans
    themselves and credits each span once (:mod:`rageval.evaluation.spans`): these qrels say which
    chunks are judged (pools, exports), not the gain a ranking earns.
    """
    by_parent: dict[str, list[Chunk]] = {}
    for chunk in chunks:
        by_parent.setdefault(chunk.parent_id, []).append(chunk)
    out: dict[str, dict[str, int]] = {}
    for case in cases:
        grades: dict[str, int] = {}
        exact: set[str] = set()  # chunks that are exactly a judged span: graded by those spans alone
        for judgment in case.relevant:
            for chunk in by_parent.get(judgment.documentId, []):
                span = judgment.span
                if span is not None and (chunk.start, chunk.end) == span:
                    if chunk.chunk_id not in exact:
                        exact.add(chunk.chunk_id)
                        grades.pop(chunk.chunk_id, None)
                elif chunk.chunk_id in exact or (span is not None and not covers(chunk.start, chunk.end, *span)):
                    continue
                grades[chunk.chunk_id] = max(judgment.grade, grades.get(chunk.chunk_id, judgment.grade))
        out[case.queryId] = grades
    return out
