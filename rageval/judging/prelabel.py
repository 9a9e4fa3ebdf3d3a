"""Pre-labeling a pool with a judge: every item judged blind (shuffled with a seed, nothing of its
provenance shown), its samples checked (rubric, evidence spans at their offsets), their
disagreement, failures and instruction-like text routed to human review, and what it cost.

The labels come out in the judging package's labels format (``assessor: llm:<model>@<prompt
hash>``), so they can be adjudicated beside human labels; the items that need a human come out as
a blind sheet (:class:`~rageval.judging.schema.SheetRow`) for ``rageval judge import``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from rageval.benchmark.loading import Benchmark
from rageval.judging.backends import Backend, Item, Sample, injection_flags, spans_problem
from rageval.judging.judges import Judge
from rageval.judging.pooling import rubric_text
from rageval.judging.schema import PoolItem, PoolManifest, SheetRow
from rageval.judging.sheets import LABEL_COLUMNS

STATUSES = ("labelled", "rejected", "failed")  # a label; replies, none acceptable; no reply at all


@dataclass
class ItemResult:
    """One item's outcome: final grade (the most common accepted sample grade, the lower on a tie)."""

    item: PoolItem
    status: str
    grade: int | None
    reason: str
    evidence: list[dict[str, Any]]  # offsets into the document (not the passage shown)
    grades: list[int]  # the accepted samples' grades
    samples: int
    rejected: list[str]
    failures: list[str]
    injection: list[str]
    review: list[str] = field(default_factory=list)
    attempts: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    latency_s: float = 0.0
    cost: float = 0.0


@dataclass(frozen=True)
class Prelabels:
    judge: Judge
    results: list[ItemResult]

    def labels(self) -> pd.DataFrame:
        """The accepted labels as a labels frame (``LABEL_COLUMNS``)."""
        rows = [
            (r.item.itemId, r.item.queryId, self.judge.assessor, r.grade, r.reason, f"judge {self.judge.config.name}")
            for r in self.results
            if r.status == "labelled"
        ]
        return pd.DataFrame(rows, columns=LABEL_COLUMNS).astype({"grade": np.int64})

    def table(self) -> pd.DataFrame:
        """One row per item: status, grades, review reasons, failures, injection flags, cost (no text)."""
        return pd.DataFrame(
            [
                {
                    "item_id": r.item.itemId,
                    "query_id": r.item.queryId,
                    "status": r.status,
                    "grade": r.grade,
                    "sample_grades": " ".join(map(str, r.grades)),
                    "samples": r.samples,
                    "review": bool(r.review),
                    "review_reasons": "; ".join(r.review),
                    "injection": " ".join(r.injection),
                    "rejected": " | ".join(r.rejected),
                    "failures": " | ".join(r.failures),
                    "attempts": r.attempts,
                    "tokens_in": r.tokens_in,
                    "tokens_out": r.tokens_out,
                    "cost": r.cost,
                    "latency_s": r.latency_s,
                    "slice": " ".join(r.item.slice),
                }
                for r in self.results
            ]
        )

    def summary(self) -> dict[str, float]:
        table = self.table()
        counts = Counter(table["status"]) if len(table) else Counter()
        return {
            "items": float(len(table)),
            **{f"items_{s}": float(counts.get(s, 0)) for s in STATUSES},
            "review": float(table["review"].sum()) if len(table) else 0.0,
            "injection_flagged": float((table["injection"] != "").sum()) if len(table) else 0.0,
            "samples_disagree": float(sum("samples disagree" in r.review for r in self.results)),
            "attempts": float(table["attempts"].sum()) if len(table) else 0.0,
            "tokens_in": float(table["tokens_in"].sum()) if len(table) else 0.0,
            "tokens_out": float(table["tokens_out"].sum()) if len(table) else 0.0,
            "cost": float(table["cost"].sum()) if len(table) else 0.0,
            "latency_s": float(table["latency_s"].sum()) if len(table) else 0.0,
        }


def shown(item: PoolItem, benchmark: Benchmark) -> tuple[str, str]:
    """The title and text a judge (and a human) sees of an item: its passage, or the whole document."""
    document = benchmark.documents[item.documentId]
    text = document.text if item.start is None else document.text[item.start : item.end]
    return document.title or "", text


def prelabel(
    manifest: PoolManifest,
    benchmark: Benchmark,
    judge: Judge,
    backend: Backend,
    *,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> Prelabels:
    """Judge every item of ``manifest`` in a seeded random order; see the module docstring."""
    cases = {case.queryId: case for case in benchmark.cases}
    order = np.random.default_rng(seed).permutation(len(manifest.items))
    results = []
    for done, index in enumerate(order, start=1):
        pooled = manifest.items[int(index)]
        title, text = shown(pooled, benchmark)
        item = Item(item_id=pooled.itemId, query=cases[pooled.queryId].query, title=title, text=text)
        results.append(_judge_item(pooled, item, judge, backend))
        if progress:
            progress(done, len(order))
    order_back = {item.itemId: i for i, item in enumerate(manifest.items)}
    results.sort(key=lambda r: order_back[r.item.itemId])  # reported in the pool's (blind) order
    return Prelabels(judge=judge, results=results)


def _samples_for(item: PoolItem, judge: Judge) -> int:
    sampling = judge.config.sampling
    ranks = [f.rank for f in item.found if f.rank is not None]
    high = bool(ranks) and min(ranks) <= sampling.high_impact_rank
    return max(sampling.samples, sampling.high_impact_samples) if high else sampling.samples


def _screened(runs: list[Sample], item: Item, judge: Judge) -> tuple[list[Sample], list[str], list[str]]:
    """The samples whose reply keeps to the rubric and quotes the document at its offsets, why each
    other reply was rejected, and every error (retried attempts too: they cost time and tokens)."""
    accepted: list[Sample] = []
    rejected: list[str] = []
    failures: list[str] = []
    for sample in runs:
        failures.extend(sample.errors)
        if sample.reply is None:
            continue
        why = spans_problem(sample.reply, item.text, list(judge.config.rubric))
        if why:
            rejected.append(why)
        else:
            accepted.append(sample)
    return accepted, rejected, failures


def _majority(accepted: list[Sample], grades: list[int], offset: int) -> tuple[int | None, str, list[dict[str, Any]]]:
    """The most common grade (the lower on a tie), with the reason and evidence of the first sample
    that gave it; the evidence's offsets are moved from the passage shown into the document."""
    if not grades:
        return None, "", []
    counts = Counter(grades)
    grade = min(g for g, n in counts.items() if n == max(counts.values()))
    chosen = next(s.reply for s in accepted if s.reply and s.reply.grade == grade)
    assert chosen is not None
    evidence = [{"start": s.start + offset, "end": s.end + offset, "text": s.text} for s in chosen.evidence]
    return grade, chosen.reason, evidence


def _judge_item(pooled: PoolItem, item: Item, judge: Judge, backend: Backend) -> ItemResult:
    config = judge.config
    offset = pooled.start or 0
    flags = sorted(set(injection_flags(item.text)) | set(injection_flags(item.title)))
    runs: list[Sample] = [backend(item, k) for k in range(_samples_for(pooled, judge))]
    accepted, rejected, failures = _screened(runs, item, judge)
    grades = [s.reply.grade for s in accepted if s.reply]
    status = "labelled" if accepted else "rejected" if rejected else "failed"
    grade, reason, evidence = _majority(accepted, grades, offset)
    review = []
    if flags:
        review.append(f"instruction-like text in the document ({', '.join(flags)})")
    if len(set(grades)) > 1:
        review.append(f"samples disagree ({' '.join(map(str, grades))})")
    if any(s.uncertain for s in accepted):
        review.append("score at a grade threshold")
    if status != "labelled":
        review.append(f"no acceptable label ({status})")
    elif rejected or any(s.reply is None for s in runs):
        review.append("some samples failed or were rejected")
    tokens_in = sum(s.tokens_in for s in runs)
    tokens_out = sum(s.tokens_out for s in runs)
    backend_config = config.backend
    cost = tokens_in * getattr(backend_config, "price_per_input_token", 0.0) + tokens_out * getattr(
        backend_config, "price_per_output_token", 0.0
    )
    return ItemResult(
        item=pooled,
        status=status,
        grade=grade,
        reason=reason,
        evidence=evidence,
        grades=grades,
        samples=len(runs),
        rejected=rejected,
        failures=failures,
        injection=flags,
        review=review,
        attempts=sum(s.attempts for s in runs),
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        latency_s=sum(s.latency_s for s in runs),
        cost=float(cost),
    )


def review_sheet(result: Prelabels, benchmark: Benchmark) -> list[SheetRow]:
    """A blind sheet of the items routed to review, for human assessors (``rageval judge import``)."""
    cases = {case.queryId: case for case in benchmark.cases}
    rubric = rubric_text(result.judge.config.rubric)
    rows = []
    for r in result.results:
        if r.review:
            title, text = shown(r.item, benchmark)
            rows.append(
                SheetRow(
                    itemId=r.item.itemId,
                    queryId=r.item.queryId,
                    query=cases[r.item.queryId].query,
                    title=title,
                    text=text,
                    rubric=rubric,
                )
            )
    return rows


def detail(result: Prelabels) -> Sequence[dict[str, Any]]:
    """One record per item for ``prelabels.jsonl``: the table's row plus the reason and evidence."""
    table = result.table().to_dict(orient="records")
    return [
        {**row, "assessor": result.judge.assessor, "reason": r.reason, "evidence": r.evidence}
        for row, r in zip(table, result.results, strict=True)
    ]
