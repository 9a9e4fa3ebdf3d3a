"""Retrieval stages (one per file) and the pipeline that chains them.

A stage is a small class built from its config model and the corpus chunks, with one method:
``__call__(query, previous) -> list[Hit]``. ``STAGES`` maps each config ``type`` to its class.
"""

from rageval.retrieval.base import Hit, Query, Stage
from rageval.retrieval.lexical import BM25Stage
from rageval.retrieval.pipeline import STAGES, Pipeline, PipelineOutput, build_stage

__all__ = ["STAGES", "BM25Stage", "Hit", "Pipeline", "PipelineOutput", "Query", "Stage", "build_stage"]
