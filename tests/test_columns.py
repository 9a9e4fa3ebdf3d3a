"""The columnar corpus: a Mapping[str, Document] that reads as the dict it replaces, built from columns."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from rageval.benchmark import columns
from rageval.benchmark.columns import DocumentColumns, Documents
from rageval.benchmark.loading import load_benchmark, validate_benchmark
from rageval.benchmark.schema import Document
from rageval.errors import BenchmarkError

ROWS = [
    {"id": "a", "title": "A", "text": "alpha text"},
    {"id": "b", "title": "", "text": "béta — ünïcode ✓", "metadata": {"lang": "fr", "n": 2, "x": [1.5, None]}},
    {"id": "c", "title": "C", "text": "gamma", "metadata": {}, "acl": ["team-a"], "created": "2024-01-02"},
    {"id": "d", "title": "D", "text": "delta", "acl": None, "updated": "2025-03-04"},
]


def _built(rows: list[dict]) -> tuple[Documents, dict[str, Document]]:
    builder = DocumentColumns()
    expected: dict[str, Document] = {}
    for row in rows:
        doc = Document.model_validate(row)
        builder.append(doc)
        expected.setdefault(doc.id, doc)
    return builder.build(), expected


def test_documents_read_as_the_dict_they_replace():
    documents, expected = _built(ROWS)
    assert len(documents) == 4 and list(documents) == ["a", "b", "c", "d"]
    assert "b" in documents and "z" not in documents and documents.get("z") is None
    for doc_id, doc in expected.items():
        got = documents[doc_id]
        assert got == doc
        assert got.model_dump() == doc.model_dump()
        assert got.model_fields_set == doc.model_fields_set
        assert got.model_dump(exclude_unset=True) == doc.model_dump(exclude_unset=True)
    assert documents["b"].metadata == {"lang": "fr", "n": 2, "x": [1.5, None]}
    assert documents["c"].acl == ["team-a"] and documents["c"].created == dt.date(2024, 1, 2)
    assert documents["d"].updated == dt.date(2025, 3, 4) and documents["d"].acl is None
    assert list(documents.values()) == list(expected.values())
    assert list(documents.items()) == list(expected.items())
    assert documents == expected  # Mapping equality: same items
    assert list(documents.texts()) == [(d.id, d.title, d.text) for d in expected.values()]
    assert documents.text_length("b") == len("béta — ünïcode ✓") and documents.text_length("z") == 0
    with pytest.raises(KeyError):
        documents["z"]


def test_a_built_document_is_its_own_object():
    documents, _ = _built(ROWS)
    first = documents["c"]
    first.metadata["changed"] = True
    first.acl.append("team-b")
    # Nothing a caller does to one Document reaches the columns.
    assert documents["c"].metadata == {} and documents["c"].acl == ["team-a"]


def test_many_chunks_keep_every_document(monkeypatch):
    monkeypatch.setattr(columns, "_CHUNK", 3)
    rows = [{"id": f"d{i}", "title": f"T{i}", "text": f"text {i}" * (i % 4)} for i in range(10)]
    rows.append({"id": "d4", "title": "repeat", "text": "a repeated ID: the first one stands"})
    documents, expected = _built(rows)
    assert len(documents) == 10 and list(documents) == [f"d{i}" for i in range(10)]
    assert documents["d7"] == expected["d7"] and documents["d4"].title == "T4"
    assert [d.id for d in documents.values()] == [f"d{i}" for i in range(10)]
    assert [t.id for t in documents.texts()] == [f"d{i}" for i in range(10)]  # the repeat skipped here too


def test_chunking_the_columns_cuts_the_same_chunks_as_the_documents():
    from rageval.benchmark.chunking import chunk_corpus
    from rageval.benchmark.schema import ChunkingConfig

    text = "# Head\n\nFirst paragraph of words here.\n\n## Sub\n\n" + "more words again " * 40
    rows = [{"id": f"d{i}", "title": f"T{i}", "text": text * (i + 1)} for i in range(4)]
    documents, expected = _built(rows)
    for chunking in (
        ChunkingConfig(method="markdown", size=32, overlap=4, headings=True),
        ChunkingConfig(method="none"),
    ):
        got = chunk_corpus(documents.texts(), chunking)
        assert got == chunk_corpus(expected.values(), chunking)
        assert len(got) > len(rows) or chunking.method == "none"


def _folder(tmp_path: Path, lines: list[str]) -> Path:
    from rageval.benchmark.loading import hash_files

    (tmp_path / "documents.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    case = {
        "queryId": "q1",
        "query": "alpha?",
        "split": "test",
        "corpusVersion": "v1",
        "relevant": [{"documentId": "a", "grade": 2, "start": 0, "end": 5}],
    }
    (tmp_path / "cases.jsonl").write_text(json.dumps(case) + "\n", encoding="utf-8")
    spec = {"name": "t", "version": "1", "corpusVersion": "v1", "relevanceUnit": "passage", "splits": ["test"]}
    import yaml

    spec["files"] = hash_files(tmp_path)
    (tmp_path / "benchmark.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    return tmp_path


def test_load_benchmark_holds_columns_and_the_same_documents(tmp_path):
    folder = _folder(tmp_path, [json.dumps(r, ensure_ascii=False) for r in ROWS])
    benchmark = load_benchmark(folder)
    assert isinstance(benchmark.documents, Documents)
    assert dict(benchmark.documents) == {r["id"]: Document.model_validate(r) for r in ROWS}
    assert benchmark.hashes["corpus"] == benchmark.file_hashes["documents.jsonl"]


def test_loading_as_columns_keeps_the_line_numbers_of_problems(tmp_path):
    lines = [json.dumps(ROWS[0]), "{not json", json.dumps({"id": "b", "title": 3, "text": "x"}), json.dumps(ROWS[0])]
    benchmark, problems = validate_benchmark(_folder(tmp_path, lines))
    assert benchmark is None
    found = [(p.file, p.line, p.field) for p in problems]
    assert ("documents.jsonl", 2, None) in found  # malformed JSON, reported first (as read_jsonl's callers do)
    assert ("documents.jsonl", 3, "title") in found
    assert ("documents.jsonl", 4, "id") in found  # the duplicate ID, on its own line
    assert found.index(("documents.jsonl", 2, None)) < found.index(("documents.jsonl", 3, "title"))
    with pytest.raises(BenchmarkError, match="duplicate document ID 'a' \\(first on line 1\\)"):
        load_benchmark(tmp_path)
