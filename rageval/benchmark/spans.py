"""Spans of documents: whether a passage covers a judged span (the one rule of the metric
contract's ``passages`` rule), and finding a piece of text in a document (the one locator behind
passages given by their text and judgments written from a quote).

:func:`locate` tries the text exactly first; where it is not there verbatim, it tries again with
both sides normalised (Unicode NFKD, every run of whitespace one space, invisible format characters
such as zero-width spaces dropped), and maps what it found back to character offsets of the
original document. It returns every place the text occurs, so the caller decides what an ambiguous
or absent text means (an error naming the candidates, a failed hit).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Literal, TypeVar

import numpy as np

Offsets = TypeVar("Offsets", int, np.ndarray)


def covers(p_start: Offsets, p_end: Offsets, s_start: Offsets, s_end: Offsets) -> Offsets:
    """Whether a passage ``[p_start, p_end)`` covers a judged span ``[s_start, s_end)`` of the same
    document: they overlap by at least half of the shorter of the two (element-wise on arrays)."""
    overlap = np.minimum(p_end, s_end) - np.maximum(p_start, s_start)
    shorter = np.minimum(p_end - p_start, s_end - s_start)
    return (overlap > 0) & (2 * overlap >= shorter)


Match = Literal["exact", "normalised"]


@dataclass(frozen=True)
class Located:
    """Where a text occurs in a document: ``(start, end)`` character offsets (end exclusive), how it
    was found, and every occurrence (more than one: the text is ambiguous there)."""

    spans: tuple[tuple[int, int], ...]
    match: Match | None  # None: not found

    @property
    def unique(self) -> tuple[int, int] | None:
        return self.spans[0] if len(self.spans) == 1 else None


def _occurrences(haystack: str, needle: str) -> list[int]:
    out, at = [], haystack.find(needle)
    while at >= 0:
        out.append(at)
        at = haystack.find(needle, at + 1)
    return out


def _invisible(char: str) -> bool:
    # Zero-width spaces and joiners, soft hyphens, byte-order marks: format characters (Cf).
    return unicodedata.category(char) == "Cf"


def normalised(text: str) -> tuple[str, list[int]]:
    """``text`` normalised for tolerant matching, and for each character of the result the offset of
    the original character it came from."""
    out: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(text):
        if _invisible(char):
            continue
        if char.isspace():
            if out and out[-1] != " ":
                out.append(" ")
                origin.append(index)
            continue
        for part in unicodedata.normalize("NFKD", char):
            out.append(part)
            origin.append(index)
    if out and out[-1] == " ":
        out.pop()
        origin.pop()
    return "".join(out), origin


def locate(document: str, text: str) -> Located:
    """Every place ``text`` occurs in ``document``: exactly, else after normalisation (see module)."""
    if not text.strip():
        return Located((), None)
    exact = _occurrences(document, text)
    if exact:
        return Located(tuple((at, at + len(text)) for at in exact), "exact")
    haystack, origin = normalised(document)
    needle, _ = normalised(text)
    if not needle:
        return Located((), None)
    found = _occurrences(haystack, needle)
    spans = []
    for at in found:
        start = origin[at]
        end = origin[at + len(needle) - 1] + 1
        spans.append((start, end))
    return Located(tuple(dict.fromkeys(spans)), "normalised" if spans else None)
