"""Shadow evidence: the log of a candidate run beside production on the same requests, the import
policy that must allow its use, what the two arms' rankings show, and the rules a release holds
them to (:mod:`rageval.release.shadow_rules`).

A shadow log (JSON lines or parquet) holds one :class:`ShadowRecord` per request: the query's
sha256, or its *redacted* text with the redaction it went through; the principal's groups; for
each arm (``baseline``, ``candidate``) the ranked IDs with scores, latency, error and resource use.
The :class:`ImportPolicy` (a :class:`~rageval.release.traffic.TrafficPolicy`) names the authorization, the redaction and the retention date; a log is
read only under one (:func:`check_import_policy`). Raw query text is never part of a record: only
hashes reach the store, and redacted text only where the policy keeps ``query``.

:func:`analyze_shadow` is pure: overall and per segment, RBO (:mod:`rageval.analysis.rbo`),
Jaccard@k, top-1 change, latency quantile deltas with paired bootstrap intervals, error rates,
resource use, permission leaks against the benchmark's ACLs, and the candidate's top-k of
requests matched to benchmark cases (a case named by ``case_id``, or one whose query has the
request's hash): the share of it whose document the case never judged, and the rankings frame a
judgment pool is built from.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
import pandas as pd
from pydantic import Field, StrictBool, StrictStr, model_validator
from scipy import stats

from rageval.analysis.rbo import jaccard_at, rank_biased_overlap
from rageval.benchmark.loading import Benchmark
from rageval.benchmark.provenance import Redaction
from rageval.benchmark.schema import Case, Document
from rageval.errors import InputError, PolicyError, Problem
from rageval.hashing import sha256_text
from rageval.io import read_jsonl
from rageval.release.traffic import TrafficPolicy, load_traffic_policy
from rageval.validation import Sha256, Slug, Strict, shorten, valid_rows

ARMS = ("baseline", "candidate")
# What an import policy may allow into the store besides hashes and figures (one list: docs, CLI).
Keep = Literal["query", "principal", "segment", "request_id"]
KEEP_FIELDS: tuple[str, ...] = get_args(Keep)
QUANTILES = (0.5, 0.95, 0.99)
ALL = "all"

# --------------------------------------------------------------------------- the log


class Hit(Strict):
    id: Slug
    score: float | None = None


class Arm(Strict):
    """One arm's answer to a request."""

    results: list[Hit] = Field(default_factory=list, description="ranked, best first")
    latency_ms: float = Field(ge=0)
    error: StrictStr | None = None
    config: StrictStr | None = Field(default=None, description="the configuration's name or run ID")
    resources: dict[Slug, float] = Field(default_factory=dict, description="e.g. cpu_ms, tokens, cost")

    @model_validator(mode="after")
    def _distinct(self) -> Arm:
        seen: set[str] = set()
        for rank, hit in enumerate(self.results, 1):
            if hit.id in seen:
                raise ValueError(f"results hold '{shorten(hit.id)}' twice (again at rank {rank}): log each ID once")
            seen.add(hit.id)
        return self

    @property
    def ids(self) -> list[str]:
        return [hit.id for hit in self.results]

    @property
    def failed(self) -> bool:
        return self.error is not None or not self.results


class ShadowRecord(Strict):
    """One request of a shadow log."""

    request_id: Slug
    time: dt.datetime = Field(strict=False)
    query: StrictStr | None = Field(default=None, description="redacted text only, with its redaction")
    query_sha256: Sha256 | None = Field(default=None, description="sha256 of the UTF-8 query text")
    redaction: Redaction | None = None
    principal: list[Slug] | None = Field(default=None, description="the groups the asker belongs to")
    case_id: Slug | None = Field(default=None, description="the benchmark case this request is")
    segment: list[Slug] = Field(default_factory=list)
    simulated: StrictBool = False
    baseline: Arm
    candidate: Arm

    @model_validator(mode="after")
    def _query(self) -> ShadowRecord:
        if self.query is None and self.query_sha256 is None:
            raise ValueError("give query_sha256 (or redacted query text with its redaction)")
        if self.query is not None and self.redaction is None:
            raise ValueError(
                "query text without a redaction: log only query_sha256, or redact the text and record the "
                "redaction (rules, version, types)"
            )
        if self.query is not None and self.query_sha256 is not None and sha256_text(self.query) != self.query_sha256:
            raise ValueError("query_sha256 is not the sha256 of query: log the hash of the text logged")
        return self

    @property
    def digest(self) -> str:
        return self.query_sha256 or sha256_text(self.query or "")


def read_log(path: str | Path) -> list[ShadowRecord]:
    """Every record of a JSONL or parquet shadow log; every problem names the file, line (the
    parquet row, from 1) and field, and a request ID given twice is one."""
    path = Path(path)
    file = str(path)
    problems: list[Problem] = []
    if path.suffix == ".jsonl":
        rows, problems = read_jsonl(path)
    elif path.suffix == ".parquet" and path.is_file():
        import pyarrow.parquet as pq

        try:
            rows = list(enumerate(pq.read_table(path).to_pylist(), 1))
        except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
            raise InputError(
                Problem(file=file, message=f"cannot be read as parquet: {shorten(str(exc), 200)}")
            ) from None
        # parquet writes an absent optional field as null; the model's defaults stand for it
        rows = [(line, _without_nulls(row)) for line, row in rows]
    else:
        why = "file not found" if not path.exists() else f"unknown log format '{path.suffix}'"
        raise InputError(Problem(file=file, message=why, fix="give a shadow log: .jsonl or .parquet"))
    seen: dict[str, int] = {}

    def once(record: ShadowRecord, at: Any) -> Problem | None:
        if record.request_id in seen:
            return at(
                field="request_id",
                message=f"'{record.request_id}' is logged again (first at line {seen[record.request_id]})",
                fix="log each request once",
            )
        return None

    records = []
    for line, record in valid_rows(rows, ShadowRecord, file, problems, check=once):
        seen[record.request_id] = line
        records.append(record)
    if not records and not problems:
        problems.append(Problem(file=file, message="the log holds no requests", fix="log at least one request"))
    if problems:
        raise InputError(problems)
    return records


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


# --------------------------------------------------------------------------- the import policy


class ImportPolicy(TrafficPolicy):
    """``params/shadow/policy.yaml``: the terms under which a shadow log may be read."""

    keep: list[Keep] = Field(default_factory=list, description="what may be kept in the run's artifacts")


def load_import_policy(path: str | Path | None, today: dt.date) -> ImportPolicy:
    """The import policy, refused when absent, without authorization or past its retention date."""
    return load_traffic_policy(
        path, today, model=ImportPolicy, what="a shadow log", example="params/shadow/policy.yaml"
    )


def check_import_policy(records: Sequence[ShadowRecord], policy: ImportPolicy, file: str) -> None:
    """Every logged query text went through the policy's redaction (rules and version)."""
    problems = [
        Problem(
            file=file,
            field=f"{r.request_id}.redaction",
            message=f"redaction {r.redaction.rules} {r.redaction.version} is not the policy's "
            f"({policy.redaction.rules} {policy.redaction.version})",
            fix="log text redacted under the policy's rules, or only query_sha256",
        )
        for r in records
        if r.redaction is not None
        and r.query is not None
        and (r.redaction.rules, r.redaction.version) != (policy.redaction.rules, policy.redaction.version)
    ]
    if problems:
        raise PolicyError(problems)


# --------------------------------------------------------------------------- the analysis


@dataclass(frozen=True)
class ShadowAnalysis:
    """What a shadow log shows; ``summary`` and ``latency`` have one row per slice (``all`` first)."""

    per_request: pd.DataFrame
    summary: pd.DataFrame
    latency: pd.DataFrame
    resources: pd.DataFrame
    leaks: pd.DataFrame
    # the candidate's top-k of requests matched to cases: request_id, a rankings frame (query_id, rank,
    # chunk_id, parent_id), and whether the case judged the document (a pool judges passages itself)
    candidate_top: pd.DataFrame = field(repr=False)
    p: float = 0.9
    k: int = 10
    confidence: float = 0.95

    @property
    def overall(self) -> dict[str, Any]:
        return dict(self.summary.iloc[0])

    def latency_row(self, quantile: float, slice_name: str = ALL) -> dict[str, Any]:
        rows = self.latency[(self.latency["slice"] == slice_name) & (self.latency["quantile"] == quantile)]
        return dict(rows.iloc[0]) if len(rows) else {}


def parent_of(item: str, documents: Mapping[str, Document]) -> str:
    """A logged ID's document: itself, or a chunk ID's parent (``{parent}#{hash}-{position}``)."""
    return item if item in documents or "#" not in item else item.rsplit("#", 1)[0]


def _leaks(ids: Sequence[str], principal: Sequence[str] | None, documents: Mapping[str, Document]) -> list[int]:
    """The ranks of results the principal may not see (the same rule as the filter stage's)."""
    groups = set(principal or ())
    out = []
    for rank, item in enumerate(ids, 1):
        document = documents.get(parent_of(item, documents))
        if document is not None and document.acl is not None and not set(document.acl) & groups:
            out.append(rank)
    return out


def analyze_shadow(
    records: Sequence[ShadowRecord],
    benchmark: Benchmark,
    *,
    k: int = 10,
    p: float = 0.9,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> ShadowAnalysis:
    """Compare the arms request by request, overall and per segment (see the module's docstring).
    A request where an arm failed or returned nothing counts in the error rates, not in RBO."""
    documents = benchmark.documents
    cases = {case.queryId: case for case in benchmark.cases}
    by_hash = {sha256_text(case.query): case for case in benchmark.cases}
    unknown = [r.request_id for r in records if r.case_id is not None and r.case_id not in cases]
    if unknown:
        raise InputError(
            Problem(
                file="shadow log",
                field="case_id",
                message=f"requests name cases the benchmark lacks: {', '.join(unknown[:5])}",
                fix="give the benchmark the log was matched against, or drop case_id",
            )
        )
    qrels = {case.queryId: {j.documentId for j in case.relevant} for case in benchmark.cases}
    rows, leak_rows, top_rows = [], [], []
    for record in records:
        case: Case | None = cases.get(record.case_id or "") or by_hash.get(record.digest)
        row, leaked, top = _compare_request(record, case, documents, qrels, k, p)
        rows.append(row)
        leak_rows += leaked
        top_rows += top
    per_request = pd.DataFrame(rows)
    slices = [ALL, *sorted({s for r in records for s in r.segment})]
    rng = np.random.default_rng(seed)
    summary, latency, resources = [], [], []
    for name in slices:
        part = per_request if name == ALL else per_request[per_request["segment"].map(lambda s, n=name: n in s)]
        summary.append(_summary(name, part))
        latency.extend(_latency(name, part, confidence, resamples, rng))
        resources.extend(_resources(name, part))
    return ShadowAnalysis(
        per_request=per_request,
        summary=pd.DataFrame(summary),
        latency=pd.DataFrame(latency),
        resources=pd.DataFrame(resources, columns=["slice", "resource", "baseline_mean", "candidate_mean", "delta"]),
        leaks=pd.DataFrame(leak_rows, columns=["request_id", "query_sha256", "rank", "id"]),
        candidate_top=pd.DataFrame(
            top_rows, columns=["request_id", "query_id", "rank", "chunk_id", "parent_id", "judged"]
        ),
        p=p,
        k=k,
        confidence=confidence,
    )


def _compare_request(
    record: ShadowRecord,
    case: Case | None,
    documents: Mapping[str, Document],
    qrels: dict[str, set[str]],
    k: int,
    p: float,
) -> tuple[dict[str, Any], list[dict[str, Any]], list[tuple[Any, ...]]]:
    """One request's arms compared: its per-request row, the candidate's leaks (one row each) and,
    when it matched a case, the candidate's top-k with whether each item's document is judged."""
    base, cand = record.baseline, record.candidate
    compared = not base.failed and not cand.failed
    rbo = rank_biased_overlap(base.ids, cand.ids, p) if compared else None
    leaks = _leaks(cand.ids, record.principal, documents)
    leak_rows = [
        {"request_id": record.request_id, "query_sha256": record.digest, "rank": rank, "id": cand.ids[rank - 1]}
        for rank in leaks
    ]
    top = cand.ids[:k]
    unjudged = 0
    top_rows: list[tuple[Any, ...]] = []
    if case is not None:
        for rank, item in enumerate(top, 1):
            parent = parent_of(item, documents)
            if parent in documents:
                judged = parent in qrels[case.queryId]
                unjudged += not judged
                top_rows.append((record.request_id, case.queryId, rank, item, parent, judged))
    row = {
        "request_id": record.request_id,
        "query_sha256": record.digest,
        "case_id": case.queryId if case is not None else None,
        "segment": list(record.segment),
        "compared": compared,
        "rbo_min": rbo.min if rbo else np.nan,
        "rbo_res": rbo.res if rbo else np.nan,
        "rbo_ext": rbo.ext if rbo else np.nan,
        "jaccard": jaccard_at(base.ids, cand.ids, k) if compared else np.nan,
        "top1_changed": float(base.ids[0] != cand.ids[0]) if compared else np.nan,
        "baseline_error": float(base.error is not None),
        "candidate_error": float(cand.error is not None),
        "baseline_ms": base.latency_ms,
        "candidate_ms": cand.latency_ms,
        "candidate_leaks": len(leaks),
        "baseline_leaks": len(_leaks(base.ids, record.principal, documents)),
        "unknown_ids": sum(parent_of(i, documents) not in documents for i in top),
        "top_k": len(top),
        "unjudged": unjudged if case is not None else np.nan,
        **{f"baseline_res.{n}": v for n, v in base.resources.items()},
        **{f"candidate_res.{n}": v for n, v in cand.resources.items()},
    }
    return row, leak_rows, top_rows


def _summary(name: str, part: pd.DataFrame) -> dict[str, Any]:
    matched = part[part["case_id"].notna()]
    judged_room = float(matched["top_k"].sum())
    return {
        "slice": name,
        "requests": len(part),
        "compared": int(part["compared"].sum()),
        "rbo_ext_mean": part["rbo_ext"].mean(),
        "rbo_min_mean": part["rbo_min"].mean(),
        "rbo_res_mean": part["rbo_res"].mean(),
        "jaccard_mean": part["jaccard"].mean(),
        "top1_change_rate": part["top1_changed"].mean(),
        "baseline_error_rate": part["baseline_error"].mean(),
        "candidate_error_rate": part["candidate_error"].mean(),
        "error_rate_delta": part["candidate_error"].mean() - part["baseline_error"].mean(),
        "candidate_leaks": int(part["candidate_leaks"].sum()),
        "baseline_leaks": int(part["baseline_leaks"].sum()),
        "requests_with_leaks": int((part["candidate_leaks"] > 0).sum()),
        "matched_requests": len(matched),
        "unjudged_share": float(matched["unjudged"].sum()) / judged_room if judged_room else np.nan,
        "unknown_ids": int(part["unknown_ids"].sum()),
    }


def _latency(
    name: str, part: pd.DataFrame, confidence: float, resamples: int, rng: np.random.Generator
) -> list[dict[str, Any]]:
    """Quantile deltas and ratios of the paired latencies, each with a percentile bootstrap interval
    resampling requests (both arms' latencies move together)."""
    base, cand = part["baseline_ms"].to_numpy(float), part["candidate_ms"].to_numpy(float)
    out = []
    for q in QUANTILES:
        row: dict[str, Any] = {"slice": name, "quantile": q, "requests": len(base)}
        if not len(base):
            out.append(row)
            continue
        b, c = float(np.quantile(base, q)), float(np.quantile(cand, q))
        row.update(baseline_ms=b, candidate_ms=c, delta_ms=c - b, ratio=c / b if b > 0 else np.nan)
        for key, statistic in (("delta", _delta(q)), ("ratio", _ratio(q))):
            low = high = np.nan
            if len(base) >= 2 and (key == "delta" or b > 0):
                ci = stats.bootstrap(
                    (base, cand),
                    statistic,
                    paired=True,
                    vectorized=True,
                    n_resamples=resamples,
                    confidence_level=confidence,
                    method="percentile",
                    rng=rng,
                ).confidence_interval
                low, high = float(ci.low), float(ci.high)
            row[f"{key}_low"], row[f"{key}_high"] = low, high
        out.append(row)
    return out


def _delta(q: float) -> Any:
    return lambda b, c, axis=-1: np.quantile(c, q, axis=axis) - np.quantile(b, q, axis=axis)


def _ratio(q: float) -> Any:
    def ratio(b: np.ndarray, c: np.ndarray, axis: int = -1) -> np.ndarray:
        low = np.quantile(b, q, axis=axis)
        # a resample whose baseline quantile is 0 has no ratio
        return np.divide(np.quantile(c, q, axis=axis), low, out=np.full_like(low, np.inf), where=low > 0)

    return ratio


def _resources(name: str, part: pd.DataFrame) -> list[dict[str, Any]]:
    names = sorted({c.split(".", 1)[1] for c in part.columns if c.startswith(("baseline_res.", "candidate_res."))})
    out = []
    for resource in names:
        b = part.get(f"baseline_res.{resource}", pd.Series(dtype=float)).mean()
        c = part.get(f"candidate_res.{resource}", pd.Series(dtype=float)).mean()
        out.append({"slice": name, "resource": resource, "baseline_mean": b, "candidate_mean": c, "delta": c - b})
    return out
