"""What differs between two runs' executed notebooks, in a screen or two (``rageval diff-notebooks``).

Both notebooks are first reduced to what a reader compares: each cell's source and the text of its
outputs. Left out: notebook and cell metadata (papermill's start and end times and durations, the
kernel's timings), execution counts and cell IDs. The injected-parameters cell's multi-line
strings (``config_yaml``) are shown as the lines they hold, so a changed key is a one-line change; an
HTML table (a pandas Styler) is shown one row per line; an image is one line, its digest and size,
reported as "image changed"; memory addresses (``at 0x7f…``) and random Styler IDs are masked. The
lines are then diffed with :mod:`difflib`, one section per changed source or output, each headed by
its nbdime-style path (``/cells/2/source``, ``/cells/5/outputs/0``). nbdime's own, complete diff is
:func:`nbdime_diff` (``--full``).
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import nbformat

from rageval.errors import InputError, Problem, TrackingError
from rageval.tracking.store import Tracker

# Lines of each section shown by default (the rest are counted); --full or max_lines=0 shows all.
MAX_LINES = 40
# One line of context around each change keeps a changed YAML key next to its neighbours.
CONTEXT = 1
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/svg+xml")
TEXT_TYPES = ("text/html", "text/markdown", "text/latex", "application/json", "text/plain")
_ADDRESS = re.compile(r"\bat 0x[0-9a-fA-F]+")
# pandas' random table IDs, and rageval's (``T_rageval_`` and a digest of the table: a value change changes it).
_STYLER_ID = re.compile(r"\bT_(?:[0-9a-f]{5}|rageval_[0-9a-f]{10})(?=[_\"\s])")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_BREAKS = {"p", "div", "br", "li", "h1", "h2", "h3", "h4", "h5", "h6", "caption", "pre"}


@dataclass(frozen=True)
class Image:
    """An image output as the diff sees it: its type, digest and size."""

    mime: str
    digest: str
    size: int

    def line(self) -> str:
        return f"[{self.mime} {self.size / 1024:.1f} KB sha256:{self.digest[:12]}]"


@dataclass(frozen=True)
class Output:
    """One output reduced to its text lines (or an image), with the representation it came from."""

    kind: str
    lines: tuple[str, ...] = ()
    image: Image | None = None
    columns: str | None = None  # an HTML table's header row

    def title(self) -> str:
        return f"{self.kind}; columns {self.columns}" if self.columns else self.kind


class _HtmlText(HTMLParser):
    """HTML as lines of text: a table row per line (cells joined by `` | ``), style and script dropped."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: list[str] = []
        self._line: list[str] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._skip = 0
        self._thead = False
        self.header: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("style", "script"):
            self._skip += 1
        elif tag == "thead":
            self._thead = True
        elif tag == "tr":
            self._flush()
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
        elif tag in _BREAKS:
            self._flush()

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "script"):
            self._skip = max(0, self._skip - 1)
        elif tag in ("td", "th") and self._row is not None and self._cell is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "thead":
            self._thead = False
        elif tag == "tr" and self._row is not None:
            self._end_row(self._row)
            self._row = None
        elif tag in _BREAKS or tag == "table":
            self._flush()

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        if self._cell is not None:
            self._cell.append(data)
        elif self._row is None:
            self._line.append(data)

    def _end_row(self, row: list[str]) -> None:
        if self._thead and self.header is not None and row and not any(row[1:]):
            # pandas writes the index's name on a header row of its own: join it to the columns' row.
            columns = self.header.split(" | ")
            corner = f"{row[0]} \\ {columns[0]}" if columns[0] else row[0]  # index name \ columns' name
            self.header = " | ".join([corner, *columns[1:]])
            self.lines[-1] = self.header
            return
        self.lines.append(" | ".join(row))
        if self._thead:
            self.header = self.lines[-1]

    def _flush(self) -> None:
        text = " ".join("".join(self._line).split())
        if text:
            self.lines.append(text)
        self._line = []

    def text(self) -> list[str]:
        self._flush()
        return self.lines


def html_lines(html: str) -> tuple[list[str], str | None]:
    """The text of an HTML output, one table row or block per line, and its (first) table's header row."""
    parser = _HtmlText()
    parser.feed(html)
    parser.close()
    return parser.text(), parser.header


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _mask(text: str) -> str:
    return _STYLER_ID.sub("T_…", _ADDRESS.sub("at 0x…", _ANSI.sub("", text)))


def reduce_output(output: dict[str, Any]) -> Output:
    """An output as lines of text, or an image (an image wins over its text repr, e.g. ``<Figure …>``)."""
    kind = output.get("output_type", "")
    if kind == "stream":
        return Output(
            f"stream {output.get('name', '')}".strip(), tuple(_mask(_text(output.get("text", ""))).splitlines())
        )
    if kind == "error":
        lines = [f"{output.get('ename', '')}: {output.get('evalue', '')}", *map(_text, output.get("traceback", []))]
        return Output("error", tuple(_mask("\n".join(lines)).splitlines()))
    data = output.get("data", {})
    for mime in IMAGE_TYPES:
        if mime in data:
            raw = _text(data[mime]).encode()
            return Output(mime, image=Image(mime, hashlib.sha256(raw).hexdigest(), len(raw)))
    for mime in TEXT_TYPES:
        if mime in data:
            text = _mask(_text(data[mime]))
            if mime == "text/html":
                lines, columns = html_lines(text)
                return Output(mime, tuple(lines), columns=columns)
            return Output(mime, tuple(text.splitlines()))
    return Output(kind, tuple(sorted(data)))


# Injected parameters that differ between any two runs by construction and say nothing about them:
# where rageval run's kernel leaves its result (a temporary file, gone once the run is logged).
PRIVATE_PARAMETERS = frozenset({"handoff"})


def parameter_lines(source: str) -> list[str]:
    """Papermill's injected parameters with each multi-line string literal (``config_yaml = "…\\n…"``)
    opened into its lines, between triple quotes (:data:`PRIVATE_PARAMETERS` left out)."""
    lines: list[str] = []
    for line in source.splitlines():
        try:
            statement = ast.parse(line).body
        except SyntaxError:
            statement = []
        if (
            len(statement) == 1
            and isinstance(statement[0], ast.Assign)
            and any(isinstance(t, ast.Name) and t.id in PRIVATE_PARAMETERS for t in statement[0].targets)
        ):
            continue
        if (
            len(statement) == 1
            and isinstance(statement[0], ast.Assign)
            and len(statement[0].targets) == 1
            and isinstance(statement[0].targets[0], ast.Name)
            and isinstance(statement[0].value, ast.Constant)
            and isinstance(statement[0].value.value, str)
            and "\n" in statement[0].value.value
        ):
            lines.append(f'{statement[0].targets[0].id} = """')
            lines.extend(statement[0].value.value.splitlines())
            lines.append('"""')
        else:
            lines.append(line)
    return lines


@dataclass(frozen=True)
class Cell:
    """A cell as the diff sees it: type, source lines, outputs."""

    kind: str
    source: tuple[str, ...]
    outputs: tuple[Output, ...]
    injected: bool = False


def reduce_notebook(nb: dict[str, Any]) -> list[Cell]:
    """The notebook's cells without metadata, execution counts or IDs."""
    cells = []
    for cell in nb.get("cells", []):
        source = _text(cell.get("source", ""))
        injected = "injected-parameters" in (cell.get("metadata") or {}).get("tags", [])
        lines = parameter_lines(source) if injected else source.splitlines()
        outputs = tuple(reduce_output(o) for o in cell.get("outputs", []))
        cells.append(Cell(cell.get("cell_type", ""), tuple(lines), outputs, injected))
    return cells


def _number(text: str) -> bool:
    try:
        float(text.replace(",", ""))
    except ValueError:
        return False
    return True


def _changed_row(old: str, new: str) -> str | None:
    """A table row whose label stayed and only numbers changed, as one ``~`` line (``a → b`` per
    changed cell); ``None`` for any other pair of lines."""
    a, b = old.split(" | "), new.split(" | ")
    if len(a) < 2 or len(a) != len(b) or a[0] != b[0]:
        return None
    if not all(_number(x) and _number(y) for x, y in zip(a, b, strict=True) if x != y):
        return None
    return "~" + " | ".join(x if x == y else f"{x} → {y}" for x, y in zip(a, b, strict=True))


def _pair_rows(lines: list[str]) -> list[str]:
    """Each run of k removed lines followed by k added ones, paired as changed rows where all pair."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        j = i
        while j < len(lines) and lines[j].startswith("-"):
            j += 1
        k = j
        while k < len(lines) and lines[k].startswith("+"):
            k += 1
        if j > i and k - j == j - i:
            rows = [_changed_row(a[1:], b[1:]) for a, b in zip(lines[i:j], lines[j:k], strict=True)]
            if all(rows):
                out.extend(row for row in rows if row)
                i = k
                continue
        out.extend(lines[i : max(k, i + 1)])
        i = max(k, i + 1)
    return out


def _hunks(old: Sequence[str], new: Sequence[str]) -> list[str]:
    diff = difflib.unified_diff(list(old), list(new), lineterm="", n=CONTEXT)
    return _pair_rows([line for line in diff if not line.startswith(("---", "+++"))])


def _section(header: str, lines: list[str], max_lines: int) -> list[str]:
    if max_lines and len(lines) > max_lines:
        hidden = len(lines) - max_lines
        lines = [*lines[:max_lines], f"… {hidden} more lines of this change (--full shows the whole diff)"]
    return [f"## {header}", *lines, ""]


def _output_lines(output: Output) -> list[str]:
    return [output.image.line()] if output.image else list(output.lines)


def _output_sections(
    path: str, old: tuple[Output, ...], new: tuple[Output, ...], max_lines: int
) -> Iterator[list[str]]:
    for index in range(max(len(old), len(new))):
        where = f"{path}/outputs/{index}"
        if index >= len(new):
            yield _section(
                f"deleted {where} ({old[index].kind})", [f"-{x}" for x in _output_lines(old[index])], max_lines
            )
        elif index >= len(old):
            yield _section(
                f"added {where} ({new[index].kind})", [f"+{x}" for x in _output_lines(new[index])], max_lines
            )
        elif old[index] != new[index]:
            a, b = old[index], new[index]
            if a.image and b.image:
                note = f"{a.image.mime} {a.image.size / 1024:.1f} KB → {b.image.mime} {b.image.size / 1024:.1f} KB"
                yield [f"## modified {where}: image changed ({note})", ""]
            else:
                kind = b.title() if a.kind == b.kind else f"{a.kind} → {b.kind}"
                yield _section(f"modified {where} ({kind})", _hunks(_output_lines(a), _output_lines(b)), max_lines)


def _cell_sections(index: int, a: Cell, b: Cell, max_lines: int) -> Iterator[list[str]]:
    path = f"/cells/{index}"
    if a.source != b.source:
        what = " (injected parameters)" if b.injected else ""
        yield _section(f"modified {path}/source{what}", _hunks(a.source, b.source), max_lines)
    yield from _output_sections(path, a.outputs, b.outputs, max_lines)


def _whole_cell(sign: str, verb: str, index: int, cell: Cell, max_lines: int) -> list[str]:
    lines = [f"{sign}{x}" for x in cell.source]
    for output in cell.outputs:
        lines.extend(f"{sign}  {x}" for x in _output_lines(output))
    return _section(f"{verb} /cells/{index} ({cell.kind})", lines, max_lines)


def diff_reduced(old: list[Cell], new: list[Cell], max_lines: int = MAX_LINES) -> list[str]:
    """The sections of differences between two reduced notebooks (empty when they read the same).
    Cells are matched by their sources, so an inserted cell does not shift every later one."""
    matcher = difflib.SequenceMatcher(
        a=[(c.kind, c.source) for c in old], b=[(c.kind, c.source) for c in new], autojunk=False
    )
    lines: list[str] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        paired = min(i2 - i1, j2 - j1) if tag in ("equal", "replace") else 0
        for k in range(paired):
            for section in _cell_sections(j1 + k, old[i1 + k], new[j1 + k], max_lines):
                lines.extend(section)
        for k in range(i1 + paired, i2):
            lines.extend(_whole_cell("-", "deleted", k, old[k], max_lines))
        for k in range(j1 + paired, j2):
            lines.extend(_whole_cell("+", "added", k, new[k], max_lines))
    return lines


def diff_notebook_files(old: Path, new: Path, labels: tuple[str, str], max_lines: int = MAX_LINES) -> str:
    """The readable diff of two executed notebooks ('' when they differ in nothing a reader compares)."""
    reduced = [reduce_notebook(nbformat.read(path, as_version=4)) for path in (old, new)]
    lines = diff_reduced(reduced[0], reduced[1], max_lines)
    if not lines:
        return ""
    return "\n".join([f"--- {labels[0]}", f"+++ {labels[1]}", *lines]).rstrip("\n") + "\n"


def is_notebook_file(name: str) -> bool:
    """Whether ``name`` names a local notebook (``….ipynb``) rather than a run ID."""
    return name.endswith(".ipynb")


def download_notebooks(tracker: Tracker | None, run_ids: Sequence[str], folder: Path) -> list[Path]:
    """Each run's executed notebook, downloaded under ``folder``; a local ``.ipynb`` file is taken as
    it is (a notebook executed in JupyterLab against a recorded run, or two local ones: no store)."""
    paths = []
    for position, run_id in enumerate(run_ids):
        if is_notebook_file(run_id):
            local = Path(run_id)
            if not local.is_file():
                raise InputError(
                    Problem(
                        file=run_id, message="no such notebook file", fix="give a .ipynb file that exists, or a run ID"
                    )
                )
            paths.append(local)
            continue
        if tracker is None:
            raise TrackingError(f"{run_id} is a run ID and no tracking store was opened")
        found = sorted(tracker.download(run_id, "notebook", folder / str(position)).glob("*.ipynb"))
        if not found:
            raise TrackingError(f"run {run_id} has no executed notebook under notebook/")
        paths.append(found[0])
    return paths


def nbdime_diff(
    old: Path, new: Path, *, metadata: bool = False, color: bool = False
) -> subprocess.CompletedProcess[str]:
    """nbdime's complete diff of two notebooks (``nbdiff``); without ``metadata``, metadata, cell IDs
    and execution details are left out (``-M -I -D``)."""
    command = [sys.executable, "-m", "nbdime", "diff", *([] if metadata else ["-M", "-I", "-D"])]
    if not color:
        command.append("--no-color")
    return subprocess.run([*command, str(old), str(new)], capture_output=True, text=True)
