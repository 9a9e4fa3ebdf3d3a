"""Retrieval stages (one per file) and the pipeline that runs them.

A stage is a small class built from its config model and the :class:`Corpus`, with one method:
``__call__(query, inputs) -> list[Hit]``. ``STAGES`` maps each config ``type`` to its class.
"""

from rageval.retrieval.base import Corpus, Hit, Query, Stage, top_hits
from rageval.retrieval.dedup import DedupStage
from rageval.retrieval.dense import DenseStage
from rageval.retrieval.filters import FilterStage, visible
from rageval.retrieval.fusion import FusionStage
from rageval.retrieval.lexical import BM25Stage
from rageval.retrieval.pipeline import STAGES, Pipeline, PipelineOutput, build_stage
from rageval.retrieval.rerank import RerankStage
from rageval.retrieval.runfile import RunFileStage

__all__ = [
    "STAGES",
    "BM25Stage",
    "Corpus",
    "DedupStage",
    "DenseStage",
    "FilterStage",
    "FusionStage",
    "Hit",
    "Pipeline",
    "PipelineOutput",
    "Query",
    "RerankStage",
    "RunFileStage",
    "Stage",
    "build_stage",
    "top_hits",
    "visible",
]
