"""Whether two recorded runs' numbers mean the same thing: the one check every comparison and gate
makes before reading a run's scores against another's.

Two runs are comparable when they were measured on the same benchmark content (corpus, cases and
qrels hashes), the same split and evaluation level, under the same metric contract and evaluation
options, and, where passage-level measures matched chunk IDs (contracts before passages were graded
on judged spans), the same chunking.
"""

from __future__ import annotations

from collections.abc import Sequence

from rageval.analysis.records import RunInfo
from rageval.errors import ComparisonError
from rageval.evaluation.contract import grades_spans

SPLIT_TAG = "rageval.split"
LEVEL_TAG = "rageval.level"
# What must match for two runs' numbers to mean the same thing (tag → what it is).
CONTRACT_TAGS: dict[str, str] = {
    "rageval.hash.corpus": "corpus hash",
    "rageval.hash.cases": "cases hash",
    "rageval.hash.qrels": "qrels hash",
    SPLIT_TAG: "split",
    LEVEL_TAG: "evaluation level",
}
CHUNKING_TAG = "rageval.chunking.hash"
CONTRACT_PARAM = "metrics.contract"
# The evaluation options the contract leaves to the configuration: one param, ``evaluation`` =
# ``ties=docid-asc; duplicates=…; relevance=1; gain=…`` (runs recorded before 2026-12: a param each,
# ``evaluation.ties`` …, still read). One column of the runs table instead of four.
EVALUATION_PARAM = "evaluation"
EVALUATION_OPTIONS = ("ties", "duplicates", "relevance", "gain")
# The contract's version and rule digest, and the evaluation options.
CONTRACT_PARAMS = (CONTRACT_PARAM, "metrics.contract_digest", EVALUATION_PARAM)


def evaluation_param(options: dict[str, object]) -> str:
    """The ``evaluation`` param's value: each option as ``name=value``, in a fixed order."""
    return "; ".join(f"{k}={options[k]}" for k in EVALUATION_OPTIONS)


def evaluation_options(params: dict[str, str]) -> dict[str, str | None]:
    """A run's evaluation options, from its one ``evaluation`` param or its older ``evaluation.*``."""
    folded = params.get(EVALUATION_PARAM)
    if folded is None:
        return {k: params.get(f"evaluation.{k}") for k in EVALUATION_OPTIONS}
    pairs = dict(item.split("=", 1) for item in folded.split("; ") if "=" in item)
    return {k: pairs.get(k) for k in EVALUATION_OPTIONS}


def short_value(value: str | None) -> str:
    """A recorded value as a message shows it: hashes cut to their head."""
    if value is None:
        return "nothing recorded"
    return f"{value[:12]}…" if len(value) > 16 else value


def differences(baseline: RunInfo, candidate: RunInfo) -> list[str]:
    """Every way ``candidate``'s numbers would mean something else than ``baseline``'s."""
    out = []
    b, c = baseline.run_id[:8], candidate.run_id[:8]
    for tag, what in CONTRACT_TAGS.items():
        before, after = baseline.tags.get(tag), candidate.tags.get(tag)
        if before != after:
            out.append(
                f"{what} differs ({tag}): baseline {b} has {short_value(before)}, candidate {c} has {short_value(after)}"
            )
    # Document-level measures roll chunks up to their parents, so only passage level sees the chunking,
    # and only where passages were matched by chunk ID: graded on judged spans, any chunkings compare.
    levels = {baseline.tags.get(LEVEL_TAG), candidate.tags.get(LEVEL_TAG)}
    by_spans = all(grades_spans(r.params.get(CONTRACT_PARAM)) for r in (baseline, candidate))
    if "passage" in levels and not by_spans and baseline.tags.get(CHUNKING_TAG) != candidate.tags.get(CHUNKING_TAG):
        out.append(
            f"chunking differs ({CHUNKING_TAG}) and passage-level measures count chunks: baseline {b} has "
            f"{short_value(baseline.tags.get(CHUNKING_TAG))}, candidate {c} has {short_value(candidate.tags.get(CHUNKING_TAG))}"
        )
    options = evaluation_options(baseline.params), evaluation_options(candidate.params)
    for option in EVALUATION_OPTIONS:
        before, after = options[0][option], options[1][option]
        if before != after:
            out.append(
                f"metric contract differs ({EVALUATION_PARAM}: {option}): baseline {b} has {short_value(before)}, "
                f"candidate {c} has {short_value(after)}"
            )
    for param in CONTRACT_PARAMS[:2]:
        before, after = baseline.params.get(param), candidate.params.get(param)
        if before != after:
            out.append(
                f"metric contract differs ({param}): baseline {b} has {short_value(before)}, candidate {c} has {short_value(after)}"
            )
    return out


def check_comparable(baseline: RunInfo, candidates: Sequence[RunInfo], *, allow_mismatch: bool = False) -> list[str]:
    """Refuse unsealed runs, and runs whose contract differs unless ``allow_mismatch``; return the
    differences found (to be recorded when allowed)."""
    unsealed = [f"run {r.run_id} is {r.status} and not sealed" for r in (baseline, *candidates) if not r.sealed]
    if unsealed:
        raise ComparisonError("only sealed runs are results; these are not:", differences=unsealed)
    found = [d for candidate in candidates for d in differences(baseline, candidate)]
    if found and not allow_mismatch:
        raise ComparisonError(
            "the runs are not comparable (pass --allow-mismatch to compare anyway; it is recorded):", differences=found
        )
    return found
