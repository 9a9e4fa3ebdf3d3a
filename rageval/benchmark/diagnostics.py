"""Easy-question and coverage diagnostics of a valid benchmark: warnings, never errors.

Per case, the lexical overlap of the query with its evidence, its documents' titles and headings,
and whether it looks generated from a heading (questions written from headings are lexically easy
and inflate scores). Per benchmark, the cases per slice and split, the coverage of the guide's
slices (:data:`GUIDE_SLICES`; missing and tiny ones listed), and slices derived from document
metadata, judgments and the query's wording shown beside the hand-written labels.

Terms: the benchmark's tokenizer (``words``), lower-cased, word tokens only, English stopwords
(bm25s's list) and question words (:data:`QUESTION_WORDS`) dropped, Snowball-stemmed. An overlap is
the share of the query's distinct terms found in the other text.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from functools import cache
from typing import Any

import Stemmer

from rageval import progress
from rageval.benchmark.loading import Benchmark
from rageval.benchmark.provenance import USER_RECORD_SOURCES
from rageval.benchmark.schema import Case, Document
from rageval.benchmark.tokenizers import get_tokenizer

with progress.no_tqdm_notice():  # bm25s imports tqdm.auto
    from bm25s.stopwords import STOPWORDS_EN

# The guide's slices and the labels that stand for them (the demo's vocabulary: rageval/demo/README.md).
GUIDE_SLICES: dict[str, tuple[str, ...]] = {
    "frequent": ("frequent",),
    "long-tail": ("long-tail",),
    "short/constrained": ("short", "constrained"),
    "exact terminology": ("exact-term",),
    "paraphrase": ("paraphrase",),
    "single/multi-document": ("single-doc", "multi-doc"),
    "time-sensitive": ("time-sensitive",),
    "negation": ("negation",),
    "permissions": ("permissions",),
    "unanswerable": ("unanswerable",),
}
# A label with fewer cases than this in a split is tiny: its mean's interval is too wide to read.
MIN_SLICE_CASES = 5
# Heading-generated: some heading (or the title) of an evidence document has at least
# HEADING_MIN_TERMS terms, HEADING_CONTAINMENT of them are in the query, and they make up at least
# HEADING_COVERAGE of the query's terms; the query restates the heading and adds little.
HEADING_MIN_TERMS = 2
HEADING_CONTAINMENT = 0.8
HEADING_COVERAGE = 0.6
# The derived 'paraphrase' label: under half the query's terms are in its best evidence passage.
PARAPHRASE_BELOW = 0.5
# The derived 'short' label: at most this many word tokens.
SHORT_WORDS = 4
# A retention date this close (days) is announced before it becomes an error.
RETENTION_NOTICE_DAYS = 30
# Document metadata summarised per case (over its evidence documents), where documents carry it.
DOCUMENT_FACETS: tuple[str, ...] = ("docType", "language", "updateFrequency")
# Question and auxiliary words: part of a query's form, not of what it asks about.
QUESTION_WORDS = frozenset(
    "what how why when where which who whom whose can could do does did should would will is are was i we my our "
    "me us you your".split()
)
# The query-intent rules (documented in docs/governance.md).
_NEGATION = re.compile(r"\b(not|no|never|without|avoid|cannot|none)\b|n't\b", re.IGNORECASE)
_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
_TIME = re.compile(
    rf"\b((19|20)\d\d|{_MONTHS}|ago|since|until|latest|current|deprecated|legacy|anymore|upgrad\w*|"
    r"v?\d+\.\d+(\.\d+)?)\b",
    re.IGNORECASE,
)
# An identifier: snake/dotted names, camelCase, UPPER_CASE codes, CLI flags.
_EXACT = re.compile(r"(--[a-z][\w-]*|\b\w+[._]\w+\b|\b[a-z]+[A-Z]\w*\b|\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b)")
_OPENERS = {
    "what": "what",
    "which": "what",
    "how": "how",
    "why": "why",
    "when": "when",
    "where": "where",
    "who": "who",
    "can": "yes-no",
    "could": "yes-no",
    "do": "yes-no",
    "does": "yes-no",
    "did": "yes-no",
    "is": "yes-no",
    "are": "yes-no",
    "should": "yes-no",
    "will": "yes-no",
}
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")


@cache
def _stemmer() -> Any:
    return Stemmer.Stemmer("english")


def terms(text: str, tokenizer: str = "words") -> frozenset[str]:
    """The distinct content terms of ``text`` (see the module's docstring)."""
    words = (text[start:end].lower() for start, end in get_tokenizer(tokenizer)(text))
    # Word tokens of two characters or more ("can't" leaves a bare 't').
    kept = [w for w in words if re.fullmatch(r"\w\w+", w) and w not in STOPWORDS_EN and w not in QUESTION_WORDS]
    return frozenset(_stemmer().stemWords(kept))


def headings(text: str) -> list[str]:
    """The markdown ``#`` headings of a text, outside fenced code."""
    out, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and (match := _HEADING.match(line)):
            out.append(match.group(2))
    return out


def _share(part: frozenset[str], whole: frozenset[str]) -> float:
    return len(part & whole) / len(part) if part else 0.0


@dataclass(frozen=True)
class CaseDiagnostics:
    """One case's overlaps (None where it has no evidence) and its derived labels."""

    queryId: str
    split: str
    labels: list[str]
    evidence: float | None  # share of the query's terms in its best evidence passage
    title: float | None  # ... in the title of an evidence document (the best)
    heading: float | None  # ... in one heading of an evidence document (the best)
    closest_heading: str | None  # the heading (or title) the query restates most
    heading_like: bool
    reasons: list[str] = field(default_factory=list)
    derived: list[str] = field(default_factory=list)  # rule-derived labels comparable to the hand-written ones
    intent: str = "keyword"  # the question form: what, how, why, when, where, who, yes-no, keyword
    facets: dict[str, list[str]] = field(default_factory=dict)  # document facet -> values of its evidence
    source: str | None = None  # provenance source, own or inherited


@dataclass(frozen=True)
class CoverageRow:
    """One hand-written label the guide asks for, counted per split."""

    guide: str
    label: str
    counts: dict[str, int]
    status: str  # ok | tiny | missing (the worst over the splits)


@dataclass(frozen=True)
class LabelComparison:
    """A hand-written label beside the same label derived by rule: how many cases each gives, and both."""

    label: str
    rule: str
    hand: int
    derived: int
    both: int


@dataclass(frozen=True)
class Diagnostics:
    """Everything ``rageval benchmark validate`` reports beyond validity."""

    benchmark: str
    splits: list[str]
    thresholds: dict[str, Any]
    cases: list[CaseDiagnostics]
    slices: dict[str, dict[str, int]]  # hand-written label -> split -> cases
    coverage: list[CoverageRow]
    comparisons: list[LabelComparison]
    facets: dict[str, dict[str, dict[str, int]]]  # facet -> value -> split -> cases
    intents: dict[str, dict[str, int]]  # question form -> split -> cases
    sources: dict[str, int]  # provenance source (or 'none') -> cases
    overlap: dict[str, float]  # hand-written label -> mean evidence overlap of its answerable cases
    warnings: list[str]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


THRESHOLDS: dict[str, Any] = {
    "min_slice_cases": MIN_SLICE_CASES,
    "heading_min_terms": HEADING_MIN_TERMS,
    "heading_containment": HEADING_CONTAINMENT,
    "heading_coverage": HEADING_COVERAGE,
    "paraphrase_below": PARAPHRASE_BELOW,
    "short_words": SHORT_WORDS,
    "retention_notice_days": RETENTION_NOTICE_DAYS,
}
# What each derived label is derived from (its rule, shown beside the comparison).
RULES: dict[str, str] = {
    "short": f"at most {SHORT_WORDS} words",
    "exact-term": "an identifier: snake_case, dotted.key, camelCase, UPPER_CODE or --flag",
    "paraphrase": f"under {PARAPHRASE_BELOW:.0%} of the query's terms in its evidence",
    "single-doc": "answerable, and no judgment of grade 2",
    "multi-doc": "a judgment of grade 2 (the rubric's 'must be combined with another passage')",
    "time-sensitive": "a date term (year, month, ago, since, latest, version…) or a judged superseded document",
    "negation": "a negation (not, no, never, without, avoid, n't…)",
    "permissions": "a principal, or restricted (acl) evidence",
    "unanswerable": "no judgment above grade 0",
}
_NEEDS_COUNTS = ("frequent", "long-tail")


def diagnose(benchmark: Benchmark, tokenizer: str = "words", today: dt.date | None = None) -> Diagnostics:
    """The diagnostics of a loaded benchmark (pure: reads nothing else); ``today`` (default: the
    current date) dates the retention notices."""
    documents = benchmark.documents
    cases = [
        _case(case, documents, tokenizer, (p.source if (p := benchmark.provenance_of(case)) else None))
        for case in benchmark.cases
    ]
    splits = list(benchmark.spec.splits)
    slices: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(splits, 0))
    facets: dict[str, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(lambda: dict.fromkeys(splits, 0)))
    intents: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(splits, 0))
    for diag in cases:
        for label in diag.labels:
            slices[label][diag.split] += 1
        for facet, values in diag.facets.items():
            for value in values:
                facets[facet][value][diag.split] += 1
        intents[diag.intent][diag.split] += 1
    coverage = [
        _coverage(guide, label, slices.get(label), splits) for guide, ls in GUIDE_SLICES.items() for label in ls
    ]
    comparisons = [
        LabelComparison(
            label=label,
            rule=rule,
            hand=sum(label in d.labels for d in cases),
            derived=sum(label in d.derived for d in cases),
            both=sum(label in d.labels and label in d.derived for d in cases),
        )
        for label, rule in RULES.items()
    ]
    sources = Counter(d.source or "none" for d in cases)
    overlaps: dict[str, list[float]] = defaultdict(list)
    for diag in cases:
        for label in diag.labels:
            if diag.evidence is not None:
                overlaps[label].append(diag.evidence)
    return Diagnostics(
        benchmark=f"{benchmark.spec.name} {benchmark.spec.version}",
        splits=splits,
        thresholds=THRESHOLDS,
        cases=cases,
        slices={label: slices[label] for label in sorted(slices)},
        coverage=coverage,
        comparisons=comparisons,
        facets={f: {v: dict(c) for v, c in sorted(values.items())} for f, values in facets.items()},
        intents={intent: intents[intent] for intent in sorted(intents)},
        sources=dict(sorted(sources.items())),
        overlap={label: sum(values) / len(values) for label, values in sorted(overlaps.items())},
        warnings=_warnings(benchmark, cases, coverage, today or dt.date.today()),
    )


def _evidence(case: Case, documents: Mapping[str, Document]) -> list[tuple[Document, str]]:
    """The case's best-graded evidence: (document, passage text) for each judgment of its top grade."""
    top = max((j.grade for j in case.relevant), default=0)
    if top <= 0:
        return []
    out = []
    for judgment in case.relevant:
        document = documents[judgment.documentId]
        if judgment.grade == top:
            span = judgment.span
            out.append((document, document.text[span[0] : span[1]] if span else document.text))
    return out


def _case(case: Case, documents: Mapping[str, Document], tokenizer: str, source: str | None) -> CaseDiagnostics:
    query = terms(case.query, tokenizer)
    evidence = _evidence(case, documents)
    reasons: list[str] = []
    evidence_share = title_share = heading_share = None
    closest: str | None = None
    heading_like = False
    if evidence:
        evidence_share = max(_share(query, terms(text, tokenizer)) for _, text in evidence)
        title_share = max(_share(query, terms(doc.title, tokenizer)) for doc, _ in evidence)
        heading_share = 0.0
        best: tuple[bool, float, float] = (False, -1.0, -1.0)
        for document in {doc.id: doc for doc, _ in evidence}.values():
            for text in (document.title, *headings(document.text)):
                heading_terms = terms(text, tokenizer)
                coverage, containment = _share(query, heading_terms), _share(heading_terms, query)
                if text != document.title:
                    heading_share = max(heading_share, coverage)
                restates = (
                    len(heading_terms) >= HEADING_MIN_TERMS
                    and containment >= HEADING_CONTAINMENT
                    and coverage >= HEADING_COVERAGE
                )
                if (restates, coverage, containment) > best:
                    best, closest = (restates, coverage, containment), text
                    what = "title" if text == document.title else "heading"
                    reason = (
                        f"restates the {what} {text!r} of {document.id} "
                        f"({containment:.0%} of its terms, {coverage:.0%} of the query's)"
                    )
        if best[0]:
            heading_like = True
            reasons.append(reason)
    if source == "heading-generated":
        heading_like = True
        reasons.append("its provenance says heading-generated")
    return CaseDiagnostics(
        queryId=case.queryId,
        split=case.split,
        labels=list(case.slice),
        evidence=evidence_share,
        title=title_share,
        heading=heading_share,
        closest_heading=closest,
        heading_like=heading_like,
        reasons=reasons,
        derived=_derived(case, documents, evidence_share),
        intent=_OPENERS.get(next(iter(re.findall(r"\w+", case.query.lower())), ""), "keyword"),
        facets=_facets(case, documents),
        source=source,
    )


def _derived(case: Case, documents: Mapping[str, Document], evidence: float | None) -> list[str]:
    """The labels of :data:`RULES` the case's wording, judgments and documents give it."""
    labels = []
    if len(re.findall(r"\w+", case.query)) <= SHORT_WORDS:
        labels.append("short")
    if _EXACT.search(case.query):
        labels.append("exact-term")
    if evidence is not None and evidence < PARAPHRASE_BELOW:
        labels.append("paraphrase")
    if case.answerable:
        labels.append("multi-doc" if any(j.grade == 2 for j in case.relevant) else "single-doc")
    judged = [documents[j.documentId] for j in case.relevant]
    if _TIME.search(case.query) or any("supersededBy" in d.metadata for d in judged):
        labels.append("time-sensitive")
    if _NEGATION.search(case.query):
        labels.append("negation")
    if case.principal is not None or any(documents[j.documentId].acl for j in case.relevant if j.grade > 0):
        labels.append("permissions")
    if not case.answerable:
        labels.append("unanswerable")
    return labels


def _facets(case: Case, documents: Mapping[str, Document]) -> dict[str, list[str]]:
    evidence = [documents[j.documentId] for j in case.relevant if j.grade > 0]
    out: dict[str, list[str]] = {}
    for facet in DOCUMENT_FACETS:
        values = sorted({str(d.metadata[facet]) for d in evidence if d.metadata.get(facet) is not None})
        if values:
            out[facet] = values
    return out


def _coverage(guide: str, label: str, counts: dict[str, int] | None, splits: list[str]) -> CoverageRow:
    counts = dict(counts or dict.fromkeys(splits, 0))
    status = "missing" if not any(counts.values()) else "tiny" if min(counts.values()) < MIN_SLICE_CASES else "ok"
    return CoverageRow(guide=guide, label=label, counts=counts, status=status)


def _warnings(
    benchmark: Benchmark, cases: list[CaseDiagnostics], coverage: list[CoverageRow], today: dt.date
) -> list[str]:
    out = []
    for row in coverage:
        if row.status == "missing":
            out.append(f"slice '{row.label}' ({row.guide}) is missing: no case carries it")
        elif row.status == "tiny":
            small = ", ".join(f"{s} {n}" for s, n in row.counts.items() if n < MIN_SLICE_CASES)
            out.append(f"slice '{row.label}' ({row.guide}) is tiny: {small} (fewer than {MIN_SLICE_CASES} cases)")
    for diag in cases:
        if diag.heading_like:
            out.append(f"case '{diag.queryId}' looks heading-generated: {'; '.join(diag.reasons)}")
    for case in benchmark.cases:
        provenance = benchmark.provenance_of(case)
        retention = provenance.retention if provenance is not None else None
        if retention is not None and (retention - today).days <= RETENTION_NOTICE_DAYS:
            out.append(
                f"case '{case.queryId}' may be used until {retention} ({(retention - today).days} days left): "
                "retire it in a new version by then, or record a renewed date"
            )
        if provenance is not None and provenance.source in USER_RECORD_SOURCES:
            absent = [name for name in ("redaction", "retention", "access") if getattr(provenance, name) is None]
            if absent:
                out.append(f"case '{case.queryId}' comes from {provenance.source} but records no {', '.join(absent)}")
    without = sum(d.source is None for d in cases)
    if without:
        out.append(f"{without} case(s) record no provenance (add a default to benchmark.yaml or a block per case)")
    return out


# --------------------------------------------------------------------------- terminal


def _counts(counts: dict[str, int]) -> str:
    return "  ".join(f"{split} {n:>3}" for split, n in counts.items())


def _percent(value: float | None) -> str:
    return "   -" if value is None else f"{value:4.0%}"


def format_report(diagnostics: Diagnostics, *, per_case: bool = False) -> Iterable[str]:
    """The diagnostics as terminal lines."""
    d = diagnostics
    answerable = [c for c in d.cases if c.evidence is not None]
    yield (
        f"slice coverage (the guide's slices; tiny: fewer than {MIN_SLICE_CASES} cases in a split; overlap: "
        "the mean share of the query's terms in its evidence):"
    )
    for row in d.coverage:
        overlap = f"  overlap {d.overlap[row.label]:.0%}" if row.label in d.overlap else ""
        yield f"  {row.guide:<22} {row.label:<15} {_counts(row.counts)}  {row.status:<7}{overlap}".rstrip()
    others = [label for label in d.slices if all(label not in ls for ls in GUIDE_SLICES.values())]
    for label in others:
        yield f"  {'(other label)':<22} {label:<15} {_counts(d.slices[label])}"
    yield f"  not derivable without query counts (from a log import): {', '.join(_NEEDS_COUNTS)}"
    yield "hand-written labels beside the rule-derived ones (cases: hand / rule / both):"
    for comp in d.comparisons:
        yield f"  {comp.label:<15} {comp.hand:>3} / {comp.derived:>3} / {comp.both:>3}   rule: {comp.rule}"
    yield "query intent (the question word it opens with): " + ", ".join(
        f"{intent} {sum(counts.values())}" for intent, counts in d.intents.items()
    )
    for facet, values in d.facets.items():
        yield f"evidence documents by {facet}: " + ", ".join(f"{v} {sum(c.values())}" for v, c in values.items())
    yield "provenance: " + ", ".join(f"{source} {n}" for source, n in d.sources.items())
    if answerable:
        mean = sum(c.evidence or 0.0 for c in answerable) / len(answerable)
        full = sum(c.evidence == 1.0 for c in answerable)
        yield (
            f"lexical overlap of query and evidence: mean {mean:.0%} over {len(answerable)} answerable cases; "
            f"{full} with every query term in the evidence; {sum(c.heading_like for c in d.cases)} heading-like"
        )
    if per_case:
        yield "per case (share of the query's terms in evidence / title / best heading):"
        for c in d.cases:
            flag = "  HEADING-LIKE" if c.heading_like else ""
            yield f"  {c.queryId:<12} {_percent(c.evidence)} {_percent(c.title)} {_percent(c.heading)}{flag}"
    for warning in d.warnings:
        yield f"warning: {warning}"
