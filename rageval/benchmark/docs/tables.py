"""A table as text: one line per row of ``header: value`` pairs, or kept whole as a pipe table.
Shared by the Markdown and the HTML pages."""

from __future__ import annotations

from collections.abc import Sequence


def _cell(text: str) -> str:
    return " ".join(text.split())


def table_as_rows(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """``header: value; header: value`` per body row (empty cells left out; a cell without a header
    stands alone). A table with a header but no body keeps its header as one line."""
    names = [_cell(name) for name in header]
    if not rows:
        return "; ".join(name for name in names if name)
    lines = []
    for row in rows:
        pairs = []
        for index, value in enumerate(row):
            value = _cell(value)
            if not value:
                continue
            name = names[index] if index < len(names) else ""
            pairs.append(f"{name}: {value}" if name else value)
        if pairs:
            lines.append("; ".join(pairs))
    return "\n".join(lines)


def table_whole(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """The table as a Markdown pipe table (a '|' inside a cell escaped)."""

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(_cell(cell).replace("|", "\\|") for cell in cells) + " |"

    width = max([len(header), *(len(row) for row in rows)])
    head = list(header) + [""] * (width - len(header))
    body = [list(row) + [""] * (width - len(row)) for row in rows]
    return "\n".join([line(head), "|" + "---|" * width, *(line(row) for row in body)])


TABLE_WRITERS = {"tables-as-rows": table_as_rows, "tables-whole": table_whole}
