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


# --------------------------------------------------------------------------- secrets

# The shortest form of a secret looked for: a shorter one would match ordinary text.
_MIN_SECRET_FORM = 4
# What may sit between two characters of a secret that was re-wrapped or folded: whitespace, and
# the escaped line breaks a JSON string holds for it.
_FOLD = r"(?:\s|\\[nrt])*"


def secret_forms(secret: str) -> list[str]:
    """The texts ``secret`` can be echoed as: as written; JSON-escaped (also with ``\\/``);
    URL-encoded (every reserved character, or ``/`` kept, or ``+`` for spaces; upper- or
    lower-case hex); HTML-escaped; and base64 (standard and URL-safe, at each of the three byte
    alignments it can have inside a longer encoded text: the characters only its own bytes fix).
    A header value ``Bearer TOKEN`` also gives TOKEN's forms."""
    import base64
    import json
    from urllib.parse import quote, quote_plus

    parts = [secret]
    last = secret.split()[-1] if secret.split() else ""
    if last != secret and len(last) >= 8:
        parts.append(last)
    forms: set[str] = set()
    for part in parts:
        escaped = json.dumps(part, ensure_ascii=False)[1:-1]
        encoded = [quote(part, safe=""), quote(part), quote_plus(part)]
        lower = [re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), e) for e in encoded]
        forms.update([part, escaped, escaped.replace("/", "\\/"), json.dumps(part)[1:-1], *encoded, *lower])
        forms.add(html.escape(part))
        raw = part.encode()
        for offset in range(3):
            first = -(-offset * 4 // 3)  # the first character no padding byte reaches
            last_char = (offset + len(raw)) * 8 // 6  # past it, the next unknown byte would share
            for encode in (base64.b64encode, base64.urlsafe_b64encode):
                core = encode(b"\0" * offset + raw).decode()[first:last_char]
                forms.add(core)
    return sorted((f for f in forms if len(f) >= _MIN_SECRET_FORM), key=len, reverse=True)


class Redactor:
    """Replaces every secret given, in each of its :func:`secret_forms` and folded by whitespace or
    escaped line breaks anywhere inside, with ``***``."""

    def __init__(self, secrets: Any) -> None:
        forms = sorted({f for s in secrets if s for f in secret_forms(str(s))}, key=len, reverse=True)
        self.pattern = re.compile("|".join(_FOLD.join(re.escape(c) for c in form) for form in forms)) if forms else None

    def __call__(self, text: str) -> str:
        return self.pattern.sub("***", text) if self.pattern is not None else text


# Query parameters whose value is a credential (the http stage's URL check names the same).
SECRET_PARAMETER = re.compile(
    r"(?i)(?:api[_-]?key|apikey|key|token|access[_-]?token|auth|password|passwd|pwd|secret|client[_-]?secret|"
    r"sig|signature|x-amz-signature|x-amz-credential)"
)


def url_credentials(url: str) -> str | None:
    """What in ``url`` is a credential (``user:password@``, or the names of query parameters such as
    ``api_key``; never their values), or None."""
    from urllib.parse import parse_qsl, urlsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.username is not None or parts.password is not None:
        return "user:password@"
    names = sorted(
        {name for name, _ in parse_qsl(parts.query, keep_blank_values=True) if SECRET_PARAMETER.fullmatch(name)}
    )
    return ", ".join(names) or None


def mask_credentials(text: str) -> str:
    """``text`` with the password of every ``scheme://user:password@`` and the value of every
    credential-named query parameter (:data:`SECRET_PARAMETER`) replaced by ``***``: for echoing
    what a user typed (a ``--set`` of a URL) in an error."""
    text = re.sub(r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/:@]*:)[^\s/@]+@", r"\1***@", text)

    def parameter(match: re.Match[str]) -> str:
        masked = "***" if SECRET_PARAMETER.fullmatch(match.group(2)) else match.group(3)
        return f"{match.group(1)}{match.group(2)}={masked}"

    return re.sub(r"([?&])([^=&\s#]+)=([^&\s#]*)", parameter, text)
