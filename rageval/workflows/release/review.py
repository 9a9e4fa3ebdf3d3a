"""``rageval review``: a person looks at the queries a gate (or comparison) decision rests on.

``start`` reads a sealed gate or comparison run and its two evaluation runs, selects the queries
that matter (:func:`rageval.release.review.select`) and writes a review folder: ``review.json``,
the sheet to fill and the side-by-side detail. ``record`` reads the filled sheets back (strictly),
and records a sealed review run linked to the gate run: decisions, reviewers, time, rationale, the
rejections still open, those it resolved, and a judgment pool of the ``needs-judgment`` queries.
The rules (what is selected, what lost evidence and a resolved rejection are) are in
:mod:`rageval.release.review`."""

from __future__ import annotations

import datetime as dt
import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from rageval.analysis import load_policy, query_slices, wide_scores
from rageval.analysis.records import RunArtifacts, RunInfo
from rageval.benchmark.chunking import chunk_document
from rageval.benchmark.loading import Benchmark, load_benchmark
from rageval.config.load import config_from_yaml
from rageval.errors import ComparisonError, InputError, Problem
from rageval.io import read_jsonl
from rageval.judging import pool, write_pool
from rageval.judging.review_sheets import DETAIL_CSV, REVIEW_CSV, REVIEW_JSONL, read_review, sheet_rows, write_review
from rageval.paths import project_root
from rageval.release.marks import named_pair
from rageval.release.review import (
    SCRIPTED_REVIEWER,
    Decisions,
    Focus,
    open_rejections,
    read_decisions,
    review_sheet,
    scripted_decisions,
    select,
    side_by_side,
    top_k,
)
from rageval.safety import csv_bytes
from rageval.tracking.records import role_tags
from rageval.tracking.store import Tracker
from rageval.workflows.guards import sealed_and_intact
from rageval.workflows.provenance import RAGEVAL_VERSION, git_state

REJECTIONS_FILE = "rejections.json"


@dataclass(frozen=True)
class Pair:
    """The two evaluation runs a gate or comparison run compared, read back with their benchmark."""

    baseline: RunArtifacts
    candidate: RunArtifacts
    benchmark: Benchmark
    split: str
    chunkings: list[Any]


@dataclass(frozen=True)
class ReviewStart:
    folder: Path
    manifest: dict[str, Any]
    sheet: pd.DataFrame
    detail: pd.DataFrame


@dataclass(frozen=True)
class ReviewOutcome:
    run_id: str
    sealed: str
    decisions: Decisions
    open: list[dict[str, Any]]
    resolved: list[dict[str, Any]]
    pool_items: int
    simulated: bool

    @property
    def status(self) -> str:
        return "complete" if self.decisions.complete else "incomplete"


def reviewed_runs(tracker: Tracker, run_id: str, candidate: str | None = None) -> tuple[RunInfo, str, str]:
    """The sealed gate or comparison run, its baseline and its candidate (a comparison of several
    candidates needs ``candidate``)."""
    info = sealed_and_intact(tracker, run_id)
    kind = info.tags.get("rageval.kind")
    if kind == "gate":
        baseline, candidate = named_pair(info.tags)
        return info, baseline or "", candidate or ""
    if kind == "comparison":
        # rageval.candidates / rageval.baseline (role_tags); runs recorded before them: rageval.compare.*
        candidates = info.tags.get("rageval.candidates", info.tags.get("rageval.compare.candidates", "")).split(",")
        if candidate is None and len(candidates) == 1:
            candidate = candidates[0]
        if candidate not in candidates:
            raise InputError(
                Problem(
                    file="--candidate",
                    message=f"comparison {run_id} compares {len(candidates)} candidates: {', '.join(candidates)}",
                    fix="name the one to review with --candidate",
                )
            )
        return info, info.tags.get("rageval.baseline", info.tags.get("rageval.compare.baseline", "")), str(candidate)
    raise ComparisonError(f"run {run_id} is a {kind or 'plain'} run: review a gate or comparison run")


def read_pair(tracker: Tracker, baseline: str, candidate: str) -> Pair:
    """Both evaluation runs (sealed, intact) and the benchmark version they ran on."""
    base, cand = (tracker.run_artifacts(sealed_and_intact(tracker, r).run_id) for r in (baseline, candidate))
    configs = [config_from_yaml(run.config_yaml) for run in (base, cand)]
    benchmark = load_benchmark(configs[0].benchmark)
    for tag in ("rageval.hash.corpus", "rageval.hash.cases"):
        if base.info.tags.get(tag) != benchmark.hashes[tag.rsplit(".", 1)[1]]:
            raise ComparisonError(
                f"the benchmark at {benchmark.path} is not the version run {baseline} used ({tag} differs): "
                "the review shows its texts and judgments; check out that version"
            )
    return Pair(base, cand, benchmark, base.info.tags.get("rageval.split", ""), [c.chunking for c in configs])


def _texts(pair: Pair, parents: set[str]) -> dict[str, str]:
    """Each ranked chunk's text, rebuilt from its parent under both runs' chunkings."""
    out: dict[str, str] = {}
    for chunking in pair.chunkings:
        for parent in sorted(parents):
            for chunk in chunk_document(pair.benchmark.documents[parent], chunking):
                out[chunk.chunk_id] = chunk.text
    return out


def _sealed_json(tracker: Tracker, run_id: str, name: str) -> Any:
    with tempfile.TemporaryDirectory(prefix="rageval-review-") as tmp:
        return json.loads(tracker.download_sealed(run_id, name, Path(tmp)).read_text(encoding="utf-8"))


def _gate_focus(
    tracker: Tracker, run_id: str, measure: str | None, critical: list[str], flagged: dict[str, list[str]]
) -> tuple[str, list[str]]:
    """A gate run's measure (the policy's first unless given) and critical slices (the policy's
    added), its largest losses added to ``flagged``."""
    decision = _sealed_json(tracker, run_id, "decision.json")
    with tempfile.TemporaryDirectory(prefix="rageval-review-") as tmp:
        policy = load_policy(tracker.download_sealed(run_id, "policy.yaml", Path(tmp)))
    for row in decision.get("largest_losses", []):
        flagged.setdefault(str(row["query_id"]), []).append("gate:largest-loss")
    return measure or next(iter(policy.measures)), critical + [s for s in policy.critical_slices if s not in critical]


def _recorded_measure(measure: str | None, before: pd.DataFrame, after: pd.DataFrame) -> str:
    """The measure to review by (default nDCG@10, else the first recorded), which both runs recorded."""
    measure = measure or ("nDCG@10" if "nDCG@10" in before.columns else str(before.columns[0]))
    if measure not in before.columns or measure not in after.columns:
        raise InputError(
            Problem(
                file="--measure",
                message=f"'{measure}' is not a measure both runs recorded",
                fix=f"use one of {', '.join(c for c in before.columns if c in after.columns)}",
            )
        )
    return measure


def _carried_rejections(tracker: Tracker, resolves: str) -> dict[str, dict[str, Any]]:
    """The rejections an earlier review run left open, by query."""
    earlier = sealed_and_intact(tracker, resolves)
    if earlier.tags.get("rageval.kind") != "review":
        raise ComparisonError(f"--resolves {resolves}: a {earlier.tags.get('rageval.kind')} run, not a review run")
    return {r["query_id"]: r for r in _sealed_json(tracker, resolves, REJECTIONS_FILE)}


def _leaking(queries: pd.DataFrame) -> list[str]:
    """The queries whose candidate ranking showed a document its asker may not see."""
    if "permission_leaks" not in queries.columns:
        return []
    return [str(q) for q in queries.loc[queries["permission_leaks"].fillna(0) > 0, "query_id"]]


@dataclass(frozen=True)
class ReviewRequest:
    """One review to start, as ``rageval review start``, the demo and the tests give it: the gate or
    comparison run and the folder to write; the ``n`` largest losses and gains, top lists ``k`` deep,
    on ``measure`` (default: a gate policy's first, else nDCG@10); ``critical`` slices besides a gate
    policy's; ``candidate``: the one to review of a comparison of several; ``resolves``: an earlier
    review run whose open rejections to revisit."""

    run_id: str
    out: str | Path
    n: int = 5
    k: int = 10
    measure: str | None = None
    critical: Sequence[str] = ()
    candidate: str | None = None
    resolves: str | None = None


def start_review(request: ReviewRequest, *, tracker: Tracker) -> ReviewStart:
    """Select the queries of a gate or comparison run worth a person's look and write the review folder."""
    run_id, k, resolves = request.run_id, request.k, request.resolves
    info, baseline, cand_id = reviewed_runs(tracker, run_id, request.candidate)
    flagged: dict[str, list[str]] = {}
    measure, critical = request.measure, list(request.critical)
    if info.tags["rageval.kind"] == "gate":
        measure, critical = _gate_focus(tracker, run_id, measure, critical, flagged)
    pair = read_pair(tracker, baseline, cand_id)
    before, after = wide_scores(pair.baseline.per_query), wide_scores(pair.candidate.per_query)
    measure = _recorded_measure(measure, before, after)
    for query_id in _leaking(pair.candidate.queries):
        flagged.setdefault(query_id, []).append("leak")
    carried = _carried_rejections(tracker, resolves) if resolves is not None else {}

    cases = pair.benchmark.cases_for(pair.split)
    grades = pair.benchmark.qrels(pair.split)
    base_top, cand_top = top_k(pair.baseline.rankings, k), top_k(pair.candidate.rankings, k)
    focus = Focus(
        n=request.n,
        slices=query_slices(pair.baseline.queries),
        critical=critical,
        permission=[c.queryId for c in cases if c.principal],
        flagged=flagged,
        carried=carried,
    )
    selection = select(before[measure], after[measure], focus, base_top, cand_top)
    chosen = set(selection["query_id"])
    texts = _texts(pair, {p for top in (base_top, cand_top) for q in chosen for _, p in top.get(q, ())})
    sheet = review_sheet(selection, base_top, cand_top, grades, texts, {c.queryId: c.query for c in cases}, measure)
    detail = side_by_side(selection, base_top, cand_top, grades, texts, k)
    manifest = {
        "review_of": run_id,
        "kind": info.tags["rageval.kind"],
        "baseline": baseline,
        "candidate": cand_id,
        "measure": measure,
        "n": request.n,
        "k": k,
        "critical_slices": critical,
        "resolves": resolves,
        "carried": carried,
        "queries": selection["query_id"].tolist(),
        "reasons": dict(zip(selection["query_id"], selection["reasons"], strict=True)),
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "rageval_version": RAGEVAL_VERSION,
    }
    write_review(request.out, manifest, sheet, detail)
    return ReviewStart(Path(request.out), manifest, sheet, detail)


def _scripted_rows(folder: Path) -> list[tuple[str, list[tuple[int, dict[str, Any]]]]]:
    rows, problems = read_jsonl(folder / REVIEW_JSONL)
    if problems:
        raise InputError(problems)
    filled = scripted_decisions(pd.DataFrame([r for _, r in rows]))
    records = filled[["query_id", "decision", "reviewer", "note"]].to_dict(orient="records")
    return [("<scripted>", list(enumerate(records, 1)))]


def _pool_needs_judgment(pair: Pair, decisions: Decisions, k: int, folder: Path) -> Any:
    """A judgment pool of the queries decided ``needs-judgment`` (both runs' top ``k``), written to
    ``folder`` when it holds any item; None when no query needs one."""
    wanted = set(decisions.frame.loc[decisions.frame["decision"] == "needs-judgment", "query_id"])
    if not wanted:
        return None
    rankings = {
        run.info.run_id: run.rankings[run.rankings["query_id"].isin(wanted)] for run in (pair.baseline, pair.candidate)
    }
    pooled = pool(rankings, pair.benchmark, pair.split, k, chunking=pair.chunkings)
    if pooled.manifest.items:
        write_pool(pooled, folder)
    return pooled


def _log_and_seal(tracker: Tracker, run_id: str, files: dict[str, bytes], metrics: dict[str, float]) -> str:
    try:
        tracker.log_files(run_id, files)
        tracker.log_metrics(run_id, metrics)
        return tracker.seal(run_id)
    except Exception as exc:
        tracker.fail(run_id, f"sealing failed: {type(exc).__name__}: {exc}")
        raise


def _decisions(
    folder: Path,
    manifest: dict[str, Any],
    carried: dict[str, dict[str, Any]],
    sheets: Sequence[str | Path],
    reviewer: str | None,
    scripted: bool,
) -> Decisions:
    """The decisions of the filled sheets (default: the folder's ``review.csv``), or the demo's
    scripted ones; every bad row is named."""
    if scripted:
        rows = _scripted_rows(folder)
    else:
        rows, problems = sheet_rows(list(sheets) or [folder / REVIEW_CSV])
        if problems:
            raise InputError(problems)
    decisions, problems = read_decisions(rows, manifest["queries"], carried=carried, reviewer=reviewer)
    if problems:
        raise InputError(problems)
    return decisions


@dataclass(frozen=True)
class _Review:
    """A review folder's sheets read: everything its review run is made of."""

    folder: Path
    manifest: dict[str, Any]
    info: RunInfo  # the gate or comparison run reviewed
    baseline: str
    candidate: str
    decisions: Decisions
    still: list[dict[str, Any]]  # rejections left open
    resolved: list[Any]  # earlier rejections this review resolves
    pair: Pair
    pooled: Any  # the pool of queries that need judgment, or None
    simulated: bool

    @property
    def status(self) -> str:
        return "complete" if self.decisions.complete else "incomplete"

    @property
    def reviewers(self) -> list[str]:
        return sorted(set(self.decisions.frame["reviewer"]))


def record_review(
    folder: str | Path,
    *,
    tracker: Tracker,
    sheets: Sequence[str | Path] = (),
    reviewer: str | None = None,
    scripted: bool = False,
    pool_out: str | Path | None = None,
) -> ReviewOutcome:
    """Read the filled sheets of a review folder (default: its ``review.csv``; ``scripted``: the
    demo's decisions) and record a sealed review run. Bad rows stop it, every one named; undecided
    queries make the review ``incomplete``."""
    folder = Path(folder)
    manifest = read_review(folder)
    info, baseline, candidate = reviewed_runs(tracker, manifest["review_of"], manifest["candidate"])
    carried: dict[str, dict[str, Any]] = manifest.get("carried") or {}
    decisions = _decisions(folder, manifest, carried, sheets, SCRIPTED_REVIEWER if scripted else reviewer, scripted)
    still, resolved = open_rejections(decisions.frame, carried)
    pair = read_pair(tracker, baseline, candidate)
    pooled = _pool_needs_judgment(pair, decisions, int(manifest["k"]), Path(pool_out) if pool_out else folder / "pool")
    review = _Review(folder, manifest, info, baseline, candidate, decisions, still, resolved, pair, pooled, scripted)
    label = "SIMULATED review" if review.simulated else "review"
    run_id = tracker.create_run(
        tracker.experiment_name(info.experiment_id),
        f"{label} of {info.name}: {review.status}, {len(still)} open rejection(s)",
        params={},  # what was reviewed is the tag rageval.review.gate, the rest review.json
        tags=_review_tags(review),
    )
    for entry in still:
        entry["review"] = entry.get("review") or run_id
    # The two figures a reviewer reads at a glance; every count (accepted, rejected, undecided,
    # resolved) is in decisions.json.
    metrics = {"open_rejections": len(still), "needs_judgment": decisions.counts()["needs-judgment"]}
    digest = _log_and_seal(tracker, run_id, _review_files(review), metrics)
    items = len(pooled.manifest.items) if pooled else 0
    return ReviewOutcome(run_id, digest, decisions, still, resolved, items, review.simulated)


def _review_tags(review: _Review) -> dict[str, str]:
    manifest, benchmark = review.manifest, review.pair.benchmark
    return {
        **git_state(project_root()),
        "rageval.version": RAGEVAL_VERSION,
        "rageval.kind": "review",
        "rageval.review.gate": review.info.run_id,
        **role_tags(review.baseline, [review.candidate]),
        "rageval.review.status": review.status,
        "rageval.review.open_rejections": str(len(review.still)),
        "rageval.review.reviewers": ",".join(review.reviewers),
        "rageval.simulated": str(review.simulated).lower(),
        "rageval.benchmark.name": benchmark.spec.name,
        "rageval.benchmark.version": benchmark.spec.version,
        **({"rageval.review.resolves": manifest["resolves"]} if manifest.get("resolves") else {}),
    }


def _review_files(review: _Review) -> dict[str, bytes]:
    """The review (review.json), its decisions (JSON with the verdict, and CSV), the rejections
    left open, the side-by-side detail and the pool of queries that need judgment."""
    decisions, pooled = review.decisions, review.pooled
    record = {
        "review_of": review.info.run_id,
        "status": review.status,
        "simulated": review.simulated,
        "recorded": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "reviewers": review.reviewers,
        "counts": decisions.counts(),
        "undecided": decisions.undecided,
        "decisions": decisions.frame.to_dict(orient="records"),
        "open_rejections": len(review.still),
        "resolved_rejections": review.resolved,
    }
    return {
        "review.json": json.dumps(review.manifest, indent=1, ensure_ascii=False).encode(),
        "decisions.json": json.dumps(record, indent=1, ensure_ascii=False).encode(),
        "decisions.csv": csv_bytes(decisions.frame),
        REJECTIONS_FILE: json.dumps(review.still, indent=1, ensure_ascii=False).encode(),
        DETAIL_CSV: (review.folder / DETAIL_CSV).read_bytes(),
        **({"pool/pool.json": pooled.manifest.model_dump_json(indent=1).encode()} if pooled else {}),
    }
