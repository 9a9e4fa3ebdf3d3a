"""Untrusted text (document and query text, IDs, slice labels, log lines) made safe where rageval
renders it: control and ANSI escape sequences stripped from tables and terminals, HTML escaped in
notebook displays, and spreadsheet formulas neutralised in CSV files. The text is kept otherwise
unchanged, so a reader sees what the corpus holds, never what it would execute."""

from __future__ import annotations

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


def strip_control(text: str) -> str:
    """``text`` without terminal escape sequences and control characters (tab and newline kept)."""
    return _CONTROL.sub("", _ANSI.sub("", text))


def neutralise_formula(text: str) -> str:
    """A cell starting like a formula gets a leading apostrophe, so spreadsheets show it as text.
    Numbers are left alone: ``-0.25`` is a value, not a formula."""
    if text.startswith(_FORMULA) and not _is_number(text):
        return "'" + text
    return text


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


def safe_frame(frame: pd.DataFrame, *, csv: bool = False) -> pd.DataFrame:
    """A copy of ``frame`` whose text cells, index and column labels are stripped of control
    sequences (and, for ``csv``, neutralised as formulas). Numeric columns are untouched."""
    from pandas.api.types import is_object_dtype, is_string_dtype

    def text(values: Any) -> bool:
        return is_object_dtype(values) or is_string_dtype(values)

    out = frame.copy()
    for column in out.columns:
        if text(out[column]):
            out[column] = out[column].map(lambda v: _clean(v, csv=csv))
    out.columns = [_clean(c, csv=csv) for c in out.columns]
    if text(out.index):
        out.index = out.index.map(lambda v: _clean(v, csv=csv))
    return out


def csv_bytes(frame: pd.DataFrame, *, index: bool = False) -> bytes:
    """``frame`` as UTF-8 CSV with every text cell safe to open in a spreadsheet."""
    return safe_frame(frame, csv=True).to_csv(index=index).encode()


def styled(frame: pd.DataFrame, formatter: Any = None, **options: Any) -> Styler:
    """A pandas Styler for notebook display: text escaped as HTML (pandas does not escape by
    default) and a stable table ID, so two executions diff only where their values differ.
    ``formatter`` and ``options`` go to :meth:`Styler.format` (one call, so escaping stays on)."""
    return safe_frame(frame).style.format(formatter, escape="html", **options).set_uuid("rageval")
