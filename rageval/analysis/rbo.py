"""How alike two rankings are without judgments: rank-biased overlap (Webber, Moffat and Zobel, "A
similarity measure for indefinite rankings", TOIS 28(4), 2010), Jaccard@k and the top-1 change.

RBO weighs the agreement at each depth d (the share of the two top-d prefixes they have in common)
by p^(d-1), so with persistence ``p`` the first 1/(1-p) ranks carry most of the weight (p = 0.9:
the first 10 ranks carry 86%). Two rankings seen to finite depths give three numbers:

- ``min`` (RBO_min, the paper's eq. 11): the value if no item beyond the seen prefixes ever agrees;
- ``res`` (RBO_res, eq. 30): how much more agreement could still come from the unseen items, so
  the true RBO of the full rankings lies in [min, min + res];
- ``ext`` (RBO_ext, eq. 32): the point estimate that assumes the agreement seen at the shorter
  list's depth goes on; it lies in that interval.

Lists of different lengths (s ≤ l) are handled as the paper does: beyond depth s the shorter list's
unseen items are unknown, and the overlap X_d counts its s seen items within the longer list's top
d. Items are compared by ID without ties; an ID twice in one ranking is an error. An empty ranking
has no overlap to measure: the caller counts empty or failed responses apart.

The function is :func:`rank_biased_overlap`, not ``rbo``: a package export named like this module
would hide the module (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rageval.errors import EvaluationError


@dataclass(frozen=True)
class RBO:
    """RBO of two rankings: ``min`` ≤ ``ext`` ≤ ``min + res``, at persistence ``p``, the shorter
    ranking seen to ``short`` items and the longer to ``long``."""

    min: float
    res: float
    ext: float
    p: float
    short: int
    long: int

    @property
    def max(self) -> float:
        return self.min + self.res


def _ranks(ranking: Sequence[str], name: str) -> dict[str, int]:
    """Each ID's 1-based rank; a repeated or missing ID is refused."""
    ranks: dict[str, int] = {}
    for rank, item in enumerate(ranking, 1):
        if item in ranks:
            raise EvaluationError(
                f"the {name} ranking holds '{item}' at ranks {ranks[item]} and {rank}: RBO compares rankings of "
                "distinct IDs; drop the repeats first (keep each ID's first rank, as the dedup stage does)"
            )
        ranks[item] = rank
    if not ranks:
        raise EvaluationError(
            f"the {name} ranking is empty: there is no overlap to measure; count empty or failed responses apart"
        )
    return ranks


def overlaps(short: Sequence[str], long: Sequence[str]) -> np.ndarray:
    """X_d for d = 1..len(long): how many of the first min(d, len(short)) items of ``short`` are in
    the first d of ``long``. ``short`` must not be the longer one."""
    seen, other = _ranks(short, "first"), _ranks(long, "second")
    if len(seen) > len(other):
        raise ValueError("overlaps() takes the shorter ranking first")
    # An item both share counts from the depth where both prefixes hold it.
    depths = [max(rank, other[item]) for item, rank in seen.items() if item in other]
    return np.cumsum(np.bincount(np.asarray(depths, dtype=int), minlength=len(other) + 1)[1:])


def rank_biased_overlap(first: Sequence[str], second: Sequence[str], p: float = 0.9) -> RBO:
    """Rank-biased overlap of two rankings (IDs best first) at persistence ``p`` in (0, 1)."""
    if not 0 < p < 1:
        raise ValueError(f"the persistence p must lie in (0, 1) (got {p})")
    _ranks(first, "first")  # name the list that repeats an ID or is empty
    _ranks(second, "second")
    short, long = (first, second) if len(first) <= len(second) else (second, first)
    s, l = len(short), len(long)  # noqa: E741  (the paper's names)
    x = overlaps(short, long).astype(float)
    x_s, x_l = x[s - 1], x[l - 1]
    d = np.arange(1, l + 1, dtype=float)
    weights = p**d / d  # p^d / d, the terms every sum below shares
    scale = (1 - p) / p
    log_term = -np.log1p(-p)  # ln(1 / (1 - p)) = the sum of p^d / d over all d

    # eq. 11 carried to depth l: the seen agreement, and X_l for ever after.
    low = scale * (float(np.sum((x - x_l) * weights)) + x_l * log_term)

    # eq. 30: every unseen item agrees as early as it can; from depth f = l + s - X_l on, all agree.
    f = int(l + s - x_l)
    partial = np.cumsum(p ** np.arange(1, f + 1) / np.arange(1, f + 1))  # sum of p^d/d to each depth

    def tail(a: int, b: int) -> float:  # sum of p^d / d for d = a+1 .. b
        return float(partial[b - 1] - partial[a - 1]) if b > a else 0.0

    res = p**s + p**l - p**f - scale * (s * tail(s, f) + l * tail(l, f) + x_l * (log_term - float(partial[f - 1])))

    # eq. 32: the agreement X_s / s seen at depth s goes on in the shorter list's unseen items.
    beyond = d > s
    seen_sum = float(np.sum(x * weights)) + float(np.sum(x_s * (d[beyond] - s) / s * weights[beyond]))
    ext = scale * seen_sum + ((x_l - x_s) / l + x_s / s) * p**l
    return RBO(
        min=float(low),
        res=max(float(res), 0.0),  # rounding can leave -1e-17 for identical lists
        ext=float(ext),
        p=p,
        short=s,
        long=l,
    )


def jaccard_at(first: Sequence[str], second: Sequence[str], k: int) -> float:
    """|A ∩ B| / |A ∪ B| of the two top-k sets (a ranking shorter than k: all of it)."""
    if k < 1:
        raise ValueError(f"k must be at least 1 (got {k})")
    _ranks(first, "first")
    _ranks(second, "second")
    top_a, top_b = set(list(first)[:k]), set(list(second)[:k])
    return len(top_a & top_b) / len(top_a | top_b)


def top1_changed(first: Sequence[str], second: Sequence[str]) -> bool:
    """Whether the two rankings put different IDs first."""
    _ranks(first, "first")
    _ranks(second, "second")
    return bool(first[0] != second[0])
