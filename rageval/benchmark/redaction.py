"""Redaction of query text: the detectors ``rageval queries import`` applies, and the residual check
that drops a query still holding something secret-like after them.

The detectors are a regex set of rageval's own (rules ``rageval-regex``, :data:`RULES_VERSION`), with
checksums where the format has one (Luhn for payment cards, ISO 7064 mod 97 for IBANs). Microsoft
Presidio's pattern recognizers were measured against it on a labelled log and not chosen: it has no
recognizer for API keys and tokens, and it imports spaCy (docs/queries.md gives the figures).

A detector's matches are replaced by its token (``<EMAIL>``); detectors run in :data:`DETECTORS`
order, so a secret inside a URL is taken by the URL rule first and a card number is not read as a
phone number. Invisible format characters (zero-width spaces and joiners, soft hyphens) are removed
before any detector runs, so a card number or a key split by them is still found. Nothing here
keeps a removed text: a redaction is its types and counts.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Literal, get_args

from rageval.benchmark.lookalike import visible

RULES = "rageval-regex"
RULES_VERSION = "1"

Detector = Literal["url-credentials", "secret", "email", "iban", "card", "phone"]
# The order they run in (a rule earlier in the list takes its text before a later one sees it).
DETECTORS: tuple[Detector, ...] = get_args(Detector)
TOKENS: dict[str, str] = {
    "url-credentials": "<URL_CREDENTIALS>",
    "secret": "<SECRET>",
    "email": "<EMAIL>",
    "iban": "<IBAN>",
    "card": "<CARD>",
    "phone": "<PHONE>",
}

_SECRETS = [
    r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b",  # AWS access key IDs
    r"\bgh[pousr]_[A-Za-z0-9]{36,255}\b",  # GitHub tokens
    r"\bgithub_pat_[A-Za-z0-9_]{22,255}\b",
    r"\bxox[abposr]-[A-Za-z0-9-]{10,250}",  # Slack
    r"\b(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{16,}\b",  # Stripe
    r"\bAIza[0-9A-Za-z_-]{35}\b",  # Google API keys
    r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",  # JWT
    r"\b(?i:bearer)\s+[A-Za-z0-9._~+/=-]{16,}",
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----",
    # key=value and key: value for names that say "secret", and "my password is …": the name stays,
    # the value goes
    r"(?P<keep>\b(?i:api[_-]?key|apikey|secret|token|access[_-]?key|client[_-]?secret|password|passwd|pwd|auth)"
    r"\s?[=:]\s?|\b(?i:password|passwd|pwd|passphrase|passcode|pin)\s+(?i:is|was)\s+(?:(?i:now|still)\s+)?)"
    r"[^\s,;&]+",
]
_PATTERNS: dict[str, re.Pattern[str]] = {
    "url-credentials": re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]{1,15}://[^\s/:@]+:[^\s/@]+@[^\s]+"),
    "secret": re.compile("|".join(f"(?:{p})" for p in _SECRETS)),
    "email": re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"),
    "iban": re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b"),
    "card": re.compile(r"(?<![\d+-])\d(?:[ -]?\d){12,18}(?![\d-])"),
    # International (+ or 00 prefix), a bracketed area code, a national number with its trunk 0
    # (020 7946 0958), or ten digits in groups of 3-3-4.
    "phone": re.compile(
        r"(?<![\w+])(?:(?:\+|00)\d{1,3}[ .-]?(?:\(\d{1,4}\)[ .-]?)?\d{1,4}(?:[ .-]?\d{2,4}){1,4}"
        r"|\(\d{2,4}\)[ .-]?\d{3,4}[ .-]?\d{3,4}"
        r"|0\d{1,4}[ .-]\d{3,4}[ .-]\d{3,4}"
        r"|\d{3}[ .-]\d{3}[ .-]\d{4})(?![\w])"
    ),
}


def luhn(digits: str) -> bool:
    """The Luhn checksum of a card number (digits only)."""
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char) * (2 if index % 2 else 1)
        total += value - 9 if value > 9 else value
    return total % 10 == 0


def iban_valid(text: str) -> bool:
    """ISO 13616 check digits (ISO 7064 mod 97-10) of an IBAN, spaces allowed."""
    compact = text.replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    moved = compact[4:] + compact[:4]
    return int("".join(str(int(char, 36)) for char in moved)) % 97 == 1


def _digits(text: str) -> str:
    return re.sub(r"\D", "", text)


_CHECKS: dict[str, Callable[[str], bool]] = {
    "card": lambda text: 13 <= len(_digits(text)) <= 19 and luhn(_digits(text)),
    "iban": iban_valid,
    "phone": lambda text: 7 <= len(_digits(text)) <= 15,
}


@dataclass(frozen=True)
class Redacted:
    """A text after redaction and what was removed from it, by type (never the removed text)."""

    text: str
    removed: Mapping[str, int]


class Redactor:
    """Applies the chosen detectors, in :data:`DETECTORS` order, each match replaced by its token."""

    def __init__(self, detectors: Sequence[str] = DETECTORS, tokens: Mapping[Detector, str] | None = None) -> None:
        unknown = sorted(set(detectors) - set(DETECTORS))
        if unknown:
            raise ValueError(f"unknown detector(s) {', '.join(unknown)}; valid choices are {', '.join(DETECTORS)}")
        self.detectors = [name for name in DETECTORS if name in detectors]
        self.tokens: dict[str, str] = {**TOKENS, **{str(name): token for name, token in (tokens or {}).items()}}

    def __call__(self, text: str) -> Redacted:
        removed: Counter[str] = Counter()
        text = visible(text)
        for name in self.detectors:
            text = _PATTERNS[name].sub(partial(self._replace, name, removed), text)
        return Redacted(text, dict(removed))

    def _replace(self, name: str, removed: Counter[str], match: re.Match[str]) -> str:
        check = _CHECKS.get(name)
        if check is not None and not check(match.group(0)):
            return match.group(0)
        removed[name] += 1
        # The generic key=value rule keeps the key's name: only the value goes.
        return (match.groupdict().get("keep") or "") + self.tokens[name]

    def spans(self, text: str) -> list[tuple[int, int, str]]:
        """Where each detector matches in the original text (start, end, type), as :meth:`__call__`
        would replace them: for measuring detectors against labelled text."""
        found: list[tuple[int, int, str]] = []
        taken: list[tuple[int, int]] = []
        for name in self.detectors:
            check = _CHECKS.get(name)
            for match in _PATTERNS[name].finditer(text):
                start, end = match.span()
                if match.groupdict().get("keep"):
                    start = match.end("keep")
                if check is not None and not check(match.group(0)):
                    continue
                if any(start < b and a < end for a, b in taken):
                    continue
                taken.append((start, end))
                found.append((start, end, name))
        return sorted(found)


# --------------------------------------------------------------------------- the residual check

# What still looks like a secret after redaction: each a reason a query is dropped, not redacted.
RESIDUAL: dict[str, re.Pattern[str]] = {
    "digit-run": re.compile(r"\d(?:[ .-]?\d){8,}"),  # 9+ digits: an account, card or phone number
    "at-sign": re.compile(r"[^\s<>]@[^\s<>]"),  # an address the e-mail rule did not take
    "credential-url": re.compile(r"://[^\s/]*@"),
    "long-token": re.compile(r"(?=[A-Za-z0-9_+/=-]*\d)(?=[A-Za-z0-9_+/=-]*[A-Za-z])[A-Za-z0-9_+/=-]{20,}"),
    "secret-word": re.compile(
        r"(?i)\b(?:(?:password|passwd|api[_-]?key|secret|token)\s*[:=]|(?:password|passwd|passphrase)\s+is)\s*(?!<)\S"
    ),
}


def residual(text: str) -> str | None:
    """The first :data:`RESIDUAL` pattern the (redacted) ``text`` matches, invisible characters
    ignored, else None."""
    text = visible(text)
    return next((name for name, pattern in RESIDUAL.items() if pattern.search(text)), None)
