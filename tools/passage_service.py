"""A stand-in for a team's production retriever: a local HTTP search service with ITS OWN chunking,
answering rageval's ``http`` stage protocol with passages rather than rageval chunk IDs.

It loads a benchmark's ``documents.jsonl``, cuts every document the way a LangChain
``RecursiveCharacterTextSplitter`` would (paragraphs, then lines, then words, packed into passages
of at most ``--size`` characters, the next passage repeating up to ``--overlap`` characters of the
one before), indexes the passages with bm25s (title + passage text, English stopwords and stemmer)
and answers ``POST /search`` (``{"query_id", "text", "k", "principal", "filters"}``) with
``{"query_id", "hits": [...], "latency_ms"}``, best first. ``--answer`` picks the shape of a hit:

- ``passages``: ``{"documentId", "start", "end", "score"}`` (character offsets, end exclusive)
- ``text``: ``{"documentId", "text", "score"}`` (the passage's text, as a RAG prompt would get it)
- ``documents``: ``{"id": documentId, "score"}``, each document once, with its best passage's score

It binds 127.0.0.1 only. Start it before a run or sweep that asks it::

    python tools/passage_service.py --documents benchmarks/docs/build/documents.jsonl --port 8765
    curl -s 127.0.0.1:8765/search -d '{"query_id": "q", "text": "default timeout", "k": 3}'

Not part of the rageval package: a test fixture and a demonstration of evaluating a service whose
passage IDs are not rageval's chunk IDs (docs/docs-benchmark.md).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ANSWERS = ("passages", "text", "documents")
Answer = Literal["passages", "text", "documents"]
SEPARATORS = ("\n\n", "\n", " ")  # paragraphs, lines, words: RecursiveCharacterTextSplitter's defaults


# ---------------------------------------------------------------------------- chunking


def _pieces(text: str, start: int, end: int, size: int, separators: Sequence[str]) -> list[tuple[int, int]]:
    """``text[start:end]`` as contiguous spans of at most ``size`` characters, cut at the first
    separator that occurs (the separator stays with the piece before it), recursing on any piece
    still too long; with no separator left, cut every ``size`` characters."""
    if end - start <= size:
        return [(start, end)]
    for index, separator in enumerate(separators):
        if text.find(separator, start, end) < 0:
            continue
        out: list[tuple[int, int]] = []
        at = start
        while at < end:
            cut = text.find(separator, at, end)
            stop = end if cut < 0 else cut + len(separator)
            out.extend(_pieces(text, at, stop, size, separators[index + 1 :]))
            at = stop
        return out
    return [(at, min(at + size, end)) for at in range(start, end, size)]


def _stripped(text: str, start: int, end: int) -> tuple[int, int] | None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if end > start else None


def split_passages(text: str, size: int = 800, overlap: int = 100) -> list[tuple[int, int]]:
    """Passages of ``text`` as ``(start, end)`` offsets: pieces packed greedily up to ``size``
    characters; a new passage starts with the last pieces of the previous one that fit in
    ``overlap`` characters (LangChain's merge rule). Leading and trailing whitespace is trimmed."""
    if size <= 0 or not 0 <= overlap < size:
        raise ValueError(f"need size > 0 and 0 <= overlap < size (got size={size}, overlap={overlap})")
    pieces = _pieces(text, 0, len(text), size, SEPARATORS)
    spans: list[tuple[int, int]] = []
    window: list[tuple[int, int]] = []
    for piece in pieces:
        if window and piece[1] - window[0][0] > size:
            span = _stripped(text, window[0][0], window[-1][1])
            if span is not None and (not spans or span != spans[-1]):
                spans.append(span)
            # Keep the tail that fits in the overlap and leaves room for the new piece.
            while window and (window[-1][1] - window[0][0] > overlap or piece[1] - window[0][0] > size):
                window.pop(0)
        window.append(piece)
    if window:
        span = _stripped(text, window[0][0], window[-1][1])
        if span is not None and (not spans or span != spans[-1]):
            spans.append(span)
    return spans


# ---------------------------------------------------------------------------- the index


@dataclass(frozen=True)
class Passage:
    document_id: str
    start: int
    end: int
    text: str


class PassageIndex:
    """BM25 (bm25s, Lucene variant) over the passages of every document."""

    def __init__(self, documents: Sequence[dict[str, Any]], size: int = 800, overlap: int = 100) -> None:
        import bm25s
        import Stemmer

        self.documents = {d["id"]: d for d in documents}
        self.passages = [
            Passage(d["id"], start, end, d["text"][start:end])
            for d in documents
            for start, end in split_passages(d["text"], size, overlap)
        ]
        if not self.passages:
            raise ValueError("no passages: the documents are empty")
        self._stemmer = Stemmer.Stemmer("english")
        corpus = [f"{self.documents[p.document_id].get('title', '')}\n{p.text}" for p in self.passages]
        tokens = bm25s.tokenize(corpus, stopwords="en", stemmer=self._stemmer, show_progress=False)
        self._bm25 = bm25s.BM25(k1=1.2, b=0.75)
        self._bm25.index(tokens, show_progress=False)

    def _visible(self, passage: Passage, principal: list[str] | None, filters: dict[str, Any] | None) -> bool:
        document = self.documents[passage.document_id]
        acl = document.get("acl")
        if acl is not None and not set(acl) & set(principal or ()):
            return False
        metadata = document.get("metadata") or {}
        for key, wanted in (filters or {}).items():
            allowed = wanted if isinstance(wanted, list) else [wanted]
            if metadata.get(key) not in allowed:
                return False
        return True

    def search(
        self, text: str, k: int, principal: list[str] | None = None, filters: dict[str, Any] | None = None
    ) -> list[tuple[Passage, float]]:
        """The ``k`` best visible passages, best first (equal scores in index order)."""
        import bm25s

        tokens = bm25s.tokenize([text], return_ids=False, stopwords="en", stemmer=self._stemmer, show_progress=False)
        if not tokens[0]:
            return []
        scores = self._bm25.get_scores(tokens[0])  # every passage's score; words not indexed add nothing
        order = sorted(range(len(scores)), key=lambda i: -float(scores[i]))
        out = []
        for i in order:
            if scores[i] <= 0 or len(out) == k:
                break
            if self._visible(self.passages[i], principal, filters):
                out.append((self.passages[i], float(scores[i])))
        return out


def hits(results: list[tuple[Passage, float]], answer: Answer, k: int) -> list[dict[str, Any]]:
    """Search results in the shape ``answer`` asks for (see the module docstring)."""
    if answer == "passages":
        return [{"documentId": p.document_id, "start": p.start, "end": p.end, "score": s} for p, s in results]
    if answer == "text":
        return [{"documentId": p.document_id, "text": p.text, "score": s} for p, s in results]
    best: dict[str, float] = {}
    for passage, score in results:
        best.setdefault(passage.document_id, score)
    return [{"id": document_id, "score": score} for document_id, score in list(best.items())[:k]]


# ---------------------------------------------------------------------------- the service


class SearchRequest(BaseModel):
    """rageval's http stage request (rageval.retrieval.http.SearchRequest)."""

    model_config = ConfigDict(extra="forbid")
    query_id: str
    text: str
    k: int = Field(gt=0)
    principal: list[str] | None = None
    filters: dict[str, Any] | None = None


def create_app(index: PassageIndex, answer: Answer) -> Any:
    from fastapi import FastAPI

    app = FastAPI(title="passage service", docs_url=None, redoc_url=None)

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"documents": len(index.documents), "passages": len(index.passages), "answer": answer}

    @app.post("/search")
    def search(request: SearchRequest) -> dict[str, Any]:
        started = time.perf_counter()
        # Documents mode ranks documents by their best passage: ask for enough passages to fill k.
        depth = request.k if answer != "documents" else request.k * 10
        results = index.search(request.text, depth, request.principal, request.filters)
        body = hits(results, answer, request.k)
        return {"query_id": request.query_id, "hits": body, "latency_ms": (time.perf_counter() - started) * 1000}

    return app


def read_documents(path: Path) -> list[dict[str, Any]]:
    """``documents.jsonl`` (or a benchmark folder holding one), one JSON object a line."""
    if path.is_dir():
        path = path / "documents.jsonl"
    documents = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if line.strip():
                try:
                    documents.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise SystemExit(f"{path}:{number}: not JSON ({exc.msg}); expected one document a line") from None
    return documents


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--documents", type=Path, required=True, help="documents.jsonl or a benchmark folder")
    parser.add_argument("--port", type=int, default=8765, help="port on 127.0.0.1 (0: any free port)")
    parser.add_argument("--answer", choices=ANSWERS, default="passages", help="the shape of a hit")
    parser.add_argument("--size", type=int, default=800, help="passage size in characters")
    parser.add_argument("--overlap", type=int, default=100, help="characters repeated from the previous passage")
    args = parser.parse_args(argv)
    if not args.documents.exists():
        raise SystemExit(f"{args.documents}: no such file; build the benchmark first (benchmarks/docs/build.py)")
    try:
        index = PassageIndex(read_documents(args.documents), args.size, args.overlap)
    except (KeyError, ValueError) as exc:
        raise SystemExit(f"{args.documents}: {exc}") from None
    print(
        f"passage service: {len(index.documents)} documents, {len(index.passages)} passages "
        f"(size {args.size}, overlap {args.overlap}), answering {args.answer} on http://127.0.0.1:{args.port}/search",
        file=sys.stderr,
        flush=True,
    )
    import uvicorn

    uvicorn.run(create_app(index, args.answer), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
