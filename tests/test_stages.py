"""Fusion, filters, deduplication, run files, per-stage measurement and evidence trails, with
values computed by hand."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT

from rageval.benchmark.chunking import chunk_corpus
from rageval.benchmark.schema import ChunkingConfig, Document
from rageval.config.load import load_config
from rageval.errors import ConfigError, InputError
from rageval.experiment.run import run_experiment
from rageval.experiment.stages import evidence_trail, overlap_ratio
from rageval.retrieval import Corpus, DedupStage, FilterStage, FusionStage, Hit, Query, RunFileStage
from rageval.retrieval.schema import DedupConfig, FilterConfig, FusionConfig, RunFileConfig

DOCS = [
    Document(id="w", title="", text="public text about webhooks"),
    Document(id="x", title="", text="restricted runbook for on-call", acl=["sre"], metadata={"area": "ops"}),
    Document(id="y", title="", text="Public   TEXT about webhooks", metadata={"area": "ops"}),
    Document(id="z", title="", text="finance only figures", acl=["finance", "sre"], metadata={"area": "money"}),
]
CHUNKS = chunk_corpus(DOCS, ChunkingConfig(method="none", headings=False))
CORPUS = Corpus(CHUNKS, {d.id: d for d in DOCS})
ID = {c.parent_id: c.chunk_id for c in CHUNKS}


def hits(*pairs):
    return [Hit(ID[p], float(s)) for p, s in pairs]


def parents(ranking):
    return [h.chunk_id.split("#")[0] for h in ranking]


def test_rrf_by_hand():
    stage = FusionStage(FusionConfig(type="fusion", inputs=["a", "b"], weights={"b": 2}, rank_constant=60), CORPUS)
    out = stage(Query("q", ""), [hits(("x", 9), ("y", 8), ("z", 7)), hits(("y", 5), ("w", 4))])
    # y: 1/62 + 2/61 = 0.048916; w: 2/62 = 0.032258; x: 1/61 = 0.016393; z: 1/63 = 0.015873
    assert parents(out) == ["y", "w", "x", "z"]
    assert [h.score for h in out] == pytest.approx([1 / 62 + 2 / 61, 2 / 62, 1 / 61, 1 / 63])


def test_score_fusion_min_max_by_hand_and_ties_by_id():
    stage = FusionStage(FusionConfig(type="fusion", method="score", inputs=["a", "b"]), CORPUS)
    out = stage(Query("q", ""), [hits(("x", 3), ("y", 2), ("z", 1)), hits(("y", 10), ("w", 4))])
    # a → x 1, y 0.5, z 0; b → y 1, w 0; missing counts as the input's floor (0).
    assert parents(out) == ["y", "x", "w", "z"]  # w and z tie at 0: chunk-ID order
    assert [h.score for h in out] == pytest.approx([1.5, 1.0, 0.0, 0.0])


def test_score_fusion_z_score_by_hand():
    stage = FusionStage(FusionConfig(type="fusion", method="score", normalization="zscore", inputs=["a", "b"]), CORPUS)
    out = stage(Query("q", ""), [hits(("x", 3), ("y", 1)), hits(("y", 2), ("w", 2))])
    # a: mean 2, std 1 → x 1, y -1; b: std 0 → 0, 0. w is missing from a: a's floor -1.
    assert dict(zip(parents(out), [h.score for h in out], strict=True)) == pytest.approx(
        {"x": 1.0, "y": -1.0, "w": -1.0}
    )


def test_permission_filter_after_and_before_retrieval():
    ranking = hits(("x", 4), ("z", 3), ("w", 2), ("y", 1))
    after = FilterStage(FilterConfig(type="filter"), CORPUS)
    assert parents(after(Query("q", "", ("sre",)), [ranking])) == ["x", "z", "w", "y"]
    assert parents(after(Query("q", "", ("finance",)), [ranking])) == ["z", "w", "y"]
    assert parents(after(Query("q", "", None), [ranking])) == ["w", "y"]  # anonymous: public only
    before = FilterStage(FilterConfig(type="filter", when="before", metadata={"area": ["ops", "money"]}), CORPUS)
    allowed = before.allowed(Query("q", "", ("finance",)))
    assert sorted(CHUNKS[i].parent_id for i in allowed) == ["y", "z"]  # x: no finance group; w: no area


def test_dedup_exact_near_and_per_parent_cap():
    exact = DedupStage(DedupConfig(type="dedup"), CORPUS)
    ranking = hits(("w", 4), ("x", 3), ("y", 2), ("z", 1))
    assert parents(exact(Query("q", ""), [ranking])) == ["w", "x", "z"]  # y = w up to case and spaces
    docs = [
        Document(id="a", title="", text="one two three four five six seven eight"),
        Document(id="b", title="", text="one two three four five six seven nine"),
        Document(id="c", title="", text="completely different words here"),
    ]
    chunks = chunk_corpus(docs, ChunkingConfig(method="none", headings=False))
    corpus = Corpus(chunks, {d.id: d for d in docs})
    ranked = [Hit(c.chunk_id, 3.0 - i) for i, c in enumerate(chunks)]
    # 3-word shingles: a and b share 5 of 7 distinct → Jaccard 5/7 = 0.714
    near = DedupStage(DedupConfig(type="dedup", exact=False, near={"shingle": 3, "threshold": 0.7}), corpus)
    assert parents(near(Query("q", ""), [ranked])) == ["a", "c"]
    looser = DedupStage(DedupConfig(type="dedup", exact=False, near={"shingle": 3, "threshold": 0.75}), corpus)
    assert parents(looser(Query("q", ""), [ranked])) == ["a", "b", "c"]
    many = chunk_corpus(
        [Document(id="long", title="", text=" ".join(f"w{i}" for i in range(60)))], ChunkingConfig(size=10, overlap=0)
    )
    capped = DedupStage(DedupConfig(type="dedup", max_per_parent=2), Corpus(many, {}))
    assert len(capped(Query("q", ""), [[Hit(c.chunk_id, 1.0) for c in many]])) == 2


def test_run_file_stage_reads_trec_and_jsonl_and_names_unknown_ids(tmp_path):
    trec = tmp_path / "run.trec"
    trec.write_text(f"q1 Q0 {ID['y']} 2 1.5 prod\nq1 Q0 w 1 2.5 prod\nq1 Q0 w 3 0.5 prod\n")
    stage = RunFileStage(RunFileConfig(type="runfile", path=str(trec)), CORPUS)
    assert parents(stage(Query("q1", ""))) == ["w", "y"] and stage(Query("q2", "")) == []
    jsonl = tmp_path / "run.jsonl"
    jsonl.write_text(
        json.dumps({"query_id": "q1", "id": "z", "score": 1})
        + "\n"
        + json.dumps({"query_id": "q1", "id": "nope", "score": 0})
        + "\n"
    )
    with pytest.raises(InputError, match=r"run.jsonl:2: 'nope' is neither a chunk nor a non-empty document"):
        RunFileStage(RunFileConfig(type="runfile", path=str(jsonl)), CORPUS)


def test_evidence_trail_names_the_stage_that_dropped_it():
    def frame(stage, qid, *chunk_ids):
        return pd.DataFrame(
            {
                "query_id": qid,
                "rank": range(1, len(chunk_ids) + 1),
                "chunk_id": chunk_ids,
                "parent_id": chunk_ids,
                "score": 1.0,
                "stage": stage,
            }
        )

    stages = {
        "bm25": frame("bm25", "q", "a", "b"),
        "dense": frame("dense", "q", "c", "d"),
        "fusion": frame("fusion", "q", "a", "c"),
        "rerank": frame("rerank", "q", "c"),
    }
    inputs = {"bm25": [], "dense": [], "fusion": ["bm25", "dense"], "rerank": ["fusion"]}
    qrels = {"q": {"a": 2, "b": 1, "c": 3, "d": 1, "e": 2, "f": 0}}
    trail = evidence_trail(stages, inputs, qrels, "passage", frame("context", "q", "c")).set_index("item_id")
    assert trail.loc["a", ["found_by", "lost_at", "status"]].tolist() == ["bm25", "rerank", "dropped"]
    assert trail.loc["b", ["found_by", "lost_at", "status"]].tolist() == ["bm25", "fusion", "dropped"]
    assert trail.loc["d", ["found_by", "lost_at"]].tolist() == ["dense", "fusion"]
    assert pd.isna(trail.loc["c", "lost_at"]) and trail.loc["c", "status"] == "kept"
    assert trail.loc["e", ["found_by", "status"]].tolist() == ["", "not-retrieved"]
    assert "f" not in trail.index  # grade 0 is not evidence


def test_overlap_ratio_counts_shared_characters_once():
    doc = Document(id="d", title="", text=" ".join(f"w{i}" for i in range(40)))
    chunks = chunk_corpus([doc], ChunkingConfig(size=20, overlap=10, headings=False))
    first, second = chunks[0], chunks[1]
    shared = first.end - second.start
    assert shared > 0
    expected = shared / ((first.end - first.start) + (second.end - second.start))
    assert overlap_ratio([first, second]) == pytest.approx(expected)
    assert overlap_ratio([first]) == 0.0


def test_permission_filter_off_leaks_on_the_demo_permission_slice_and_on_does_not():
    results = {}
    for name, overrides in {
        "off": [],
        "on": ["retrieval.stages=[{type: bm25, candidates: 100}, {type: filter, when: after}]"],
        "before": ["retrieval.stages=[{type: bm25, candidates: 100}, {type: filter, when: before}]"],
    }.items():
        for split in ("dev", "release"):
            cfg = load_config(ROOT / "params" / "bm25.yaml", [*overrides, f"split={split}"])
            results[(name, split)] = run_experiment(cfg, cache=False)
    for split in ("dev", "release"):
        off = results[("off", split)]
        slice_queries = {c.queryId for c in off.benchmark.cases_for(split) if "permissions" in c.slice}
        assert slice_queries
        assert off.diagnostics.loc[sorted(slice_queries), "permission_leaks"].sum() > 0
        for name in ("on", "before"):
            assert results[(name, split)].counts()["permission_leaks"] == 0
            assert results[(name, split)].counts()["permission_leaks_context"] == 0
    # Filtering before retrieval fills the candidate list with allowed chunks; after, it only removes.
    before, after = results[("before", "dev")], results[("on", "dev")]
    assert before.stage_table().loc["filter", "candidates"] > after.stage_table().loc["filter", "candidates"]


def test_stage_config_errors_name_the_stage_and_the_fix(tmp_path):
    params = tmp_path / "p.yaml"
    base = (ROOT / "params" / "bm25.yaml").read_text().replace("../rageval/demo", str(ROOT / "rageval" / "demo"))
    cases = {
        "    - type: fusion\n      inputs: [bm25, dense]\n": "takes input 'dense', not an earlier stage",
        "    - type: bm25\n": "stage name 'bm25' repeats",
        "    - type: fusion\n      inputs: [bm25, bm25x]\n      weights: {nope: 1}\n": "weights for nope, which are not inputs",
        "    - type: dedup\n      shingles: 3\n": "allowed keys here: name, inputs, type, exact, near, max_per_parent",
    }
    for extra, message in cases.items():
        params.write_text(base.replace("      candidates: 100\n", "      candidates: 100\n" + extra, 1))
        with pytest.raises(ConfigError, match=message):
            load_config(params)
    params.write_text(
        base.replace("    - type: bm25\n", "    - type: rerank\n    - type: bm25\n      name: second\n", 1)
    )
    with pytest.raises(ConfigError, match="first stage is 'rerank'"):
        load_config(params)


def test_top_hits_settles_ties_at_the_cut_by_chunk_id():
    from rageval.retrieval import top_hits

    scores = np.array([1.0, 2.0, 2.0, 2.0], dtype=np.float32)  # w x y z
    assert parents(top_hits(CORPUS, scores, 2)) == ["x", "y"]
    assert parents(top_hits(CORPUS, scores, 2, allowed=np.array([0, 3]))) == ["z", "w"]


def test_the_stopword_lists_rageval_accepts_are_those_bm25s_knows():
    """The config checks a stopword name without importing bm25s; the set must be bm25s's own."""
    import re

    import bm25s

    from rageval.retrieval.schema import BM25_STOPWORDS, BM25TokenizerConfig

    for name in BM25_STOPWORDS:
        assert bm25s.tokenize(["the probe"], stopwords=name, show_progress=False) is not None, name
    with pytest.raises(ValueError) as raised:
        bm25s.tokenize(["probe"], stopwords="klingon", show_progress=False)
    # bm25s names every language it knows in its error: each one is in the set
    languages = re.findall(r"[A-Z][a-z]+", str(raised.value).split("supported")[0])
    languages = {w.lower() for w in languages if w not in ("Only", "English")} | {"english"}
    assert languages and languages <= BM25_STOPWORDS, languages - BM25_STOPWORDS
    with pytest.raises(ValueError, match="unknown stopword list 'klingon'; valid choices are"):
        BM25TokenizerConfig(stopwords="klingon")
    assert BM25TokenizerConfig(stopwords="de").stopwords == "de"
