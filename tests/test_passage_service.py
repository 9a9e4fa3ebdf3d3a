"""tools/passage_service.py: its own chunking (offsets exact, sizes and overlap kept), and the real
service started as a process on a free loopback port, answering passages, text and documents."""

from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import httpx
import pytest
from conftest import ROOT

SERVICE = ROOT / "tools" / "passage_service.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("passage_service", SERVICE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["passage_service"] = module
    spec.loader.exec_module(module)
    return module


ps = _load()

PARAGRAPHS = {
    "timeouts": [
        "# Timeouts",
        "HTTPX raises a TimeoutException after five seconds of network inactivity by default.",
        " ".join(
            f"Pool rule {n}: the pool timeout is the longest wait for connection {n}; then PoolTimeout."
            for n in range(6)
        ),
        "Pass timeout=None to disable every timeout on a client.",
    ],
    "background": [
        "# Background tasks",
        " ".join(f"Background task {n} runs only once response {n} has been sent to the client." for n in range(12)),
        "Tasks run in order; when one raises, the following tasks are skipped.",
    ],
    "cookies": ["# Cookies", "Set cookies on the client rather than on each request."],
}
DOCUMENTS = [{"id": name, "title": name.title(), "text": "\n\n".join(parts)} for name, parts in PARAGRAPHS.items()]
TEXT = {d["id"]: d["text"] for d in DOCUMENTS}


# ---------------------------------------------------------------------------- chunking


def test_split_packs_words_with_the_overlap_rule() -> None:
    # Worked by hand: pieces 'one ', 'two ', 'three ', 'four ', 'five ', 'six' packed to 14 characters,
    # each new passage starting with the previous one's pieces that fit in 8 characters.
    text = "one two three four five six"
    spans = ps.split_passages(text, size=14, overlap=8)
    assert [text[s:e] for s, e in spans] == ["one two three", "three four", "four five six"]
    assert spans == [(0, 13), (8, 18), (14, 27)]


def test_split_prefers_paragraphs_and_trims_whitespace() -> None:
    text = "aaaa bbbb\n\ncccc dddd\n\neeee"
    assert ps.split_passages(text, size=12, overlap=5) == [(0, 9), (11, 20), (22, 26)]
    assert ps.split_passages(text, size=100, overlap=10) == [(0, 26)]


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda d: d["id"])
def test_split_covers_the_document_within_size_and_overlap(document: dict[str, str]) -> None:
    text = document["text"]
    spans = ps.split_passages(text, size=300, overlap=60)
    covered = set()
    for start, end in spans:
        assert 0 < end - start <= 300
        assert text[start:end] == text[start:end].strip()
        covered.update(range(start, end))
    assert all(i in covered for i, char in enumerate(text) if not char.isspace())
    for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
        assert end - start <= 60  # repeated characters (negative: a gap of whitespace)
    assert spans == sorted(spans)


def test_split_refuses_an_overlap_not_below_size() -> None:
    with pytest.raises(ValueError, match="overlap < size"):
        ps.split_passages("text", size=10, overlap=10)


# ---------------------------------------------------------------------------- the service


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def documents_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("service") / "documents.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in DOCUMENTS), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def services(documents_file: Path) -> Iterator[dict[str, str]]:
    """One real service process per answer shape, each on its own free port (size 300, overlap 60)."""
    processes, urls = [], {}
    try:
        for answer in ps.ANSWERS:
            port = _free_port()
            command = [sys.executable, str(SERVICE), "--documents", str(documents_file), "--port", str(port)]
            command += ["--answer", answer, "--size", "300", "--overlap", "60"]
            processes.append(subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
            urls[answer] = f"http://127.0.0.1:{port}"
        for (answer, url), process in zip(urls.items(), processes, strict=True):
            deadline = (
                time.monotonic() + 180
            )  # three processes import fastapi and bm25s at once: slow on a busy machine
            while True:
                if process.poll() is not None:
                    output = process.stdout.read().decode() if process.stdout else ""
                    pytest.fail(f"the {answer} service exited ({process.returncode}): {output}")
                try:
                    if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail(f"the {answer} service did not answer within 180 s")
                time.sleep(0.1)
        yield urls
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=10)
            if process.stdout:
                process.stdout.close()


def _search(url: str, text: str, k: int = 5, **extra: object) -> dict:
    reply = httpx.post(f"{url}/search", json={"query_id": "q1", "text": text, "k": k, **extra}, timeout=10)
    assert reply.status_code == 200, reply.text
    return reply.json()


def test_health_counts_documents_and_its_own_passages(services: dict[str, str]) -> None:
    health = httpx.get(f"{services['passages']}/health", timeout=5).json()
    own = sum(len(ps.split_passages(d["text"], 300, 60)) for d in DOCUMENTS)
    assert health == {"documents": 3, "passages": own, "answer": "passages"}
    assert own > len(DOCUMENTS)  # the long paragraphs were cut


def test_passages_are_offsets_of_its_own_chunks(services: dict[str, str]) -> None:
    reply = _search(services["passages"], "pool timeout PoolTimeout")
    assert reply["query_id"] == "q1" and reply["latency_ms"] >= 0
    hits = reply["hits"]
    assert hits and len(hits) <= 5
    for hit in hits:
        assert set(hit) == {"documentId", "start", "end", "score"}
        assert (hit["start"], hit["end"]) in ps.split_passages(TEXT[hit["documentId"]], 300, 60)
    best = hits[0]
    assert best["documentId"] == "timeouts"
    assert "PoolTimeout" in TEXT["timeouts"][best["start"] : best["end"]]
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True) and scores[-1] > 0


def test_text_answers_carry_the_same_passages_text(services: dict[str, str]) -> None:
    passages = _search(services["passages"], "background task response sent")["hits"]
    texts = _search(services["text"], "background task response sent")["hits"]
    assert [h["documentId"] for h in texts] == [h["documentId"] for h in passages]
    assert [h["text"] for h in texts] == [TEXT[h["documentId"]][h["start"] : h["end"]] for h in passages]
    assert [h["score"] for h in texts] == [h["score"] for h in passages]


def test_documents_answers_name_each_document_once_with_its_best_passage(services: dict[str, str]) -> None:
    passages = _search(services["passages"], "timeout client cookies task", k=50)["hits"]
    documents = _search(services["documents"], "timeout client cookies task", k=50)["hits"]
    best: dict[str, float] = {}
    for hit in passages:
        best.setdefault(hit["documentId"], hit["score"])
    assert documents == [{"id": d, "score": s} for d, s in best.items()]
    assert len({h["id"] for h in documents}) == len(documents) == 3
    assert _search(services["documents"], "timeout client cookies task", k=1)["hits"] == documents[:1]


def test_no_matching_word_and_a_bad_request(services: dict[str, str]) -> None:
    assert _search(services["passages"], "zebra xylophone")["hits"] == []
    bad = httpx.post(f"{services['passages']}/search", json={"query_id": "q", "text": "x", "k": 0}, timeout=5)
    assert bad.status_code == 422


def test_filters_apply_to_document_metadata(documents_file: Path) -> None:
    documents = [dict(d, metadata={"site": "httpx" if d["id"] != "background" else "starlette"}) for d in DOCUMENTS]
    documents[2]["acl"] = ["staff"]
    index = ps.PassageIndex(documents, size=300, overlap=60)
    found = {p.document_id for p, _ in index.search("task timeout cookies client", 50)}
    assert found == {"timeouts", "background"}  # cookies is staff-only and the query is anonymous
    httpx_only = {p.document_id for p, _ in index.search("task timeout cookies client", 50, None, {"site": "httpx"})}
    assert httpx_only == {"timeouts"}
    staff = {p.document_id for p, _ in index.search("task timeout cookies client", 50, ["staff"])}
    assert staff == {"timeouts", "background", "cookies"}


# ---------------------------------------------------------------------------- through rageval's http stage
# (The fixture's sentences are all distinct: a passage text that occurs twice in its document fails
# the query in rageval, which cannot tell which of the places was retrieved.)


@pytest.fixture(scope="module")
def corpus():
    from rageval.benchmark.chunking import chunk_corpus
    from rageval.benchmark.schema import ChunkingConfig, Document
    from rageval.retrieval.base import Corpus

    documents = {d["id"]: Document.model_validate(d) for d in DOCUMENTS}
    # rageval's own chunking (40 words, markdown): not the service's 300-character passages.
    return Corpus(chunk_corpus(documents.values(), ChunkingConfig(size=40, overlap=5)), documents)


def _stage(url: str, corpus):
    from rageval.retrieval.http import HttpStage
    from rageval.retrieval.schema import HttpConfig

    return HttpStage(HttpConfig(type="http", url=f"{url}/search", candidates=5, backoff_s=0.0), corpus)


@pytest.mark.parametrize("answer", ["passages", "text"])
def test_the_http_stage_reads_the_services_own_passages(services: dict[str, str], corpus, answer: str) -> None:
    from rageval.retrieval.base import Query

    query = "pool timeout PoolTimeout"
    hits = _stage(services[answer], corpus)(Query("q1", query))
    wanted = _search(services["passages"], query)["hits"]
    assert len(hits) == len(wanted) > 0
    for hit, passage in zip(hits, wanted, strict=True):
        chunk = corpus.by_id(hit.chunk_id)  # a passage the corpus registered, read like a chunk
        assert (chunk.parent_id, chunk.start, chunk.end) == (passage["documentId"], passage["start"], passage["end"])
        assert hit.chunk_id == f"{passage['documentId']}#span:{passage['start']}-{passage['end']}"
        assert hit.score == pytest.approx(passage["score"])
    assert not set(h.chunk_id for h in hits) & set(corpus.ids)  # none of them is one of rageval's chunks


def test_the_http_stage_reads_documents_as_whole_documents(services: dict[str, str], corpus) -> None:
    from rageval.retrieval.base import Query

    hits = _stage(services["documents"], corpus)(Query("q1", "timeout client cookies task"))
    spans = [(c.parent_id, c.start, c.end) for c in map(corpus.by_id, (h.chunk_id for h in hits))]
    assert sorted(spans) == [(d, 0, len(TEXT[d])) for d in ("background", "cookies", "timeouts")]
