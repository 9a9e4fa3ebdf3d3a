"""Hybrid fusion of several rankings: reciprocal rank fusion or normalized score fusion.

RRF (Cormack et al. 2009, with weights as in MongoDB's ``$rankFusion``): a chunk scores
``sum_i w_i / (c + rank_i)`` over the inputs that ranked it (ranks from 1). Score fusion normalizes
each input's scores (min-max to [0, 1], or z-score) and sums them weighted; a chunk missing from an
input gets that input's lowest normalized score. Equal fused scores are ordered by chunk ID.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rageval.retrieval.base import Corpus, Hit, Query
from rageval.retrieval.schema import FusionConfig


def rrf(rankings: Sequence[list[Hit]], weights: Sequence[float], rank_constant: float) -> dict[str, float]:
    fused: dict[str, float] = {}
    for hits, weight in zip(rankings, weights, strict=True):
        for rank, hit in enumerate(hits, start=1):
            fused[hit.chunk_id] = fused.get(hit.chunk_id, 0.0) + weight / (rank_constant + rank)
    return fused


def normalized(scores: np.ndarray, method: str) -> np.ndarray:
    if len(scores) == 0:
        return scores
    if method == "minmax":
        low, high = scores.min(), scores.max()
        return np.ones_like(scores) if high == low else (scores - low) / (high - low)
    std = scores.std()
    return np.zeros_like(scores) if std == 0 else (scores - scores.mean()) / std


def score_fusion(rankings: Sequence[list[Hit]], weights: Sequence[float], method: str) -> dict[str, float]:
    normed = [normalized(np.array([h.score for h in hits], dtype=np.float64), method) for hits in rankings]
    floors = [float(n.min()) if len(n) else 0.0 for n in normed]
    every = {hit.chunk_id for hits in rankings for hit in hits}
    fused = {chunk_id: sum(w * f for w, f in zip(weights, floors, strict=True)) for chunk_id in every}
    for hits, values, weight, floor in zip(rankings, normed, weights, floors, strict=True):
        for hit, value in zip(hits, values.tolist(), strict=True):
            fused[hit.chunk_id] += weight * (value - floor)
    return fused


class FusionStage:
    def __init__(self, config: FusionConfig, corpus: Corpus) -> None:
        self.name = config.name
        self.config = config
        self.corpus = corpus
        self.weights = [config.weights.get(name, 1.0) for name in config.inputs]

    def __call__(self, query: Query, inputs: Sequence[list[Hit]] = ()) -> list[Hit]:
        if self.config.method == "rrf":
            fused = rrf(inputs, self.weights, self.config.rank_constant)
        else:
            fused = score_fusion(inputs, self.weights, self.config.normalization)
        # Equal scores by ID (byte order), whether the hits are chunks or another system's passages.
        ordered = sorted(fused.items(), key=lambda item: (-item[1], item[0]))
        return [Hit(chunk_id, score) for chunk_id, score in ordered[: self.config.candidates]]
