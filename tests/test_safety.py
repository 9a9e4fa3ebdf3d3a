"""Untrusted text is made safe where it is rendered: no live HTML, no terminal escapes, no formulas."""

from __future__ import annotations

import pandas as pd

from rageval.safety import csv_bytes, markdown_text, neutralise_formula, safe_frame, strip_control, styled


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


def test_styled_tables_escape_index_and_column_labels_and_their_names():
    # pandas' Styler escapes none of these by default (slice labels are a table's index).
    frame = pd.DataFrame(
        {"<b>col</b>": [0.5], "text": ["ok"]},
        index=pd.MultiIndex.from_tuples([("<script>alert(1)</script>", "\x1b[31mred")], names=["<i>slice</i>", "run"]),
    )
    frame.columns.name = "<u>measures</u>"
    html = styled(frame, precision=2).to_html()
    assert "<script" not in html and "<b>" not in html and "<i>" not in html and "<u>" not in html
    assert "\x1b" not in html
    for escaped in ("&lt;script&gt;alert(1)&lt;/script&gt;", "&lt;b&gt;col&lt;/b&gt;", "&lt;i&gt;slice&lt;/i&gt;"):
        assert escaped in html
    assert ">red<" in html and "0.50" in html


def test_styled_tables_show_as_the_table_in_plain_text_not_an_address():
    frame = pd.DataFrame({"query": ["\x1b[2Jwipe"], "v": [1.0]})
    text = repr(styled(frame))
    assert text == repr(pd.DataFrame({"query": ["wipe"], "v": [1.0]})) and " at 0x" not in text
    assert repr(styled(frame).hide(axis="index")) == text  # Styler's methods keep the safe text form


def test_safe_frame_cleans_every_index_level_and_keeps_multiindex_columns():
    columns = pd.MultiIndex.from_tuples([("a", "=x"), ("b", "y")])
    frame = pd.DataFrame([["=1+1", 2.0]], columns=columns, index=pd.MultiIndex.from_tuples([("@q", "-r\x1b[0m")]))
    safe = safe_frame(frame, csv=True)
    assert safe.columns.tolist() == [("a", "'=x"), ("b", "y")] and safe.index.tolist() == [("'@q", "'-r")]
    assert safe.iloc[0].tolist() == ["'=1+1", 2.0]


def test_markdown_text_renders_as_written_never_as_markup():
    text = "see [x](javascript:alert(1)) <img src=x onerror=alert(1)> **bold** \x1b[31m"
    assert markdown_text(text) == (
        r"see \[x\]\(javascript:alert\(1\)\) &lt;img src=x onerror=alert\(1\)&gt; \*\*bold\*\* "
    )
