"""The benchmark's user-written files as strict models: ``benchmark.yaml``, ``documents.jsonl``,
``cases.jsonl``, label-migration review rows, and the chunking configuration whose hash is part of
every chunk ID. Benchmark files use the camelCase field names of the case schema.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, Field, StrictInt, StrictStr, field_validator

from rageval.benchmark.lookalike import blank
from rageval.benchmark.provenance import Provenance
from rageval.benchmark.tokenizers import TOKENIZERS
from rageval.validation import Sha256, Slug, Strict

DEFAULT_RUBRIC: dict[int, str] = {
    0: "irrelevant or misleading",
    1: "topically related but insufficient",
    2: "necessary evidence that must be combined with another passage",
    3: "directly contains the key fact and its boundary conditions",
}

DOCUMENTS_FILE = "documents.jsonl"
CASES_FILE = "cases.jsonl"
BENCHMARK_FILE = "benchmark.yaml"
# The two levels a benchmark is judged and a run is measured at (one source for every choice list).
Level = Literal["document", "passage"]
LEVELS: tuple[str, ...] = get_args(Level)
# The frozen split: evaluated rarely (counted), never tuned on, never given unreviewed labels.
RELEASE_SPLIT = "release"
# An assessor whose name starts so is a judge (rageval judge prelabel), never a human: a language
# model's mark, and a similarity pre-labeler's (labels name their backend honestly).
JUDGE_ASSESSOR_PREFIX = "llm:"
SIMILARITY_ASSESSOR_PREFIX = "similarity:"
JUDGE_ASSESSOR_PREFIXES: tuple[str, ...] = (JUDGE_ASSESSOR_PREFIX, SIMILARITY_ASSESSOR_PREFIX)
# The split tuned on.
DEV_SPLIT = "dev"
# The splits an importer writes unless told another name on purpose.
IMPORT_SPLITS: tuple[str, ...] = (DEV_SPLIT, RELEASE_SPLIT)

ChunkingHash = Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{12}$")]
JUDGMENT_NOTES_FILE = "judgment-notes.jsonl"
ChangeAction = Literal["added", "retired", "re-judged", "judgments-added"]
CHANGE_ACTIONS: tuple[str, ...] = get_args(ChangeAction)


# A preprocessing step as recorded: its name and version, e.g. ``strip-heading-anchors/1``
# (the steps themselves: rageval.benchmark.docs.steps.STEPS).
PreprocessingStep = Annotated[StrictStr, Field(pattern=r"^[a-z][a-z0-9-]*/[1-9][0-9]*$")]


class Predecessor(Strict):
    """The version a benchmark version was started from (``rageval benchmark new-version``)."""

    path: Slug = Field(description="the predecessor's folder, relative to this benchmark's folder")
    version: Slug
    cases: Sha256 = Field(description="sha256 of the predecessor's cases.jsonl when this version was started")


class ChangelogEntry(Strict):
    """One change to the cases, made in ``version``; validation checks the entries of the current
    version against the predecessor's cases."""

    version: Slug
    date: dt.date = Field(strict=False)
    action: ChangeAction
    cases: list[Slug] = Field(min_length=1, description="query IDs")
    reason: StrictStr

    @field_validator("reason")
    @classmethod
    def _has_reason(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the reason is empty; say why the cases changed")
        return value


class LabelChunking(Strict):
    """The chunking whose chunks the passage judgments were made on (see docs/governance.md)."""

    hash: ChunkingHash
    config: dict[StrictStr, Any]


class BenchmarkSpec(Strict):
    """``benchmark.yaml``: what binds a corpus snapshot and its judgments together."""

    name: Slug
    version: Slug
    description: StrictStr | None = None
    corpusVersion: Slug
    relevanceUnit: Level
    rubric: dict[StrictInt, StrictStr] = Field(default_factory=lambda: dict(DEFAULT_RUBRIC))
    splits: list[Slug] = Field(min_length=1)
    files: dict[StrictStr, Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")]] = Field(
        description="sha256 of every file of the benchmark, by file name"
    )
    predecessor: Predecessor | None = None
    changelog: list[ChangelogEntry] = Field(default_factory=list)
    labelChunking: LabelChunking | None = None
    provenance: Provenance | None = Field(default=None, description="the default of every case without its own")
    preprocessing: list[PreprocessingStep] = Field(
        default_factory=list,
        description="the named, versioned steps that made documents.jsonl from its source pages, in order "
        "(rageval benchmark import docs)",
    )

    @field_validator("splits")
    @classmethod
    def _unique_splits(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError(f"split names repeat: {value}")
        return value


class Document(Strict):
    """One line of ``documents.jsonl``."""

    id: Slug
    title: StrictStr
    text: StrictStr
    metadata: dict[str, Any] = Field(default_factory=dict)
    acl: list[Slug] | None = None
    # ISO dates arrive as JSON strings, so these two fields parse in lax mode.
    created: dt.date | None = Field(default=None, strict=False)
    updated: dt.date | None = Field(default=None, strict=False)


class Judgment(Strict):
    """A graded relevant item of a case; ``start``/``end`` locate the evidence passage."""

    documentId: Slug
    grade: StrictInt
    start: StrictInt | None = Field(default=None, ge=0)
    end: StrictInt | None = Field(default=None, ge=0)
    quote: StrictStr | None = Field(
        default=None,
        description="the evidence text the span was found from (rageval benchmark label); a re-import of the "
        "corpus locates the judgment again by it",
    )

    @property
    def has_span(self) -> bool:
        return self.span is not None

    @property
    def span(self) -> tuple[int, int] | None:
        """(start, end) of the evidence passage; None for a whole-document judgment."""
        return (self.start, self.end) if self.start is not None and self.end is not None else None


class Case(Strict):
    """One line of ``cases.jsonl``: a query with its judgments."""

    queryId: Slug
    query: StrictStr
    corpusVersion: Slug
    relevant: list[Judgment]
    slice: list[Slug] = Field(default_factory=list)
    notes: StrictStr | None = None
    split: Slug
    principal: list[Slug] | None = None
    provenance: Provenance | None = Field(default=None, description="replaces benchmark.yaml's default as a whole")

    @field_validator("query")
    @classmethod
    def _non_empty_query(cls, value: str) -> str:
        if blank(value):
            shown = "empty" if not value.strip() else "empty once its invisible characters are removed"
            raise ValueError(f"the query is {shown}; write the question the user asks")
        return value

    @property
    def answerable(self) -> bool:
        return any(j.grade > 0 for j in self.relevant)


class ProposalSource(Strict):
    """A judgment a migrated chunk label was proposed from, with its overlap score."""

    documentId: Slug
    grade: StrictInt
    start: StrictInt | None = None
    end: StrictInt | None = None
    overlap: float = Field(ge=0, le=1)


class LabelProposal(Strict):
    """One line of a label-migration review file (``chunk-labels-<hash>.jsonl``). A reviewer sets
    ``decision`` (and may change ``grade``); ``migrate-labels --review`` then marks it reviewed."""

    queryId: Slug
    chunkId: Slug
    documentId: Slug
    start: StrictInt = Field(ge=0)
    end: StrictInt = Field(ge=0)
    grade: StrictInt
    overlap: float = Field(ge=0, le=1, description="the share of the smaller of chunk and judged span they share")
    sources: list[ProposalSource] = Field(min_length=1)
    fromChunks: list[StrictStr] = Field(default_factory=list)
    fromChunking: ChunkingHash
    toChunking: ChunkingHash
    status: Literal["proposed", "reviewed"] = "proposed"
    decision: Literal["accept", "reject"] | None = None
    reviewer: StrictStr | None = None
    reviewedOn: dt.date | None = Field(default=None, strict=False)
    note: StrictStr | None = None


def _known_tokenizer(value: str) -> str:
    if value not in TOKENIZERS:
        raise ValueError(f"unknown tokenizer '{value}'; valid choices are {', '.join(TOKENIZERS)}")
    return value


# A tokenizer named in a config: one of rageval.benchmark.tokenizers.TOKENIZERS (the one source).
TokenizerName = Annotated[
    StrictStr, AfterValidator(_known_tokenizer), Field(description="name in rageval.benchmark.tokenizers.TOKENIZERS")
]


# The Markdown block parser a chunking reads blocks (headings, paragraphs, code, tables) with: the
# chunking version. ``markdown-it`` (CommonMark with tables, through markdown-it-py) is version 2;
# ``rageval-1`` is the hand-written parser of every chunking recorded before this field existed.
ChunkParser = Literal["markdown-it", "rageval-1"]
CHUNK_PARSERS: tuple[str, ...] = get_args(ChunkParser)
LEGACY_CHUNK_PARSER: ChunkParser = "rageval-1"

# The largest chunk in tokens: a chunk is cut to fit a model's window, and a larger one is a typo
# (a whole document is method "none").
MAX_CHUNK_TOKENS = 100_000


class ChunkingConfig(Strict):
    """How documents are cut into chunks. Its hash is part of every chunk ID."""

    method: Literal["none", "markdown"] = "markdown"
    parser: ChunkParser = Field(
        default="markdown-it",
        description="Markdown block parser, the chunking version: markdown-it (2) or rageval-1 (runs recorded before)",
    )
    tokenizer: TokenizerName = "words"
    size: StrictInt = Field(default=200, gt=0, le=MAX_CHUNK_TOKENS, description="max tokens per chunk")
    overlap: StrictInt = Field(default=0, ge=0, description="tokens repeated from the previous chunk")
    headings: bool = Field(default=True, description="prefix title and heading path to the indexed text")
    code_blocks: Literal["atomic", "split"] = "atomic"
    tables: Literal["atomic", "split"] = "atomic"

    @field_validator("overlap")
    @classmethod
    def _overlap_below_size(cls, value: int, info: Any) -> int:
        size = info.data.get("size")
        if size is not None and value > size // 2:
            raise ValueError(f"overlap ({value}) must be at most half of size ({size})")
        return value


def recorded_chunking(section: Any) -> Any:
    """A chunking section as a run or a benchmark recorded it, ready to validate: one recorded
    before ``parser`` existed was chunked by the version-1 parser, and is read so (a params file a
    user writes from now on gets the default, ``markdown-it``)."""
    if isinstance(section, dict) and "parser" not in section:
        return {**section, "parser": LEGACY_CHUNK_PARSER}
    return section
