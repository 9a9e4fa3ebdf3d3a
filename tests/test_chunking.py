"""Stable chunk IDs, parents kept, offsets exact, span judgments mapped to chunks by overlap."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import DEMO

from rageval.benchmark.chunking import chunk_corpus, chunk_document, chunk_qrels, config_hash, parent_of
from rageval.benchmark.loading import load_benchmark
from rageval.benchmark.schema import Case, ChunkingConfig, Document

CONFIG = ChunkingConfig(size=120, overlap=20)

DOC = Document(
    id="runbook",
    title="Runbook",
    text=(
        "# Runbook\n\nIntro line about the service and why this runbook exists at all.\n\n"
        "## Restore\n\nRestore from the nightly snapshot, then replay the journal.\n\n"
        "```bash\n# a comment, not a heading\nnpub restore --from nightly --replay\n```\n\n"
        "| step | owner |\n|---|---|\n| restore | sre |\n| verify | qa |\n\n"
        "## Verify\n\n" + "Check every region twice. " * 30
    ),
)


def ids_of(chunks):
    return [(c.chunk_id, c.parent_id, c.start, c.end) for c in chunks]


def demo_documents():
    return list(load_benchmark(DEMO).documents.values())


def test_demo_corpus_chunks_identically_twice():
    docs = demo_documents()
    first, second = chunk_corpus(docs, CONFIG), chunk_corpus(docs, CONFIG)
    assert len(first) > len(docs)  # long documents really are split
    assert ids_of(first) == ids_of(second)


CHILD = """
import json, sys
from rageval.benchmark.loading import load_benchmark
from rageval.benchmark.chunking import chunk_corpus
from rageval.benchmark.schema import ChunkingConfig
docs = load_benchmark(sys.argv[1]).documents.values()
chunks = chunk_corpus(docs, ChunkingConfig(size=120, overlap=20))
print(json.dumps([[c.chunk_id, c.parent_id, c.start, c.end] for c in chunks]))
"""


def test_demo_corpus_chunks_identically_in_two_processes():
    outputs = [
        subprocess.run(
            [sys.executable, "-c", CHILD, str(DEMO)],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "PATH": ""},
        ).stdout
        for seed in ("1", "2")
    ]
    assert outputs[0] == outputs[1]
    here = [list(row) for row in ids_of(chunk_corpus(demo_documents(), CONFIG))]
    assert json.loads(outputs[0]) == here


def test_changing_chunk_size_changes_ids_and_keeps_parents():
    docs = demo_documents()
    small = chunk_corpus(docs, CONFIG)
    large = chunk_corpus(docs, CONFIG.model_copy(update={"size": 300}))
    assert config_hash(CONFIG) != config_hash(CONFIG.model_copy(update={"size": 300}))
    assert not {c.chunk_id for c in small} & {c.chunk_id for c in large}
    for chunks in (small, large):
        assert {c.parent_id for c in chunks} == {d.id for d in docs}
        assert all(parent_of(c.chunk_id) == c.parent_id for c in chunks)


def test_chunk_id_is_parent_config_and_position():
    chunks = chunk_document(DOC, CONFIG)
    digest = config_hash(CONFIG)
    assert [c.chunk_id for c in chunks] == [f"runbook#{digest}-{i}" for i in range(len(chunks))]


def test_offsets_are_exact_and_chunks_cover_the_text():
    chunks = chunk_document(DOC, ChunkingConfig(size=40, overlap=8))
    assert len(chunks) >= 4
    for chunk in chunks:
        assert DOC.text[chunk.start : chunk.end] == chunk.text
        assert chunk.tokens <= 40
    covered = set()
    for chunk in chunks:
        covered.update(range(chunk.start, chunk.end))
    assert all(i in covered for i, ch in enumerate(DOC.text) if not ch.isspace())


def test_atomic_code_blocks_and_tables_are_not_cut():
    code = DOC.text.index("```bash")
    code_end = DOC.text.index("```\n", code + 3) + 3
    table = DOC.text.index("| step")
    table_end = DOC.text.index("| verify | qa |") + len("| verify | qa |")
    for chunk in chunk_document(DOC, ChunkingConfig(size=40, overlap=8)):
        for start, end in ((code, code_end), (table, table_end)):
            if chunk.start < end and start < chunk.end:  # overlaps the block: must hold all of it
                assert chunk.start <= start and chunk.end >= end, (chunk.text, start, end)


def test_headings_are_inherited_but_not_inside_code():
    chunks = chunk_document(DOC, ChunkingConfig(size=40, overlap=0))
    verify = [c for c in chunks if "Check every region" in c.text and not c.text.startswith("## Verify")]
    assert verify and verify[-1].headings == ("Runbook", "Verify")
    assert verify[-1].index_text.startswith("Runbook > Runbook > Verify\n")
    assert all("a comment, not a heading" not in h for c in chunks for h in c.headings)
    plain = chunk_document(DOC, ChunkingConfig(size=40, overlap=0, headings=False))
    assert all(c.index_text == c.text for c in plain)


def test_method_none_keeps_one_chunk_per_document():
    (chunk,) = chunk_document(DOC, ChunkingConfig(method="none"))
    assert (chunk.start, chunk.end, chunk.parent_id) == (0, len(DOC.text), "runbook")
    assert chunk.index_text == "Runbook\n" + DOC.text


def test_span_judgments_grade_the_chunks_that_cover_them():
    chunks = chunk_document(DOC, ChunkingConfig(size=40, overlap=0))
    start = DOC.text.index("Restore from")
    end = start + len("Restore from the nightly snapshot")
    case = Case(
        queryId="q",
        query="restore",
        corpusVersion="v",
        split="dev",
        relevant=[
            {"documentId": "runbook", "grade": 3, "start": start, "end": end},
            {"documentId": "other", "grade": 1},
        ],
    )
    other = chunk_document(Document(id="other", title="", text="whole document judged"), CONFIG)
    qrels = chunk_qrels([case], chunks + other)["q"]
    # Covered: an overlap of at least half the shorter of chunk and span (the contract's passages rule).
    hit = [
        c.chunk_id for c in chunks if 2 * (min(c.end, end) - max(c.start, start)) >= min(c.end - c.start, end - start)
    ]
    assert hit and all(qrels[c] == 3 for c in hit)
    assert not any(c.chunk_id in qrels for c in chunks if c.chunk_id not in hit)
    assert qrels[other[0].chunk_id] == 1


@pytest.mark.parametrize("overlap", [61, 100])
def test_overlap_above_half_the_size_is_refused(overlap):
    with pytest.raises(ValueError, match="at most half"):
        ChunkingConfig(size=120, overlap=overlap)


# --------------------------------------------------------------------------- chunking versions
# Version 2 reads blocks with markdown-it-py; version 1 (the hand-written parser) is kept because a
# recorded run re-chunks exactly as it did. The three cases below are why version 2 exists.

SETEXT = "Guide\n=====\n\nWhy the guide exists.\n\nSetup\n-----\n\nInstall the package first.\n"
NESTED_FENCE = "# Examples\n\n````markdown\n```python\n# not a heading\nprint(1)\n```\n````\n\nAfter the example.\n"
BARE_TABLE = (
    "Ports in use by the services of this deployment.\n\n"
    "name | port\n--|--\napi | 80\nweb | 8080\ndb | 5432\n\nAfter the table.\n"
)
V1 = "rageval-1"


def blocks_of(text, parser):
    from rageval.benchmark.blocks import parse_blocks

    return [(b.kind, b.title, text[b.start : b.end]) for b in parse_blocks(text, parser)]


def chunks_of(text, size, parser):
    chunks = chunk_document(Document(id="d", title="T", text=text), ChunkingConfig(size=size, parser=parser))
    return [(c.text, c.headings) for c in chunks]


def test_setext_headings_are_headings_in_version_2_and_paragraphs_in_version_1():
    assert blocks_of(SETEXT, "markdown-it") == [
        ("heading", "Guide", "Guide\n=====\n"),
        ("paragraph", "", "Why the guide exists.\n"),
        ("heading", "Setup", "Setup\n-----\n"),
        ("paragraph", "", "Install the package first.\n"),
    ]
    assert chunks_of(SETEXT, 6, "markdown-it")[-1] == ("Install the package first.", ("Guide", "Setup"))
    assert {kind for kind, _, _ in blocks_of(SETEXT, V1)} == {"paragraph"}
    assert chunks_of(SETEXT, 6, V1)[-1] == ("Install the package first.", ())


def test_a_hash_line_in_a_nested_fence_is_code_in_version_2_and_a_heading_in_version_1():
    code = "````markdown\n```python\n# not a heading\nprint(1)\n```\n````\n"
    assert blocks_of(NESTED_FENCE, "markdown-it") == [
        ("heading", "Examples", "# Examples\n"),
        ("code", "", code),
        ("paragraph", "", "After the example.\n"),
    ]
    assert chunks_of(NESTED_FENCE, 8, "markdown-it")[-1] == ("````\n\nAfter the example.", ("Examples",))
    assert ("heading", "not a heading", "# not a heading\n") in blocks_of(NESTED_FENCE, V1)
    assert chunks_of(NESTED_FENCE, 8, V1)[-1] == ("After the example.", ("not a heading",))


def test_a_table_without_a_leading_pipe_is_kept_whole_in_version_2_and_cut_in_version_1():
    table = "name | port\n--|--\napi | 80\nweb | 8080\ndb | 5432\n"
    assert ("table", "", table) in blocks_of(BARE_TABLE, "markdown-it")
    assert [text for text, _ in chunks_of(BARE_TABLE, 22, "markdown-it")] == [
        "Ports in use by the services of this deployment.",
        table + "\nAfter the table.",
    ]
    assert ("paragraph", "", table) in blocks_of(BARE_TABLE, V1)
    assert [text for text, _ in chunks_of(BARE_TABLE, 22, V1)] == [
        "Ports in use by the services of this deployment.\n\nname | port\n--|--\napi | 80",
        "web | 8080\ndb | 5432\n\nAfter the table.",
    ]


def test_the_version_is_in_the_hash_and_new_configs_get_version_2():
    assert ChunkingConfig().parser == "markdown-it"
    assert config_hash(ChunkingConfig()) != config_hash(ChunkingConfig(parser=V1))
    assert (
        chunk_document(DOC, CONFIG)[0].chunk_id
        != chunk_document(DOC, CONFIG.model_copy(update={"parser": V1}))[0].chunk_id
    )


# Measured with the code before the version field existed (commit 194d561): the demo corpus under
# params/bm25.yaml's chunking, and the nested-fence page at size 8.
OLD_DEMO_HASH, OLD_DEMO_CHUNKS = "85783434de96", "9d860ce470b3547d812ea3537b6bf65b1d3c303a95ff1aabd7d770057d514a72"
OLD_FENCE_CHUNKS = [
    ("d#b7bb29e908be-0", 0, 24, ()),
    ("d#b7bb29e908be-1", 25, 34, ("Examples",)),
    ("d#b7bb29e908be-2", 35, 59, ()),
    ("d#b7bb29e908be-3", 60, 68, ("not a heading",)),
    ("d#b7bb29e908be-4", 70, 88, ("not a heading",)),
]


def test_a_config_recorded_before_the_version_existed_rechunks_bit_identically():
    import hashlib

    from rageval.config.load import config_from_yaml, dump_config, load_config

    recorded = dump_config(load_config(DEMO.parent.parent / "params" / "bm25.yaml"))
    assert "  parser: markdown-it\n" in recorded  # written from now on: version 2, said so
    old_record = recorded.replace("  parser: markdown-it\n", "")  # what a run sealed before
    chunking = config_from_yaml(old_record).chunking
    assert chunking.parser == V1
    assert config_hash(chunking) == OLD_DEMO_HASH
    chunks = chunk_corpus(demo_documents(), chunking)
    rows = [[c.chunk_id, c.start, c.end, list(c.headings)] for c in chunks]
    assert hashlib.sha256(json.dumps(rows).encode()).hexdigest() == OLD_DEMO_CHUNKS
    old_size8 = config_from_yaml(
        old_record.replace("  size: 200\n  overlap: 30\n", "  size: 8\n  overlap: 0\n")
    ).chunking
    fence = chunk_document(Document(id="d", title="T", text=NESTED_FENCE), old_size8)
    assert [(c.chunk_id, c.start, c.end, c.headings) for c in fence] == OLD_FENCE_CHUNKS
