"""What rendering one page needs and gathers (shared by the Markdown renderer and the includes)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rageval.errors import Problem


@dataclass
class PageContext:
    """What rendering one page needs and gathers: its file (for errors), the steps, the include
    folders; the title, front matter, counts and problems found."""

    file: str
    folder: Path
    steps: frozenset[str]
    include_root: Path | None = None
    offset: int = 0  # the source line of this text's first line (a block body is rendered on its own)
    title: str | None = None  # the first heading
    h1: str | None = None  # the first heading of level 1
    front_matter: dict[str, Any] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)

    def count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def nested(self, offset: int) -> PageContext:
        """The context of a block body starting at source line ``offset`` (shares what it gathers)."""
        inner = PageContext(self.file, self.folder, self.steps, self.include_root, self.offset + offset)
        inner.title = inner.h1 = ""  # a body's headings never name the page
        inner.front_matter, inner.counts, inner.problems = self.front_matter, self.counts, self.problems
        return inner
