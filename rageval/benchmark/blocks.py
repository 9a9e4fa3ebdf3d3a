"""Markdown documents as blocks with character offsets, for the chunker: its break points (a heading,
a block's end) and the blocks it keeps whole (code, tables).

Two parsers, one per chunking version (``ChunkingConfig.parser``), since a chunk's offsets follow
the blocks and a recorded run must re-chunk exactly as it did:

- ``markdown-it`` (version 2): CommonMark with GitHub tables through markdown-it-py; its tokens'
  line maps give the offsets. Setext headings, fences nested in longer fences and tables without a
  leading ``|`` are read as CommonMark reads them.
- ``rageval-1`` (version 1): the hand-written parser of every run recorded before the version
  field existed, kept unchanged. It misreads exactly those three cases (``Title`` over ``=====`` is
  a paragraph; a ``#`` line inside a ```````` fence that holds a ```````` fence is a heading; ``a | b``
  rows are a paragraph).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from markdown_it import MarkdownIt

from rageval.benchmark.schema import ChunkParser


@dataclass(frozen=True)
class Block:
    start: int
    end: int
    kind: str  # heading | paragraph | code | table
    level: int = 0
    title: str = ""


def parse_blocks(text: str, parser: ChunkParser) -> list[Block]:
    """The document's blocks in order, under the chunking version's parser."""
    return blocks_markdown_it(text) if parser == "markdown-it" else blocks_v1(text)


# --------------------------------------------------------------------------- version 2: markdown-it

# markdown-it reads "\r\n", "\r" and "\n" as line ends (and nothing else): its line numbers count these.
_LINE_END = re.compile(r"\r\n?|\n")
_LEAF_KINDS = {"paragraph_open": "paragraph", "fence": "code", "code_block": "code", "table_open": "table"}
_LEAF_KINDS |= {"html_block": "paragraph", "hr": "paragraph"}


@cache
def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("table")


def blocks_markdown_it(text: str) -> list[Block]:
    """Leaf blocks at any depth (a list item's paragraphs, a quote's code), and the headings at the
    top level (a heading inside a list or a quote is a paragraph: it opens no section)."""
    starts = [0] + [m.end() for m in _LINE_END.finditer(text)]

    def offset(line: int) -> int:
        return starts[line] if line < len(starts) else len(text)

    tokens = _parser().parse(text)
    blocks: list[Block] = []
    in_table = 0
    for index, token in enumerate(tokens):
        if token.type == "table_close":
            in_table -= 1
        if token.map is None or in_table:
            continue
        first, last = token.map
        if token.type == "heading_open":
            kind = "heading" if token.level == 0 else "paragraph"
            title = tokens[index + 1].content.strip()
            blocks.append(Block(offset(first), offset(last), kind, int(token.tag[1:]), title))
        elif token.type in _LEAF_KINDS:
            blocks.append(Block(offset(first), offset(last), _LEAF_KINDS[token.type]))
        if token.type == "table_open":
            in_table += 1
    return blocks


# --------------------------------------------------------------------------- version 1: hand-written
# Frozen: runs recorded with ``parser: rageval-1`` (or before the field existed) re-chunk with it.

_FENCE = re.compile(r"^(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def blocks_v1(text: str) -> list[Block]:
    """Split markdown into blocks with character offsets; headings inside code fences are code."""
    blocks: list[Block] = []
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    i = 0
    while i < len(lines):
        line = lines[i].rstrip("\r\n")
        start = offsets[i]
        if not line.strip():
            i += 1
            continue
        fence = _FENCE.match(line.lstrip())
        if fence:
            j = i + 1
            while j < len(lines) and not lines[j].lstrip().startswith(fence.group(1)):
                j += 1
            j = min(j + 1, len(lines))
            blocks.append(Block(start, offsets[j], "code"))
            i = j
            continue
        heading = _HEADING.match(line)
        if heading:
            blocks.append(Block(start, offsets[i + 1], "heading", len(heading.group(1)), heading.group(2)))
            i += 1
            continue
        kind = "table" if line.lstrip().startswith("|") else "paragraph"
        j = i + 1
        while j < len(lines):
            nxt = lines[j].rstrip("\r\n")
            if not nxt.strip() or _FENCE.match(nxt.lstrip()) or _HEADING.match(nxt):
                break
            if (kind == "table") != nxt.lstrip().startswith("|"):
                break
            j += 1
        blocks.append(Block(start, offsets[j], kind))
        i = j
    return blocks
