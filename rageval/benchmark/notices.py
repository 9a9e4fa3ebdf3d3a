"""What a valid benchmark may hold but probably does not mean, as warnings for people: look-alike
query IDs and principal groups no document grants (``rageval benchmark validate`` prints them)."""

from __future__ import annotations

import difflib

from rageval.benchmark.loading import Benchmark
from rageval.benchmark.lookalike import collisions, describe, lookalike_key, shown
from rageval.benchmark.schema import CASES_FILE, DOCUMENTS_FILE


def benchmark_warnings(benchmark: Benchmark) -> list[str]:
    """What a valid benchmark may hold but probably does not mean: query IDs that look the same
    (see :mod:`rageval.benchmark.lookalike`), and principal groups that no document's ``acl``
    grants (a misspelt group, ``editor`` for ``editors``, makes a permission slice all zeros)."""
    out = []
    alike = collisions(case.queryId for case in benchmark.cases)
    if alike:
        out.append(
            f"warning: {CASES_FILE}: queryId: {len(alike)} group(s) of query IDs look the same (Unicode form, "
            f"invisible characters or surrounding whitespace): {describe(alike)} (fix: give each query an ID that "
            "reads differently; a run's query IDs must match them exactly)"
        )
    granted = {group for doc in benchmark.documents.values() for group in doc.acl or ()}
    for group, query in _principal_groups(benchmark).items():
        if group in granted:
            continue
        close = _closest(group, granted)
        hint = f"; did you mean {shown(close)}?" if close else ""
        out.append(
            f"warning: {CASES_FILE}: principal: no document grants the group {shown(group)} of case "
            f"{shown(query)} (no acl in "
            f"{DOCUMENTS_FILE} lists it){hint} (fix: spell the group as the documents' acl does, or grant it)"
        )
    return out


def _principal_groups(benchmark: Benchmark) -> dict[str, str]:
    """Each principal group of the cases and the first case that names it."""
    groups: dict[str, str] = {}
    for case in benchmark.cases:
        for group in case.principal or ():
            groups.setdefault(group, case.queryId)
    return groups


def _closest(group: str, granted: set[str]) -> str | None:
    """The granted group ``group`` is most likely a misspelling of: same look-alike key or case,
    else the nearest by difflib."""
    for candidate in sorted(granted):
        if lookalike_key(candidate).casefold() == lookalike_key(group).casefold():
            return candidate
    found = difflib.get_close_matches(group, sorted(granted), n=1, cutoff=0.8)
    return found[0] if found else None
