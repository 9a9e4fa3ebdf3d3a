"""What every retrieval stage takes and returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Query:
    query_id: str
    text: str
    principal: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Hit:
    chunk_id: str
    score: float


class Stage(Protocol):
    """A retrieval stage. ``previous`` is the preceding stage's output (``None`` for the first)."""

    name: str

    def __call__(self, query: Query, previous: list[Hit] | None) -> list[Hit]: ...


def ranked(hits: list[Hit]) -> list[Hit]:
    """Score descending, then chunk ID ascending: a deterministic order for equal scores."""
    return sorted(hits, key=lambda hit: (-hit.score, hit.chunk_id))
