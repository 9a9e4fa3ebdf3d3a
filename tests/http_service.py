"""A real retrieval service for the ``http`` stage's tests: a FastAPI app served by uvicorn on
127.0.0.1 (a free port, in a thread of the test process), answering the stage's request schema with
rageval's own BM25 over a benchmark's chunks, built from a run configuration: the same chunking and
the same tokenizer settings as the in-process ``bm25`` stage of that configuration.

Switches (:class:`Behaviour`, changed by the tests between requests) make it slow, failing (any
status, for the first N attempts of a query or always), malformed (a cut-off JSON body) or wrong
(IDs no corpus has), for all queries or some. It records what it saw: each request's body and
headers, the attempts per query, and the most requests it had in flight at once.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from rageval.benchmark.chunking import chunk_corpus
from rageval.benchmark.loading import load_benchmark
from rageval.config.load import load_config
from rageval.experiment.run import corpus_for
from rageval.retrieval.base import Query
from rageval.retrieval.http import SearchRequest
from rageval.retrieval.lexical import BM25Stage
from rageval.retrieval.schema import BM25Config


@dataclass
class Behaviour:
    delay_s: float = 0.0
    status: int | None = None  # answer this status (with a JSON error body) instead of hits
    fail_attempts: int | None = None  # ... for a query's first N attempts only; None: every attempt
    malformed: bool = False  # a JSON body cut off in the middle
    wrong_ids: bool = False  # hits with IDs that are in no corpus
    parent_ids: bool = False  # hits named by their document's ID, not the chunk's
    passages: str | None = None  # "offsets" or "text": hits given as passages of their document, not by ID
    echo: bool = False  # with ``status``: the error body repeats the Authorization header (as careless services do)
    only: set[str] | None = None  # the query IDs the switches apply to; None: every query


@dataclass
class Seen:
    bodies: list[dict] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    attempts: Counter[str] = field(default_factory=Counter)
    in_flight: int = 0
    max_in_flight: int = 0


class BM25Service:
    """A BM25 stage behind ``POST /search`` (``stage`` may be replaced between requests)."""

    def __init__(self, stage: BM25Stage) -> None:
        self.stage = stage
        self.behaviour = Behaviour()
        self.seen = Seen()
        self.lock = threading.Lock()
        self.app = FastAPI()
        self.app.post("/search")(self.search)

    @classmethod
    def from_params(cls, params_file: Path) -> BM25Service:
        """The first stage of a run configuration (a ``bm25`` stage), over its benchmark and chunking."""
        config = load_config(params_file)
        stage_config = config.retrieval.stages[0]
        if not isinstance(stage_config, BM25Config):
            raise ValueError(f"{params_file}: the first stage is not a bm25 stage")
        benchmark = load_benchmark(config.benchmark)
        chunks = chunk_corpus(benchmark.documents.values(), config.chunking)
        return cls(BM25Stage(stage_config, corpus_for(config, benchmark, chunks, None)))

    def reset(self, **behaviour: object) -> None:
        """New switches, and a fresh record of what the service saw."""
        with self.lock:
            self.behaviour = Behaviour(**behaviour)  # type: ignore[arg-type]
            self.seen = Seen()

    async def search(self, request: Request) -> Response:
        body = SearchRequest.model_validate_json(await request.body())
        seen, behaviour = self.seen, self.behaviour
        with self.lock:
            seen.bodies.append(body.model_dump())
            seen.headers.append(dict(request.headers))
            seen.attempts[body.query_id] += 1
            attempt = seen.attempts[body.query_id]
            seen.in_flight += 1
            seen.max_in_flight = max(seen.max_in_flight, seen.in_flight)
        try:
            started = time.perf_counter()
            applies = behaviour.only is None or body.query_id in behaviour.only
            if applies and behaviour.delay_s:
                await asyncio.sleep(behaviour.delay_s)
            if applies and behaviour.status is not None:
                if behaviour.fail_attempts is None or attempt <= behaviour.fail_attempts:
                    detail = {"detail": f"switched to {behaviour.status}"}
                    if behaviour.echo:
                        detail["authorization"] = request.headers.get("authorization", "")
                    return JSONResponse(detail, status_code=behaviour.status)
            if applies and behaviour.malformed:
                return Response(b'{"hits": [{"id": "x", "sco', media_type="application/json")
            hits = self.stage(Query(body.query_id, body.text, tuple(body.principal) if body.principal else None))
            hits = hits[: body.k]
            ids = [h.chunk_id for h in hits]
            if applies and behaviour.wrong_ids:
                ids = [f"no-such-chunk-{i}" for i in range(len(hits))]
            if applies and behaviour.parent_ids:
                ids = [self.stage.corpus.by_id(i).parent_id for i in ids]
            answers: list[dict] = [{"id": i} for i in ids]
            if applies and behaviour.passages is not None:
                chunks = [self.stage.corpus.by_id(i) for i in ids]
                answers = [
                    {"documentId": c.parent_id, "start": c.start, "end": c.end}
                    if behaviour.passages == "offsets"
                    else {"documentId": c.parent_id, "text": c.text}
                    for c in chunks
                ]
            return JSONResponse(
                {
                    "query_id": body.query_id,
                    "hits": [{**a, "score": h.score} for a, h in zip(answers, hits, strict=True)],
                    "latency_ms": (time.perf_counter() - started) * 1000,
                }
            )
        finally:
            with self.lock:
                seen.in_flight -= 1


@contextmanager
def serve(app: FastAPI) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1 at a free port, in a thread; yields its base URL; stops it after."""
    # proto IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on such sockets, and without it every
    # reply waited 40 ms for the client's delayed ACK (44 ms a request here, 3 ms with it).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    host, port = sock.getsockname()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", ws="none"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="bm25-service")
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test service did not start")
        time.sleep(0.02)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
