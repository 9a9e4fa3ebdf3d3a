"""The one text locator: exact first, then tolerant of whitespace, Unicode forms and invisible characters."""

from __future__ import annotations

import unicodedata

from rageval.benchmark.spans import locate


def test_exact_unique_and_ambiguous():
    doc = "Alpha retries. Beta retries. Gamma."
    assert locate(doc, "Beta retries").spans == ((15, 27),)
    assert locate(doc, "Beta retries").match == "exact"
    ambiguous = locate(doc, "retries")
    assert ambiguous.spans == ((6, 13), (20, 27))
    assert ambiguous.unique is None


def test_whitespace_and_line_breaks_tolerated():
    doc = "The client\n  retries   the request\ttwice."
    found = locate(doc, "client retries the request")
    assert found.match == "normalised"
    start, end = found.unique
    assert doc[start:end] == "client\n  retries   the request"


def test_unicode_forms_and_invisible_characters():
    nfd = unicodedata.normalize("NFD", "Le café ferme à midi.")
    found = locate(nfd, "café ferme")
    assert found.match == "normalised"
    start, end = found.unique
    assert unicodedata.normalize("NFC", nfd[start:end]) == "café ferme"
    zw = "pay\u200bment failed"
    start, end = locate(zw, "payment failed").unique
    assert (start, end) == (0, len(zw))


def test_absent_and_empty():
    assert locate("abc", "xyz").spans == ()
    assert locate("abc", "xyz").match is None
    assert locate("abc", "   ").spans == ()
