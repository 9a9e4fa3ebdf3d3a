"""What every retrieval stage takes and returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol


@dataclass(frozen=True)
class Query:
    query_id: str
    text: str
    principal: tuple[str, ...] | None = None


class Hit(NamedTuple):
    # A tuple, not a dataclass: stages build thousands per query and tuples are cheap.
    chunk_id: str
    score: float


class Stage(Protocol):
    """A retrieval stage. ``previous`` is the preceding stage's output (``None`` for the first)."""

    name: str

    def __call__(self, query: Query, previous: list[Hit] | None) -> list[Hit]: ...

