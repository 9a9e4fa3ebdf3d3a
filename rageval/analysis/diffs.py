"""Why per-query scores changed: each run's ranking in the order its measures saw it, the recall
curve over k, and the largest gains and losses explained by the relevant items' ranks and the chunks
that entered, left or moved in the top of the ranking.

The explanations quote the corpus and the cases (query text, IDs, snippets): their text is stripped
of control sequences here; HTML is escaped where they are displayed (:func:`rageval.safety.styled`)
and formulas neutralised where they are written as CSV (:func:`rageval.safety.csv_bytes`)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from rageval.benchmark.chunking import parent_of
from rageval.config.schema import RunConfig
from rageval.evaluation import ContractOptions, evaluate, order_ranking
from rageval.evaluation.spans import Evidence, graded_ranking
from rageval.experiment.run import level_run
from rageval.safety import strip_control

DIFF_COLUMNS = [
    "run",
    "change",
    "query_id",
    "query",
    "measure",
    "baseline",
    "candidate",
    "delta",
    "relevant_ranks",
    "moved_chunks",
]


@dataclass(frozen=True)
class Judgments:
    """What a diff needs from the benchmark: judgments at the runs' level, query and chunk texts."""

    level: str
    # query → evaluated item (document ID) → grade; at passage level the judged spans
    qrels: dict[str, dict[str, int]] | Evidence
    queries: dict[str, str]
    texts: dict[str, str]  # chunk (or passage) ID → text, for every run compared


def ordered(rankings: pd.DataFrame, config: RunConfig, level: str) -> pd.DataFrame:
    """A run's ranking at ``level`` in the order its measures saw it (tie and duplicate policy applied)."""
    return order_ranking(level_run(rankings, level), config.evaluation.ties, config.evaluation.duplicates)


def recall_curve(
    ranking: pd.DataFrame,
    qrels: Mapping[str, Mapping[str, int]] | Evidence,
    queries: Sequence[str],
    ks: Sequence[int],
    relevance: int = 1,
) -> pd.Series:
    """Mean R@k over ``queries`` at each k, computed by :func:`rageval.evaluation.evaluate` under the
    metric contract (queries without a relevant item are not averaged). ``ranking`` is already in
    its decided order (see :func:`ordered`)."""
    ks = sorted({int(k) for k in ks})
    index = pd.Index(ks, name="k")
    judged: Mapping[str, Mapping[str, int]] | Evidence
    if isinstance(qrels, Evidence):
        judged = qrels.subset(queries)
        names = set(judged.query.tolist())
    else:
        judged = {q: qrels[q] for q in queries if q in qrels}
        names = set(judged)
    if not names:
        return pd.Series(np.nan, index=index, name="recall")
    evaluation = evaluate(
        ranking[ranking["query_id"].isin(names)],
        judged,
        [f"R@{k}" for k in ks],
        ContractOptions(ties="input-order", relevance=relevance),
    )
    return pd.Series(evaluation.aggregates.to_numpy(), index=index, name="recall")


def _snippet(text: str, width: int = 140) -> str:
    return textwrap.shorten(" ".join(strip_control(text).split()), width=width, placeholder=" …")


def explain_query(
    query_id: str,
    judgments: Judgments,
    before: tuple[pd.DataFrame, pd.DataFrame],
    after: tuple[pd.DataFrame, pd.DataFrame],
    *,
    depth: int = 10,
    moved: int = 4,
) -> dict[str, Any]:
    """Why one query's score changed. ``before``/``after``: (ranking at the evaluated level,
    chunk ranking) of the baseline and the candidate. Returns the query text, each relevant item's
    rank before → after, and the chunks that entered, left or moved within the top ``depth``."""

    def ranks(frame: pd.DataFrame, column: str) -> dict[str, int]:
        rows = frame[frame["query_id"] == query_id]
        return dict(zip(rows[column].astype(str), rows["rank"].astype(int), strict=True))

    chunk_before, chunk_after = ranks(before[1], "chunk_id"), ranks(after[1], "chunk_id")
    shown = {c for c, r in chunk_before.items() if r <= depth} | {c for c, r in chunk_after.items() if r <= depth}

    def change(chunk: str) -> tuple[float, str]:
        # A chunk absent from a ranking counts as far below it, so entering or leaving sorts first.
        a, b = chunk_before.get(chunk), chunk_after.get(chunk)
        gap = abs((a or depth * 10) - (b or depth * 10))
        return (-gap, chunk)

    if isinstance(judgments.qrels, Evidence):
        relevant, grade_of = _span_changes(query_id, judgments.qrels, before[0], after[0])
    else:
        grades = judgments.qrels.get(query_id, {})
        level_before, level_after = ranks(before[0], "doc_id"), ranks(after[0], "doc_id")
        relevant = [
            {"item": item, "grade": grade, "before": level_before.get(item), "after": level_after.get(item)}
            for item, grade in sorted(grades.items(), key=lambda kv: (-kv[1], kv[0]))
            if grade > 0
        ]

        def grade_of(chunk: str) -> int | None:
            # Document-level qrels grade the chunk's parent.
            return int(grades.get(parent_of(chunk), 0))

    movers = [c for c in sorted(shown, key=change) if chunk_before.get(c) != chunk_after.get(c)][:moved]
    return {
        "query_id": query_id,
        "query": strip_control(judgments.queries.get(query_id, "")),
        "relevant": relevant,
        "moved": [
            {
                "chunk_id": c,
                "before": chunk_before.get(c),
                "after": chunk_after.get(c),
                "grade": grade_of(c),
                "snippet": _snippet(judgments.texts.get(c, "")),
            }
            for c in movers
        ],
    }


def _span_changes(
    query_id: str, evidence: Evidence, before: pd.DataFrame, after: pd.DataFrame
) -> tuple[list[dict[str, Any]], Callable[[str], int | None]]:
    """Graded on spans: each relevant judged span's rank before → after (the rank of the passage
    credited with it), and each passage's grade in the ranking it is in (None: unjudged)."""
    one = evidence.subset([query_id])
    graded = {}
    for name, ranking in (("before", before), ("after", after)):
        rows, spans = graded_ranking(ranking[ranking["query_id"] == query_id], one, ties="input-order")
        graded[name] = (rows, spans)
    spans_before, spans_after = graded["before"][1], graded["after"][1]
    relevant = [
        {
            "item": span,
            "grade": int(grade),
            "before": None if pd.isna(rank) else int(rank),
            "after": None if pd.isna(spans_after.at[index, "rank"]) else int(spans_after.at[index, "rank"]),
        }
        for index, (span, grade, rank) in enumerate(
            zip(spans_before["span"], spans_before["grade"], spans_before["rank"], strict=True)
        )
        if grade > 0
    ]
    relevant.sort(key=lambda r: (-r["grade"], r["item"]))
    grades: dict[str, float] = {}
    for rows, _ in (graded["before"], graded["after"]):
        grades.update(zip(rows["doc_id"], rows["grade"], strict=True))

    def grade_of(passage: str) -> int | None:
        value = grades.get(passage)
        return None if value is None or pd.isna(value) else int(value)

    return relevant, grade_of


def _rank_text(value: int | None) -> str:
    return "–" if value is None else str(value)


def _grade_text(value: int | None) -> str:
    return "unjudged" if value is None else f"grade {value}"


def diff_table(
    deltas: pd.DataFrame,
    measure: str,
    judgments: Judgments,
    rankings: Mapping[str, tuple[pd.DataFrame, pd.DataFrame]],
    baseline: str,
    *,
    top_n: int = 10,
    depth: int = 10,
) -> pd.DataFrame:
    """The ``top_n`` largest gains and losses on ``measure`` per candidate, explained."""
    rows = []
    for run, group in deltas[deltas["measure"] == measure].groupby("run", sort=False):
        gains = group[group["delta"] > 0].sort_values(["delta", "query_id"], ascending=[False, True]).head(top_n)
        losses = group[group["delta"] < 0].sort_values(["delta", "query_id"], ascending=[True, True]).head(top_n)
        for kind, chosen in (("gain", gains), ("loss", losses)):
            for item in chosen.itertuples(index=False):
                why = explain_query(str(item.query_id), judgments, rankings[baseline], rankings[str(run)], depth=depth)
                rows.append(
                    {
                        "run": run,
                        "change": kind,
                        "query_id": item.query_id,
                        "query": why["query"],
                        "measure": measure,
                        "baseline": item.baseline,
                        "candidate": item.candidate,
                        "delta": item.delta,
                        "relevant_ranks": strip_control(
                            "; ".join(
                                f"{r['item']} (grade {r['grade']}): {_rank_text(r['before'])} → {_rank_text(r['after'])}"
                                for r in why["relevant"]
                            )
                        ),
                        "moved_chunks": strip_control(
                            "\n".join(
                                f"{m['chunk_id']} ({_grade_text(m['grade'])}): {_rank_text(m['before'])} → {_rank_text(m['after'])} “{m['snippet']}”"
                                for m in why["moved"]
                            )
                        ),
                    }
                )
    return pd.DataFrame(rows, columns=DIFF_COLUMNS)
