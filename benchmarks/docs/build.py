"""Build the docs benchmark (httpx + starlette documentation, graded character spans) into a
gitignored folder, then validate it with ``rageval benchmark validate``.

    python benchmarks/docs/build.py                       # -> benchmarks/docs/build/
    python benchmarks/docs/build.py --out /tmp/docs-bench --force

Documents: every ``*.md`` page of ``--source`` (default ``../shared/datasets/docs-trees`` beside the
checkout), one document per page, its ID the page path without ``.md`` (``httpx/advanced/timeouts``),
its title the page's mkdocs nav title (else its first ``#`` heading, else its file name).
Judgments: ``questions.yaml`` beside this script; every quote is found in its page with
:func:`rageval.benchmark.spans.locate` (exact, then whitespace/Unicode tolerant) and must occur
exactly once; a ``heading`` evidence is that heading's section (to the next heading of the same or
a higher level). No offset is written by hand, and nothing from docs-trees is committed.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, StrictInt, StrictStr, ValidationError, model_validator

from rageval.benchmark.loading import write_benchmark
from rageval.benchmark.schema import DEFAULT_RUBRIC, Case, Document, Judgment
from rageval.benchmark.spans import locate
from rageval.validation import Slug, Strict

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DEFAULT_SOURCE = ROOT.parent / "shared" / "datasets" / "docs-trees"
DEFAULT_OUT = HERE / "build"
QUESTIONS = HERE / "questions.yaml"
# docs-trees as of SOURCES.txt (httpx ae1b9f66, starlette cb8f84f5).
CORPUS_VERSION = "docs-trees-ae1b9f6-cb8f84f"


class Evidence(Strict):
    doc: Slug = Field(description="document ID: the page path under the source without .md")
    quote: StrictStr | None = None
    heading: StrictStr | None = None
    grade: StrictInt = Field(ge=0, le=3)

    @model_validator(mode="after")
    def _one_locator(self) -> Evidence:
        if (self.quote is None) == (self.heading is None):
            raise ValueError("give exactly one of quote or heading")
        return self


class Question(Strict):
    id: Slug
    query: StrictStr
    split: Slug
    slice: list[Slug] = Field(default_factory=list)
    notes: StrictStr | None = None
    evidence: list[Evidence] = Field(default_factory=list)


class Questions(Strict):
    """The questions file, in the format of ``rageval benchmark label --from``."""

    cases: list[Question] = Field(min_length=1)


class _AnyTagLoader(yaml.SafeLoader):
    """mkdocs.yml files carry ``!!python/name:`` tags; only ``nav`` is read here."""


_AnyTagLoader.add_multi_constructor("", lambda loader, suffix, node: None)


def _nav_titles(mkdocs: Path) -> dict[str, str]:
    if not mkdocs.exists():
        return {}
    titles: dict[str, str] = {}

    def walk(items: Any) -> None:
        for item in items or []:
            if isinstance(item, dict):
                for title, target in item.items():
                    if isinstance(target, str):
                        titles[target] = title
                    else:
                        walk(target)

    walk((yaml.load(mkdocs.read_text(encoding="utf-8"), Loader=_AnyTagLoader) or {}).get("nav"))
    return titles


def read_documents(source: Path) -> list[Document]:
    documents = []
    for site in sorted(p for p in source.iterdir() if p.is_dir()):
        titles = _nav_titles(site / "mkdocs.yml")
        for page in sorted(site.rglob("*.md")):
            relative = page.relative_to(site).as_posix()
            text = page.read_text(encoding="utf-8")
            heading = re.search(r"^# (.+)$", text, re.MULTILINE)
            title = titles.get(relative) or (heading.group(1).strip() if heading else page.stem.replace("-", " "))
            document_id = f"{site.name}/{relative[: -len('.md')]}"
            documents.append(Document(id=document_id, title=title, text=text, metadata={"site": site.name}))
    return documents


def _section(text: str, heading: str) -> tuple[int, int] | None:
    found = re.search(rf"^(#+) {re.escape(heading)}\s*$", text, re.MULTILINE)
    if found is None:
        return None
    level = len(found.group(1))
    after = re.search(rf"^#{{1,{level}}} ", text[found.end() :], re.MULTILINE)
    end = found.end() + after.start() if after else len(text)
    return found.start(), len(text[:end].rstrip())


def _span(question: Question, evidence: Evidence, text: str) -> tuple[tuple[int, int] | None, str | None]:
    where = f"questions.yaml: {question.id}: {evidence.doc}"
    if evidence.heading is not None:
        span = _section(text, evidence.heading)
        return span, None if span else f"{where}: no heading '{evidence.heading}'"
    located = locate(text, evidence.quote or "")
    if located.unique is not None:
        return located.unique, None
    if not located.spans:
        return None, f"{where}: quote not found: {evidence.quote!r}; copy a sentence of the page"
    return None, f"{where}: quote occurs {len(located.spans)} times at {located.spans}; quote a longer passage"


def build_cases(questions: Questions, documents: dict[str, Document]) -> tuple[list[Case], list[str]]:
    cases, problems = [], []
    for question in questions.cases:
        relevant = []
        for evidence in question.evidence:
            document_id = evidence.doc
            if document_id not in documents:
                problems.append(f"questions.yaml: {question.id}: no document {document_id}")
                continue
            span, problem = _span(question, evidence, documents[document_id].text)
            if span is None:
                problems.append(problem or f"questions.yaml: {question.id}: no span")
                continue
            relevant.append(Judgment(documentId=document_id, grade=evidence.grade, start=span[0], end=span[1]))
        cases.append(
            Case(
                queryId=question.id,
                query=question.query,
                corpusVersion=CORPUS_VERSION,
                relevant=relevant,
                slice=question.slice,
                notes=question.notes,
                split=question.split,
            )
        )
    return cases, problems


def build(source: Path, out: Path, questions_path: Path = QUESTIONS) -> Path:
    try:
        questions = Questions.model_validate(yaml.safe_load(questions_path.read_text(encoding="utf-8")))
    except ValidationError as exc:
        raise SystemExit(f"{questions_path}: {exc}") from None
    documents = read_documents(source)
    cases, problems = build_cases(questions, {d.id: d for d in documents})
    if problems:
        raise SystemExit("\n".join(problems))
    spec = {
        "name": "docs-httpx-starlette",
        "version": "1",
        "description": "httpx and starlette documentation pages; questions with graded character-span "
        "evidence located from quotes (benchmarks/docs/questions.yaml).",
        "corpusVersion": CORPUS_VERSION,
        "relevanceUnit": "passage",
        "rubric": dict(DEFAULT_RUBRIC),
        "splits": sorted({q.split for q in questions.cases}),
        "provenance": {"source": "expert-written", "access": ["public"]},
    }
    return write_benchmark(out, spec, documents, cases)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="the docs-trees folder")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="benchmark folder to write (gitignored)")
    parser.add_argument("--force", action="store_true", help="replace an existing build at --out")
    args = parser.parse_args(argv)
    if not args.source.is_dir():
        raise SystemExit(f"{args.source}: no such folder; pass --source PATH/TO/docs-trees")
    if args.out.exists():
        if not args.force:
            raise SystemExit(f"{args.out} exists; pass --force to replace it")
        shutil.rmtree(args.out)
    out = build(args.source, args.out)
    validate = [sys.executable, "-c", "from rageval.cli import main; main()", "benchmark", "validate", str(out)]
    sys.exit(subprocess.run(validate, check=False).returncode)


if __name__ == "__main__":
    main()
