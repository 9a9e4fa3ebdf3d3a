"""A run configuration (``params/*.yaml``) as a strict model: benchmark and split, chunking, the
retrieval stages, the context budget and the evaluation's measures and contract options. Run
configurations use snake_case keys like most Python tool configs.
"""

from __future__ import annotations

import unicodedata
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StrictInt, StrictStr, field_validator

from rageval.benchmark.schema import ChunkingConfig, Level, TokenizerName
from rageval.errors import MeasureError
from rageval.evaluation import DuplicatePolicy, Gain, TiePolicy, parse_measures
from rageval.retrieval.schema import RetrievalConfig
from rageval.validation import Slug, Strict

CONFIG_VERSION = 1
# The largest count a run configuration may give for a depth (final_k, the diagnostics' depth):
# deeper is a typo, and every rank down to it is scored.
MAX_K = 10_000
# The largest context budget in tokens: far past any model's window, so a larger one is a typo.
MAX_CONTEXT_TOKENS = 10_000_000
# The longest configuration, sweep or member name: it becomes an MLflow run name (up to 250
# characters), ``<sweep>/<member>@<split>`` for a sweep member, and a tag.
MAX_NAME = 100


def _run_name(value: str) -> str:
    """A name a run is recorded under: one line of visible text, no path separator."""
    if len(value) > MAX_NAME:
        raise ValueError(f"the name is {len(value)} characters long, more than {MAX_NAME}: shorten it")
    if value.strip() != value or any(unicodedata.category(c)[0] in "CZ" and c != " " for c in value):
        raise ValueError(
            "the name holds control, invisible or surrounding whitespace characters: "
            "write it with letters, digits, '-', '_' and '.'"
        )
    if "/" in value or "\\" in value or value in (".", ".."):
        raise ValueError(
            "the name holds a path separator (or is . or ..): write it with letters, digits, '-', '_' and '.'"
        )
    return value


# A configuration's, sweep's or member's name (refused before any run starts where it cannot be recorded).
RunName = Annotated[Slug, AfterValidator(_run_name)]


class ContextConfig(Strict):
    """The context handed to the generator: the final stage's top ``final_k`` chunks, exact
    duplicates removed, cut at ``max_tokens``."""

    tokenizer: TokenizerName | None = Field(default=None, description="default: the chunking's tokenizer")
    max_tokens: StrictInt | None = Field(default=None, gt=0, le=MAX_CONTEXT_TOKENS)
    dedup: Literal["exact", "none"] = "exact"


class EvaluationConfig(Strict):
    level: Literal["auto", Level] = Field(default="auto", description="auto: the benchmark's relevance unit")
    measures: list[StrictStr] = Field(min_length=1)

    @field_validator("measures")
    @classmethod
    def _parseable_measures(cls, value: list[str]) -> list[str]:
        try:
            parse_measures(value)
        except MeasureError as exc:
            raise ValueError(
                "; ".join(f"{p.message} ({p.fix})" if p.fix else p.message for p in exc.problems)
            ) from None
        return value

    ties: TiePolicy = "docid-asc"
    duplicates: DuplicatePolicy = Field(
        default="keep-first",
        description="a repeated ID counts once, at its first rank; later ones are dropped and counted",
    )
    relevance: StrictInt = Field(
        default=1, ge=1, description="lowest grade that counts as relevant for binary measures"
    )
    gain: Gain = Field(default="grade", description="nDCG gain: the grade, or 2^grade - 1")
    depth: StrictInt = Field(
        default=10, ge=1, le=MAX_K, description="depth of the Judged@k, unjudged and tie-rate diagnostics"
    )
    abstain_below: float | None = Field(
        default=None, description="top score below which retrieval abstains (unanswerable contract); null: not measured"
    )


class FailureBudget(Strict):
    """How many queries may fail (a service error, a timeout, a bad reply) before the run is refused.
    A failed query has no ranking and would score 0 in every measure: by default (0.0) one failure
    refuses the run, so a run whose service was down is never recorded as a result."""

    max_fraction: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="largest share of the split's queries that may fail (0.0: none; 1.0: all)",
    )


class RunConfig(Strict):
    """A run configuration (``params/*.yaml``)."""

    version: Literal[1] = Field(description="configuration schema version")
    name: RunName
    description: StrictStr | None = None
    benchmark: StrictStr = Field(description="benchmark folder, relative to this file")
    split: Slug
    chunking: ChunkingConfig = Field(default_factory=ChunkingConfig)
    retrieval: RetrievalConfig
    final_k: StrictInt = Field(default=10, gt=0, le=MAX_K, description="chunks in the final context")
    context: ContextConfig = Field(default_factory=ContextConfig)
    evaluation: EvaluationConfig
    failures: FailureBudget = Field(default_factory=FailureBudget)
