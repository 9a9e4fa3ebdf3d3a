"""The metric contract: every rule rageval's measures follow, versioned and machine-readable.

Two tools can use the same metric name while differing on edge cases (ties, duplicates, a query
with nothing relevant). rageval decides each case once, here. A run records
:func:`contract_record` (the version, every rule, the options it chose); comparisons call
:func:`require_same_contract` and refuse runs whose records differ unless told otherwise.

Changing any text in :data:`RULES` changes :data:`CONTRACT_DIGEST`; a test pins the digest of each
version, so a rule cannot change without bumping :data:`CONTRACT`. ``docs/metric-contract.md`` is
the same contract for people.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Literal, get_args

from rageval.errors import ComparisonError, EvaluationError

CONTRACT = "rageval-metrics/4"
# From this version on, passage-level measures grade passages on judged spans, so runs with different
# chunkings (or a system's own passages) are comparable at passage level.
SPANS_SINCE = 4

# Each choice list is written once, as the Literal that pydantic models and signatures use; the tuple
# (messages, CLI choices) and the rule's choices in RULES (the docs, the digest) are read from it.
TiePolicy = Literal["docid-asc", "docid-desc", "input-order"]
DuplicatePolicy = Literal["keep-first", "error"]
MissingPolicy = Literal["zero", "skip"]
NoRelevantPolicy = Literal["skip", "score"]
Gain = Literal["grade", "exp"]

TIE_POLICIES: tuple[TiePolicy, ...] = get_args(TiePolicy)
DUPLICATE_POLICIES: tuple[DuplicatePolicy, ...] = get_args(DuplicatePolicy)
MISSING_POLICIES: tuple[MissingPolicy, ...] = get_args(MissingPolicy)
NO_RELEVANT_POLICIES: tuple[NoRelevantPolicy, ...] = get_args(NoRelevantPolicy)
GAINS: tuple[Gain, ...] = get_args(Gain)


def _choices(options: tuple[str, ...], texts: dict[str, str]) -> dict[str, str]:
    """A rule's choices: one text for each option of its Literal, in the Literal's order."""
    if tuple(texts) != options:
        raise ValueError(f"the rule describes choices {tuple(texts)}, but its options are {options}")
    return texts


# Each rule: what it says, and for rules with options, the choices (registries: their keys are the
# valid values) and the default.
RULES: dict[str, dict[str, Any]] = {
    "measures": {
        "rule": "Measures are written as ir-measures names them and parsed once; Hit@k is an alias of Success@k, "
        "MRR of RR. Values equal trec_eval's measure of the same definition.",
        "definitions": {
            "P@k": "relevant items in the first k, divided by k (trec_eval P_k)",
            "R@k": "relevant items in the first k, divided by all relevant items in the qrels (trec_eval recall_k)",
            "Success@k": "1 if at least one relevant item is in the first k, else 0 (alias Hit@k). It can hide "
            "failure on multi-evidence questions: one of three needed passages already scores 1",
            "RR": "1 / rank of the first relevant item, 0 if none is retrieved (trec_eval recip_rank); RR@k looks "
            "only at the first k; alias MRR, the mean over queries",
            "AP": "sum of the precision at the rank of each retrieved relevant item, divided by all relevant items "
            "(trec_eval map); AP@k counts only the first k",
            "Rprec": "relevant items in the first R, divided by R, where R is the number of relevant items "
            "(trec_eval Rprec)",
            "nDCG@k": "sum over the first k of gain(grade) / log2(rank + 1), divided by the same sum for the ideal "
            "ordering of every judged grade of the query; 0 where that ideal is 0 (trec_eval ndcg_cut)",
            "Judged@k": "items in the first k that have any judgment in the qrels (grade 0 and negative grades "
            "count as judged), divided by the number of items in the first k (0 for an empty ranking)",
        },
    },
    "relevance": {
        "rule": "For binary measures (P, R, Success, RR, AP, Rprec) an item is relevant when its grade is at least "
        "the threshold; a measure's own rel=... parameter overrides it. nDCG gains ignore the threshold; a query is "
        "answerable when some item reaches it.",
        "default": 1,
    },
    "gain": {
        "rule": "nDCG's gain for a grade; grades <= 0 gain nothing.",
        "choices": _choices(GAINS, {"grade": "gain = grade (trec_eval ndcg_cut)", "exp": "gain = 2^grade - 1"}),
        "default": "grade",
    },
    "ties": {
        "rule": "Equal scores within a query are ordered by one explicit policy before any measure is computed; "
        "the ranking is then evaluated in exactly that order. The tie rate (see diagnostics) shows how often it "
        "mattered.",
        "choices": _choices(
            TIE_POLICIES,
            {
                "docid-asc": "score descending, then document ID ascending (byte order)",
                "docid-desc": "score descending, then document ID descending: trec_eval's own rule",
                "input-order": "the order the producer gave: the rank column where there is one, else row order; "
                "scores are ignored",
            },
        ),
        "default": "docid-asc",
    },
    "duplicates": {
        "rule": "An ID repeated within one query's ranking (after the tie policy).",
        "choices": _choices(
            DUPLICATE_POLICIES,
            {
                "keep-first": "the first occurrence counts; later ones are dropped (ranks close up) and counted",
                "error": "the evaluation fails and names the repeated IDs",
            },
        ),
        "default": "keep-first",
    },
    "fewer_than_k": {
        "rule": "A ranking shorter than k is not padded: P@k still divides by k, as trec_eval does; Judged@k "
        "divides by the items there are (as ir-measures); R@k, nDCG@k and the rest look at what there is.",
    },
    "unjudged": {
        "rule": "An item with no judgment counts as not relevant (gain 0). Judged@k and the number of unjudged "
        "items in the first k are reported per query, so a system that finds unjudged evidence is visible.",
    },
    "no_relevant": {
        "rule": "A query the qrels judge (at least one judgment) but with no item at or above the relevance "
        "threshold. A query without any judgment (an unanswerable case, or one the qrels do not name) gets no value "
        "under either choice and is listed as skipped.",
        "choices": _choices(
            NO_RELEVANT_POLICIES,
            {
                "skip": "it gets no value for any ranking measure: excluded from means and listed as skipped "
                "(ir-measures would score it 0 and average it in)",
                "score": "it is scored like any judged query (0 on the binary measures; nDCG from its positive grades, "
                "0 where it has none) and counts in the means; absent from the run, it follows the missing rule: "
                "trec_eval's rule",
            },
        ),
        "default": "skip",
    },
    "missing": {
        "rule": "A query that would be scored (answerable; under no_relevant=score, any judged query) but is absent "
        "from the run.",
        "choices": _choices(
            MISSING_POLICIES,
            {
                "zero": "it scores 0 on every measure and counts in the means (trec_eval -c)",
                "skip": "it gets no value (trec_eval's default)",
            },
        ),
        "default": "zero",
    },
    "unanswerable": {
        "rule": "Stated apart from the ranking measures. For queries with no relevant item a retrieval abstains "
        "when its top score is below a confidence threshold, or it returned nothing. Reported: the abstention rate "
        "and the false-confidence rate (top score at or above the threshold) on the unanswerable slice; with "
        "answerable queries, the wrongful-abstention rate on those.",
    },
    "levels": {
        "rule": "A passage-level run is graded on judged spans (the passages rule), and rolled up to parent "
        "documents against document qrels: each parent once, at the rank and score of its best-ranked passage, "
        "ranks renumbered. Both are labelled.",
    },
    "passages": {
        "rule": "At passage level a retrieved passage (a chunk, another system's passage given by offsets or text, "
        "or a whole document) is a character span of a document, graded against the judged spans, not by ID. A "
        "judgment without a span spans its whole document. A passage covers a judged span of its document when "
        "they overlap by at least half the shorter of the two; a passage that is exactly a judged span covers only "
        "the spans it equals (its assessor's grade stands). Each judged span is credited once, to the first "
        "passage in the decided order that covers it. A passage's grade is the highest grade credited to it; a "
        "passage covering only spans credited earlier is judged with grade 0; a passage covering no judged span "
        "is unjudged. The judged items are the spans: R@k counts spans credited within k, AP averages over "
        "relevant spans the precision at the rank of the passage credited with each, Rprec counts spans credited "
        "within R, and nDCG's ideal ranks each span's grade once. With whole-document passages and judgments "
        "this is matching by ID.",
    },
    "evidence": {
        "rule": "Per evaluated query, over the context handed to generation (the final ranking's first final_k "
        "passages after deduplication and the token budget), counted in the tokens the context budget is stated "
        "in, each token once however many passages or spans hold it (a token belongs to a span when its first "
        "character does): evidence is the judged spans graded at or above the relevance threshold; "
        "evidence_recall = evidence tokens in the context / evidence tokens; evidence_precision = evidence tokens "
        "in the context / context tokens (0 for an empty context); evidence_iou = evidence tokens in the context / "
        "tokens in the evidence or the context.",
    },
    "diagnostics": {
        "rule": "Per evaluated query, at a depth (default 10): Judged@depth, unjudged items in the first depth, "
        "tie rate (adjacent pairs of equal scores among the first depth results, divided by the number of "
        "adjacent pairs; no value with fewer than two results) and duplicates dropped; with their means.",
        "default_depth": 10,
    },
}

DEFAULT_DEPTH: int = RULES["diagnostics"]["default_depth"]


def grades_spans(version: str | None) -> bool:
    """Whether a run recorded under contract ``version`` graded its passages on judged spans."""
    prefix, _, number = (version or "").rpartition("/")
    return prefix == "rageval-metrics" and number.isdigit() and int(number) >= SPANS_SINCE


def check_choice(what: str, value: object, choices: tuple[str, ...]) -> None:
    """Refuse (:class:`EvaluationError`) a ``value`` that is not one of ``choices``, naming them."""
    if value not in choices:
        raise EvaluationError(f"unknown {what} {value!r}; valid choices are {', '.join(choices)}")


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=True).encode()).hexdigest()


CONTRACT_DIGEST = _digest(RULES)


def contract_record(**options: Any) -> dict[str, Any]:
    """What a run records: the version, the digest and full text of every rule, and its options
    (``ties``, ``duplicates``, ``missing``, ``no_relevant``, ``relevance``, ``gain``, ``depth`` …)."""
    return {
        "version": CONTRACT,
        "digest": CONTRACT_DIGEST,
        "rules": json.loads(json.dumps(RULES)),
        "options": dict(sorted(options.items())),
    }


def contract_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """Each way two contract records differ, as readable lines; empty when they are the same."""
    out = []
    if a.get("version") != b.get("version"):
        out.append(f"contract version {a.get('version')!r} != {b.get('version')!r}")
    elif a.get("digest") != b.get("digest") or a.get("rules") != b.get("rules"):
        out.append(f"contract {a.get('version')!r}: rule texts differ (digest {a.get('digest')} != {b.get('digest')})")
    options_a, options_b = a.get("options", {}), b.get("options", {})
    for name in sorted(set(options_a) | set(options_b)):
        if options_a.get(name, "<absent>") != options_b.get(name, "<absent>"):
            out.append(f"option {name}: {options_a.get(name, '<absent>')!r} != {options_b.get(name, '<absent>')!r}")
    return out


def require_same_contract(a: Mapping[str, Any], b: Mapping[str, Any], *, allow_different: bool = False) -> list[str]:
    """Refuse (:class:`ComparisonError`) two records that differ, unless ``allow_different``;
    returns the differences either way so a comparison can show them."""
    differences = contract_differences(a, b)
    if differences and not allow_different:
        raise ComparisonError(
            "the runs were measured under different metric contracts; re-evaluate one of them, or compare "
            "anyway with allow_different=True (the differences are shown with the comparison)",
            differences=differences,
        )
    return differences
