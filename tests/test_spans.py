"""Span-native grading (the contract's ``passages`` rule): each edge case of docs/metric-contract.md,
and the proof that the same rankings given by ID or as passages agree on every value."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import DEMO, shared

from rageval.benchmark.chunking import chunk_corpus
from rageval.benchmark.loading import load_benchmark
from rageval.benchmark.schema import ChunkingConfig
from rageval.config.load import load_config
from rageval.errors import EvaluationError
from rageval.evaluation import ContractOptions, evaluate
from rageval.evaluation.spans import evidence_from_rows, graded_ranking
from rageval.experiment.run import level_run, run_experiment
from rageval.retrieval.schema import RunFileConfig

MEASURES = ["nDCG@10", "nDCG@3", "R@1", "R@2", "R@10", "P@1", "P@3", "Success@1", "RR", "AP", "Rprec", "Judged@3"]


def passages(*rows, query="q"):
    """A passage run: (document, start, end) rows, best first."""
    return pd.DataFrame(
        {
            "query_id": query,
            "doc_id": [f"{d}@{s}-{e}" for d, s, e in rows],
            "score": [float(len(rows) - i) for i in range(len(rows))],
            "document_id": [d for d, _, _ in rows],
            "start": [s for _, s, _ in rows],
            "end": [e for _, _, e in rows],
        }
    )


def spans(*rows, query="q"):
    return evidence_from_rows([query], [(query, d, s, e, g) for d, s, e, g in rows])


def grades(run, evidence):
    rows, _ = graded_ranking(run, evidence, ties="input-order")
    return [None if pd.isna(g) else int(g) for g in rows["grade"]]


# --------------------------------------------------------------------------- each edge case


def test_cover_is_an_overlap_of_half_the_shorter():
    assert grades(passages(("d", 0, 100)), spans(("d", 10, 20, 3))) == [3]  # span inside the passage
    assert grades(passages(("d", 100, 200)), spans(("d", 0, 1000, 2))) == [2]  # passage inside the span
    assert grades(passages(("d", 50, 400)), spans(("d", 0, 100, 3))) == [3]  # half of the span
    assert grades(passages(("d", 80, 400)), spans(("d", 0, 100, 3))) == [None]  # a sliver: unjudged
    assert grades(passages(("e", 0, 100)), spans(("d", 0, 100, 3))) == [None]  # another document


def test_a_span_straddling_two_chunks_goes_to_the_chunk_holding_most_of_it():
    assert grades(passages(("d", 0, 100), ("d", 100, 200)), spans(("d", 90, 130, 3))) == [None, 3]


def test_a_passage_takes_the_highest_grade_and_every_span_counts_for_recall():
    run, evidence = passages(("d", 0, 50)), spans(("d", 0, 10, 1), ("d", 20, 30, 3))
    assert grades(run, evidence) == [3]
    values = evaluate(run, evidence, ["R@1", "nDCG@10"]).per_query.loc["q"]
    assert values["R@1"] == 1.0
    assert values["nDCG@10"] == pytest.approx(3 / (3 + 1 / np.log2(3)))  # one passage, two spans ideally two ranks


def test_a_span_is_credited_once_and_a_passage_earns_what_it_adds():
    assert grades(passages(("d", 0, 50), ("d", 5, 60)), spans(("d", 10, 20, 3))) == [3, 0]
    two = spans(("d", 10, 20, 3), ("d", 200, 210, 1))
    assert grades(passages(("d", 0, 50), ("d", 0, 300)), two) == [3, 1]
    values = evaluate(passages(("d", 0, 50), ("d", 5, 60)), spans(("d", 10, 20, 3)), MEASURES).per_query.loc["q"]
    assert values["nDCG@10"] == 1.0 and values["P@3"] == pytest.approx(1 / 3) and values["Judged@3"] == 1.0


def test_grade_zero_spans_are_judged_and_uncovered_text_is_unjudged():
    run = passages(("d", 0, 50), ("d", 500, 600))
    assert grades(run, spans(("d", 10, 20, 0), ("d", 1000, 1010, 2))) == [0, None]
    values = evaluate(run, spans(("d", 10, 20, 0), ("d", 1000, 1010, 2)), ["Judged@2", "R@2"]).per_query.loc["q"]
    assert values["Judged@2"] == 0.5 and values["R@2"] == 0.0


def test_ap_averages_the_precision_where_each_relevant_span_was_credited():
    # Spans A, B (relevant) and C (relevant); rank 1 covers nothing, rank 2 covers A and B, rank 3 C.
    evidence = spans(("d", 100, 110, 2), ("d", 120, 130, 2), ("d", 400, 410, 1))
    run = passages(("e", 0, 50), ("d", 90, 140), ("d", 390, 420))
    values = evaluate(run, evidence, ["AP", "Rprec", "R@2", "RR"]).per_query.loc["q"]
    # Precision at rank 2 is 1/2 for A and for B; at rank 3 it is 2/3 for C.
    assert values["AP"] == pytest.approx((0.5 + 0.5 + 2 / 3) / 3)
    assert values["Rprec"] == pytest.approx(3 / 3) and values["R@2"] == pytest.approx(2 / 3)
    assert values["RR"] == 0.5


def test_spans_credited_are_read_back_with_their_rank():
    _, credited = graded_ranking(passages(("d", 0, 100), ("d", 100, 200)), spans(("d", 90, 130, 3)), "input-order")
    assert credited[["span", "grade", "rank"]].to_dict("records") == [{"span": "d:90-130", "grade": 3, "rank": 2.0}]


def test_a_measure_that_needs_matching_ids_is_refused_on_spans():
    with pytest.raises(EvaluationError, match="Bpref: graded on spans"):
        evaluate(passages(("d", 0, 10)), spans(("d", 0, 10, 1)), ["Bpref"])


# --------------------------------------------------------------------------- the same rankings, by ID or as passages


def _whole_documents(run: pd.DataFrame, lengths: dict[str, int]) -> pd.DataFrame:
    return run.assign(document_id=run["doc_id"], start=0, end=run["doc_id"].map(lengths))


def _document_evidence(qrels, lengths):
    rows = [(q, d, 0, lengths[d], g) for q, judged in qrels.items() for d, g in judged.items()]
    return evidence_from_rows(qrels, rows)


def test_whole_documents_graded_on_spans_equal_id_matching_on_trec_evals_suite():
    from rageval.benchmark.trec import read_qrels, read_run

    folder = shared("trec_eval")
    qrels = read_qrels(folder / "qrels.test")
    run = read_run(folder / "results.test")[["query_id", "doc_id", "score"]]
    lengths = {d: 100 for d in set(run["doc_id"]) | {d for j in qrels.values() for d in j}}
    options = {"ties": "docid-desc", "no_relevant": "score"}
    by_id = evaluate(run, qrels, MEASURES, ContractOptions(**options)).per_query
    by_span = evaluate(
        _whole_documents(run, lengths), _document_evidence(qrels, lengths), MEASURES, ContractOptions(**options)
    ).per_query
    pd.testing.assert_frame_equal(by_id, by_span)


def test_whole_documents_graded_on_spans_equal_id_matching_on_scifact():
    folder = shared("scifact")
    corpus = {}
    for line in (folder / "corpus.jsonl").read_text().splitlines():
        doc = json.loads(line)
        corpus[doc["_id"]] = len(doc["title"]) + len(doc["text"]) + 1
    qrels: dict[str, dict[str, int]] = {}
    for line in (folder / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        q, d, g = line.split("\t")
        qrels.setdefault(q, {})[d] = int(g)
    # A deterministic run over every judged document and its neighbours in ID order, scores with ties.
    ids = sorted(corpus)
    rng = np.random.default_rng(7)
    rows = []
    for q, judged in qrels.items():
        picked = set(judged) | {ids[int(i)] for i in rng.integers(0, len(ids), 60)}
        for d in sorted(picked):
            rows.append((q, d, float(rng.integers(0, 20))))
    run = pd.DataFrame(rows, columns=["query_id", "doc_id", "score"])
    by_id = evaluate(run, qrels, MEASURES).per_query
    by_span = evaluate(_whole_documents(run, corpus), _document_evidence(qrels, corpus), MEASURES).per_query
    pd.testing.assert_frame_equal(by_id, by_span)


@pytest.fixture(scope="module")
def demo_run():
    config = load_config(DEMO.parent.parent / "params" / "bm25.yaml")
    return config, run_experiment(config, cache=False)


def test_chunk_ids_and_the_same_passages_as_offsets_or_text_agree_on_every_value(demo_run, tmp_path):
    """The demo's BM25 ranking given by chunk IDs (the run itself), then written as a run file of
    passages by offsets and by text and evaluated under another chunking, where those passages are
    no chunk of the evaluating corpus: every per-query value of both levels is the same."""
    config, result = demo_run
    benchmark = load_benchmark(config.benchmark)
    chunks = {c.chunk_id: c for c in chunk_corpus(benchmark.documents.values(), config.chunking)}
    for form in ("offsets", "text"):
        lines = []
        for row in result.rankings.itertuples(index=False):
            chunk = chunks[row.chunk_id]
            hit = (
                {"documentId": chunk.parent_id, "start": chunk.start, "end": chunk.end}
                if form == "offsets"
                else {"documentId": chunk.parent_id, "text": chunk.text}
            )
            lines.append(json.dumps({"query_id": row.query_id, "score": row.score, "rank": int(row.rank), **hit}))
        path = tmp_path / f"{form}.jsonl"
        path.write_text("\n".join(lines) + "\n")
        stage = RunFileConfig(type="runfile", path=str(path), candidates=100)
        other = config.model_copy(
            update={
                "chunking": ChunkingConfig(method="markdown", size=57, overlap=0),
                "retrieval": config.retrieval.model_copy(update={"stages": [stage]}),
            }
        )
        replayed = run_experiment(other, benchmark, cache=False)
        assert not replayed.rankings["chunk_id"].isin(chunks.keys()).all()  # foreign passages, not chunks
        for level, evaluation in result.levels.items():
            pd.testing.assert_frame_equal(evaluation.per_query, replayed.levels[level].per_query)
        pd.testing.assert_frame_equal(result.context_evidence, replayed.context_evidence)


def test_the_demo_passage_level_under_spans(demo_run):
    """The demo's BM25 dev figures under rageval-metrics/4 (docs/metric-contract.md quotes them)."""
    _, result = demo_run
    table = result.level_table()
    assert round(table.loc["nDCG@10", "passage"], 4) == 0.6716
    assert round(table.loc["nDCG@10", "document"], 4) == 0.7688  # unchanged from rageval-metrics/3
    assert level_run(result.rankings, "passage").columns.tolist()[-3:] == ["document_id", "start", "end"]


def test_a_passage_that_is_exactly_a_judged_span_keeps_its_assessors_grade():
    # The assessor judged 0-60 as 1; a finer span inside it (10-40) was judged 3 on its own.
    assert grades(passages(("d", 0, 60)), spans(("d", 0, 60, 1), ("d", 10, 40, 3))) == [1]
    # Another passage over the same text is graded by the spans it covers.
    assert grades(passages(("d", 0, 61)), spans(("d", 0, 60, 1), ("d", 10, 40, 3))) == [3]


def test_adjudicated_chunk_grades_are_the_grades_evaluation_uses_with_overlapping_chunks():
    """Pooled chunks of an overlapping chunking, written as spans with their assessors' grades (as
    judge adjudicate does): every chunk is graded exactly its own grade, though its neighbours
    overlap it and some were graded higher; and chunk_qrels (pools, exports) says the same."""
    from rageval.benchmark.chunking import chunk_document, chunk_qrels
    from rageval.benchmark.schema import Case

    benchmark = load_benchmark(DEMO)
    document = max(benchmark.documents.values(), key=lambda d: len(d.text))
    chunks = chunk_document(document, ChunkingConfig(size=60, overlap=30))
    assert len(chunks) >= 4 and any(a.end > b.start for a, b in zip(chunks, chunks[1:], strict=False))
    assessed = {c.chunk_id: [1, 3, 0, 2][i % 4] for i, c in enumerate(chunks)}
    evidence = spans(*[(document.id, c.start, c.end, assessed[c.chunk_id]) for c in chunks])
    run = passages(*[(document.id, c.start, c.end) for c in chunks])
    assert grades(run, evidence) == [assessed[c.chunk_id] for c in chunks]
    # Reversed, every chunk still earns exactly its own grade (no neighbour's span is credited to it).
    assert grades(passages(*[(document.id, c.start, c.end) for c in reversed(chunks)]), evidence) == [
        assessed[c.chunk_id] for c in reversed(chunks)
    ]
    case = Case(
        queryId="q",
        query="q",
        corpusVersion="v",
        split="dev",
        relevant=[
            {"documentId": document.id, "grade": assessed[c.chunk_id], "start": c.start, "end": c.end} for c in chunks
        ],
    )
    assert chunk_qrels([case], chunks)["q"] == assessed


def test_evidence_in_the_context_is_counted_in_tokens_once():
    from rageval.benchmark.schema import Document
    from rageval.experiment.evidence import context_evidence

    text = "w0 w1 w2 w3 w4 w5 w6 w7 w8 w9"  # token i starts at 3*i
    documents = {"d": Document(id="d", title="", text=text)}
    starts = {"d": np.arange(0, len(text), 3)}
    # Evidence: tokens 2-4 (grade 3) and token 8 (grade 1); a grade-0 span never counts.
    evidence = spans(("d", 6, 14, 3), ("d", 24, 26, 1), ("d", 0, 2, 0))
    # Context: tokens 3-6 twice (overlapping passages), token 8.
    context = pd.DataFrame({"query_id": "q", "parent_id": "d", "start": [9, 12, 24], "end": [20, 17, 26]})
    row = context_evidence(context, evidence, documents, starts.__getitem__, relevance=1).loc["q"]
    # evidence tokens {2,3,4,8} = 4; context tokens {3,4,5,6,8} = 5; both {3,4,8} = 3; either = 6
    assert (row["evidence_tokens"], row["context_tokens"], row["evidence_in_context_tokens"]) == (4, 5, 3)
    assert row["evidence_recall"] == pytest.approx(3 / 4)
    assert row["evidence_precision"] == pytest.approx(3 / 5)
    assert row["evidence_iou"] == pytest.approx(3 / 6)
    strict = context_evidence(context, evidence, documents, starts.__getitem__, relevance=3).loc["q"]
    assert strict["evidence_recall"] == pytest.approx(2 / 3)  # only the grade-3 span: tokens 2-4
