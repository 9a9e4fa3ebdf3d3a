"""A Markdown page (mkdocs or plain) as indexable text, read through markdown-it-py's token stream.

The page is parsed once (CommonMark with tables, front matter, ``!!!``/``???`` admonitions and
``///`` blocks); each top-level block then becomes text: headings as ``# …`` lines (setext ones
too), code and prose copied from the source as written, and the blocks a step names (see
:mod:`.steps`) converted. A block nested in a list or quote is converted in place, at its indent.
The body of an admonition or a ``///`` block is a page of its own, rendered the same way.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Sequence
from functools import cache

import yaml
from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.admon import admon_plugin
from mdit_py_plugins.container import container_plugin
from mdit_py_plugins.front_matter import front_matter_plugin

from rageval.benchmark.docs.context import PageContext
from rageval.benchmark.docs.html import html_text
from rageval.benchmark.docs.includes import expand_fence, expand_line, is_include
from rageval.benchmark.docs.tables import TABLE_WRITERS
from rageval.errors import Problem

__all__ = ["PageContext", "parser", "render_markdown"]

# `## Title { #anchor }`, `{#id .class}`, `{: #id }`: an attribute list ending a heading.
ANCHOR = re.compile(r"\s*\{:?\s*[#.][^{}]*\}\s*$")
# mkautodoc / mkdocstrings: `::: package.name` (its option lines follow, indented, starting with ':').
AUTODOC = re.compile(r"^\s*:::\s+(\S+)\s*$")
# The blocks a step converts wherever they stand (in a list item or a quote too).
CONVERTED = ("admonition_open", "container_blocks_open", "table_open", "html_block", "front_matter")


@cache
def parser() -> MarkdownIt:
    return (
        MarkdownIt("commonmark")
        .enable("table")
        .use(front_matter_plugin)
        .use(admon_plugin)
        .use(container_plugin, name="blocks", marker="/", validate=lambda *_: True)
    )


def render_markdown(source: str, context: PageContext) -> str:
    """The page's text after the steps; the title, front matter and problems land in ``context``."""
    lines = source.splitlines()
    tokens = parser().parse(source)
    if "html-as-text" in context.steps:
        _drop_inline_html(tokens, lines, context)
    blocks = [text for start, end in _top_level(tokens) if (text := _block(tokens[start:end], lines, context))]
    return "\n\n".join(blocks)


def _drop_inline_html(tokens: Sequence[Token], lines: list[str], context: PageContext) -> None:
    """Remove inline HTML tags (``<a href=…>``, ``</a>``) from the source lines of the prose they
    stand in, wherever it is (a list item too); code spans and blocks keep theirs."""
    for token in tokens:
        if token.type != "inline" or token.map is None or not token.children:
            continue
        if not any(child.type == "html_inline" for child in token.children):
            continue
        start, end = token.map
        text = "\n".join(lines[start:end])
        at = 0
        for child in token.children:  # in order: a tag is removed, any other text is stepped over
            found = text.find(child.content, at) if child.content else -1
            if found < 0:
                continue
            if child.type == "html_inline":
                text, at = text[:found] + text[found + len(child.content) :], found
            else:
                at = found + len(child.content)
        lines[start:end] = text.split("\n")
        context.count("inline-html")


def _top_level(tokens: Sequence[Token]) -> list[tuple[int, int]]:
    """(first, past-last) token index of each top-level block."""
    out, index = [], 0
    while index < len(tokens):
        end = _close(tokens, index)
        out.append((index, end + 1))
        index = end + 1
    return out


def _close(tokens: Sequence[Token], index: int) -> int:
    token = tokens[index]
    if token.nesting != 1:
        return index
    return next(i for i in range(index + 1, len(tokens)) if tokens[i].level == token.level and tokens[i].nesting == -1)


def _source(lines: Sequence[str], token: Token) -> list[str]:
    start, end = token.map or (0, 0)
    out = list(lines[start:end])
    while out and not out[-1].strip():
        out.pop()
    return out


def _block(tokens: Sequence[Token], lines: Sequence[str], context: PageContext) -> str:
    first = tokens[0]
    handler = HANDLERS.get(first.type)
    if handler is not None:
        return handler(tokens, lines, context)
    return _verbatim(tokens, lines, context)


def _verbatim(tokens: Sequence[Token], lines: Sequence[str], context: PageContext) -> str:
    """The block's source lines, with each converted block inside it (a table in a list item, say)
    replaced by its conversion at its indent."""
    first = tokens[0]
    if first.map is None:
        return ""
    start = first.map[0]
    out = list(lines[start : first.map[1]])
    index = 1
    splices: list[tuple[list[int], str, bool]] = []
    while index < len(tokens):
        token = tokens[index]
        end = _close(tokens, index)
        if token.type == "paragraph_open" and token.map is not None and _directives(_source(lines, token), context):
            splices.append((token.map, _paragraph(tokens[index : end + 1], lines, context), False))
            index = end + 1
        elif token.type in CONVERTED and token.map is not None and _converts(token, context):
            splices.append((token.map, _block(tokens[index : end + 1], lines, context), True))
            index = end + 1
        else:
            index += 1
    for (inner_start, inner_end), text, indented in reversed(splices):
        indent = re.match(r"\s*", lines[inner_start]).group() if indented else ""  # type: ignore[union-attr]
        replaced = [indent + line if line else "" for line in text.splitlines()]
        out[inner_start - start : inner_end - start] = [*replaced, ""] if indented else replaced
    while out and not out[-1].strip():
        out.pop()
    return "\n".join(out)


def _converts(token: Token, context: PageContext) -> bool:
    return any(step in context.steps for step in STEP_OF.get(token.type, ()))


def _heading(tokens: Sequence[Token], lines: Sequence[str], context: PageContext) -> str:
    text = tokens[1].content
    if "strip-heading-anchors" in context.steps:
        text = ANCHOR.sub("", text)
    text = " ".join(text.split())
    if context.title is None and text:
        context.title = text
    if context.h1 is None and text and tokens[0].tag == "h1":
        context.h1 = text
    if tokens[0].markup in ("=", "-"):
        context.count("setext-headings")
    return f"{'#' * int(tokens[0].tag[1])} {text}"


def _paragraph(tokens: Sequence[Token], lines: Sequence[str], context: PageContext) -> str:
    source = _source(lines, tokens[0])
    start = (tokens[0].map or (0, 0))[0]
    includes = "expand-includes" in context.steps
    autodoc = "autodoc-as-text" in context.steps
    if not _directives(source, context):
        return "\n".join(source)
    out: list[str] = []
    in_autodoc = False
    for number, line in enumerate(source, start=start):
        indent = line[: len(line) - len(line.lstrip())]
        if includes and is_include(line):
            expanded = expand_line(line, context, number, _render_included)
            out.extend(indent + part if part else "" for part in expanded.split("\n"))
            in_autodoc = False
        elif autodoc and (match := AUTODOC.match(line)):
            out.append(f"{indent}`{match.group(1)}`")
            context.count("autodoc")
            in_autodoc = True
        elif not (in_autodoc and line.strip().startswith(":")):
            out.append(line)
            in_autodoc = False
    return "\n".join(out)


def _directives(source: Sequence[str], context: PageContext) -> bool:
    """Whether a paragraph's lines hold an include or an autodoc line a step converts."""
    includes = "expand-includes" in context.steps
    autodoc = "autodoc-as-text" in context.steps
    return any((includes and is_include(line)) or (autodoc and bool(AUTODOC.match(line))) for line in source)


def _render_included(text: str, context: PageContext) -> str:
    return render_markdown(text, context)


def _fence(tokens: Sequence[Token], lines: Sequence[str], context: PageContext) -> str:
    source = _source(lines, tokens[0])
    if "expand-includes" not in context.steps:
        return "\n".join(source)
    return expand_fence(source, context, (tokens[0].map or (0, 0))[0])


def _front_matter(tokens: Sequence[Token], lines: Sequence[str], context: PageContext) -> str:
    if "front-matter" not in context.steps:
        return "\n".join(_source(lines, tokens[0]))
    try:
        data = yaml.safe_load(tokens[0].content) if tokens[0].content.strip() else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = context.offset + 2 + (mark.line if mark is not None else 0)
        context.problems.append(
            Problem(
                file=context.file,
                line=line,
                field="front matter",
                message=f"not YAML: {getattr(exc, 'problem', None) or exc}",
                fix="correct the front matter between the --- lines",
            )
        )
        return ""
    if not isinstance(data, dict):
        context.problems.append(
            Problem(
                file=context.file, line=context.offset + 1, field="front matter", message="expected key: value pairs"
            )
        )
        return ""
    context.front_matter.update({str(key): value for key, value in data.items()})
    context.count("front-matter")
    return ""


def _admonition(tokens: Sequence[Token], lines: Sequence[str], context: PageContext) -> str:
    first = tokens[0]
    if "admonitions-as-text" not in context.steps:
        return _verbatim(tokens, lines, context)
    if first.type == "admonition_open":
        kind, title = str(first.meta.get("tag", "note")), tokens[2].content
    else:
        kind, _, title = first.info.strip().partition("|")
        kind = kind.split()[0] if kind.split() else "note"
    kind, title = kind.strip(), " ".join(title.split())
    label = kind.capitalize() + (f": {title}" if title and title.lower() != kind.lower() else ":")
    start, end = first.map or (0, 0)
    body = textwrap.dedent("\n".join(lines[start + 1 : end]))
    context.count("admonitions")
    rendered = render_markdown(body, context.nested(start + 1))
    return f"{label}\n{rendered}" if rendered else label


def _table(tokens: Sequence[Token], lines: Sequence[str], context: PageContext) -> str:
    writer = next((TABLE_WRITERS[step] for step in TABLE_WRITERS if step in context.steps), None)
    if writer is None:
        return "\n".join(_source(lines, tokens[0]))
    header: list[str] = []
    rows: list[list[str]] = []
    in_head = False
    for token in tokens:
        if token.type in ("thead_open", "thead_close"):
            in_head = token.type == "thead_open"
        elif token.type == "tr_open" and not in_head:
            rows.append([])
        elif token.type == "inline":
            (header if in_head else rows[-1]).append(token.content)
    context.count("tables")
    return writer(header, rows)


def _html(tokens: Sequence[Token], lines: Sequence[str], context: PageContext) -> str:
    if "html-as-text" not in context.steps:
        return "\n".join(_source(lines, tokens[0]))
    context.count("html-blocks")
    return html_text(tokens[0].content, context.steps, context.counts)


Handler = Callable[[Sequence[Token], Sequence[str], PageContext], str]
HANDLERS: dict[str, Handler] = {
    "heading_open": _heading,
    "paragraph_open": _paragraph,
    "fence": _fence,
    "front_matter": _front_matter,
    "admonition_open": _admonition,
    "container_blocks_open": _admonition,
    "table_open": _table,
    "html_block": _html,
}
# The steps under which a nested block is converted in place.
STEP_OF: dict[str, tuple[str, ...]] = {
    "admonition_open": ("admonitions-as-text",),
    "container_blocks_open": ("admonitions-as-text",),
    "table_open": tuple(TABLE_WRITERS),
    "html_block": ("html-as-text",),
    "front_matter": ("front-matter",),
}
