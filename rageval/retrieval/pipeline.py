"""Chain stages over a set of queries, timing each stage and recording failures per query."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from rageval.chunking import Chunk
from rageval.retrieval.base import Hit, Query, Stage
from rageval.retrieval.lexical import BM25Stage
from rageval.schema import StageConfig

STAGES: dict[str, Callable[..., Stage]] = {"bm25": BM25Stage}


def build_stage(config: StageConfig, chunks: Sequence[Chunk]) -> Stage:
    return STAGES[config.type](config, chunks)


@dataclass
class PipelineOutput:
    """Final hits per query (absent for a query that failed), with latencies and failures."""

    hits: dict[str, list[Hit]] = field(default_factory=dict)
    final_stage: dict[str, str] = field(default_factory=dict)
    latencies: list[tuple[str, str, float]] = field(default_factory=list)  # query, stage, seconds
    failures: list[tuple[str, str, str, str]] = field(default_factory=list)  # query, stage, type, message


class Pipeline:
    def __init__(self, stages: Sequence[Stage]) -> None:
        if not stages:
            raise ValueError("a pipeline needs at least one stage")
        self.stages = list(stages)

    @classmethod
    def from_config(cls, configs: Iterable[StageConfig], chunks: Sequence[Chunk]) -> Pipeline:
        return cls([build_stage(config, chunks) for config in configs])

    def run(self, queries: Iterable[Query]) -> PipelineOutput:
        """Run every query through every stage. A stage that raises fails that query only."""
        out = PipelineOutput()
        for query in queries:
            hits: list[Hit] | None = None
            for stage in self.stages:
                started = time.perf_counter()
                try:
                    hits = stage(query, hits)
                except Exception as exc:  # noqa: BLE001 - recorded per query, never swallowed
                    out.failures.append((query.query_id, stage.name, type(exc).__name__, str(exc)))
                    hits = None
                    break
                finally:
                    out.latencies.append((query.query_id, stage.name, time.perf_counter() - started))
            if hits is not None:
                out.hits[query.query_id] = hits
                out.final_stage[query.query_id] = self.stages[-1].name
        return out
