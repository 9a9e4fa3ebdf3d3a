"""LangChain and LlamaIndex retrievers as stages, offline, with the real packages and the offline
MiniLM model: chunks come back as passages of their documents (graded on their spans), the
factory's code and the framework versions are recorded, and bad factories are named."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest
from conftest import DEMO
from pydantic import ValidationError

from rageval.benchmark.chunking import chunk_corpus
from rageval.benchmark.loading import load_benchmark
from rageval.benchmark.schema import ChunkingConfig
from rageval.errors import ConfigError
from rageval.retrieval.frameworks import Found, from_langchain, from_llamaindex, load_factory
from rageval.retrieval.schema import STAGE_TYPES, LangChainConfig, LlamaIndexConfig, RetrievalConfig

LC = "plugins.lc_retriever:build"
LI = "plugins.li_retriever:build"


@pytest.fixture(scope="module")
def demo():
    return load_benchmark(DEMO)


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """No model or tokenizer is fetched: the hub is told so, and any connection out of the
    machine fails the test."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    connect = socket.socket.connect

    def local_only(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in ("127.0.0.1", "::1", "localhost"):
            raise AssertionError(f"a network connection was attempted: {address}")
        return connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", local_only)


def rageval_bounds(demo) -> set[tuple[str, int, int]]:
    chunks = chunk_corpus(demo.documents.values(), ChunkingConfig(size=200, overlap=30))
    return {(c.parent_id, c.start, c.end) for c in chunks}


def test_the_stage_types_are_strict_members_of_the_one_list():
    assert STAGE_TYPES["langchain"] is LangChainConfig and STAGE_TYPES["llamaindex"] is LlamaIndexConfig
    config = RetrievalConfig(stages=[{"type": "langchain", "factory": LC, "options": {"chunk_size": 200}}])
    assert (config.stages[0].name, config.stages[0].candidates) == ("langchain", 100)
    with pytest.raises(ValidationError, match="extra"):
        LlamaIndexConfig(type="llamaindex", factory=LI, top_k=3)
    with pytest.raises(ValidationError, match="pattern"):
        LangChainConfig(type="langchain", factory="plugins/lc_retriever.py")


def test_langchain_chunks_keep_their_document_and_offsets(demo):
    pytest.importorskip("langchain_text_splitters")
    from langchain_core.documents import Document
    from plugins.lc_retriever import splitter

    documents = [Document(page_content=d.text, metadata={"documentId": d.id}) for d in demo.documents.values()]
    chunks = splitter().split_documents(documents)
    found = [from_langchain(c) for c in chunks]
    assert len(found) > len(documents)
    for item in found:
        start = item.start
        assert start is not None and demo.documents[item.document_id].text[start : start + len(item.text)] == item.text
    bounds = {(f.document_id, f.start, f.start + len(f.text)) for f in found}
    assert len(bounds - rageval_bounds(demo)) > 0.9 * len(bounds)  # a chunking of its own


def test_llamaindex_nodes_keep_their_document_and_offsets(demo):
    pytest.importorskip("llama_index.core")
    from llama_index.core import Document
    from llama_index.core.schema import NodeWithScore
    from plugins.li_retriever import splitter

    documents = [Document(text=d.text, id_=d.id) for d in demo.documents.values()]
    nodes = splitter().get_nodes_from_documents(documents)
    found = [from_llamaindex(NodeWithScore(node=n, score=0.5)) for n in nodes]
    assert len(found) > len(documents)
    for item, node in zip(found, nodes, strict=True):
        assert item.score == 0.5 and item.start == node.start_char_idx
        assert demo.documents[item.document_id].text[node.start_char_idx : node.end_char_idx] == item.text
    bounds = {(f.document_id, f.start, f.start + len(f.text)) for f in found}
    assert len(bounds - rageval_bounds(demo)) > 0.9 * len(bounds)


def test_a_langchain_score_and_missing_offsets_are_read_as_given():
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document

    assert from_langchain(Document(page_content="x y", metadata={"documentId": "d", "score": 0.25})) == Found(
        "d", "x y", None, 0.25
    )
    assert from_langchain(Document(page_content="x", metadata={"relevance_score": 2, "start_index": True})) == Found(
        None, "x", None, 2.0
    )


def test_the_factory_is_identified_by_its_source(tmp_path, monkeypatch):
    module = tmp_path / "team_factory.py"
    module.write_text("def build(documents, k=3):\n    return documents\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    factory, identity = load_factory(LangChainConfig(type="langchain", factory="team_factory:build"))
    import hashlib

    assert factory(["a"]) == ["a"]
    assert identity == {
        "name": "team_factory:build",
        "sha256": hashlib.sha256(module.read_bytes()).hexdigest(),
        "source": str(module.resolve()),
    }
    with pytest.raises(ConfigError, match="cannot import 'no_such_team_module'"):
        load_factory(LangChainConfig(type="langchain", factory="no_such_team_module:build"))
    with pytest.raises(ConfigError, match="has no function 'nothing'"):
        load_factory(LangChainConfig(type="langchain", factory="team_factory:nothing"))


@pytest.mark.parametrize(
    ("stage_type", "module"), [("langchain", "langchain_core.documents"), ("llamaindex", "llama_index.core")]
)
def test_a_missing_extra_names_the_install(stage_type, module, monkeypatch, demo):
    from rageval.retrieval.base import Corpus
    from rageval.retrieval.pipeline import build_stage

    monkeypatch.setitem(sys.modules, module, None)  # what an environment without the extra imports
    config = STAGE_TYPES[stage_type](type=stage_type, factory=LC)
    with pytest.raises(ConfigError) as error:
        build_stage(config, Corpus([], demo.documents))
    (problem,) = error.value.problems
    assert problem.field == "type" and "pip install 'rageval[frameworks]'" in problem.fix


# --------------------------------------------------------------------------- the stages on the demo corpus


def demo_corpus(demo, size: int = 15):
    """The demo's first ``size`` documents (the frameworks embed every one; the CPU is shared)."""
    from rageval.retrieval.base import Corpus

    documents = dict(list(demo.documents.items())[:size])
    return Corpus(chunk_corpus(documents.values(), ChunkingConfig(size=200, overlap=30)), documents)


@pytest.fixture(scope="module")
def stages(demo):
    """A LangChain and a LlamaIndex stage, each over its own corpus (passages register on it)."""
    pytest.importorskip("langchain_huggingface")
    pytest.importorskip("llama_index.embeddings.huggingface")
    from rageval.retrieval.pipeline import build_stage

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        lc = build_stage(LangChainConfig(type="langchain", factory=LC, candidates=7), demo_corpus(demo))
        li = build_stage(LlamaIndexConfig(type="llamaindex", factory=LI, candidates=7), demo_corpus(demo))
    return lc, li


def dev_queries(demo, count: int = 10):
    from rageval.retrieval.base import Query

    return [Query(c.queryId, c.query) for c in demo.cases_for("dev")[:count]]


def test_hits_are_the_frameworks_own_chunks_as_passages_of_their_documents(stages, demo):
    lc, li = stages
    boundaries = rageval_bounds(demo)
    spans = 0
    raws = (
        (lc, lambda q: [from_langchain(d) for d in lc.retriever.invoke(q, k=7)]),
        (li, lambda q: [from_llamaindex(r) for r in li.retriever.retrieve(q)]),
    )
    for stage, raw in raws:
        for query in dev_queries(demo):
            hits = stage(query)
            expected = raw(query.text)
            assert len(hits) == len(expected) == 7  # candidates reached the retriever as its k
            for hit, found in zip(hits, expected, strict=True):
                passage = stage.corpus.by_id(hit.chunk_id)
                document = demo.documents[passage.parent_id]
                assert passage.parent_id == found.document_id and passage.start == found.start
                # the framework's own chunk, graded on its span
                assert document.text[passage.start : passage.end] == found.text
                spans += (passage.parent_id, passage.start, passage.end) not in boundaries
    assert spans > 0.9 * 2 * 7 * len(dev_queries(demo))  # chunkings of their own, not rageval's chunks


def test_scores_are_the_retrievers_where_it_gives_them_else_by_rank(stages, demo):
    lc, li = stages
    query = dev_queries(demo)[0]
    lc_hits, li_hits = lc(query), li(query)
    assert [h.score for h in lc_hits] == [1 / r for r in range(1, 8)]
    raw = [r.score for r in li.retriever.retrieve(query.text)]
    assert [h.score for h in li_hits] == raw and raw == sorted(raw, reverse=True)
    assert (lc.model_identity["scores"], li.model_identity["scores"]) == ("rank", "retriever")


def test_the_identity_records_the_factory_source_and_the_framework_versions(stages):
    import hashlib
    import importlib.metadata

    lc, li = stages
    for stage, module, versions in (
        (lc, "lc_retriever.py", ("langchain-core", "langchain-text-splitters", "langchain-huggingface")),
        (li, "li_retriever.py", ("llama-index-core", "llama-index-embeddings-huggingface")),
    ):
        identity = stage.model_identity
        source = identity["source"]
        assert source.endswith(f"tests/plugins/{module}") and identity["k"] == "candidates"
        assert identity["sha256"] == hashlib.sha256(Path(source).read_bytes()).hexdigest()
        for name in versions:
            assert identity[name] == importlib.metadata.version(name)


def test_a_before_filter_keeps_the_documents_the_query_may_see(stages, demo):
    import dataclasses

    import numpy as np

    lc, _ = stages
    query = dev_queries(demo)[0]
    first = lc.corpus.by_id(lc(query)[0].chunk_id).parent_id
    allowed = np.array([i for i, c in enumerate(lc.corpus.chunks) if c.parent_id != first])
    hits = lc(dataclasses.replace(query, allowed=allowed))
    assert hits and all(lc.corpus.by_id(h.chunk_id).parent_id != first for h in hits)


# --------------------------------------------------------------------------- runs and a comparison


def doc_params() -> dict:
    """The params example of docs/frameworks.md (the test keeps it true)."""
    import re

    import yaml
    from conftest import ROOT

    text = (ROOT / "docs" / "frameworks.md").read_text()
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if "retrieval:" in b]
    return yaml.safe_load(block)


def params_file(folder, stages: list[dict], name: str):
    import yaml

    params = {**doc_params(), "name": name, "benchmark": str(DEMO)}
    params["retrieval"] = {"stages": stages}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    return path


def test_a_chunk_without_its_document_fails_its_query_by_name(tmp_path, tiny):
    pytest.importorskip("langchain_huggingface")
    from rageval.config.load import load_config
    from rageval.experiment.run import run_experiment

    stage = {"type": "langchain", "factory": LC, "options": {"drop_document_ids": True}, "candidates": 3}
    # Every query fails: within a budget that allows it (the default refuses the run, naming them).
    config = load_config(params_file(tmp_path, [stage], "no-ids"), ["failures.max_fraction=1.0"], benchmark=tiny)
    result = run_experiment(config, cache=False)
    failures = result.failures
    assert set(failures["query_id"]) == {"q1", "q2"} and set(failures["stage"]) == {"langchain"}  # q3: release split
    assert failures["message"].str.contains("without its document").all()
    assert failures["message"].str.contains("documentId").all()


def demo_subset(folder: Path, cases: int = 8, extra: int = 4) -> Path:
    """The demo benchmark cut down to its first ``cases`` dev cases, the documents they judge and
    ``extra`` others (the frameworks embed the whole corpus, and this machine's CPU is shared)."""
    import json
    import shutil

    from rageval.benchmark.loading import write_hashes

    rows = [json.loads(line) for line in (DEMO / "cases.jsonl").read_text().splitlines() if line.strip()]
    kept = [c for c in rows if c["split"] == "dev"][:cases]
    judged = {r["documentId"] for c in kept for r in c["relevant"]}
    documents = [json.loads(line) for line in (DEMO / "documents.jsonl").read_text().splitlines() if line.strip()]
    others = [d["id"] for d in documents if d["id"] not in judged][:extra]
    folder.mkdir()
    shutil.copy(DEMO / "benchmark.yaml", folder / "benchmark.yaml")
    (folder / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in kept))
    (folder / "documents.jsonl").write_text(
        "".join(json.dumps(d) + "\n" for d in documents if d["id"] in judged or d["id"] in others)
    )
    write_hashes(folder)
    return folder


def test_langchain_and_llamaindex_beside_bm25_in_one_comparison(tmp_path, store):
    """The issue's demonstration: three retrievers, each its own sealed run, compared at passage
    level on the benchmark's judged spans, the frameworks' identities recorded."""
    pytest.importorskip("langchain_huggingface")
    pytest.importorskip("llama_index.embeddings.huggingface")
    import json

    from rageval import analysis as cmp
    from rageval.config.load import dump_config, load_config
    from rageval.experiment.run import run_experiment
    from rageval.tracking.store import Tracker
    from rageval.workflows.readback import load_inputs
    from rageval.workflows.run import run_params, run_tags

    bench = load_benchmark(demo_subset(tmp_path / "bench"))
    tracker = Tracker(store)
    runs, results = {}, {}
    for stage in doc_params()["retrieval"]["stages"]:
        name = stage.get("name", stage["type"])
        path = params_file(tmp_path, [stage], name)
        config = load_config(path, benchmark=bench.path)
        run_id = tracker.create_run(
            "frameworks",
            name,
            params=run_params(config, []),
            tags=run_tags(config, bench, path, None),
            files={"config.yaml": dump_config(config).encode()},
        )
        results[name] = run_experiment(config, bench, cache=False)
        tracker.log_result(run_id, results[name])
        tracker.seal(run_id)
        runs[name] = run_id

    for name, result in results.items():
        assert result.level == "passage" and result.failures.empty, name
    inputs = load_inputs(tracker, runs["bm25"], [runs["team-langchain"], runs["team-llamaindex"]])
    comparison = cmp.compare(inputs, statistics=cmp.Statistics(resamples=200, samples=500))
    overall = comparison.overall.set_index(["run", "measure"])
    for name in runs:
        for measure in ("nDCG@10", "R@20", "MRR"):
            row = overall.loc[(name, measure)]
            assert row["level"] == "passage" and 0 < row["mean"] <= 1, (name, measure)
            # the comparison's means are the runs' own evaluations
            assert row["mean"] == pytest.approx(results[name].evaluation.aggregates[measure])
    for name, package in (("team-langchain", "langchain-core"), ("team-llamaindex", "llama-index-core")):
        models = json.loads(tracker.download_sealed(runs[name], "models.json", tmp_path / name).read_text())
        assert models[name]["name"] == f"plugins.{'lc' if 'lang' in name else 'li'}_retriever:build"
        assert models[name][package] == importlib_version(package)


def importlib_version(name: str) -> str:
    import importlib.metadata

    return importlib.metadata.version(name)
