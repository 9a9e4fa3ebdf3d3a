"""IDs and text that look the same but are not: ``café`` written NFC and NFD, ``d1`` and ``d1``
followed by a no-break space or a zero-width space. IDs are compared as written everywhere (an ID
is what the corpus says it is); this module finds the pairs a reader could not tell apart, so that
loading a benchmark refuses two such document IDs, and a run whose IDs miss the qrels only by
such a difference is told so instead of scoring 0 without a word.

The look-alike key of a text: invisible format characters (Unicode category Cf: zero-width spaces
and joiners, word joiners, soft hyphens, byte-order marks) removed, Unicode NFKC normalisation, and
whitespace (no-break spaces included) stripped at both ends.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# How many look-alike pairs a message shows before "and N more".
EXAMPLES = 3


def visible(text: str) -> str:
    """``text`` without invisible format characters (Unicode category Cf)."""
    return "".join(char for char in text if unicodedata.category(char) != "Cf")


def lookalike_key(text: str) -> str:
    """The form two IDs share when a reader cannot tell them apart (see the module's docstring)."""
    return unicodedata.normalize("NFKC", visible(text)).strip()


def blank(text: str) -> bool:
    """True for a text that shows nothing: empty once invisible characters and whitespace go."""
    return not lookalike_key(text)


def collisions(ids: Iterable[str]) -> list[tuple[str, ...]]:
    """Groups of distinct IDs (two or more, in first-seen order) that share a look-alike key."""
    groups: dict[str, list[str]] = {}
    for value in ids:
        group = groups.setdefault(lookalike_key(value), [])
        if value not in group:
            group.append(value)
    return [tuple(group) for group in groups.values() if len(group) > 1]


def shown(text: str) -> str:
    """``text`` with its invisible and non-ASCII characters visible (``'caf\\u0301e'``), for messages."""
    return ascii(text)


def describe(groups: list[tuple[str, ...]]) -> str:
    """``'café' and 'cafe\\u0301'; …`` for the first few groups, and how many more."""
    parts = [" and ".join(shown(v) for v in group) for group in groups[:EXAMPLES]]
    more = f" (and {len(groups) - EXAMPLES} more)" if len(groups) > EXAMPLES else ""
    return "; ".join(parts) + more


@dataclass(frozen=True)
class NearMisses:
    """IDs of a run that match nothing judged as written, but a judged ID once normalised."""

    queries: tuple[tuple[str, str], ...]  # (run's query id, the qrels' query id)
    documents: tuple[tuple[str, str, str], ...]  # (query id, retrieved id, judged id)

    def __bool__(self) -> bool:
        return bool(self.queries or self.documents)

    def message(self) -> str:
        """A warning naming how many and a few examples, with the fix ('' when there are none)."""
        parts = []
        if self.queries:
            parts.append(_count("query ID", [f"{shown(r)} vs {shown(j)}" for r, j in self.queries]))
        if self.documents:
            parts.append(
                _count("retrieved ID", [f"{shown(q)}: {shown(r)} vs judged {shown(j)}" for q, r, j in self.documents])
            )
        if not parts:
            return ""
        return (
            f"warning: {'; '.join(parts)} match nothing judged as written, but match once Unicode forms, invisible "
            "characters and surrounding whitespace are ignored; IDs are compared as written, so these count as "
            "unjudged (fix: write the run's IDs exactly as the benchmark does)"
        )


def _count(what: str, examples: list[str]) -> str:
    more = f" (and {len(examples) - EXAMPLES} more)" if len(examples) > EXAMPLES else ""
    return f"{len(examples)} {what}(s) ({', '.join(examples[:EXAMPLES])}{more})"


def near_misses(run: Mapping[str, Iterable[str]], qrels: Mapping[str, Mapping[str, int]]) -> NearMisses:
    """The IDs of ``run`` (query → retrieved document IDs) that miss ``qrels`` (query → {document
    ID: grade}) as written but would match after normalisation: query IDs, then the retrieved IDs
    of each query (matched against the judged IDs of its look-alike query where the IDs differ)."""
    query_keys = _first_by_key(qrels)
    queries, documents = [], []
    for query, retrieved in run.items():
        target = query if query in qrels else query_keys.get(lookalike_key(query))
        if target is None:
            continue
        if target != query:
            queries.append((query, target))
        judged = qrels[target]
        doc_keys = _first_by_key(judged)
        for doc in retrieved:
            if doc not in judged and (match := doc_keys.get(lookalike_key(doc))) is not None:
                documents.append((query, doc, match))
    return NearMisses(tuple(queries), tuple(documents))


def _first_by_key(ids: Iterable[str]) -> dict[str, str]:
    keys: dict[str, str] = {}
    for value in ids:
        keys.setdefault(lookalike_key(value), value)
    return keys


__all__ = ["NearMisses", "blank", "collisions", "describe", "lookalike_key", "near_misses", "visible"]
