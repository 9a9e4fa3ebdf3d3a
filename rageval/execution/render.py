"""An executed notebook as the HTML page the MLflow UI previews, and warming that up while a
notebook runs."""

from __future__ import annotations

import functools
import threading
from pathlib import Path
from typing import Any


def notebook_html(executed: Path) -> bytes:
    """An executed notebook rendered as HTML (nbconvert), which the MLflow UI can preview: rageval's
    template (``execution/templates/rageval``), JupyterLab's look with its CSS inlined, so the page is
    styled offline, and no scripts (the stock templates load require.js and MathJax from a CDN, which
    an offline viewer cannot reach and an artifact page should not run); figures inline."""
    import nbformat

    resources = {"metadata": {"name": executed.stem}}
    with _HTML_LOCK:  # one exporter, its templates compiled once per process; not made for threads
        page, _ = _html_exporter().from_notebook_node(nbformat.read(executed, as_version=4), resources=resources)
    return page.encode()


_HTML_LOCK = threading.Lock()


@functools.cache
def _html_exporter() -> Any:
    from nbconvert import HTMLExporter

    return HTMLExporter(template_name="rageval", extra_template_basedirs=[str(Path(__file__).parent / "templates")])


def warm_html() -> None:
    """nbconvert imported and the HTML exporter's templates compiled, ahead of the notebook's end."""
    import nbformat

    with _HTML_LOCK:
        _html_exporter().from_notebook_node(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")]))
