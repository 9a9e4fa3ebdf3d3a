"""``rageval benchmark import docs``: a documentation tree as a benchmark's corpus, and a changed
tree as the next version of that benchmark.

A first import writes the corpus with no cases (``rageval benchmark label`` adds them; the folder
validates once it holds one). A re-import (``previous``) writes a new version naming its
predecessor: it reports the pages added, changed and removed, and takes every judgment across —
unchanged where its page is, located again by its recorded quote where the page changed. A judgment
whose text moved gets its new offsets and its case is logged ``re-judged``; one whose text is gone
(or found more than once, or its page removed) is dropped and its case logged ``re-judged`` (or
``retired`` where no judgment is left). Nothing is shifted without a line in the report and the
changelog.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rageval.benchmark.docs.pages import AclMap, TreeOptions, find_pages, render_tree
from rageval.benchmark.docs.steps import chosen_steps, from_record, recorded
from rageval.benchmark.labeling import load_draft
from rageval.benchmark.loading import Benchmark, relative_path, write_benchmark
from rageval.benchmark.schema import (
    CASES_FILE,
    DEFAULT_RUBRIC,
    IMPORT_SPLITS,
    Case,
    ChangeAction,
    ChangelogEntry,
    Document,
    Judgment,
)
from rageval.benchmark.spans import locate
from rageval.errors import BenchmarkError, Problem
from rageval.hashing import sha256_text
from rageval.progress import SILENT, Reporter


@dataclass(frozen=True)
class DocsImport:
    """One import: the tree, where the benchmark goes, and how pages become text. ``steps`` None:
    every step (on a re-import, the predecessor's recorded steps)."""

    source: Path
    out: Path
    name: str
    version: str
    corpus_version: str | None = None
    steps: tuple[str, ...] | None = None
    tables: str | None = None
    include_root: Path | None = None
    acl_map: AclMap | None = None
    previous: Benchmark | None = None
    today: dt.date | None = None


@dataclass(frozen=True)
class Moved:
    """What became of one judgment of a changed or removed page."""

    case: str
    document: str
    old: tuple[int, int] | None
    new: tuple[int, int] | None
    why: str  # "moved", "not found", "ambiguous (n places)", "page removed", "no quote recorded"

    def line(self) -> str:
        old = f"{self.old[0]}-{self.old[1]}" if self.old else "whole page"
        new = f"{self.new[0]}-{self.new[1]}" if self.new else "dropped"
        return f"{self.case}: {self.document} {old} -> {new} ({self.why})"


@dataclass
class ImportReport:
    """What an import wrote: counts, the steps, and for a re-import the page and judgment changes."""

    out: Path
    documents: int
    steps: list[str]
    counts: dict[str, int]
    skipped: list[str]
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    judgments: list[Moved] = field(default_factory=list)
    changelog: list[ChangelogEntry] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "out": str(self.out),
            "documents": self.documents,
            "steps": self.steps,
            "counts": self.counts,
            "skipped": self.skipped,
            "added": self.added,
            "changed": self.changed,
            "removed": self.removed,
            "judgments": [{**m.__dict__, "old": m.old, "new": m.new} for m in self.judgments],
            "changelog": [entry.model_dump(mode="json") for entry in self.changelog],
        }


def _options(request: DocsImport) -> tuple[tuple[str, ...], TreeOptions]:
    names, tables = request.steps, request.tables
    if request.previous is not None and names is None:
        again = from_record(request.previous.spec.preprocessing)
        if again is not None:
            names = tuple(n for n in again[0] if not n.startswith("tables-"))
            tables = tables or again[1]
    steps = chosen_steps(names, tables or "rows")
    return steps, TreeOptions(frozenset(steps), request.include_root, request.acl_map)


def import_docs(request: DocsImport, reporter: Reporter = SILENT) -> ImportReport:
    """Import the tree (a re-import where ``request.previous`` is given); see the module."""
    previous = request.previous
    if previous is not None and request.version == previous.spec.version:
        raise BenchmarkError(
            Problem(
                file="--version",
                message=f"'{request.version}' is the version of --previous itself",
                fix="versions are append-only: give the re-import a new version",
            )
        )
    reporter.step(f"read pages under {request.source}")
    tree = find_pages(request.source)
    steps, options = _options(request)
    documents, counts = render_tree(tree, options)
    corpus = sha256_text("\n".join(f"{d.model_dump_json()}" for d in documents))[:12]
    corpus_version = request.corpus_version or f"{request.source.resolve().name}-{corpus}"
    spec: dict[str, Any] = {
        "name": request.name,
        "version": request.version,
        "description": f"documentation pages imported from {request.source.resolve().name} (rageval benchmark import docs)",
        "corpusVersion": corpus_version,
        "relevanceUnit": "passage",
        "rubric": dict(DEFAULT_RUBRIC),
        "splits": list(IMPORT_SPLITS),
        "preprocessing": recorded(steps),
    }
    report = ImportReport(request.out, len(documents), spec["preprocessing"], counts, tree.skipped)
    cases: list[Case] = []
    if previous is not None:
        reporter.step("compare with the previous version")
        today = request.today or dt.date.today()
        cases = _carry_over(previous, documents, corpus_version, today, request.version, report)
        spec["splits"] = list(previous.spec.splits)
        spec["rubric"] = dict(previous.spec.rubric)
        spec["predecessor"] = {
            "path": relative_path(previous.path, request.out),
            "version": previous.spec.version,
            "cases": previous.file_hashes[CASES_FILE],
        }
        spec["changelog"] = [e.model_dump(mode="json") for e in [*previous.spec.changelog, *report.changelog]]
    reporter.step(f"write {request.out}")
    write_benchmark(request.out, spec, documents, cases)
    load_draft(request.out)  # the lineage rules, for a re-import
    return report


def _carry_over(
    previous: Benchmark,
    documents: Sequence[Document],
    corpus_version: str,
    today: dt.date,
    version: str,
    report: ImportReport,
) -> list[Case]:
    new = {doc.id: doc for doc in documents}
    old = previous.documents
    report.added = sorted(set(new) - set(old))
    report.removed = sorted(set(old) - set(new))
    report.changed = sorted(d for d in set(new) & set(old) if new[d] != old[d])
    changed_text = {d for d in report.changed if new[d].text != old[d].text} | set(report.removed)
    cases, rejudged, retired = [], [], []
    for case in previous.cases:
        kept: list[Judgment] = []
        touched = False
        for judgment in case.relevant:
            if judgment.documentId not in changed_text:
                kept.append(judgment)
                continue
            moved = _relocate(case.queryId, judgment, new.get(judgment.documentId))
            if moved.why in ("kept", "same place"):
                kept.append(judgment)
                continue
            report.judgments.append(moved)
            touched = True
            if moved.new is not None:
                kept.append(judgment.model_copy(update={"start": moved.new[0], "end": moved.new[1]}))
        if touched and not kept and case.relevant:
            retired.append(case.queryId)
            continue
        if touched:
            rejudged.append(case.queryId)
        cases.append(case.model_copy(update={"relevant": kept, "corpusVersion": corpus_version}))
    actions: tuple[tuple[ChangeAction, list[str]], ...] = (("re-judged", rejudged), ("retired", retired))
    for action, ids in actions:
        if ids:
            report.changelog.append(
                ChangelogEntry(
                    version=version,
                    date=today,
                    action=action,
                    cases=ids,
                    reason=f"the corpus was re-imported: {len(ids)} case(s) whose judged pages changed; "
                    + "; ".join(m.line() for m in report.judgments if m.case in ids),
                )
            )
    return cases


def _relocate(case: str, judgment: Judgment, document: Document | None) -> Moved:
    old = judgment.span
    if document is None:
        return Moved(case, judgment.documentId, old, None, "page removed")
    if old is None:
        return Moved(case, judgment.documentId, None, None, "kept")  # a whole-page judgment stays
    if judgment.quote is None:
        return Moved(case, judgment.documentId, old, None, "no quote recorded")
    found = locate(document.text, judgment.quote)
    if not found.spans:
        return Moved(case, judgment.documentId, old, None, "not found")
    if found.unique is None:
        return Moved(case, judgment.documentId, old, None, f"ambiguous ({len(found.spans)} places)")
    return Moved(case, judgment.documentId, old, found.unique, "same place" if found.unique == old else "moved")
