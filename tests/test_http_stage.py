"""The ``http`` stage against a real local service (tests/http_service.py: FastAPI + uvicorn on
127.0.0.1): the demo's rankings equal the in-process BM25 stage's; slow, failing, dead, malformed and
wrong services fail their queries, never the run; retries only where a retry can help; concurrency
bounded; header secrets reach the service and nothing else."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import ROOT
from http_service import BM25Service, serve

from rageval.benchmark.chunking import chunk_corpus
from rageval.benchmark.loading import load_benchmark
from rageval.config.load import load_config
from rageval.errors import ConfigError
from rageval.experiment.run import corpus_for, query_of, run_experiment
from rageval.retrieval import Corpus, Pipeline, Query
from rageval.retrieval.http import HttpStage
from rageval.retrieval.lexical import BM25Stage
from rageval.retrieval.schema import BM25Config, HttpConfig
from rageval.testing import RetrieverContract

BM25 = ROOT / "params" / "bm25.yaml"
HTTP = ROOT / "params" / "http-bm25.yaml"
TOKEN_VAR = "RAGEVAL_SEARCH_TOKEN"  # the variable params/http-bm25.yaml names
SECRET = "Bearer s3cret-6f1c9a-never-recorded"


@pytest.fixture(scope="module")
def service() -> BM25Service:
    return BM25Service.from_params(BM25)


@pytest.fixture(scope="module")
def url(service: BM25Service):
    with serve(service.app) as base:
        yield f"{base}/search"


@pytest.fixture(autouse=True)
def fresh(request, monkeypatch):
    """Every test starts with a well-behaved service and the token set."""
    monkeypatch.setenv(TOKEN_VAR, SECRET)
    if "service" in request.fixturenames:
        request.getfixturevalue("service").reset()


@pytest.fixture(scope="module")
def demo() -> tuple[Corpus, list[Query]]:
    config = load_config(BM25)
    benchmark = load_benchmark(config.benchmark)
    chunks = chunk_corpus(benchmark.documents.values(), config.chunking)
    queries = [query_of(c) for split in benchmark.spec.splits for c in benchmark.cases_for(split)]
    return corpus_for(config, benchmark, chunks, None), queries


def http_stage(url: str, corpus: Corpus, **options) -> HttpStage:
    return HttpStage(HttpConfig(type="http", url=url, **{"backoff_s": 0.0, **options}), corpus)


def http_run(url: str, *overrides: str):
    config = load_config(HTTP, [f"retrieval.stages.0.url={url}", *overrides])
    return run_experiment(config, cache=False)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --------------------------------------------------------------------------- the contract


@pytest.fixture(scope="module")
def contract_service(service: BM25Service):
    """A service of its own for the contract, whose corpus each contract test chooses."""
    own = BM25Service(service.stage)
    with serve(own.app) as base:
        yield own, f"{base}/search"


class TestHttpStageContract(RetrieverContract):
    """The shipped retriever contract, the service serving BM25 over the contract's corpus."""

    @pytest.fixture(autouse=True)
    def _service(self, contract_service) -> None:
        self.service, self.url = contract_service

    def make_stage(self, corpus: Corpus):
        self.service.stage = BM25Stage(BM25Config(type="bm25"), corpus)
        return http_stage(self.url, corpus)


# --------------------------------------------------------------------------- the same rankings


def test_rankings_equal_the_in_process_bm25_stage_on_the_demo(service, url):
    local = run_experiment(load_config(BM25), cache=False)
    remote = http_run(url)
    assert remote.failures.empty and len(remote.rankings) > 0
    columns = ["query_id", "rank", "chunk_id"]
    pd.testing.assert_frame_equal(remote.rankings[columns], local.rankings[columns])
    assert remote.rankings["score"].tolist() == pytest.approx(local.rankings["score"].tolist(), rel=1e-9)
    assert remote.evaluation.aggregates.to_dict() == pytest.approx(local.evaluation.aggregates.to_dict())
    queries = remote.counts()["queries_total"]
    counts = remote.counts()
    assert (counts["external_calls/attempts"], counts["external_calls/retries"], counts["external_calls/failures"]) == (
        queries,
        0,
        0,
    )
    assert remote.external_calls == {"bm25-service": queries}
    # The secret reached the service with every request; the server's own time came back as a step.
    assert {h["authorization"] for h in service.seen.headers} == {SECRET}
    stages = set(remote.latency["stage"])
    assert {"bm25-service", "bm25-service:server", "total"} <= stages


def test_the_request_carries_query_k_principal_and_filters(service, url, demo):
    corpus, queries = demo
    asker = next(q for q in queries if q.principal)
    stage = http_stage(url, corpus, candidates=7, filters={"product": ["publish", "cdn"]})
    stage(asker)
    (body,) = service.seen.bodies
    assert body == {
        "query_id": asker.query_id,
        "text": asker.text,
        "k": 7,
        "principal": list(asker.principal),
        "filters": {"product": ["publish", "cdn"]},
    }


def test_document_ids_in_a_reply_stand_for_the_whole_document(service, url, demo):
    corpus, queries = demo
    service.reset(parent_ids=True)
    hits = http_stage(url, corpus)(queries[0])
    parents = list(dict.fromkeys(corpus.by_id(h.chunk_id).parent_id for h in service.stage(queries[0])))
    assert hits and [corpus.by_id(h.chunk_id).parent_id for h in hits] == parents
    for hit in hits:
        passage = corpus.by_id(hit.chunk_id)
        assert (passage.start, passage.end) == (0, len(corpus.documents[passage.parent_id].text))


@pytest.mark.parametrize("form", ["offsets", "text"])
def test_passages_in_a_reply_are_located_in_their_documents(service, url, demo, form):
    corpus, queries = demo
    service.reset(passages=form)
    hits = http_stage(url, corpus)(queries[0])
    # The service's passages are exactly the corpus's chunks here: each resolves to that chunk's ID.
    assert [h.chunk_id for h in hits] == [h.chunk_id for h in service.stage(queries[0])][: len(hits)] and hits


# --------------------------------------------------------------------------- failures, not crashes


def test_a_slow_service_fails_those_queries_and_the_run_completes(service, url, demo):
    _, queries = demo
    slow = {q.query_id for q in queries[:2]}
    service.reset(delay_s=2.0, only=slow)
    # Two failed queries are within a budget that allows them (the default, 0.0, refuses the run:
    # tests/test_reliability4.py).
    result = http_run(
        url, "retrieval.stages.0.timeout_s=0.5", "retrieval.stages.0.retries=1", "failures.max_fraction=0.1"
    )
    failures = result.failures.set_index("query_id")
    assert set(failures.index) == slow and set(failures["stage"]) == {"bm25-service"}
    assert set(failures["error"]) == {"ServiceError"}
    assert all("no reply within timeout_s=0.5 (ReadTimeout) after 2 attempts" in m for m in failures["message"])
    assert {q: service.seen.attempts[q] for q in slow} == {q: 2 for q in slow}  # a timeout is retried
    counts = result.counts()
    assert counts["queries_failed"] == 2 and counts["external_calls/failures"] == 2
    # Every retry is an attempt beyond a query's first (on a loaded machine a fast query may need one too).
    assert counts["external_calls/retries"] == counts["external_calls/attempts"] - counts["queries_total"] >= 2
    # A failed query is scored 0 (both have judgments) and the rest are measured as usual.
    per_query = result.evaluation.per_query
    assert per_query.loc[sorted(slow), "nDCG@10"].tolist() == [0.0, 0.0]
    assert per_query.drop(index=sorted(slow))["nDCG@10"].max() > 0
    # Their latency is the time the client waited: two attempts of 0.5 s at least.
    latency = result.latency[(result.latency["stage"] == "bm25-service")].set_index("query_id")["seconds"]
    assert (latency.loc[sorted(slow)] >= 1.0).all()


@pytest.mark.parametrize(
    ("status", "fail_attempts", "attempts", "failed", "message"),
    [
        (503, 1, 2, False, None),  # retried, then answered
        (429, 1, 2, False, None),
        (503, None, 3, True, "HTTP 503 Service Unavailable after 3 attempts"),
        (502, None, 3, True, "HTTP 502 Bad Gateway after 3 attempts"),
        (400, None, 1, True, "HTTP 400 Bad Request (not retried)"),
        (500, None, 1, True, "HTTP 500 Internal Server Error (not retried)"),
    ],
)
def test_retries_happen_on_retryable_statuses_only(
    service, url, demo, status, fail_attempts, attempts, failed, message
):
    corpus, queries = demo
    queries = queries[:5]
    expected = {q.query_id: service.stage(q) for q in queries}
    service.reset(status=status, fail_attempts=fail_attempts)
    stage = http_stage(url, corpus, retries=2)
    output = Pipeline([stage]).run(queries)
    assert dict(service.seen.attempts) == {q.query_id: attempts for q in queries}  # counted at the service
    assert stage.call_counts == {
        "attempts": attempts * len(queries),
        "retries": (attempts - 1) * len(queries),
        "failures": len(queries) if failed else 0,
    }
    if failed:
        assert [f[0] for f in output.failures] == [q.query_id for q in queries]
        assert all(message in f[3] and f[2] == "ServiceError" for f in output.failures)
    else:
        assert output.failures == [] and output.hits == expected


def test_a_dead_service_fails_every_query_after_its_retries(demo):
    corpus, queries = demo
    stage = http_stage(f"http://127.0.0.1:{free_port()}/search", corpus, retries=1)
    output = Pipeline([stage]).run(queries[:3])
    assert output.hits == {} and len(output.failures) == 3
    assert all("cannot connect" in f[3] and "after 2 attempts" in f[3] for f in output.failures)
    assert stage.call_counts == {"attempts": 6, "retries": 3, "failures": 3}


def test_a_malformed_reply_fails_with_its_reason_and_is_not_retried(service, url, demo):
    corpus, queries = demo
    service.reset(malformed=True, only={queries[1].query_id})
    output = Pipeline([http_stage(url, corpus, retries=2)]).run(queries[:3])
    ((query_id, stage, error, message),) = output.failures
    assert (query_id, stage, error) == (queries[1].query_id, "http", "ServiceError")
    assert (
        "malformed reply (body: Invalid JSON" in message and 'expected {"hits": [...]} with each hit {"id"}' in message
    )
    assert service.seen.attempts[queries[1].query_id] == 1
    assert set(output.hits) == {queries[0].query_id, queries[2].query_id}


def test_unknown_ids_in_a_reply_fail_the_query_and_are_never_dropped(service, url, demo):
    corpus, queries = demo
    service.reset(wrong_ids=True)
    output = Pipeline([http_stage(url, corpus)]).run(queries[:1])
    ((_, _, _, message),) = output.failures
    assert "hits of query" in message and "name nothing in this corpus: rank 1: 'no-such-chunk-0'" in message
    assert "more; answer with this corpus version's chunk or document IDs, or with passages" in message


# --------------------------------------------------------------------------- concurrency


def test_concurrency_is_bounded_and_results_keep_query_order(service, url, demo, capsys):
    corpus, queries = demo
    queries = queries[:24]
    expected = {q.query_id: service.stage(q) for q in queries}
    seconds = {}
    for limit in (1, 4):
        service.reset(delay_s=0.05)
        stage = http_stage(url, corpus, max_concurrency=limit)
        started = time.perf_counter()
        output = Pipeline([stage]).run(queries)
        seconds[limit] = time.perf_counter() - started
        assert service.seen.max_in_flight == limit  # at the service: never more, and the limit is used
        assert list(output.hits) == [q.query_id for q in queries] and output.hits == expected
        latencies = [(q, s) for q, st, s in output.latencies if st == "http"]
        assert [q for q, _ in latencies] == [q.query_id for q in queries]
        assert all(s >= 0.05 for _, s in latencies)  # each query's own wait, not the window's
    with capsys.disabled():
        print(f"\n24 queries, 50 ms each at the service: {seconds[1]:.2f} s serial, {seconds[4]:.2f} s 4 at a time")
    assert seconds[4] < seconds[1] / 2


# --------------------------------------------------------------------------- secrets


def test_a_header_secret_reaches_the_service_and_no_error_text(service, url, demo):
    corpus, queries = demo
    service.reset(status=400, echo=True)  # a careless service repeats the headers in its error body
    stage = HttpStage(
        HttpConfig(type="http", url=url, headers_from_env={"Authorization": TOKEN_VAR}, retries=0), corpus
    )
    output = Pipeline([stage]).run(queries[:1])
    assert service.seen.headers[0]["authorization"] == SECRET
    ((_, _, _, message),) = output.failures
    assert "HTTP 400 Bad Request (not retried)" in message and "***" in message
    assert SECRET not in message and "s3cret" not in message


def test_missing_header_variables_and_credentials_in_urls_fail_before_a_run(monkeypatch):
    monkeypatch.delenv(TOKEN_VAR)
    with pytest.raises(ConfigError) as raised:
        load_config(HTTP)
    (problem,) = raised.value.problems
    assert problem.file == str(HTTP) and problem.field == "retrieval.stages[0].headers_from_env.Authorization"
    assert f"environment variable {TOKEN_VAR} is not set" in problem.message
    monkeypatch.setenv(TOKEN_VAR, f"{SECRET}\r\nX-Injected: 1")
    with pytest.raises(ConfigError, match=f"{TOKEN_VAR} holds a line break or control character") as raised:
        load_config(HTTP)
    assert "s3cret" not in str(raised.value)
    monkeypatch.setenv(TOKEN_VAR, SECRET)
    with pytest.raises(ConfigError, match="the URL carries credentials; pass them as a header") as raised:
        load_config(HTTP, ["retrieval.stages.0.url=https://me:hunter2@search.example/q"])
    assert "hunter2" not in raised.value.problems[0].message
    with pytest.raises(ConfigError, match="expected an http:// or https:// URL with a host"):
        load_config(HTTP, ["retrieval.stages.0.url=ftp://search.example/q"])


# --------------------------------------------------------------------------- end to end


@pytest.mark.e2e
def test_rageval_run_with_an_http_stage_ends_sealed_and_records_no_secret(service, url, store, tmp_path):
    from rageval.tracking.store import Tracker
    from rageval.workflows.run import RunRequest, execute_run

    local = run_experiment(load_config(BM25), cache=False)
    failing = str(local.evaluation.per_query["nDCG@10"].idxmax())
    service.reset(status=400, echo=True, only={failing})  # one failure, its error text in the record
    tracker = Tracker(store)
    # One failed query, within a budget that allows it (the default refuses the run).
    outcome = execute_run(
        RunRequest(HTTP, overrides=[f"retrieval.stages.0.url={url}", "failures.max_fraction=0.1"]), tracker
    )
    info = tracker.run(outcome.run_id)
    assert info.status == "FINISHED" and info.sealed and tracker.verify(outcome.run_id) == []
    recorded = yaml.safe_load((Path(info.artifact_uri.removeprefix("file://")) / "config.yaml").read_text())
    assert info.params["pipeline"].endswith(":http") and recorded["retrieval"]["stages"][0]["type"] == "http"
    assert recorded["retrieval"]["stages"][0]["headers_from_env"]["Authorization"] == TOKEN_VAR
    assert info.metrics["queries_failed"] == 1 and info.metrics["external_calls/failures"] == 1
    assert info.metrics["external_calls/attempts"] == info.metrics["queries_total"]
    # The service is the same BM25: every query scores as in process, but the failed one, which scores 0.
    per_query = local.evaluation.per_query["nDCG@10"]
    expected = (per_query.sum() - per_query[failing]) / len(per_query)
    assert per_query[failing] > 0 and info.metrics["nDCG_at_10"] == pytest.approx(expected, abs=1e-9)
    root = Path(info.artifact_uri.removeprefix("file://"))
    failures = (root / "failures.json").read_text()
    assert failing in failures and "HTTP 400 Bad Request (not retried)" in failures and "***" in failures
    # The secret reached the service and appears nowhere in the run's record.
    assert service.seen.headers and all(h["authorization"] == SECRET for h in service.seen.headers)
    texts = [*info.params.values(), *info.tags.values(), *info.params.keys(), *info.tags.keys()]
    assert not [t for t in texts if "s3cret" in t]
    files = [p for p in root.rglob("*") if p.is_file()]
    assert (root / "config.yaml") in files and len(files) > 10
    assert [p for p in files if b"s3cret" in p.read_bytes()] == []
