"""Retrievers where teams build them: a LangChain or a LlamaIndex retriever as a stage.

``type: langchain`` or ``type: llamaindex`` names a ``factory`` (``package.module:function``).
It is called once, when the stage is built, as ``factory(documents, **options)``: ``documents``
are the corpus's documents in the framework's own type (LangChain ``Document(page_content=text,
metadata=…, id=…)``, LlamaIndex ``Document(text=text, id_=…, metadata=…)``), each with the
metadata ``{**document.metadata, "documentId": id, "title": title}``. It returns the framework's
retriever, which chunks and indexes as the team does in production.

Per query the stage asks the retriever (LangChain ``invoke``, LlamaIndex ``retrieve``) and turns
each returned chunk into a passage of its document, graded on its span:

- its document: LangChain ``metadata["documentId"]`` (splitters copy metadata to every chunk);
  LlamaIndex ``node.ref_doc_id`` (the source document), else ``metadata["documentId"]``. A chunk
  with neither, or naming a document the corpus lacks, fails the query, naming the chunk.
- its offsets: LangChain ``metadata["start_index"]`` (a splitter with ``add_start_index=True``),
  LlamaIndex ``start_char_idx``; used when they slice the document to exactly the chunk's text
  (:meth:`Corpus.passage`). Otherwise the chunk's text is located in its document
  (:meth:`Corpus.locate_passage`); text found nowhere, or in several places, fails the query.
- its score: the retriever's (LangChain ``metadata["score"]`` or ``["relevance_score"]``,
  LlamaIndex ``NodeWithScore.score``) when every hit of the query has one and they never increase
  down the list; otherwise ``1 / rank``. The framework's order is always the ranking. Which of the
  two was used is recorded (``scores``).

``candidates`` is passed as ``k`` where the retriever takes it (a LangChain
``VectorStoreRetriever``'s search, a LlamaIndex retriever's ``similarity_top_k``); any retriever's
list is cut at ``candidates``. The same passage twice keeps its first place. A ``filter`` with
``when: before`` keeps only hits from documents the query may see (permissions and metadata are
document properties, so this is exact); the framework itself searched everything.

Recorded with the run (``model_identity``, the run's ``models.json``): the factory, the sha256 and
path of the file that defines it, and the version of every installed ``langchain*`` or
``llama-index*`` distribution. The framework's index is built afresh by every run (its code is the
team's: nothing of it is cached).

The frameworks are imported only when such a stage is built (the ``frameworks`` extra).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from rageval.errors import CONFIG, ConfigError, InputError, Problem
from rageval.hashing import sha256_file
from rageval.retrieval.base import Corpus, Hit, Query
from rageval.retrieval.plugin import import_named
from rageval.retrieval.schema import FrameworkConfig, LangChainConfig, LlamaIndexConfig

FRAMEWORKS_FIX = "pip install 'rageval[frameworks]' (LangChain and LlamaIndex, with their HuggingFace embeddings)"
# Where LangChain retrievers put a hit's score (it differs by retriever).
SCORE_KEYS = ("score", "relevance_score")


class Found(NamedTuple):
    """One chunk a framework returned: its document, its text, where it starts (if kept), its score."""

    document_id: str | None
    text: str
    start: int | None
    score: float | None


def from_langchain(document: Any) -> Found:
    """A LangChain ``Document`` returned by a retriever, as a :class:`Found`."""
    metadata = document.metadata or {}
    start = metadata.get("start_index")
    score = next((metadata[key] for key in SCORE_KEYS if _number(metadata.get(key))), None)
    return Found(
        metadata.get("documentId"),
        document.page_content,
        start if isinstance(start, int) and not isinstance(start, bool) else None,
        None if score is None else float(score),
    )


def from_llamaindex(result: Any) -> Found:
    """A LlamaIndex ``NodeWithScore`` returned by a retriever, as a :class:`Found`."""
    node = result.node
    document_id = node.ref_doc_id or (node.metadata or {}).get("documentId")
    return Found(document_id, node.get_content(), node.start_char_idx, result.score)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def passage_id(corpus: Corpus, found: Found) -> str:
    """The hit ID of ``found``: by its offsets where they slice its document to its text, else by
    locating its text in the document."""
    excerpt = found.text[:60].replace("\n", " ")
    if not isinstance(found.document_id, str):
        raise InputError(
            f"the retriever returned a chunk without its document ('{excerpt}…'): keep the metadata "
            "'documentId' the stage gives each document (splitters copy it to every chunk)"
        )
    document = corpus.documents.get(found.document_id)
    if document is None:
        raise InputError(f"the retriever returned a chunk of '{found.document_id}', which is not a corpus document")
    if found.start is not None and document.text[found.start : found.start + len(found.text)] == found.text:
        return corpus.passage(found.document_id, found.start, found.start + len(found.text))
    return corpus.locate_passage(found.document_id, found.text)


def ranking(corpus: Corpus, found: Sequence[Found], k: int, allowed: set[str] | None = None) -> tuple[list[Hit], str]:
    """The hits of ``found`` in the framework's order (no passage twice, only ``allowed``
    documents if given, at most ``k``) and where their scores came from: ``retriever`` or ``rank``."""
    kept: dict[str, float | None] = {}
    for item in found:
        hit_id = passage_id(corpus, item)
        if allowed is not None and item.document_id not in allowed:
            continue
        kept.setdefault(hit_id, item.score)
        if len(kept) == k:
            break
    scores = [s for s in kept.values() if s is not None]
    if len(scores) == len(kept) and all(a >= b for a, b in zip(scores, scores[1:], strict=False)):
        return [Hit(i, s) for i, s in zip(kept, scores, strict=True)], "retriever"
    return [Hit(i, 1.0 / rank) for rank, i in enumerate(kept, start=1)], "rank"


def framework_versions(prefixes: tuple[str, ...]) -> dict[str, str]:
    """Name → version of every installed distribution whose name starts with one of ``prefixes``
    (the first found on the path, the one imported)."""
    out: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        if name.startswith(prefixes) and name not in out:
            out[name] = dist.version
    return dict(sorted(out.items()))


def load_factory(config: FrameworkConfig) -> tuple[Callable[..., Any], dict[str, str]]:
    """The configured factory and its identity: name, sha256 and path of its source file."""
    module_name, _, attribute = config.factory.partition(":")
    module, factory = import_named(config.factory, "factory")
    if not callable(factory):
        message = f"'{module_name}' has no function '{attribute}'"
        raise ConfigError(Problem(file=CONFIG, field="factory", message=message))
    source = inspect.getsourcefile(module)
    if source is None:
        raise ConfigError(
            Problem(
                file=CONFIG,
                field="factory",
                message=f"'{module_name}' has no source file, so its code cannot be recorded",
                fix="define the factory in a .py module",
            )
        )
    return factory, {"name": config.factory, "sha256": sha256_file(Path(source)), "source": str(Path(source).resolve())}


def _require(stage_type: str, module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(
            Problem(file=CONFIG, field="type", message=f"{stage_type} stages need {exc.name}", fix=FRAMEWORKS_FIX)
        ) from None


def _build(config: FrameworkConfig, factory: Callable[..., Any], documents: list[Any], expected: type) -> Any:
    """The retriever the factory returns for ``documents``; anything else is the configuration's error."""
    try:
        retriever = factory(documents, **config.options)
    except Exception as exc:  # noqa: BLE001 - the team's code: its error becomes the stage's, named
        raise ConfigError(
            Problem(
                file=CONFIG,
                field="factory",
                message=f"{config.factory}(documents, **options) raised {type(exc).__name__}: {exc}",
                fix="check the factory and its options",
            )
        ) from None
    if not isinstance(retriever, expected):
        raise ConfigError(
            Problem(
                file=CONFIG,
                field="factory",
                message=f"{config.factory} returned {type(retriever).__name__}, not a {expected.__module__}."
                f"{expected.__qualname__}",
            )
        )
    return retriever


class FrameworkStage:
    """What both framework stages share: the factory, the identity, the call and its steps."""

    prefixes: tuple[str, ...] = ()

    def __init__(self, config: FrameworkConfig, corpus: Corpus, retriever: Any, identity: dict[str, str]) -> None:
        self.name = config.name
        self.config = config
        self.corpus = corpus
        self.retriever = retriever
        self.model_identity = {**identity, **framework_versions(self.prefixes), "scores": "no hits yet"}
        self.steps: dict[str, float] = {}
        self._sources: set[str] = set()

    def search(self, text: str) -> list[Found]:
        raise NotImplementedError

    def __call__(self, query: Query, inputs: Sequence[list[Hit]] = ()) -> list[Hit]:
        started = time.perf_counter()
        found = self.search(query.text)
        searched = time.perf_counter()
        allowed = None
        if query.allowed is not None:
            allowed = {self.corpus.chunks[p].parent_id for p in query.allowed.tolist()}
        hits, source = ranking(self.corpus, found, self.config.candidates, allowed)
        if hits:
            self._sources.add(source)
            self.model_identity["scores"] = ", ".join(sorted(self._sources))
        self.steps = {"retrieve": searched - started, "locate": time.perf_counter() - searched}
        return hits


class LangChainStage(FrameworkStage):
    """A LangChain ``BaseRetriever`` built by the configured factory."""

    prefixes = ("langchain",)

    def __init__(self, config: LangChainConfig, corpus: Corpus) -> None:
        documents_module = _require(config.type, "langchain_core.documents")
        retrievers = _require(config.type, "langchain_core.retrievers")
        vectorstores = _require(config.type, "langchain_core.vectorstores")
        factory, identity = load_factory(config)
        documents = [
            documents_module.Document(
                page_content=d.text, metadata={**d.metadata, "documentId": d.id, "title": d.title}, id=d.id
            )
            for d in corpus.documents.values()
        ]
        retriever = _build(config, factory, documents, retrievers.BaseRetriever)
        takes_k = isinstance(retriever, vectorstores.VectorStoreRetriever)
        self._search_kwargs = {"k": config.candidates} if takes_k else {}
        identity["k"] = "candidates" if self._search_kwargs else "the retriever's own, cut at candidates"
        super().__init__(config, corpus, retriever, identity)

    def search(self, text: str) -> list[Found]:
        return [from_langchain(d) for d in self.retriever.invoke(text, **self._search_kwargs)]


class LlamaIndexStage(FrameworkStage):
    """A LlamaIndex ``BaseRetriever`` built by the configured factory."""

    prefixes = ("llama-index",)

    def __init__(self, config: LlamaIndexConfig, corpus: Corpus) -> None:
        core = _require(config.type, "llama_index.core")
        retrievers = _require(config.type, "llama_index.core.retrievers")
        factory, identity = load_factory(config)
        documents = [
            core.Document(text=d.text, id_=d.id, metadata={**d.metadata, "documentId": d.id, "title": d.title})
            for d in corpus.documents.values()
        ]
        retriever = _build(config, factory, documents, retrievers.BaseRetriever)
        top_k = getattr(type(retriever), "similarity_top_k", None)
        takes_k = isinstance(top_k, property) and top_k.fset is not None
        if takes_k:
            retriever.similarity_top_k = config.candidates
        identity["k"] = "candidates" if takes_k else "the retriever's own, cut at candidates"
        super().__init__(config, corpus, retriever, identity)

    def search(self, text: str) -> list[Found]:
        return [from_llamaindex(r) for r in self.retriever.retrieve(text)]
