"""Build the configured stages and run queries through them, keeping every stage's output.

Stages run in the configured order; each consumes the outputs of the stages its config names
(``inputs``). A stage that raises fails that query only. Every stage's ranking is kept, so each can
be measured on its own (see :mod:`rageval.experiment.stages`), with its latency per query and the latency of
its steps (``dense:embed``, ``dense:search`` …).

A retriever that waits on a service may fetch ahead: if it has ``prefetch(queries)`` and a
``prefetch_window`` (queries), the pipeline hands it each window of queries before running them one
by one, so its calls overlap (the ``http`` stage). Such a stage measures each query's latency itself
and sets ``query_seconds`` after each call; the pipeline records that instead of the time the
call took. ``call_counts`` (``{"attempts", "retries", "failures"}``) are its external calls. A stage
with ``close()`` is closed after each run (its connections; the next run opens them again).
"""

from __future__ import annotations

import dataclasses
import importlib
import itertools
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from rageval.errors import ConfigError
from rageval.retrieval import encoders
from rageval.retrieval.base import Corpus, Hit, Query, Stage
from rageval.retrieval.filters import FilterStage
from rageval.retrieval.plugin import is_retriever
from rageval.retrieval.preflight import locate
from rageval.retrieval.schema import RETRIEVER_TYPES, StageConfig

# The registry: a config's ``type`` → the module and class (or factory) that builds the stage,
# imported when a stage of that type is built: a BM25 run never imports httpx, a process that only
# reads results (the CLI logging a run) not even bm25s.
STAGES: dict[str, str] = {
    "bm25": "rageval.retrieval.lexical:BM25Stage",
    "dense": "rageval.retrieval.dense:DenseStage",
    "fusion": "rageval.retrieval.fusion:FusionStage",
    "rerank": "rageval.retrieval.rerank:RerankStage",
    "filter": "rageval.retrieval.filters:FilterStage",
    "dedup": "rageval.retrieval.dedup:DedupStage",
    "runfile": "rageval.retrieval.runfile:RunFileStage",
    "http": "rageval.retrieval.http:HttpStage",
    "plugin": "rageval.retrieval.plugin:build_plugin",
    "langchain": "rageval.retrieval.frameworks:LangChainStage",
    "llamaindex": "rageval.retrieval.frameworks:LlamaIndexStage",
}


def stage_module(stage_type: str) -> str:
    """The module a stage of ``stage_type`` lives in (what building one imports)."""
    return STAGES[stage_type].partition(":")[0]


def stage_class(stage_type: str) -> Callable[..., Stage]:
    """The class (or factory) that builds a stage of ``stage_type``."""
    name = STAGES[stage_type].partition(":")[2]
    stage: Callable[..., Stage] = getattr(importlib.import_module(stage_module(stage_type)), name)
    return stage


def build_stage(config: StageConfig, corpus: Corpus) -> Stage:
    return stage_class(config.type)(config, corpus)


def stage_inputs(configs: Sequence[StageConfig]) -> list[list[str]]:
    """The stages each stage consumes: as configured, else none for a retriever, else the previous."""
    out = []
    for index, config in enumerate(configs):
        if config.inputs is not None:
            out.append(list(config.inputs))
        elif config.type in RETRIEVER_TYPES or (config.type == "plugin" and is_retriever(config)):
            out.append([])
        else:
            out.append([configs[index - 1].name])
    return out


@dataclass
class PipelineOutput:
    """Per stage and query, the ranking; the final stage's per query (absent for a failed query);
    latencies (query, stage or ``stage:step``, seconds) and failures."""

    stages: dict[str, dict[str, list[Hit]]] = field(default_factory=dict)
    hits: dict[str, list[Hit]] = field(default_factory=dict)
    final_stage: dict[str, str] = field(default_factory=dict)
    latencies: list[tuple[str, str, float]] = field(default_factory=list)
    failures: list[tuple[str, str, str, str]] = field(default_factory=list)  # query, stage, type, message


class Pipeline:
    def __init__(self, stages: Sequence[Stage], inputs: Sequence[Sequence[str]] | None = None) -> None:
        if not stages:
            raise ValueError("a pipeline needs at least one stage")
        self.stages = list(stages)
        names = [s.name for s in self.stages]
        self.inputs = [list(i) for i in inputs] if inputs is not None else [[]] + [[n] for n in names[:-1]]
        self.build_seconds: dict[str, float] = {}
        # Filters with ``when: before`` restrict what the retrievers may return.
        self.prefilters = [s for s in self.stages if isinstance(s, FilterStage) and s.config.when == "before"]

    @classmethod
    def from_config(
        cls, configs: Sequence[StageConfig], corpus: Corpus, *, source: str = "the run configuration"
    ) -> Pipeline:
        """Build every stage; a stage that cannot be built fails naming ``source`` (the params file)
        and its field, ``retrieval.stages[i].<key>``."""
        stages, seconds = [], {}
        for index, config in enumerate(configs):
            started = time.perf_counter()
            try:
                stages.append(build_stage(config, corpus))
            except ConfigError as exc:
                raise ConfigError([locate(p, index, source) for p in exc.problems]) from None
            seconds[config.name] = time.perf_counter() - started
        pipeline = cls(stages, stage_inputs(configs))
        pipeline.build_seconds = seconds
        return pipeline

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.stages]

    def cache_hits(self) -> dict[str, bool]:
        return {s.name: bool(hit) for s in self.stages if (hit := getattr(s, "cache_hit", None)) is not None}

    def external_calls(self) -> dict[str, int]:
        return {s.name: int(getattr(s, "external_calls", 0)) for s in self.stages}

    def call_counts(self) -> dict[str, dict[str, int]]:
        """Per stage that calls a service: its attempts, retries and failed queries."""
        return {s.name: dict(counts) for s in self.stages if (counts := getattr(s, "call_counts", None)) is not None}

    def run(self, queries: Iterable[Query]) -> PipelineOutput:
        encoders.forget_queries()  # every run pays for its own query embeddings, as it would in production
        out = PipelineOutput(stages={name: {} for name in self.names})
        # Retrievers that fetch ahead (their inputs are none, so a window can be asked at once).
        ahead = [
            s for s, i in zip(self.stages, self.inputs, strict=True) if not i and callable(getattr(s, "prefetch", None))
        ]
        window = max((int(getattr(s, "prefetch_window", 1)) for s in ahead), default=1)
        try:
            for batch in _windows(queries, window):
                batch = [self._restricted(query) for query in batch]
                for stage in ahead:
                    stage.prefetch(batch)  # type: ignore[attr-defined]
                for query in batch:
                    self._run_one(query, out)
        finally:
            for stage in self.stages:
                if callable(close := getattr(stage, "close", None)):
                    close()
        return out

    def _restricted(self, query: Query) -> Query:
        """``query`` with the chunks the ``when: before`` filters allow."""
        if not self.prefilters:
            return query
        allowed = self.prefilters[0].allowed(query)
        for extra in self.prefilters[1:]:
            allowed = np.intersect1d(allowed, extra.allowed(query))
        return dataclasses.replace(query, allowed=allowed)

    def _run_one(self, query: Query, out: PipelineOutput) -> None:
        outputs: dict[str, list[Hit]] = {}
        for stage, inputs in zip(self.stages, self.inputs, strict=True):
            started = time.perf_counter()
            try:
                hits = stage(query, [outputs[name] for name in inputs])
            except Exception as exc:  # noqa: BLE001 - recorded per query, never swallowed
                out.failures.append((query.query_id, stage.name, type(exc).__name__, str(exc)))
                return
            finally:
                own = getattr(stage, "query_seconds", None)  # a prefetching stage measures its own calls
                out.latencies.append(
                    (query.query_id, stage.name, time.perf_counter() - started if own is None else own)
                )
            for step, seconds in (getattr(stage, "steps", None) or {}).items():
                out.latencies.append((query.query_id, f"{stage.name}:{step}", seconds))
            outputs[stage.name] = hits
            out.stages[stage.name][query.query_id] = hits
        out.hits[query.query_id] = outputs[self.stages[-1].name]
        out.final_stage[query.query_id] = self.stages[-1].name


def _windows(queries: Iterable[Query], size: int) -> Iterator[list[Query]]:
    """``queries`` in lists of ``size``, pulled from the iterable only as each list is needed."""
    iterator = iter(queries)
    while batch := list(itertools.islice(iterator, max(size, 1))):
        yield batch
