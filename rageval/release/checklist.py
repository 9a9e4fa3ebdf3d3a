"""The release checklist: ten items, each PASS or FAIL from recorded evidence with a one-line reason
and the record (run ID and artifact or tag) that shows it.

The guide's own checklist text is not in this repository: the ten items are reconstructed from the
wording of issue 14 (see docs/release-decision.md). :func:`checklist` is pure: the workflow gathers
:class:`ChecklistInputs` from the store (:mod:`rageval.workflows.release.record`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd

from rageval.analysis.paired import query_slices
from rageval.benchmark.schema import JUDGE_ASSESSOR_PREFIXES
from rageval.release.decision import Evidence, ReleaseDecision
from rageval.release.marks import VERDICT_TAG

# The slices the release split must hold, each with the names a benchmark may give it.
REQUIRED_SLICES: dict[str, tuple[str, ...]] = {
    "unanswerable": ("unanswerable",),
    "permission": ("permission", "permissions", "acl"),
    "time-sensitive": ("time-sensitive", "temporal", "freshness"),
    "multi-hop": ("multi-hop", "multi-doc", "multihop"),
    "long-tail": ("long-tail", "tail", "rare"),
}
# The tags rageval judge calibrate writes on its run (rageval.workflows.judge imports them from here).
ASSESSOR_TAG = "rageval.judge.assessor"
CALIBRATION_PASSED_TAG = "rageval.judge.calibration.passed"


@dataclass(frozen=True)
class Item:
    number: int
    item: str
    verdict: Literal["pass", "fail"]
    reason: str
    record: str  # the run ID and the artifact or tag that shows it


@dataclass(frozen=True)
class EvalRun:
    """A baseline or candidate evaluation run, as the checklist reads it."""

    run_id: str
    tags: dict[str, str]
    intact: list[str]  # why it is not intact (empty: sealed and intact)
    config_yaml: str
    final_k: int
    queries: pd.DataFrame  # query_id, slices, answerable, ...


@dataclass(frozen=True)
class ChecklistInputs:
    release_run: str
    decision: ReleaseDecision
    evidence: dict[str, Evidence]
    baseline: EvalRun | None
    candidate: EvalRun | None
    gate_measures: list[str] = field(default_factory=list)  # the gate policy's measures
    gate_baseline_config: str = ""  # baseline_config.yaml of the gate run
    llm_assessors: dict[str, str] = field(default_factory=dict)  # assessor → where it was found
    calibrations: list[Evidence] = field(default_factory=list)  # sealed judge-calibration runs
    rollbacks: list[Evidence] = field(default_factory=list)  # sealed rollback runs
    notes_problem: str | None = None  # why the benchmark's judgment notes cannot be seen
    release_problems: list[str] = field(default_factory=list)  # why the release run's own record does not hold


def _cutoff(measure: str) -> int | None:
    found = re.search(r"@(\d+)$", measure)
    return int(found.group(1)) if found else None


def _frozen(x: ChecklistInputs) -> Item:
    runs = [r for r in (x.baseline, x.candidate) if r is not None]
    if len(runs) < 2:
        return Item(1, "", "fail", "the baseline and candidate evaluation runs cannot be read", "")
    off = [
        f"{r.run_id} is on '{r.tags.get('rageval.split', '?')}'"
        for r in runs
        if r.tags.get("rageval.split") != "release"
    ]
    uncounted = [r.run_id for r in runs if "rageval.release.evaluations" not in r.tags]
    counts = ", ".join(f"{r.run_id} #{r.tags.get('rageval.release.evaluations', '?')}" for r in runs)
    gate = x.evidence.get("gate")
    warned = [
        r["reason"]
        for r in (gate.record.get("rules", []) if gate else [])
        if r.get("rule") == "release evaluations" and r.get("verdict") == "warn"
    ]
    record = f"{x.candidate.run_id if x.candidate else ''} tag rageval.release.evaluations"
    if off or uncounted:
        why = "; ".join(off + [f"{u} has no rageval.release.evaluations count" for u in uncounted])
        return Item(1, "", "fail", why, record)
    if warned:
        return Item(1, "", "fail", f"the gate warned: {warned[0]}", f"{gate.run_id if gate else ''} decision.json")
    return Item(1, "", "pass", f"both runs on the release split, counted ({counts}), within the gate's limit", record)


def _baseline_preserved(x: ChecklistInputs) -> Item:
    b = x.baseline
    if b is None:
        return Item(2, "", "fail", "the baseline evaluation run cannot be read", "")
    record = f"{b.run_id} seal manifest; gate baseline_config.yaml"
    if b.intact:
        return Item(2, "", "fail", f"baseline run {b.run_id} is not intact: {b.intact[0]}", record)
    if x.gate_baseline_config and x.gate_baseline_config != b.config_yaml:
        return Item(2, "", "fail", "the gate's baseline_config.yaml differs from the baseline run's config", record)
    commit = b.tags.get("rageval.git.commit", "unknown")
    if commit == "unknown" or b.tags.get("rageval.git.dirty") != "false":
        return Item(2, "", "fail", f"baseline run {b.run_id} was not made from a clean commit ({commit})", record)
    # rageval's own revision too: a modified checkout of rageval is not the code the commit names.
    if b.tags.get("rageval.source.dirty") == "true":
        return Item(2, "", "fail", f"baseline run {b.run_id} ran on a modified rageval checkout", record)
    return Item(2, "", "pass", f"baseline sealed and intact, config as gated, clean commit {commit[:10]}", record)


def _significance(x: ChecklistInputs) -> Item:
    gate = x.evidence.get("gate")
    if gate is None or gate.problem:
        return Item(3, "", "fail", "no readable gate run", gate.run_id if gate else "")
    rules = [r for r in gate.record.get("rules", []) if str(r.get("rule", "")).startswith("measure ")]
    record = f"{gate.run_id} decision.json rules"
    failed = [f"{r['rule']}: {r['reason']}" for r in rules if r.get("verdict") == "fail"]
    if not rules:
        return Item(3, "", "fail", "the gate recorded no measure rule", record)
    if failed or gate.tags.get(VERDICT_TAG) != "pass":
        return Item(3, "", "fail", failed[0] if failed else "the gate did not pass", record)
    return Item(3, "", "pass", f"{len(rules)} measure rule(s) (significance / non-inferiority) pass on release", record)


def _k_budget(x: ChecklistInputs) -> Item:
    gate = x.evidence.get("gate")
    record = f"{gate.run_id if gate else ''} policy.yaml measures; config.yaml final_k"
    cutoffs = {m: c for m in x.gate_measures if (c := _cutoff(m)) is not None}
    runs = [r for r in (x.baseline, x.candidate) if r is not None]
    if not cutoffs or not runs:
        return Item(4, "", "fail", "no gate measure with a cutoff, or no readable configuration", record)
    budgets = sorted({r.final_k for r in runs})
    at = [m for m, c in cutoffs.items() if c in budgets]
    past = [m for m, c in cutoffs.items() if c > max(budgets)]
    note = f" ({', '.join(past)} look past the context)" if past else ""
    if len(budgets) > 1 or not at:
        return Item(4, "", "fail", f"final_k {budgets} is no cutoff of the gate's measures {list(cutoffs)}", record)
    return Item(4, "", "pass", f"{', '.join(at)} at final_k {budgets[0]}{note}", record)


def _slices(x: ChecklistInputs) -> Item:
    c = x.candidate
    if c is None:
        return Item(5, "", "fail", "the candidate evaluation run cannot be read", "")
    names: dict[str, int] = {}
    for labels in (query_slices(c.queries) if "slices" in c.queries else {}).values():
        for name in labels:
            names[name] = names.get(name, 0) + 1
    if "answerable" in c.queries:
        names["unanswerable"] = max(names.get("unanswerable", 0), int((~c.queries["answerable"].astype(bool)).sum()))
    found = {want: sum(names.get(a, 0) for a in aliases) for want, aliases in REQUIRED_SLICES.items()}
    record = f"{c.run_id} queries table (release split)"
    missing = [w for w, n in found.items() if n == 0]
    shown = ", ".join(f"{w} {n}" for w, n in found.items())
    if missing:
        return Item(5, "", "fail", f"the release split has no {', '.join(missing)} queries ({shown})", record)
    return Item(5, "", "pass", f"release split queries per slice: {shown}", record)


def _calibrated(x: ChecklistInputs) -> Item:
    if x.notes_problem:
        why = f"the judgment notes cannot be seen: {x.notes_problem}"
        return Item(6, "", "fail", why, "benchmark judgment-notes.jsonl")
    llm = {a: w for a, w in x.llm_assessors.items() if a.startswith(JUDGE_ASSESSOR_PREFIXES)}
    if not llm:
        return Item(6, "", "pass", "no LLM labels in the benchmark's judgments", "benchmark judgment-notes.jsonl")
    missing = []
    shown = []
    for assessor in sorted(llm):
        # the tags rageval judge calibrate writes (rageval.workflows.judge): the judge's assessor mark
        match = [c for c in x.calibrations if c.tags.get(ASSESSOR_TAG) == assessor]
        passing = [c for c in match if _calibration_passed(c)]
        if passing:
            shown.append(f"{assessor} by {passing[-1].run_id}")
        else:
            missing.append(assessor + (" (calibration failed)" if match else ""))
    record = ", ".join(shown) or next(iter(llm.values()))
    if missing:
        return Item(6, "", "fail", f"no passing judge-calibration run for {', '.join(missing)}", record)
    return Item(6, "", "pass", f"every LLM assessor calibrated: {'; '.join(shown)}", record)


def _calibration_passed(run: Evidence) -> bool:
    return not run.problem and run.tags.get(CALIBRATION_PASSED_TAG) == "true"


def _review(x: ChecklistInputs) -> Item:
    r = x.evidence.get("review")
    if r is None or r.problem:
        return Item(7, "", "fail", r.problem if r and r.problem else "no review run", r.run_id if r else "")
    record = f"{r.run_id} tags rageval.review.status/open_rejections"
    status, rejections = r.tags.get("rageval.review.status"), r.tags.get("rageval.review.open_rejections")
    reviewers = r.tags.get("rageval.review.reviewers", "")
    label = " (SIMULATED review)" if r.simulated else ""
    if status != "complete" or rejections != "0" or not reviewers:
        why = f"status {status}, open rejections {rejections}, reviewers '{reviewers}'"
        return Item(7, "", "fail", why + label, record)
    return Item(7, "", "pass", f"complete, 0 open rejections, reviewers {reviewers}{label}", record)


def _shadow(x: ChecklistInputs) -> Item:
    s = x.evidence.get("shadow")
    if s is None or s.problem:
        return Item(8, "", "fail", s.problem if s and s.problem else "no shadow run", s.run_id if s else "")
    leaks = s.metrics.get("candidate_leaks")
    record = f"{s.run_id} metric candidate_leaks, tables/shadow_leaks"
    label = " (SIMULATED log)" if s.simulated else ""
    if leaks is None:
        return Item(8, "", "fail", "the shadow run recorded no leak count", record)
    if leaks:
        return Item(8, "", "fail", f"{leaks:.0f} candidate result(s) the asker may not see{label}", record)
    return Item(8, "", "pass", f"0 candidate leaks over the shadow log{label}", record)


def _online(x: ChecklistInputs) -> Item:
    o = x.evidence.get("online")
    if o is None or o.problem:
        return Item(9, "", "fail", o.problem if o and o.problem else "no online run", o.run_id if o else "")
    record = f"{o.run_id} decision.json sample_ratio, metrics"
    srm = o.record.get("sample_ratio", {})
    label = " (SIMULATED cohort)" if o.simulated else ""
    if not srm.get("passed", False):
        return Item(9, "", "fail", f"sample-ratio mismatch (p={srm.get('p_value', float('nan')):.2g}){label}", record)
    guards = [m for m in o.record.get("metrics", []) if m.get("role") == "guardrail"]
    bad = [f"{m['metric']}: {m['reason']}" for m in guards if m.get("verdict") != "pass"]
    if bad:
        return Item(9, "", "fail", f"guardrail regressed: {bad[0]}{label}", record)
    return Item(
        9, "", "pass", f"no SRM (p={srm.get('p_value', 0):.2g}), {len(guards)} guardrail(s) hold{label}", record
    )


def _one_path(x: ChecklistInputs) -> Item:
    layers = {r.layer: r for r in x.decision.layers}
    absent = [name for name in ("gate", "shadow", "online") if layers.get(name) is None or not layers[name].run_id]
    failed = [f"{r.layer}: {r.reason}" for r in x.decision.layers if r.verdict == "fail"]
    base = x.baseline.run_id if x.baseline else ""
    rollback = [
        r
        for r in x.rollbacks
        if r.tags.get("rageval.promotion.release") == x.release_run
        or (base and r.tags.get("rageval.rollback.restored_run") == base)
    ]
    record = f"{x.release_run} tags rageval.release.*" + (f"; rollback run {rollback[-1].run_id}" if rollback else "")
    if x.release_problems:
        return Item(10, "", "fail", f"the release run does not hold: {x.release_problems[0]}", record)
    if absent or failed:
        why = f"missing {', '.join(absent)} evidence" if absent else failed[0]
        return Item(10, "", "fail", why, record)
    if not rollback:
        why = "offline, shadow and online concern one pair, but no rollback run names this release or its baseline"
        return Item(10, "", "fail", why + " (promote, run the rollback drill, then `rageval checklist` again)", record)
    last = rollback[-1]
    verdict = last.tags.get(VERDICT_TAG)
    if last.problem or verdict != "pass":
        why = last.problem or (f"its verdict is {verdict}" if verdict else "it records no verdict")
        return Item(10, "", "fail", f"rollback run {last.run_id}: {why}", record)
    return Item(10, "", "pass", f"offline, shadow, online and rollback ({last.run_id}) concern one pair", record)


ITEMS: Sequence[tuple[str, Callable[[ChecklistInputs], Item]]] = (
    ("the release split is frozen and was not used for tuning", _frozen),
    ("the baseline is exactly preserved and reproducible", _baseline_preserved),
    ("significance or non-inferiority is shown on the release split", _significance),
    ("k matches the context budget", _k_budget),
    ("unanswerable, permission, time-sensitive, multi-hop and long-tail slices exist", _slices),
    ("any LLM judge is calibrated", _calibrated),
    ("human review is complete", _review),
    ("shadow traffic shows no permission leaks", _shadow),
    ("online evidence has no sample-ratio mismatch and the guardrails hold", _online),
    ("offline, shadow, online, and rollback evidence form one release path", _one_path),
)


def checklist(inputs: ChecklistInputs) -> list[Item]:
    """The ten items in order, each answered from ``inputs``."""
    out = []
    for number, (title, check) in enumerate(ITEMS, 1):
        found = check(inputs)
        out.append(Item(number, title, found.verdict, found.reason, found.record))
    return out


def checklist_frame(items: Sequence[Item]) -> pd.DataFrame:
    return pd.DataFrame([i.__dict__ for i in items], columns=list(Item.__dataclass_fields__))


def changed_items(stored: Sequence[dict[str, Any]], now: Sequence[Item]) -> list[str]:
    """The items whose verdict changed since the checklist stored with the release run."""
    before = {int(row["number"]): row["verdict"] for row in stored}
    return [
        f"{i.number}. {i.item}: {before[i.number].upper()} → {i.verdict.upper()}"
        for i in now
        if i.number in before and before[i.number] != i.verdict
    ]
