"""Chunk → parent: a chunk ranking measured at document level, each parent once at its best chunk."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from rageval.errors import EvaluationError
from rageval.evaluation.ids import arrow_strings, query_codes
from rageval.evaluation.ordering import ranks
from rageval.validation import absent_columns

# A passage-level run is also measured rolled up to its parents (docs/metric-contract.md, "levels"):
# its per-query rows carry ``level`` PARENT_LEVEL, and a wide score table or a metric names those
# measures with PARENT_PREFIX (``parent/nDCG@10``) so both levels sit side by side under unique names.
PARENT_LEVEL = "document"
PARENT_PREFIX = "parent/"


def measure_level(measure: str, level: str) -> str:
    """The level a measure name of a wide table or comparison (``parent/…`` or plain) is measured at,
    given the run's own ``level``."""
    return PARENT_LEVEL if measure.startswith(PARENT_PREFIX) else level


def rollup_to_parent(rankings: pd.DataFrame) -> pd.DataFrame:
    """A chunk ranking (``query_id, rank, chunk_id, parent_id, score``) at parent level:
    ``query_id, doc_id, score, rank``.

    Each parent appears once, at its best-ranked chunk (lowest rank; input order among equal
    ranks), with that chunk's score; ranks are renumbered 1..n per query. Queries keep their order
    of first appearance.
    """
    absent = absent_columns(rankings, ("query_id", "rank", "parent_id", "score"))
    if absent:
        raise EvaluationError(f"the chunk ranking lacks column(s) {', '.join(absent)}")
    query_ids = arrow_strings(rankings["query_id"], "query ID")
    codes, _ = query_codes(query_ids)
    parents = arrow_strings(rankings["parent_id"], "parent ID")
    rank = rankings["rank"].to_numpy(dtype=np.float64)
    if np.isnan(rank).any():
        raise EvaluationError(f"{int(np.isnan(rank).sum())} missing rank(s) in the chunk ranking")
    grouped = bool((codes[1:] >= codes[:-1]).all()) and not ((codes[1:] == codes[:-1]) & (rank[1:] < rank[:-1])).any()
    order = np.arange(len(codes)) if grouped else np.lexsort((rank, codes))
    parent_codes = pd.factorize(pd.Series(parents, dtype=pd.ArrowDtype(parents.type)), sort=False)[0]
    codes = codes[order]
    first = ~pd.Index(codes * (int(parent_codes.max(initial=0)) + 1) + parent_codes[order]).duplicated(keep="first")
    order, codes = order[first], codes[first]
    taken = pa.array(order, type=pa.int64())
    return pd.DataFrame(
        {
            "query_id": pd.Series(query_ids.take(taken), dtype="str"),
            "doc_id": pd.Series(parents.take(taken), dtype="str"),
            "score": rankings["score"].to_numpy(dtype=np.float64)[order],
            "rank": ranks(codes),
        }
    )
