"""Untrusted text (document and query text, IDs, slice labels, log lines) made safe where rageval
renders it: control and ANSI escape sequences stripped from tables and terminals, HTML escaped in
notebook displays, and spreadsheet formulas neutralised in CSV files. The text is kept otherwise
unchanged, so a reader sees what the corpus holds, never what it would execute."""

from __future__ import annotations

import hashlib
import html
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd
    from pandas.io.formats.style import Styler

# ANSI/VT100 escape sequences (CSI, OSC, single-character escapes), then any other C0/C1 control
# character except tab and newline.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# A cell a spreadsheet would evaluate (OWASP's CSV injection list).
_FORMULA = ("=", "+", "-", "@", "\t", "\r")
# Characters Markdown gives a meaning to (emphasis, links, headings, code, tables, HTML).
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|~<>])")
# Every styled table's HTML ID starts T_rageval_ (then a digest of the table): notebook_diff masks it.
TABLE_ID_PREFIX = "rageval"


def strip_control(text: str) -> str:
    """``text`` without terminal escape sequences and control characters (tab and newline kept)."""
    return _CONTROL.sub("", _ANSI.sub("", text))


def neutralise_formula(text: str) -> str:
    """A cell starting like a formula gets a leading apostrophe, so spreadsheets show it as text.
    Numbers are left alone: ``-0.25`` is a value, not a formula."""
    if text.startswith(_FORMULA) and not _is_number(text):
        return "'" + text
    return text


def markdown_text(text: str) -> str:
    """``text`` to place in Markdown shown live (a notebook's ``Markdown`` display): control
    sequences stripped, HTML escaped, and Markdown's own syntax backslash-escaped, so it reads as
    written and renders as nothing else (no tag, no link, no emphasis)."""
    return _MARKDOWN.sub(r"\\\1", html.escape(strip_control(text), quote=False))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _clean(value: Any, *, csv: bool) -> Any:
    if not isinstance(value, str):
        return value
    value = strip_control(value)
    return neutralise_formula(value) if csv else value


def _text(values: Any) -> bool:
    from pandas.api.types import is_object_dtype, is_string_dtype

    return bool(is_object_dtype(values) or is_string_dtype(values))


def _clean_index(index: pd.Index, *, csv: bool) -> pd.Index:
    """``index`` (any number of levels) with its text labels and names cleaned."""
    import pandas as pd

    if isinstance(index, pd.MultiIndex):
        levels = [_clean_index(index.get_level_values(i), csv=csv) for i in range(index.nlevels)]
        return pd.MultiIndex.from_arrays(levels, names=[_clean(n, csv=csv) for n in index.names])
    if _text(index):
        index = index.map(lambda v: _clean(v, csv=csv))
    return index.rename(_clean(index.name, csv=csv))


def safe_frame(frame: pd.DataFrame, *, csv: bool = False) -> pd.DataFrame:
    """A copy of ``frame`` whose text cells, index and column labels (every level, and their names)
    are stripped of control sequences (and, for ``csv``, neutralised as formulas). Numeric columns
    are untouched."""
    out = frame.copy()
    for position in range(out.shape[1]):
        column = out.iloc[:, position]
        if _text(column):
            out.isetitem(position, column.map(lambda v: _clean(v, csv=csv)))
    out.columns = _clean_index(out.columns, csv=csv)
    out.index = _clean_index(out.index, csv=csv)
    return out


def csv_bytes(frame: pd.DataFrame, *, index: bool = False) -> bytes:
    """``frame`` as UTF-8 CSV with every text cell safe to open in a spreadsheet."""
    return safe_frame(frame, csv=True).to_csv(index=index).encode()


def styled(frame: pd.DataFrame, formatter: Any = None, **options: Any) -> Styler:
    """A pandas Styler for notebook display: every cell, index and column label escaped as HTML
    (pandas escapes none of them by default), control sequences stripped, and a stable text form
    and table ID, so two executions diff only where their values differ. The table ID comes from
    the table's own HTML: two tables of a notebook never share one (one's CSS would style the
    other). ``formatter`` and ``options`` go to :meth:`Styler.format` (one call, so escaping stays on)."""
    from pandas.io.formats.style import Styler

    class SafeStyler(Styler):
        """Its text form (a notebook's ``text/plain``) is the table, not an object's address; its HTML
        table ID is ``T_rageval_`` and a digest of the table as rendered (values, labels, styles)."""

        def __repr__(self) -> str:
            return repr(shown)

        def to_html(self, buf: Any = None, *, table_uuid: str | None = None, **kwargs: Any) -> Any:
            if table_uuid is None:
                body = super().to_html(table_uuid=TABLE_ID_PREFIX, **kwargs).encode()
                table_uuid = f"{TABLE_ID_PREFIX}_{hashlib.sha256(body).hexdigest()[:10]}"
            return super().to_html(buf, table_uuid=table_uuid, **kwargs)

    shown = safe_frame(frame)
    escaped = shown.copy()
    # Styler's format_index escapes labels but not the axes' names: escape those here.
    for axis in ("index", "columns"):
        labels = getattr(escaped, axis)
        names = [html.escape(n) if isinstance(n, str) else n for n in labels.names]
        setattr(escaped, axis, labels.set_names(names))
    return (
        SafeStyler(escaped)
        .format(formatter, escape="html", **options)
        .format_index(escape="html", axis=0)
        .format_index(escape="html", axis=1)
    )
