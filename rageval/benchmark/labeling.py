"""Judgments written from a quote, a heading or a regex: rageval finds the character span.

:func:`find_span` locates the evidence in a document: a quote through
:func:`rageval.benchmark.spans.locate` (exact, then tolerant of whitespace and Unicode forms); a
heading selects its section, from the heading line to the next heading of the same or a higher
level (headings read from the Markdown token stream, so a ``#`` line in a code block is none); a
regex, its match. Evidence found in more than one place is an error listing every candidate (line
and snippet), evidence found nowhere an error saying so: nothing is written unless every piece of
evidence is found once. :func:`label` adds the cases (or the judgments of a case already there) to
a benchmark folder, records the quote (the span's text) in each judgment so a re-import can locate
it again, rewrites the hashes and, in a version with a predecessor, logs the change.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, StrictInt, StrictStr, ValidationError, model_validator

from rageval.benchmark.docs.markdown import parser
from rageval.benchmark.loading import Benchmark, hash_files, load_benchmark, validate_benchmark, write_hashes
from rageval.benchmark.schema import CASES_FILE, DOCUMENTS_FILE, BenchmarkSpec, Case, Document, Judgment
from rageval.benchmark.spans import locate
from rageval.benchmark.versions import log_change, write_cases
from rageval.errors import BenchmarkError, InputError, Problem
from rageval.io import read_jsonl, read_yaml
from rageval.validation import Slug, Strict, problems_from_validation, shorten

EMPTY_CASES = "the file holds no cases"
SNIPPET = 60
CONTEXT = 40  # characters of context either side of an ambiguous match


class Evidence(Strict):
    """One piece of evidence: a document and exactly one of quote, heading or regex, with its grade."""

    doc: Slug
    quote: StrictStr | None = None
    heading: StrictStr | None = None
    regex: StrictStr | None = None
    grade: StrictInt

    @model_validator(mode="after")
    def _one_locator(self) -> Evidence:
        given = [name for name in ("quote", "heading", "regex") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of quote, heading or regex (got {', '.join(given) or 'none'})")
        return self

    @property
    def how(self) -> tuple[str, str]:
        kind = next(name for name in ("quote", "heading", "regex") if getattr(self, name) is not None)
        return kind, str(getattr(self, kind))


class Question(Strict):
    """One case of a questions file; no evidence: an unanswerable case."""

    id: Slug = Field(description="the case's queryId")
    query: StrictStr
    split: Slug
    slice: list[Slug] = Field(default_factory=list)
    notes: StrictStr | None = None
    evidence: list[Evidence] = Field(default_factory=list)


class QuestionsFile(Strict):
    """``rageval benchmark label PATH --from questions.yaml``."""

    cases: list[Question] = Field(min_length=1)


def read_questions(path: Path) -> tuple[list[Question], dict[tuple[Any, ...], int]]:
    data, lines = read_yaml(path, InputError)
    try:
        return QuestionsFile.model_validate(data).cases, lines
    except ValidationError as exc:
        raise InputError(
            problems_from_validation(exc, file=str(path), model=QuestionsFile, lines=lines, line=1)
        ) from None


# --------------------------------------------------------------------------- finding the span


@dataclass(frozen=True)
class Heading:
    level: int
    text: str
    start: int  # character offset of the heading line


def headings(text: str) -> list[Heading]:
    """The document's headings (``#`` and setext), from the Markdown token stream."""
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    tokens = parser().parse(text)
    return [
        Heading(int(token.tag[1]), " ".join(tokens[i + 1].content.split()), starts[token.map[0]])
        for i, token in enumerate(tokens)
        if token.type == "heading_open" and token.map is not None
    ]


def _trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _section_spans(text: str, wanted: str) -> list[tuple[int, int]]:
    found = headings(text)
    key = " ".join(wanted.lstrip("#").split())
    matches = [h for h in found if h.text == key] or [h for h in found if h.text.casefold() == key.casefold()]
    spans = []
    for heading in matches:
        later = [h.start for h in found if h.start > heading.start and h.level <= heading.level]
        spans.append(_trimmed(text, heading.start, later[0] if later else len(text)))
    return spans


def _regex_spans(text: str, pattern: str) -> list[tuple[int, int]]:
    try:
        compiled = re.compile(pattern, re.MULTILINE)
    except re.error as exc:
        raise InputError(
            Problem(file="--regex", message=f"not a regular expression: {exc}", fix="correct the pattern")
        ) from None
    return [match.span() for match in compiled.finditer(text) if match.end() > match.start()]


def _where(text: str, span: tuple[int, int]) -> str:
    """``line N (start-end): '…before [match] after…'``: where a candidate is, with its context."""
    start, end = span
    line = text.count("\n", 0, start) + 1
    match = text[start:end] if end - start <= SNIPPET else text[start : start + SNIPPET - 1] + "…"
    shown = text[max(0, start - CONTEXT) : start] + f"[{match}]" + text[end : end + CONTEXT]
    return f"line {line} ({start}-{end}): {' '.join(shown.split())!r}"


FIXES = {
    "quote": "quote more of the passage (a longer quote occurs once), or give --regex with its context",
    "heading": "give the full heading text, or quote the passage with --quote",
    "regex": "anchor the pattern so it matches once (e.g. add the words around it)",
}


def find_span(document: Document, evidence: Evidence, where: str) -> tuple[int, int]:
    """The one span of ``document`` the evidence names; ambiguous or absent evidence raises
    :class:`InputError` naming ``where`` (the file and line, or the option), every candidate, and the fix."""
    kind, value = evidence.how
    text = document.text
    if kind == "quote":
        spans = list(locate(text, value).spans)
    elif kind == "heading":
        spans = _section_spans(text, value)
    else:
        spans = _regex_spans(text, value)
    if len(spans) == 1:
        return spans[0]
    if not spans:
        known = "" if kind != "heading" else f" (its headings: {', '.join(h.text for h in headings(text)[:12])})"
        message = f"the {kind} {shorten(repr(value))} is not in document '{document.id}'{known}"
        fix = "check the document ID and the text (whitespace and Unicode forms are tolerated)"
        raise InputError(Problem(file=where, field=kind, message=message, fix=fix))
    candidates = "; ".join(_where(text, span) for span in spans)
    raise InputError(
        Problem(
            file=where,
            field=kind,
            message=f"the {kind} {shorten(repr(value))} occurs {len(spans)} times in '{document.id}': {candidates}",
            fix=FIXES[kind],
        )
    )


# --------------------------------------------------------------------------- writing the cases


def load_draft(path: str | Path) -> Benchmark:
    """A benchmark folder that may hold no case yet (a corpus just imported); every other problem raises."""
    benchmark, problems = validate_benchmark(path, retention=False)
    if benchmark is not None:
        return benchmark
    rest = [p for p in problems if not (p.file == CASES_FILE and p.message == EMPTY_CASES)]
    if rest:
        raise BenchmarkError(rest)
    root = Path(path)
    data, _ = read_yaml(root / "benchmark.yaml", BenchmarkError)
    rows, _ = read_jsonl(root / DOCUMENTS_FILE, file=DOCUMENTS_FILE)
    documents = [Document.model_validate(value) for _, value in rows]
    return Benchmark(
        root.resolve(), BenchmarkSpec.model_validate(data), {d.id: d for d in documents}, (), hash_files(root)
    )


def build_case(benchmark: Benchmark, question: Question, where: str) -> Case:
    """The case a question becomes, each evidence item located (every problem of it raised together)."""
    problems: list[Problem] = []
    judgments = []
    for index, evidence in enumerate(question.evidence):
        document = benchmark.documents.get(evidence.doc)
        if document is None:
            problems.append(
                Problem(
                    file=where,
                    field=f"evidence[{index}].doc",
                    message=f"unknown document '{shorten(evidence.doc)}'",
                    fix="use a document ID of documents.jsonl (a page's path without its suffix)",
                )
            )
            continue
        try:
            start, end = find_span(document, evidence, where)
        except InputError as exc:
            problems.extend(
                Problem(p.file, p.message, p.line, f"evidence[{index}].{p.field}", p.fix) for p in exc.problems
            )
            continue
        judgments.append(
            Judgment(documentId=document.id, grade=evidence.grade, start=start, end=end, quote=document.text[start:end])
        )
    if problems:
        raise InputError(problems)
    return Case(
        queryId=question.id,
        query=question.query,
        corpusVersion=benchmark.spec.corpusVersion,
        relevant=judgments,
        slice=question.slice,
        notes=question.notes,
        split=question.split,
    )


@dataclass(frozen=True)
class Labeled:
    """What :func:`label` wrote: the cases added and the cases given more judgments."""

    added: list[str]
    extended: list[str]
    judgments: int


def _merge(existing: Case, case: Case, where: str) -> Case:
    if existing.query != case.query or existing.split != case.split:
        raise InputError(
            Problem(
                file=where,
                field="query",
                message=f"case '{case.queryId}' exists with another query or split",
                fix="give the case a new ID, or repeat its query and split exactly to add judgments to it",
            )
        )
    return existing.model_copy(update={"relevant": [*existing.relevant, *case.relevant]})


def label(path: str | Path, questions: Sequence[tuple[Question, str]], today: dt.date | None = None) -> Labeled:
    """Add ``questions`` (each with where it was written) to the benchmark folder ``path``: all or nothing."""
    root = Path(path)
    benchmark = load_draft(root)
    problems: list[Problem] = []
    cases = {case.queryId: case for case in benchmark.cases}
    added, extended, count = [], [], 0
    for question, where in questions:
        try:
            case = build_case(benchmark, question, where)
            if case.queryId in cases:
                cases[case.queryId] = _merge(cases[case.queryId], case, where)
                extended.append(case.queryId)
            else:
                cases[case.queryId] = case
                added.append(case.queryId)
            count += len(case.relevant)
        except InputError as exc:
            problems.extend(exc.problems)
    if problems:
        raise InputError(problems)
    before = (root / CASES_FILE).read_bytes()
    spec_before = (root / "benchmark.yaml").read_bytes()
    write_cases(root / CASES_FILE, cases.values())
    write_hashes(root)
    try:
        if benchmark.spec.predecessor is not None:
            for action, ids in (("added", added), ("judgments-added", extended)):
                if ids:
                    log_change(root, action, ids, "labelled with rageval benchmark label", today)
        load_benchmark(root, retention=False)
    except InputError:
        (root / CASES_FILE).write_bytes(before)
        (root / "benchmark.yaml").write_bytes(spec_before)
        raise
    return Labeled(added, extended, count)
