"""``rageval shadow``: read a shadow log under its import policy, analyse it against a benchmark,
decide it under shadow rules when given, and record everything as a sealed shadow run
(``rageval.kind=shadow``). Only query hashes reach the store, and redacted text only where the
policy keeps ``query``; the candidate's unjudged top-k becomes a judgment pool (``pool.json``
recorded; with ``pool_out``, the whole pool with its sheets written for ``rageval judge import``)."""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from rageval.benchmark.loading import Benchmark, load_benchmark
from rageval.benchmark.schema import ChunkingConfig
from rageval.config.load import config_from_yaml
from rageval.hashing import sha256_bytes, sha256_file
from rageval.judging import Pool, pool, write_pool
from rageval.judging.schema import POOL_FILE, PoolManifest
from rageval.paths import project_root
from rageval.release.marks import BASELINE_CONFIG_TAG, CANDIDATE_CONFIG_TAG, VERDICT_TAG
from rageval.release.shadow import (
    ImportPolicy,
    ShadowAnalysis,
    ShadowRecord,
    analyze_shadow,
    check_import_policy,
    load_import_policy,
    read_log,
)
from rageval.release.shadow_rules import ShadowDecision, ShadowRules, decide_shadow, load_rules
from rageval.tracking.records import NOTE_TAG, RELEASE_EXPERIMENT, role_tags
from rageval.tracking.store import Tracker
from rageval.workflows.guards import sealed_and_intact, today_override
from rageval.workflows.provenance import RAGEVAL_VERSION, git_state


@dataclass(frozen=True)
class ShadowOutcome:
    run_id: str
    experiment: str
    sealed: str
    analysis: ShadowAnalysis
    decision: ShadowDecision | None
    pools: dict[str, PoolManifest]
    simulated: bool
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ShadowRequest:
    """What ``rageval shadow record`` analyses: the log, its import policy, the benchmark, and the
    options (see :func:`execute_shadow`)."""

    log_file: str | Path
    policy_file: str | Path | None
    benchmark: str | Path
    rules_file: str | Path | None = None
    baseline_run: str | None = None
    candidate_run: str | None = None
    chunking: ChunkingConfig | None = None
    pool_out: str | Path | None = None
    experiment: str | None = None
    k: int = 10
    p: float = 0.9
    resamples: int = 2000
    seed: int = 0
    today: dt.date | None = None


@dataclass(frozen=True)
class _Shadow:
    """A shadow log read and analysed: everything its record is made of."""

    request: ShadowRequest
    log_file: Path
    policy: ImportPolicy
    records: list[ShadowRecord]
    rules: ShadowRules | None
    bench: Benchmark
    analysis: ShadowAnalysis
    decision: ShadowDecision | None
    pools: dict[str, PoolManifest]
    warnings: list[str]
    link: dict[str, str]  # baseline, candidate → the configuration each arm ran

    @property
    def simulated(self) -> bool:
        return any(r.simulated for r in self.records)

    @property
    def verdict(self) -> str:
        return self.decision.verdict if self.decision is not None else "none"


def execute_shadow(request: ShadowRequest, *, tracker: Tracker) -> ShadowOutcome:
    """Analyse a shadow log and record it as a sealed run (see the module's docstring)."""
    shadow = _analyse(request, tracker)
    name = request.experiment or RELEASE_EXPERIMENT
    policy_bytes = Path(str(request.policy_file)).read_bytes()
    record = _shadow_record(shadow, policy_bytes)
    files = {
        "decision.json": json.dumps(_finite(record), indent=2, default=_plain, allow_nan=False).encode(),
        "import_policy.yaml": policy_bytes,
        **({"rules.yaml": Path(str(request.rules_file)).read_bytes()} if request.rules_file is not None else {}),
        **{f"pool/{split}/{POOL_FILE}": m.model_dump_json(indent=2).encode() for split, m in shadow.pools.items()},
    }
    link = shadow.link
    run_id = tracker.create_run(
        name,
        f"shadow {link['candidate'] or 'candidate'} vs {link['baseline'] or 'baseline'} → {shadow.verdict}",
        params={},  # the import policy, the rules and every setting are in decision.json and its files
        tags=_shadow_tags(shadow),
        files=files,
    )
    try:
        tracker.log_tables(run_id, _tables(shadow.analysis, shadow.records, shadow.policy))
        tracker.log_metrics(run_id, _metrics(shadow.analysis, shadow.decision))
        digest = tracker.seal(run_id)
    except Exception as exc:
        tracker.fail(run_id, f"sealing failed: {type(exc).__name__}: {exc}")
        raise
    return ShadowOutcome(
        run_id, name, digest, shadow.analysis, shadow.decision, shadow.pools, shadow.simulated, shadow.warnings
    )


def _analyse(request: ShadowRequest, tracker: Tracker) -> _Shadow:
    """Read the log under its policy (refused first: no policy, no reading), analyse it against the
    benchmark, decide it under the rules, and make the judgment pools (written to ``pool_out``)."""
    req = request
    policy = load_import_policy(req.policy_file, req.today or dt.date.today())
    log_file = Path(req.log_file)
    records = read_log(log_file)
    check_import_policy(records, policy, str(log_file))
    rules = load_rules(req.rules_file) if req.rules_file is not None else None
    bench = load_benchmark(req.benchmark)
    runs = {
        role: sealed_and_intact(tracker, run_id)
        for role, run_id in (("baseline", req.baseline_run), ("candidate", req.candidate_run))
        if run_id is not None
    }
    chunking = req.chunking
    if chunking is None and req.candidate_run is not None and bench.spec.relevanceUnit == "passage":
        chunking = config_from_yaml(tracker.run_artifacts(req.candidate_run).config_yaml).chunking
    analysis = analyze_shadow(records, bench, k=req.k, p=req.p, resamples=req.resamples, seed=req.seed)
    decision = decide_shadow(rules, analysis) if rules is not None else None
    warnings: list[str] = []
    pooled = _pools(analysis, bench, chunking, req.k, req.seed, warnings)
    if req.pool_out is not None:
        for split, result in pooled.items():
            write_pool(result, Path(req.pool_out) / split)
    configs = {arm: sorted({c for r in records if (c := getattr(r, arm).config)}) for arm in ("baseline", "candidate")}
    link = {
        role: (runs[role].tags.get("rageval.config.label") or runs[role].tags.get("rageval.config.name", ""))
        if role in runs
        else ", ".join(configs[role])
        for role in ("baseline", "candidate")
    }
    pools = {split: result.manifest for split, result in pooled.items()}
    return _Shadow(request, log_file, policy, records, rules, bench, analysis, decision, pools, warnings, link)


def _shadow_record(shadow: _Shadow, policy_bytes: bytes) -> dict[str, Any]:
    """decision.json: the verdict, the log, the import policy, the rules, both arms, the pools."""
    policy, decision, req = shadow.policy, shadow.decision, shadow.request
    return {
        "verdict": shadow.verdict,
        "simulated": shadow.simulated,
        "log": {"file": shadow.log_file.name, "sha256": sha256_file(shadow.log_file), "requests": len(shadow.records)},
        "import_policy": {
            "name": policy.name,
            "authorization": policy.authorization,
            "redaction": policy.redaction.model_dump(),
            "retention": str(policy.retention),
            "keep": list(policy.keep),
            "sha256": sha256_bytes(policy_bytes),
        },
        "rules": [r.__dict__ for r in decision.rules] if decision is not None else [],
        "rules_name": shadow.rules.name if shadow.rules else None,
        "rbo": {"p": req.p, "forms": ["min", "res", "ext"], "rule_uses": "ext"},
        "k": req.k,
        "resamples": req.resamples,
        "seed": req.seed,
        "baseline": {"run_id": req.baseline_run, "config": shadow.link["baseline"]},
        "candidate": {"run_id": req.candidate_run, "config": shadow.link["candidate"]},
        "pools": {split: f"pool/{split}/{POOL_FILE}" for split in shadow.pools},
        "warnings": shadow.warnings,
    }


def _shadow_tags(shadow: _Shadow) -> dict[str, str]:
    baseline_run, candidate_run, link, warnings = (
        shadow.request.baseline_run,
        shadow.request.candidate_run,
        shadow.link,
        shadow.warnings,
    )
    label = "SIMULATED shadow log" if shadow.simulated else "shadow log"
    return {
        **git_state(project_root()),
        "rageval.version": RAGEVAL_VERSION,
        "rageval.kind": "shadow",
        "rageval.simulated": str(shadow.simulated).lower(),
        **today_override(shadow.request.today),
        VERDICT_TAG: shadow.verdict,
        # a configuration only where the arm is no run (the run's own tags name its configuration)
        **({BASELINE_CONFIG_TAG: link["baseline"]} if not baseline_run and link["baseline"] else {}),
        **({CANDIDATE_CONFIG_TAG: link["candidate"]} if not candidate_run and link["candidate"] else {}),
        **role_tags(baseline_run, [candidate_run]),
        "rageval.benchmark.name": shadow.bench.spec.name,
        "rageval.benchmark.version": shadow.bench.spec.version,
        NOTE_TAG: _note(label, shadow.analysis, shadow.decision),
        **({"rageval.warning.shadow": "\n".join(warnings)[:4000]} if warnings else {}),
    }


def _frames(top: pd.DataFrame, bench: Benchmark, split: str) -> dict[str, pd.DataFrame]:
    cases = {c.queryId for c in bench.cases_for(split)}
    frame = top[top["query_id"].isin(cases)].drop(columns="judged")
    # one ranking per case, the first request of it logged: the pool's depth is then the candidate's k
    first = frame.drop_duplicates("query_id")[["query_id", "request_id"]]
    return {"shadow-candidate": frame.merge(first, on=["query_id", "request_id"]).drop(columns="request_id")}


def _pools(
    analysis: ShadowAnalysis, bench: Benchmark, chunking: ChunkingConfig | None, k: int, seed: int, warnings: list[str]
) -> dict[str, Pool]:
    """One pool per split of the matched cases: the candidate's top-k items the benchmark never
    judged (at passage level, the chunks whose span no judgment covers: pool() decides)."""
    top = analysis.candidate_top
    if bench.spec.relevanceUnit == "passage":
        if chunking is None:
            if not top.empty:
                warnings.append(
                    "no judgment pool: the benchmark judges passages, and pooling needs the candidate's chunking "
                    "(give --candidate RUN or --chunking)"
                )
            return {}
        whole = top["chunk_id"] == top["parent_id"]
        if (whole & ~top["judged"]).any():
            warnings.append(
                f"{int((whole & ~top['judged']).sum())} unjudged candidate result(s) are whole documents, not "
                "chunks: a passage benchmark cannot pool them"
            )
        top = top[~whole]
    pools = {
        split: pool(_frames(top, bench, split), bench, split, k, seed=seed, chunking=[chunking] if chunking else [])
        for split in sorted({c.split for c in bench.cases if c.queryId in set(top["query_id"])})
    }
    return {split: result for split, result in pools.items() if result.manifest.items}


def _tables(analysis: ShadowAnalysis, records: list[ShadowRecord], policy: ImportPolicy) -> dict[str, pd.DataFrame]:
    """The tables as recorded: hashes always; request IDs, principals, segments and redacted text
    only where the policy keeps them."""
    per_request = analysis.per_request.copy()
    per_request["segment"] = per_request["segment"].map("; ".join)
    by_id = {r.request_id: r for r in records}
    if "query" in policy.keep:
        per_request.insert(2, "query_redacted", per_request["request_id"].map(lambda i: by_id[i].query))
    if "principal" in policy.keep:
        per_request["principal"] = per_request["request_id"].map(lambda i: "; ".join(by_id[i].principal or ()))
    if "segment" not in policy.keep:
        per_request = per_request.drop(columns="segment")
    leaks = analysis.leaks
    if "request_id" not in policy.keep:
        per_request = per_request.drop(columns="request_id")
        leaks = leaks.drop(columns="request_id")
    return {
        "shadow_summary": analysis.summary,
        "shadow_latency": analysis.latency,
        "shadow_resources": analysis.resources,
        "shadow_leaks": leaks,
        "shadow_per_request": per_request,
    }


# The whole log's figures a reviewer reads at a glance, the run's only metric keys: every other figure
# (the whole log's and each slice's, latency quantiles and intervals, resources) is a row of
# tables/shadow_summary, shadow_latency and shadow_resources (docs/records.md).
HEADLINE = ("candidate_leaks", "rbo_ext_mean", "top1_change_rate")


def _metrics(analysis: ShadowAnalysis, decision: ShadowDecision | None) -> dict[str, float]:
    """The verdict's figures and :data:`HEADLINE`: the runs table and chart view show those, and the
    release path's experiment stays within its columns however many slices the log has."""
    o = analysis.overall
    out: dict[str, Any] = {key: o[key] for key in HEADLINE}
    if decision is not None:
        out["passed"] = float(decision.passed)
        out["rules_failed"] = sum(r.verdict == "fail" for r in decision.rules)
    return {key: float(v) for key, v in out.items() if v is not None and not math.isnan(float(v))}


def _note(label: str, analysis: ShadowAnalysis, decision: ShadowDecision | None) -> str:
    o = analysis.overall
    p95 = analysis.latency_row(0.95)
    lines = [
        f"**{label}**: {o['requests']} requests, {o['compared']} compared. Mean RBO_ext {o['rbo_ext_mean']:.3f} "
        f"(p={analysis.p}), Jaccard@{analysis.k} {o['jaccard_mean']:.3f}, top-1 changed {o['top1_change_rate']:.1%}, "
        f"p95 latency {p95.get('delta_ms', float('nan')):+.1f} ms, candidate leaks {o['candidate_leaks']}.",
    ]
    if decision is not None:
        lines.append(f"\nVerdict: **{decision.verdict.upper()}**\n")
        lines += [f"- {r.verdict.upper()} {r.rule}: {r.reason}" for r in decision.rules]
    return "\n".join(lines)


def _finite(value: Any) -> Any:
    """NaN (a figure with no requests behind it) as JSON null: NaN is no JSON."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")
