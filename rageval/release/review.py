"""Human review of a gate (or comparison): which queries a person should look at, the two runs'
top results side by side, the review sheet's rows and their validation, and the scripted
decisions of the demo. Pure functions over per-query scores, rankings and judgments.

A query is *selected* for one or more reasons: one of the ``n`` largest losses or gains on the
measure, a critical-slice or permission query whose top ``k`` changed, a query the gate flagged
(its largest losses, a candidate permission leak), or a query an earlier review rejected and has not
seen resolved. *Lost evidence* is a document judged relevant (grade > 0) that the baseline had in its
top ``k`` and the candidate has not. A *rejection is resolved* when a later review, started with
``--resolves`` the earlier one, decides that query ``accept`` with a note saying why."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd
from pydantic import StrictStr

from rageval.errors import Problem
from rageval.validation import At, Slug, Strict, shorten, valid_rows

Choice = Literal["accept", "reject", "needs-judgment"]
DECISIONS: tuple[str, ...] = ("accept", "reject", "needs-judgment")
SCRIPTED_REVIEWER = "scripted-demo"
# A ranking's top k as (item, document) pairs, best first.
Top = Mapping[str, Sequence[tuple[str, str]]]
TEXT_CHARS = 160


def top_k(rankings: pd.DataFrame, k: int) -> dict[str, list[tuple[str, str]]]:
    """Each query's first ``k`` ranked items (``chunk_id``, ``parent_id``), best first."""
    ordered = rankings.sort_values(["query_id", "rank"], kind="stable")
    out: dict[str, list[tuple[str, str]]] = {}
    for query_id, chunk, parent in ordered[["query_id", "chunk_id", "parent_id"]].itertuples(index=False):
        items = out.setdefault(str(query_id), [])
        if len(items) < k:
            items.append((str(chunk), str(parent)))
    return out


def changed(query_id: str, before: Top, after: Top) -> bool:
    """Whether the two top-k item lists differ (order counts)."""
    return [c for c, _ in before.get(query_id, ())] != [c for c, _ in after.get(query_id, ())]


def lost_evidence(query_id: str, before: Top, after: Top, grades: Mapping[str, Mapping[str, int]]) -> list[str]:
    """Documents judged relevant that the baseline's top k holds and the candidate's does not."""
    kept = {parent for _, parent in after.get(query_id, ())}
    judged = grades.get(query_id, {})
    lost = [p for _, p in before.get(query_id, ()) if judged.get(p, 0) > 0 and p not in kept]
    return list(dict.fromkeys(lost))


def new_unjudged(query_id: str, before: Top, after: Top, grades: Mapping[str, Mapping[str, int]]) -> list[str]:
    """Unjudged documents in the candidate's top k that the baseline's top k lacks: what a judgment
    pool must grade before the candidate's figures can be trusted for this query."""
    seen = {parent for _, parent in before.get(query_id, ())}
    judged = grades.get(query_id, {})
    return list(dict.fromkeys(p for _, p in after.get(query_id, ()) if p not in judged and p not in seen))


@dataclass(frozen=True)
class Focus:
    """What draws a query to review besides the scores: the ``n`` largest losses and gains, the
    ``critical`` slices (``slices``: each query's labels) and the ``permission`` queries whose top
    ``k`` changed, the gate's ``flagged`` queries with their reasons, and the queries an earlier review
    rejected and left open (``carried``)."""

    n: int
    slices: Mapping[str, Sequence[str]]
    critical: Collection[str]
    permission: Collection[str]
    flagged: Mapping[str, Sequence[str]] = field(default_factory=dict)
    carried: Collection[str] = ()


def select(before: pd.Series, after: pd.Series, focus: Focus, base_top: Top, cand_top: Top) -> pd.DataFrame:
    """The queries to review: ``query_id``, ``reasons`` (``;``-joined), ``baseline``, ``candidate``,
    ``delta`` of the measure whose per-query scores ``before`` and ``after`` are; worst delta first."""
    both = before.index.intersection(after.index)
    delta = (after[both] - before[both]).astype(float)
    ranked = pd.DataFrame({"delta": delta, "id": delta.index}).sort_values(["delta", "id"], kind="stable")
    reasons: dict[str, list[str]] = {}

    def add(query_id: str, reason: str) -> None:
        reasons.setdefault(str(query_id), []).append(reason)

    for query_id in ranked.index[ranked["delta"] < 0][: focus.n]:
        add(query_id, "loss")
    gains = ranked[ranked["delta"] > 0].sort_values(["delta", "id"], ascending=[False, True], kind="stable")
    for query_id in gains.index[: focus.n]:
        add(query_id, "gain")
    critical = set(focus.critical)
    for query_id, labels in sorted(focus.slices.items()):
        hit = sorted(critical.intersection(labels))
        if hit and changed(query_id, base_top, cand_top):
            add(query_id, "critical:" + ",".join(hit))
    for query_id in sorted(set(focus.permission)):
        if changed(query_id, base_top, cand_top):
            add(query_id, "permission")
    for query_id, why in sorted(focus.flagged.items()):
        for reason in why:
            add(query_id, reason)
    for query_id in sorted(set(focus.carried)):
        add(query_id, "open-rejection")
    frame = pd.DataFrame(
        {
            "query_id": list(reasons),
            "reasons": ["; ".join(r) for r in reasons.values()],
            "baseline": [float(before.get(q, float("nan"))) for q in reasons],
            "candidate": [float(after.get(q, float("nan"))) for q in reasons],
        }
    )
    frame["delta"] = frame["candidate"] - frame["baseline"]
    return frame.sort_values(["delta", "query_id"], na_position="last", kind="stable").reset_index(drop=True)


def _shown(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= TEXT_CHARS else flat[: TEXT_CHARS - 1] + "…"


def side_by_side(
    selection: pd.DataFrame,
    base_top: Top,
    cand_top: Top,
    grades: Mapping[str, Mapping[str, int]],
    texts: Mapping[str, str],
    k: int,
) -> pd.DataFrame:
    """One row per selected query and rank: each run's item, its document's grade (empty where
    unjudged), its text, and whether the baseline's item is lost evidence."""
    rows = []
    for query_id in selection["query_id"]:
        base, cand = base_top.get(query_id, ()), cand_top.get(query_id, ())
        judged, lost = grades.get(query_id, {}), set(lost_evidence(query_id, base_top, cand_top, grades))
        for rank in range(min(k, max(len(base), len(cand)))):
            b = base[rank] if rank < len(base) else None
            c = cand[rank] if rank < len(cand) else None
            rows.append(
                {
                    "query_id": query_id,
                    "rank": rank + 1,
                    "baseline_item": b[0] if b else None,
                    "baseline_grade": judged.get(b[1]) if b else None,
                    "baseline_text": _shown(texts.get(b[0], "")) if b else None,
                    "baseline_lost": bool(b and b[1] in lost),
                    "candidate_item": c[0] if c else None,
                    "candidate_grade": judged.get(c[1]) if c else None,
                    "candidate_text": _shown(texts.get(c[0], "")) if c else None,
                }
            )
    columns = ["query_id", "rank", "baseline_item", "baseline_grade", "baseline_text", "baseline_lost"]
    frame = pd.DataFrame(rows, columns=[*columns, "candidate_item", "candidate_grade", "candidate_text"])
    return frame.astype({"baseline_grade": "Int64", "candidate_grade": "Int64"})


def _listing(top: Sequence[tuple[str, str]], judged: Mapping[str, int], texts: Mapping[str, str]) -> str:
    return "\n".join(
        f"{i}. {parent} [{'g' + str(judged[parent]) if parent in judged else 'unjudged'}] {_shown(texts.get(chunk, ''))}"
        for i, (chunk, parent) in enumerate(top, 1)
    )


def review_sheet(
    selection: pd.DataFrame,
    base_top: Top,
    cand_top: Top,
    grades: Mapping[str, Mapping[str, int]],
    texts: Mapping[str, str],
    queries: Mapping[str, str],
    measure: str,
) -> pd.DataFrame:
    """The sheet a reviewer fills: one row per selected query with its figures, both top lists
    and the lost evidence as context, and the empty ``decision``, ``reviewer`` and ``note`` columns."""
    rows = []
    for row in selection.itertuples(index=False):
        q = str(row.query_id)
        judged = grades.get(q, {})
        rows.append(
            {
                "query_id": q,
                "query": queries.get(q, ""),
                "reasons": row.reasons,
                "measure": measure,
                "baseline": row.baseline,
                "candidate": row.candidate,
                "delta": row.delta,
                "lost_evidence": "; ".join(lost_evidence(q, base_top, cand_top, grades)),
                "new_unjudged": len(new_unjudged(q, base_top, cand_top, grades)),
                "baseline_top": _listing(base_top.get(q, ()), judged, texts),
                "candidate_top": _listing(cand_top.get(q, ()), judged, texts),
                "decision": "",
                "reviewer": "",
                "note": "",
            }
        )
    return pd.DataFrame(rows, columns=REVIEW_COLUMNS)


# --------------------------------------------------------------------------- the filled sheet


class ReviewRow(Strict):
    """One row of a filled review sheet (CSV or JSONL). A reviewer fills ``decision``, ``reviewer``
    (or gives ``--reviewer``) and ``note``; the other columns are context and may be deleted."""

    query_id: Slug
    decision: Choice | None = None
    reviewer: StrictStr | None = None
    note: StrictStr | None = None
    query: Any = None
    reasons: Any = None
    measure: Any = None
    baseline: Any = None
    candidate: Any = None
    delta: Any = None
    lost_evidence: Any = None
    new_unjudged: Any = None
    baseline_top: Any = None
    candidate_top: Any = None


REVIEW_COLUMNS = [
    "query_id",
    "query",
    "reasons",
    "measure",
    "baseline",
    "candidate",
    "delta",
    "lost_evidence",
    "new_unjudged",
    "baseline_top",
    "candidate_top",
    "decision",
    "reviewer",
    "note",
]
DECISION_COLUMNS = ["query_id", "decision", "reviewer", "note", "source"]


@dataclass(frozen=True)
class Decisions:
    """The decisions read from filled sheets, and the selected queries no row decided."""

    frame: pd.DataFrame  # DECISION_COLUMNS, one row per decided query
    undecided: list[str]

    @property
    def complete(self) -> bool:
        return not self.undecided

    def counts(self) -> dict[str, int]:
        return {d: int((self.frame["decision"] == d).sum()) for d in DECISIONS}


@dataclass
class _RowCheck:
    """One row of a filled review sheet against the review (:func:`read_decisions`): the problem, or None."""

    wanted: set[str]  # the selected queries
    reopened: set[str]  # queries an earlier review rejected
    reviewer: str | None  # --reviewer, for rows that name none
    seen: dict[str, str] = field(default_factory=dict)  # query → where it was decided

    def __call__(self, row: ReviewRow, at: At) -> Problem | None:
        if row.query_id not in self.wanted:
            return at(
                field="query_id",
                message=f"query '{shorten(row.query_id)}' is not in this review",
                fix="keep the query_id column of the sheet as written",
            )
        if row.decision is None:
            return None
        name = (row.reviewer or "").strip() or (self.reviewer or "")
        if not name:
            return at(field="reviewer", message="a decision without a reviewer", fix="fill the column or --reviewer")
        if row.query_id in self.seen:
            return at(
                field="query_id",
                message=f"query '{shorten(row.query_id)}' is decided already at {self.seen[row.query_id]}",
                fix="keep one decision per query",
            )
        note = (row.note or "").strip()
        if row.decision == "reject" and not note:
            return at(field="note", message="a rejection without its rationale", fix="say in the note what is wrong")
        if row.decision == "accept" and row.query_id in self.reopened and not note:
            return at(
                field="note",
                message="accepting a query an earlier review rejected, without a note",
                fix="say in the note why the earlier rejection no longer holds",
            )
        return None


def read_decisions(
    sheets: Sequence[tuple[str, Sequence[tuple[int, dict[str, Any]]]]],
    selected: Sequence[str],
    *,
    carried: Iterable[str] = (),
    reviewer: str | None = None,
    problems: list[Problem] | None = None,
) -> tuple[Decisions, list[Problem]]:
    """Validate the rows of filled sheets (``(file, rows with lines)`` each) against the selected
    queries. Every bad row is a problem naming file, line and field: an unknown query, a decision
    outside ``accept``/``reject``/``needs-judgment``, a query decided twice, a decision without a
    reviewer, a rejection without its note, and an earlier rejection accepted without a note saying
    why; and a sheet deciding nothing (the blank sheet). Rows without a decision are context; the
    selected queries they leave are ``undecided``."""
    problems = [] if problems is None else problems
    check = _RowCheck(set(selected), set(carried), reviewer)
    seen = check.seen
    decided: list[tuple[str, str, str, str, str]] = []

    for file, rows in sheets:
        before, errors = len(decided), len(problems)
        cleaned = [(line, _stripped(value)) for line, value in rows]
        for line, row in valid_rows(cleaned, ReviewRow, file, problems, check=check):
            if row.decision is None:
                continue
            seen[row.query_id] = f"{file}:{line}"
            name = (row.reviewer or "").strip() or (reviewer or "")
            decided.append((row.query_id, row.decision, name, (row.note or "").strip(), f"{file}:{line}"))
        if len(decided) == before and len(problems) == errors:
            problems.append(
                Problem(
                    file=file,
                    field="decision",
                    message=f"no row of the sheet has a decision ({len(rows)} row(s)): is this the blank sheet?",
                    fix="fill in the decision column, or leave the sheet out",
                )
            )
    frame = pd.DataFrame(decided, columns=DECISION_COLUMNS)
    return Decisions(frame, [q for q in selected if q not in seen]), problems


def _stripped(value: dict[str, Any]) -> dict[str, Any]:
    """Spreadsheets pad cells: the decision is read without surrounding blanks, an empty one as none."""
    out = dict(value)
    cell = out.get("decision")
    if isinstance(cell, str):
        out["decision"] = cell.strip() or None
    return out


def open_rejections(decisions: pd.DataFrame, carried: Mapping[str, Mapping[str, Any]]) -> tuple[list[dict], list[dict]]:
    """The rejections still open after this review and those it resolved. ``carried`` holds the
    earlier review's open rejections by query. A carried rejection this review accepts (with its
    note) is resolved; one it leaves undecided or marks ``needs-judgment`` stays open; one it
    rejects again is open as this review's rejection."""
    by_query = {row.query_id: row for row in decisions.itertuples(index=False)}
    still, resolved = [], []
    for row in decisions.itertuples(index=False):
        if row.decision == "reject":
            still.append({"query_id": row.query_id, "note": row.note, "reviewer": row.reviewer, "review": None})
    for query_id, earlier in sorted(carried.items()):
        now = by_query.get(query_id)
        if now is not None and now.decision == "accept":
            resolved.append({**earlier, "query_id": query_id, "resolution": now.note, "resolved_by": now.reviewer})
        elif now is None or now.decision != "reject":
            still.append({**earlier, "query_id": query_id})
    return still, resolved


def scripted_decisions(sheet: pd.DataFrame) -> pd.DataFrame:
    """The demo's decisions, from the figures alone (reviewer ``scripted-demo``; the run is
    labelled simulated): reject a permission query that lost judged evidence; accept a gain;
    needs-judgment where the candidate brought unjudged documents into its top; reject other lost evidence;
    accept the rest (a reordering among judged documents)."""
    out = sheet.copy()
    for i, row in out.iterrows():
        permission = "permission" in str(row["reasons"])
        if permission and row["lost_evidence"]:
            decision, note = "reject", f"permission query lost judged evidence: {row['lost_evidence']}"
        elif row["delta"] > 0:
            decision, note = "accept", f"gain of {row['delta']:+.4f} on {row['measure']}"
        elif int(row["new_unjudged"]) > 0:
            decision, note = (
                "needs-judgment",
                f"the candidate brought {int(row['new_unjudged'])} unjudged document(s) into its top",
            )
        elif row["lost_evidence"]:
            decision, note = "reject", f"lost judged evidence: {row['lost_evidence']}"
        else:
            decision, note = "accept", "no judged evidence lost: a reordering among judged documents"
        out.loc[i, ["decision", "reviewer", "note"]] = [decision, SCRIPTED_REVIEWER, f"scripted: {note}"]
    return out


def review_view(detail: pd.DataFrame) -> Any:
    """The side-by-side table for a notebook: a Styler with every text cell escaped (via
    :func:`rageval.safety.styled`), lost evidence shaded; ``.to_html()`` gives the HTML."""
    from rageval.safety import styled

    frame = detail.set_index(["query_id", "rank"])

    def shade(row: pd.Series) -> list[str]:
        mark = "background-color: #f8d7da" if row["baseline_lost"] else ""
        return [mark if column.startswith("baseline") else "" for column in row.index]

    return styled(frame, na_rep="").apply(shade, axis=1)
