"""Include directives, expanded against the page's folder and an include root.

``{* path [ln[a:b,c]] [hl[…]] *}`` (FastAPI's docs) becomes a fenced code block of the file (or of
the lines ``ln[…]`` picks; ``hl[…]`` only highlights and is dropped); ``--8<-- "path[:a:b]"``
(pymdownx.snippets) becomes the file itself, a Markdown file rendered like the page, any other
file as a fenced code block; inside a code fence it becomes the file's lines. A path is looked up
relative to the page's folder, then to the include root, then to the include root without its
leading ``../`` parts. A file found nowhere is a problem naming the page, its line and the places
looked in: the import stops rather than index a page with a hole in it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from rageval.benchmark.docs.context import PageContext
from rageval.errors import InputError, Problem
from rageval.io import read_text

BRACE = re.compile(r"^\s*\{\*\s*(?P<path>\S+)(?P<options>.*?)\*\}\s*$")
SNIPPET = re.compile(r"^\s*-{1,3}8<-{1,3}\s+(?P<quote>[\"'])(?P<path>[^\"']+)(?P=quote)\s*$")
LINES = re.compile(r"\bln\[(?P<ranges>[^\]]*)\]")
SNIPPET_LINES = re.compile(r"^(?P<path>.+?)(?::(?P<start>-?\d*)(?::(?P<end>-?\d*))?)?$")
# Code fences take their language from the included file's suffix.
LANGUAGES = {
    ".py": "python",
    ".js": "javascript",
    ".ts": "typescript",
    ".sh": "shell",
    ".toml": "toml",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".json": "json",
    ".html": "html",
    ".css": "css",
    ".txt": "",
}
MARKDOWN = (".md", ".markdown")
RenderMarkdown = Callable[[str, PageContext], str]


def is_include(line: str) -> bool:
    return bool(BRACE.match(line) or SNIPPET.match(line))


def _pick(text: str, ranges: list[tuple[int, int | None]]) -> str:
    lines = text.splitlines()
    picked: list[str] = []
    for start, end in ranges:
        picked.extend(lines[max(start - 1, 0) : end])
    return "\n".join(picked)


def _ranges(spec: str, context: PageContext, line: int) -> list[tuple[int, int | None]]:
    out: list[tuple[int, int | None]] = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        first, sep, last = part.partition(":")
        if not first.isdigit() or (sep and last and not last.isdigit()):
            context.problems.append(
                Problem(
                    file=context.file,
                    line=line,
                    field="include",
                    message=f"line range '{part}' is not a:b",
                    fix="write ln[3:8] or ln[3] (lines counted from 1)",
                )
            )
            continue
        out.append((int(first), int(last) if last else (None if sep else int(first))))
    return out


def _find(path: str, context: PageContext, line: int) -> Path | None:
    relative = PurePosixPath(path)
    places = [context.folder / relative]
    if context.include_root is not None:
        stripped = PurePosixPath(*[part for part in relative.parts if part != ".."]) if relative.parts else relative
        places += [context.include_root / relative, context.include_root / stripped]
    for place in places:
        if place.is_file():
            return place
    context.problems.append(
        Problem(
            file=context.file,
            line=line,
            field="include",
            message=f"included file '{path}' not found (looked in: {', '.join(str(p) for p in dict.fromkeys(places))})",
            fix="give --include-root the folder the includes are relative to, or correct the path",
        )
    )
    return None


def _read(path: Path, context: PageContext, line: int) -> str | None:
    try:
        return read_text(path)
    except InputError as exc:
        context.problems.extend(
            Problem(file=context.file, line=line, field="include", message=f"{path}: {p.message}") for p in exc.problems
        )
        return None


def _fenced(path: Path, text: str) -> str:
    fence = "````" if "```" in text else "```"
    return f"{fence}{LANGUAGES.get(path.suffix, path.suffix.lstrip('.'))}\n{text.rstrip()}\n{fence}"


def expand_line(line: str, context: PageContext, index: int, render: RenderMarkdown) -> str:
    """The text an include line (0-based line ``index`` of the page) stands for; '' after a problem."""
    number = context.offset + index + 1
    brace = BRACE.match(line)
    if brace:
        path, options = brace.group("path"), brace.group("options")
        ranges = [r for m in LINES.finditer(options) for r in _ranges(m.group("ranges"), context, number)]
    else:
        target = SNIPPET_LINES.match(SNIPPET.match(line).group("path"))  # type: ignore[union-attr]
        path = target.group("path")  # type: ignore[union-attr]
        start, end = target.group("start"), target.group("end")  # type: ignore[union-attr]
        ranges = [(int(start or 1), int(end) if end else None)] if start or end else []
    found = _find(path, context, number)
    text = _read(found, context, number) if found is not None else None
    if found is None or text is None:
        return ""
    context.count("includes")
    if ranges:
        text = _pick(text, ranges)
    if not brace and found.suffix in MARKDOWN:
        inner = context.nested(0)
        inner.file, inner.folder = str(found), found.parent
        return render(text, inner)
    return _fenced(found, text)


def expand_fence(source: list[str], context: PageContext, start: int) -> str:
    """A code fence with each ``--8<--`` line replaced by the lines of the file it names."""
    out: list[str] = []
    for index, line in enumerate(source, start=start):
        match = SNIPPET.match(line)
        if match is None or index == start:
            out.append(line)
            continue
        target = SNIPPET_LINES.match(match.group("path"))
        found = _find(target.group("path"), context, context.offset + index + 1)  # type: ignore[union-attr]
        text = _read(found, context, context.offset + index + 1) if found is not None else None
        if text is not None:
            s, e = target.group("start"), target.group("end")  # type: ignore[union-attr]
            context.count("includes")
            out.extend((_pick(text, [(int(s or 1), int(e) if e else None)]) if s or e else text).splitlines())
    return "\n".join(out)
