"""Untrusted text is made safe where it is rendered: no live HTML, no terminal escapes, no formulas."""

from __future__ import annotations

import pandas as pd

from rageval.safety import csv_bytes, neutralise_formula, safe_frame, strip_control, styled


def test_control_and_ansi_sequences_are_stripped_tabs_and_newlines_kept():
    assert strip_control("\x1b[31mred\x1b[0m and \x1b]0;title\x07bell\x00 a\tb\nc") == "red and bell a\tb\nc"


def test_formula_prefixes_are_neutralised_numbers_are_not():
    assert [neutralise_formula(t) for t in ("=1+1", "+SUM(A1)", "-2+3", "@cmd", "-0.25", "plain")] == [
        "'=1+1",
        "'+SUM(A1)",
        "'-2+3",
        "'@cmd",
        "-0.25",
        "plain",
    ]


def test_csv_cells_and_labels_are_safe_and_numbers_unchanged():
    frame = pd.DataFrame({"text": ["=HYPERLINK(1)", "\x1b[2Jok"], "value": [0.5, -1.0]})
    assert csv_bytes(frame).decode().splitlines() == ["text,value", "'=HYPERLINK(1),0.5", "ok,-1.0"]
    assert safe_frame(frame)["value"].tolist() == [0.5, -1.0]


def test_styled_tables_escape_html_and_have_a_stable_id():
    frame = pd.DataFrame({"query": ["<script>alert(1)</script>", '<img src=x onerror="x()">'], "v": [0.12345, 1.0]})
    html = styled(frame, precision=3).to_html()
    assert "<script>" not in html and "<img" not in html and "&lt;script&gt;" in html
    assert "0.123" in html and html == styled(frame, precision=3).to_html()
