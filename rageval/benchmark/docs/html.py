"""An HTML page (or an HTML block inside Markdown) as indexable text, read with BeautifulSoup.

Headings become ``# …`` lines, ``<pre>`` a fenced code block, a table goes the way the table step
says (:mod:`.tables`), every other block element (paragraph, list item, ``div``…) its text on a
line of its own; scripts, styles and templates are dropped. The title is ``<title>``, else the
first heading.
"""

from __future__ import annotations

from collections.abc import Iterator

from bs4 import BeautifulSoup, NavigableString, Tag
from bs4.element import Comment

from rageval.benchmark.docs.tables import TABLE_WRITERS

DROPPED = frozenset({"script", "style", "template", "noscript", "head"})
HEADINGS = {f"h{level}": level for level in range(1, 7)}
BLOCKS = frozenset(
    {
        "p",
        "div",
        "section",
        "article",
        "main",
        "body",
        "header",
        "footer",
        "nav",
        "aside",
        "ul",
        "ol",
        "li",
        "dl",
        "dt",
        "dd",
        "blockquote",
        "figure",
        "figcaption",
        "form",
        "fieldset",
        "details",
        "summary",
        "hr",
        "br",
        "html",
        "center",
        "address",
    }
)


def _text(node: Tag) -> str:
    return " ".join(node.get_text(" ").split())


def _table(node: Tag, steps: frozenset[str]) -> str:
    rows = [[_text(cell) for cell in tr.find_all(["th", "td"])] for tr in node.find_all("tr")]
    rows = [row for row in rows if row]
    first = node.find("tr")
    has_header = first is not None and first.find("td") is None and first.find("th") is not None
    header, body = (rows[0], rows[1:]) if has_header and rows else ([], rows)
    writer = next((TABLE_WRITERS[step] for step in TABLE_WRITERS if step in steps), None)
    if writer is None:
        return "\n".join(" ".join(row) for row in rows)
    return writer(header, body)


def html_blocks(node: Tag, steps: frozenset[str], counts: dict[str, int]) -> Iterator[str]:
    """The text of each block of ``node``, in order (inline runs between blocks joined)."""
    inline: list[str] = []

    def flush() -> Iterator[str]:
        text = " ".join("".join(inline).split())
        inline.clear()
        if text:
            yield text

    for child in node.children:
        if isinstance(child, Comment):
            continue
        if isinstance(child, NavigableString):
            inline.append(str(child))
            continue
        if not isinstance(child, Tag) or child.name in DROPPED:
            continue
        if child.name in HEADINGS or child.name in ("pre", "table") or child.name in BLOCKS:
            yield from flush()
        if child.name in HEADINGS:
            yield f"{'#' * HEADINGS[child.name]} {_text(child)}"
        elif child.name == "pre":
            yield f"```\n{child.get_text().rstrip()}\n```"
        elif child.name == "table":
            counts["tables"] = counts.get("tables", 0) + 1
            yield _table(child, steps)
        elif child.name in BLOCKS:
            yield from html_blocks(child, steps, counts)
        else:
            inline.append(child.get_text())  # inline: no separator, as a browser shows it
    yield from flush()


def html_text(html: str, steps: frozenset[str], counts: dict[str, int]) -> str:
    soup = BeautifulSoup(html, "html.parser")
    return "\n\n".join(html_blocks(soup, steps, counts))


def render_html(html: str, steps: frozenset[str], counts: dict[str, int]) -> tuple[str | None, str]:
    """(title, text) of an HTML page."""
    soup = BeautifulSoup(html, "html.parser")
    title_tag = soup.find("title")
    title = _text(title_tag) if isinstance(title_tag, Tag) and _text(title_tag) else None
    if title is None:
        heading = soup.find(list(HEADINGS))
        title = _text(heading) if isinstance(heading, Tag) else None
    body = soup.body if isinstance(soup.body, Tag) else soup
    return title, "\n\n".join(html_blocks(body, steps, counts))
