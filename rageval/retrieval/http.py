"""A retriever behind a service (``type: http``): one JSON POST per query, answered with a ranking.

The request (:class:`SearchRequest`) carries the query's ID and text, ``k`` (the stage's
``candidates``), the asker's ``principal`` and the configured ``filters``; the reply
(:class:`SearchReply`) is ``{"hits": [{"id": …, "score": …}, …]}``, best first, with the server's
own ``latency_ms`` if it measures one. A hit names a chunk ID of this corpus and chunking, a document
ID (the whole document is then the passage), or the service's own passage by ``documentId`` with
``start``/``end`` or ``text`` (:mod:`rageval.retrieval.passages`); a hit that names nothing in the
corpus fails the query, naming its rank, never silently dropped.

Requests go out ``max_concurrency`` at a time: the pipeline hands the stage a window of queries
(:meth:`HttpStage.prefetch`) and then asks for each in query order. Connect errors, timeouts and
HTTP 429/502/503/504 are retried with exponential backoff; nothing else is (a 4xx or a malformed
reply would only come back the same). A query whose call fails raises :class:`ServiceError` when the
pipeline asks for it, so it fails alone (scored 0 and listed) and the run goes on.

Header values are read from the environment when the stage is built and live only in the request
headers: the configuration names the variables, never the values, and every error text has them
blanked out, whatever the service echoed.
"""

from __future__ import annotations

import os
import ssl
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Annotated

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rageval.errors import ConfigError, InputError, ServiceError
from rageval.retrieval.base import Corpus, Hit, Query
from rageval.retrieval.passages import HIT_FORMS, PassageFields, problem_text, resolve_hit
from rageval.retrieval.preflight import header_problems
from rageval.retrieval.schema import HttpConfig, Scalar
from rageval.retry import call_with_retries
from rageval.safety import Redactor
from rageval.validation import shorten

RETRYABLE_STATUS = frozenset({429, 502, 503, 504})
SHOWN_IDS = 5  # unknown IDs named in a failure (the rest are counted)

FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]


class SearchRequest(BaseModel):
    """What the stage POSTs for each query, as JSON."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    query_id: str
    text: str
    k: int = Field(gt=0, description="hits wanted, best first")
    principal: list[str] | None = Field(default=None, description="the asker's groups; null: anonymous")
    filters: dict[str, Scalar | list[Scalar]] | None = Field(default=None, description="metadata key -> value(s)")


class SearchHit(PassageFields):
    """One hit: an ID, or a passage by offsets or text (:mod:`rageval.retrieval.passages`), and its score."""

    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)

    score: FiniteFloat


class SearchReply(BaseModel):
    """What the service answers. Keys beyond these (text, metadata) are ignored; these are strict:
    a score is a JSON number, an ID a string."""

    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)

    hits: list[SearchHit]
    query_id: str | None = Field(default=None, description="if given, must be the request's")
    latency_ms: FiniteFloat | None = Field(default=None, ge=0, description="the server's own time")


@dataclass(frozen=True)
class Outcome:
    """One query's call: its hits or its error, the attempts it took, client-side seconds (from the
    first attempt to the last reply, backoff included) and the server's reported seconds."""

    hits: list[Hit] | None
    error: ServiceError | None
    attempts: int
    seconds: float
    server_seconds: float | None = None


class _RetryableStatus(Exception):
    def __init__(self, response: httpx.Response) -> None:
        super().__init__(f"HTTP {response.status_code}")
        self.response = response


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, (_RetryableStatus, httpx.TimeoutException, httpx.ConnectError))


class HttpStage:
    """A retriever that asks a service (see the module docstring). After each query it sets
    ``query_seconds`` (client-side seconds of that query's call) and ``steps`` (``server``: the
    service's own seconds, when it reports them); ``external_calls`` counts attempts and
    ``call_counts`` attempts, retries and failed queries."""

    def __init__(self, config: HttpConfig, corpus: Corpus) -> None:
        problems = header_problems(config)
        if problems:
            raise ConfigError(problems)
        self.name = config.name
        self.config = config
        self.corpus = corpus
        self._headers = {header: os.environ[variable] for header, variable in config.headers_from_env.items()}
        # Every header value is a secret: redacted from each text a reply could echo it in, in any encoding.
        self._redactor = Redactor(self._headers.values())
        self._chunks_of: dict[str, list[str]] = {}
        for chunk in corpus.chunks:
            self._chunks_of.setdefault(chunk.parent_id, []).append(chunk.chunk_id)
        self.prefetch_window = 4 * config.max_concurrency
        self.external_calls = 0
        self.call_counts = {"attempts": 0, "retries": 0, "failures": 0}
        self.query_seconds: float | None = None
        self.steps: dict[str, float] = {}
        self._ready: dict[Query, Outcome] = {}
        self._session: httpx.Client | None = None
        self._tls: ssl.SSLContext | None = None

    def prefetch(self, queries: Sequence[Query]) -> None:
        """Call the service for ``queries``, ``max_concurrency`` at a time; each outcome waits for
        ``__call__`` with the same query (earlier outcomes not asked for are forgotten). The client
        (its connections) stays open for the next window, until :meth:`close`."""
        self._ready = {}
        if not queries:
            return
        if self._session is None:
            self._session = self._client()
        client = self._session
        workers = min(self.config.max_concurrency, len(queries))
        with ThreadPoolExecutor(workers, thread_name_prefix=f"rageval-{self.name}") as pool:
            outcomes = list(pool.map(lambda q: self._search(client, q), queries))
        for query, outcome in zip(queries, outcomes, strict=True):
            self._count(outcome)
            self._ready[query] = outcome

    def close(self) -> None:
        """Close the client's connections (the pipeline does, after each run; the next reopens)."""
        if self._session is not None:
            self._session.close()
            self._session = None
        self._ready = {}

    def __call__(self, query: Query, inputs: Sequence[list[Hit]] = ()) -> list[Hit]:
        outcome = self._ready.pop(query, None)
        if outcome is None:  # not prefetched (called on its own): one call now
            if self._session is not None:
                outcome = self._search(self._session, query)
            else:
                with self._client() as client:
                    outcome = self._search(client, query)
            self._count(outcome)
        self.query_seconds = outcome.seconds
        self.steps = {} if outcome.server_seconds is None else {"server": outcome.server_seconds}
        if outcome.error is not None:
            raise outcome.error
        return list(outcome.hits or [])

    # ------------------------------------------------------------------ one call

    def _client(self) -> httpx.Client:
        limits = httpx.Limits(
            max_connections=self.config.max_concurrency, max_keepalive_connections=self.config.max_concurrency
        )
        if self._tls is None:  # building it costs ~70-110 ms here; a client with it, ~1 ms
            self._tls = httpx.create_ssl_context()
        return httpx.Client(headers=self._headers, timeout=self.config.timeout_s, limits=limits, verify=self._tls)

    def _count(self, outcome: Outcome) -> None:
        self.external_calls += outcome.attempts
        self.call_counts["attempts"] += outcome.attempts
        self.call_counts["retries"] += max(outcome.attempts - 1, 0)
        self.call_counts["failures"] += outcome.error is not None

    def _search(self, client: httpx.Client, query: Query) -> Outcome:
        config = self.config
        body = SearchRequest(
            query_id=query.query_id,
            text=query.text,
            k=config.candidates,
            principal=list(query.principal) if query.principal is not None else None,
            filters=dict(config.filters) or None,
        ).model_dump(mode="json")
        attempts = 0

        def send() -> httpx.Response:
            nonlocal attempts
            attempts += 1
            response = client.post(config.url, json=body)
            if response.status_code in RETRYABLE_STATUS:
                raise _RetryableStatus(response)
            return response

        started = time.perf_counter()
        try:
            response = call_with_retries(
                send,
                retries=config.retries,
                backoff_s=config.backoff_s,
                max_backoff_s=config.max_backoff_s,
                retry_if=_retryable,
            )
            hits, server = self._parse(query, response)
            error = None
        except ServiceError as exc:
            hits, server, error = None, None, exc
        except (_RetryableStatus, httpx.HTTPError) as exc:
            hits, server, error = None, None, self._failure(exc, attempts)
        except Exception as exc:  # noqa: BLE001 - raised in a worker thread, it would end the run: fail the query
            hits, server, error = None, None, ServiceError("error", f"POST {config.url}: {type(exc).__name__}: {exc}")
        seconds = time.perf_counter() - started
        if error is not None:
            error = ServiceError(error.reason, self._redact(str(error)))
        return Outcome(hits, error, attempts, seconds, server)

    def _failure(self, exc: BaseException, attempts: int) -> ServiceError:
        tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
        where = f"POST {self.config.url}"
        if isinstance(exc, _RetryableStatus):
            response = exc.response
            return ServiceError(
                "status", f"{where}: HTTP {response.status_code} {response.reason_phrase} after {tries}"
            )
        if isinstance(exc, httpx.TimeoutException):
            return ServiceError(
                "timeout",
                f"{where}: no reply within timeout_s={self.config.timeout_s} ({type(exc).__name__}) after {tries}",
            )
        if isinstance(exc, httpx.ConnectError):
            return ServiceError("connect", f"{where}: cannot connect ({exc}) after {tries}")
        return ServiceError("transport", f"{where}: {type(exc).__name__}: {exc} (not retried)")

    def _parse(self, query: Query, response: httpx.Response) -> tuple[list[Hit], float | None]:
        where = f"POST {self.config.url}"
        if not response.is_success:
            raise ServiceError(
                "status",
                f"{where}: HTTP {response.status_code} {response.reason_phrase} (not retried): "
                f"{shorten(self._redact(response.text.strip()), 200) or 'empty body'}",  # redacted before cut
            )
        try:
            reply = SearchReply.model_validate_json(response.content)
        except ValidationError as exc:
            details = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors(include_url=False)[:3]
            )
            raise ServiceError(
                "malformed",
                f'{where}: malformed reply ({details}); expected {{"hits": [...]}} with each hit {HIT_FORMS} and a "score"',
            ) from None
        if reply.query_id is not None and reply.query_id != query.query_id:
            raise ServiceError("malformed", f"{where}: reply for query '{reply.query_id}', asked '{query.query_id}'")
        hits = self._hits(query, reply)
        return hits, None if reply.latency_ms is None else reply.latency_ms / 1000

    def _hits(self, query: Query, reply: SearchReply) -> list[Hit]:
        position = self.corpus.position
        resolved: list[Hit] = []
        unknown: list[str] = []
        for rank, item in enumerate(reply.hits, start=1):
            try:
                resolved.append(Hit(resolve_hit(self.corpus, item), float(item.score)))
            except InputError as exc:
                unknown.append(f"rank {rank}: {shorten(problem_text(exc), 160)}")
        if unknown:
            named = "; ".join(unknown[:SHOWN_IDS])
            more = f" and {len(unknown) - SHOWN_IDS} more" if len(unknown) > SHOWN_IDS else ""
            raise ServiceError(
                "unknown-ids",
                f"POST {self.config.url}: {len(unknown)} of {len(reply.hits)} hits of query '{query.query_id}' "
                f"name nothing in this corpus: {named}{more}; answer with this corpus version's chunk or document "
                "IDs, or with passages (documentId with start/end or text)",
            )
        allowed = None if query.allowed is None else set(query.allowed.tolist())
        # Best first, equal scores in the reply's order; a passage named twice keeps its better place.
        out: list[Hit] = []
        seen: set[str] = set()
        for hit in sorted(resolved, key=lambda h: -h.score):
            if hit.chunk_id in seen or (allowed is not None and not self._allowed(hit.chunk_id, allowed, position)):
                continue
            seen.add(hit.chunk_id)
            out.append(hit)
        return out[: self.config.candidates]

    def _allowed(self, hit_id: str, allowed: set[int], position: dict[str, int]) -> bool:
        """A chunk the ``when: before`` filters allow; another system's passage: when a chunk of its
        document is allowed (the filters decide per document)."""
        if hit_id in position:
            return position[hit_id] in allowed
        parent = self.corpus.by_id(hit_id).parent_id
        return any(position[c] in allowed for c in self._chunks_of.get(parent, ()))

    def _redact(self, text: str) -> str:
        return self._redactor(text)
