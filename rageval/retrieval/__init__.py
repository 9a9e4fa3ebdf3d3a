"""Retrieval stages (one per file) and the pipeline that runs them.

A stage is a small class built from its config model and the :class:`Corpus`, with one method:
``__call__(query, inputs) -> list[Hit]``. ``STAGES`` maps each config ``type`` to where its class lives
(``stage_class`` imports it).
Names load lazily: ``from rageval.retrieval import Corpus`` does not import bm25s or torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rageval.lazy import exports

_EXPORTS = {
    "Corpus": "rageval.retrieval.base",
    "Hit": "rageval.retrieval.base",
    "Query": "rageval.retrieval.base",
    "Stage": "rageval.retrieval.base",
    "top_hits": "rageval.retrieval.base",
    "DedupStage": "rageval.retrieval.dedup",
    "DenseStage": "rageval.retrieval.dense",
    "FilterStage": "rageval.retrieval.filters",
    "visible": "rageval.retrieval.filters",
    "FusionStage": "rageval.retrieval.fusion",
    "BM25Stage": "rageval.retrieval.lexical",
    "STAGES": "rageval.retrieval.pipeline",
    "Pipeline": "rageval.retrieval.pipeline",
    "PipelineOutput": "rageval.retrieval.pipeline",
    "build_stage": "rageval.retrieval.pipeline",
    "stage_class": "rageval.retrieval.pipeline",
    "RerankStage": "rageval.retrieval.rerank",
    "RunFileStage": "rageval.retrieval.runfile",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from rageval.retrieval.base import Corpus, Hit, Query, Stage, top_hits
    from rageval.retrieval.dedup import DedupStage
    from rageval.retrieval.dense import DenseStage
    from rageval.retrieval.filters import FilterStage, visible
    from rageval.retrieval.fusion import FusionStage
    from rageval.retrieval.lexical import BM25Stage
    from rageval.retrieval.pipeline import STAGES, Pipeline, PipelineOutput, build_stage, stage_class
    from rageval.retrieval.rerank import RerankStage
    from rageval.retrieval.runfile import RunFileStage
