"""benchmarks/docs: the real docs-trees build (rageval benchmark import docs + label --from
questions.yaml, as real processes) into a valid passage benchmark, every judged span holding its
quote, and the docs params and chunking sweep load against it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from conftest import ROOT, shared

from rageval.benchmark.loading import load_benchmark
from rageval.benchmark.spans import normalised
from rageval.config.load import load_config
from rageval.config.sweep import load_sweep

pytestmark = pytest.mark.realdata


def _build_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_build", ROOT / "benchmarks" / "docs" / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["docs_build"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = shared("docs-trees")
    return _build_module().build(source, tmp_path_factory.mktemp("docs") / "bench")


def test_the_benchmark_is_valid_with_both_splits(built: Path) -> None:
    benchmark = load_benchmark(built)
    assert benchmark.spec.relevanceUnit == "passage"
    assert len(benchmark.documents) == 49  # every .md page of httpx and starlette but the two licences
    cases = benchmark.cases
    assert len(cases) == 45
    splits = {split: sum(c.split == split for c in cases) for split in ("dev", "release")}
    assert splits == {"dev": 27, "release": 18}
    assert sorted(c.queryId for c in cases if not c.answerable) == ["hx-http3", "st-websocket-max-size"]
    grades = sorted({j.grade for c in cases for j in c.relevant})
    assert grades == [0, 1, 2, 3]
    assert all(j.has_span for c in cases for j in c.relevant)


def test_every_span_holds_its_quote(built: Path) -> None:
    questions = yaml.safe_load((ROOT / "benchmarks" / "docs" / "questions.yaml").read_text())["cases"]
    benchmark = load_benchmark(built)
    documents = benchmark.documents  # id -> Document
    cases = {c.queryId: c for c in benchmark.cases}
    checked = 0
    for question in questions:
        judged = cases[question["id"]].relevant
        assert len(judged) == len(question["evidence"])
        for evidence, judgment in zip(question["evidence"], judged, strict=True):
            assert judgment.documentId == evidence["doc"]
            assert judgment.grade == evidence["grade"]
            text = documents[judgment.documentId].text[judgment.start : judgment.end]
            if "quote" in evidence:
                assert normalised(text)[0] == normalised(evidence["quote"])[0]
            else:
                assert text.startswith("## " + evidence["heading"])
            checked += 1
    assert checked == 82


def test_the_docs_params_and_the_sweep_load_against_it(built: Path) -> None:
    for path in sorted((ROOT / "params" / "docs").glob("*.yaml")):
        config = load_config(path, benchmark=built)
        assert config.evaluation.level == "passage"
        assert config.evaluation.measures[:3] == ["nDCG@10", "R@10", "Success@5"]
    sweep = load_sweep(ROOT / "params" / "sweeps" / "docs-chunking.yaml")
    members = {m.name: m.config for m in sweep.members}
    assert [members[f"bm25-{size}"].chunking.size for size in (200, 400, 800)] == [200, 400, 800]
    assert members["dense"].retrieval.stages[0].type == "dense"
    urls = [members[name].retrieval.stages[0].url for name in ("service-passages", "service-documents")]
    assert urls == ["http://127.0.0.1:8765/search", "http://127.0.0.1:8766/search"]


def test_no_mkdocs_syntax_is_left_in_the_index(built: Path) -> None:
    """Counted per line with the importer tests' patterns: in the source tree, the documents and the
    indexed text of the default chunking's chunks (heading prefixes included)."""
    from test_docs_import import MKDOCS_SYNTAX, syntax_left

    from rageval.benchmark.chunking import chunk_corpus
    from rageval.benchmark.schema import ChunkingConfig

    source = "\n".join(p.read_text(encoding="utf-8") for p in sorted(shared("docs-trees").rglob("*.md")))
    assert sum(syntax_left(source).values()) > 0  # there was mkdocs syntax to remove
    documents = load_benchmark(built).documents.values()
    chunks = chunk_corpus(documents, ChunkingConfig())
    assert syntax_left("\n".join(d.text for d in documents)) == dict.fromkeys(MKDOCS_SYNTAX, 0)
    assert syntax_left("\n".join(c.index_text for c in chunks)) == dict.fromkeys(MKDOCS_SYNTAX, 0)


def test_a_handful_labelled_and_reviewed_in_the_browser(built: Path, tmp_path: Path) -> None:
    """tools/label_docs_in_browser.py: five pieces of evidence labelled in headless Chromium become
    span judgments of exactly their quotes, and a migration review is decided in the page."""
    import os
    import shutil

    from servers import REQUIRE

    if not (shutil.which("chromedriver") and (shutil.which("chromium") or shutil.which("chromium-browser"))):
        if os.environ.get(REQUIRE):
            pytest.fail(f"{REQUIRE} is set: no headless Chromium here")
        pytest.skip("no headless Chromium here (apt-get install chromium chromium-driver)")
    spec = importlib.util.spec_from_file_location("label_docs", ROOT / "tools" / "label_docs_in_browser.py")
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    tool.main([str(built), "--out", str(tmp_path / "out"), "--shots", str(tmp_path / "shots")])

    before, after = load_benchmark(built), load_benchmark(tmp_path / "out" / "docs-v2")
    assert sum(len(c.relevant) for c in after.cases) == sum(len(c.relevant) for c in before.cases) + 5
    for query_id, document_id, quote, grade in tool.LABELS:
        case = next(c for c in after.cases if c.queryId == query_id)
        text = after.documents[document_id].text
        start = text.index(quote)
        assert (document_id, start, start + len(quote), grade) in {
            (j.documentId, j.start, j.end, j.grade) for j in case.relevant
        }
    labels = (tmp_path / "out" / "pool" / "labels.jsonl").read_text().splitlines()
    assert len(labels) == 5 and all('"assessor": "browser-assessor"' in line for line in labels)
    from rageval.benchmark.migration import read_review

    (review,) = (tmp_path / "out" / "docs-v2").glob("chunk-labels-*.jsonl")
    rows = [row for _, row in read_review(review)]
    assert [(r.status, r.decision, r.reviewer) for r in rows[:3]] == [
        ("reviewed", "accept", "browser-reviewer"),
        ("reviewed", "accept", "browser-reviewer"),
        ("reviewed", "reject", "browser-reviewer"),
    ]
    assert all(r.status == "proposed" for r in rows[3:])
    assert all((tmp_path / "shots" / name).stat().st_size > 20_000 for name in tool.SHOTS)
