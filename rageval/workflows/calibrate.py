"""``rageval judge calibrate``: a judge measured against human labels on a benchmark's judged units
(weighted kappa per slice, Kendall's tau of system rankings), recorded as a sealed
``judge-calibration`` run that :mod:`rageval.workflows.judge`'s pre-labeling requires."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rageval.analysis.records import RunInfo
from rageval.benchmark.loading import Benchmark, load_benchmark
from rageval.errors import ConfigError, Problem
from rageval.judging.backends import Backend
from rageval.judging.calibration import (
    Agreement,
    RankCorrelation,
    agreement_with_humans,
    calibration_pool,
    system_ranking_correlation,
    unit_qrels,
)
from rageval.judging.judges import CalibrationRule, Judge, load_judge
from rageval.judging.prelabel import Prelabels
from rageval.safety import csv_bytes
from rageval.tracking.records import KIND_TAG, NOTE_TAG
from rageval.tracking.store import Tracker
from rageval.workflows.guards import sealed_and_intact
from rageval.workflows.judge import (
    CALIBRATION_KIND,
    PASSED_TAG,
    benchmark_path,
    json_plain,
    judge_tags,
    make_backend,
    prelabel_pool,
)


@dataclass(frozen=True)
class CalibrationOutcome:
    run_id: str
    passed: bool
    reasons: list[str]
    agreement: Agreement
    correlation: RankCorrelation
    prelabels: Prelabels


def evaluation_runs(tracker: Tracker, benchmark: Benchmark, split: str) -> list[RunInfo]:
    """The store's sealed evaluation runs of this benchmark version and split (newest first)."""
    return [
        info
        for info in tracker.runs()
        if info.sealed
        and info.tags.get(KIND_TAG) == "evaluation"
        and info.tags.get("rageval.benchmark.name") == benchmark.spec.name
        and info.tags.get("rageval.hash.cases") == benchmark.hashes["cases"]
        and info.tags.get("rageval.split") == split
    ]


@dataclass(frozen=True)
class _Calibration:
    """A judge measured against the human labels: everything its calibration run is made of."""

    judge: Judge
    identity: dict[str, str]  # the backend's identity tags (none for a backend passed in)
    bench: Benchmark
    split: str
    result: Prelabels
    human: dict[str, int]
    agreement: Agreement
    correlation: RankCorrelation
    infos: list[RunInfo]  # the evaluation runs re-scored for Kendall's tau

    @property
    def kappa(self) -> float:
        return float(self.agreement.per_slice.loc["all", "weighted_kappa"])

    @property
    def reasons(self) -> list[str]:
        return _calibration_reasons(self.agreement, self.correlation, len(self.infos), self.judge.config.calibration)


@dataclass(frozen=True)
class CalibrationRequest:
    """One judge to calibrate, as ``rageval judge calibrate`` and the tests give it: ``benchmark`` and
    ``split`` default to the judge configuration's ``calibration`` ones, ``runs`` (re-scored for
    Kendall's tau) to every matching sealed evaluation run in the store, ``experiment`` to
    ``judge-<name>``; ``seed`` orders the judging."""

    judge_file: str | Path
    benchmark: str | Path | None = None
    split: str | None = None
    runs: Sequence[str] = ()
    experiment: str | None = None
    seed: int = 0


def execute_calibrate(
    request: CalibrationRequest,
    *,
    tracker: Tracker,
    backend: Backend | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> CalibrationOutcome:
    """Judge the calibration benchmark's judged units, compare with the human grades and record a
    sealed calibration run; the request's ``runs`` are re-scored under both label sets for Kendall's
    tau. ``backend``: a judge backend of the caller's (kept open), instead of the configuration's."""
    judge = load_judge(request.judge_file)
    rule = judge.config.calibration
    bench = load_benchmark(request.benchmark or benchmark_path(rule.benchmark))
    chosen_split = request.split or rule.split
    made, identity = (backend, {}) if backend is not None else make_backend(judge)
    manifest, human = calibration_pool(bench, chosen_split, request.seed)
    result = prelabel_pool(manifest, bench, judge, made, request.seed, progress, owned=backend is None)
    _some_reply(judge, result)
    judged = {r.item.itemId: int(r.grade) for r in result.results if r.grade is not None}
    slices = {item.itemId: item.slice for item in manifest.items}
    agreement = agreement_with_humans(human, judged, slices, list(judge.config.rubric), rule.weights)
    runs = request.runs
    infos = [sealed_and_intact(tracker, r) for r in runs] if runs else evaluation_runs(tracker, bench, chosen_split)
    cases = [case.queryId for case in bench.cases_for(chosen_split)]
    correlation = system_ranking_correlation(
        {info.run_id: tracker.rankings(info.run_id) for info in infos},
        unit_qrels(manifest, human, cases),
        unit_qrels(manifest, judged, cases),
        rule.measure,
    )
    calibration = _Calibration(judge, identity, bench, chosen_split, result, human, agreement, correlation, infos)
    return _record_calibration(calibration, tracker, request.experiment)


def _record_calibration(c: _Calibration, tracker: Tracker, experiment: str | None) -> CalibrationOutcome:
    """The sealed ``judge-calibration`` run: its verdict, the agreement tables and every item."""
    judge, bench, rule, reasons = c.judge, c.bench, c.judge.config.calibration, c.reasons
    passed = not reasons
    record = {
        "judge": judge.record(),
        "benchmark": {"name": bench.spec.name, "version": bench.spec.version, "split": c.split},
        "threshold": rule.model_dump(),
        "passed": passed,
        "reasons": reasons,
        "weighted_kappa": c.kappa,
        "kendall_tau": c.correlation.tau,
        "kendall_p": c.correlation.p_value,
        "runs": [info.run_id for info in c.infos],
        "prelabel": c.result.summary(),
    }
    verdict = "passed" if passed else "failed"
    run_id = tracker.create_run(
        experiment or f"judge-{judge.config.name}",
        f"calibrate {judge.config.name} on {bench.spec.name} {bench.spec.version}@{c.split} → {verdict}",
        params={
            "judge": judge.config.name,
            "model": judge.config.model,
            "revision": judge.config.revision,
            "benchmark": bench.spec.name,
            "split": c.split,
            "min_weighted_kappa": rule.min_weighted_kappa,
            "weights": rule.weights,
            "measure": rule.measure,
        },
        tags={
            **judge_tags(judge, c.identity),
            KIND_TAG: CALIBRATION_KIND,
            PASSED_TAG: str(passed).lower(),
            "rageval.benchmark.name": bench.spec.name,
            "rageval.benchmark.version": bench.spec.version,
            "rageval.hash.cases": bench.hashes["cases"],
            "rageval.split": c.split,
            NOTE_TAG: f"Judge calibration of `{judge.config.name}` ({judge.assessor}): weighted kappa {c.kappa:.3f}, "
            f"Kendall's tau {c.correlation.tau:.3f} over {len(c.infos)} runs: **{verdict}**"
            + (f" ({'; '.join(reasons)})" if reasons else ""),
        },
        files={
            "calibration.json": json.dumps(record, indent=2, default=json_plain).encode(),
            "judge.yaml": judge.file.read_bytes(),
            "prompt.txt": judge.template.encode(),
            "agreement.csv": csv_bytes(c.agreement.per_slice.reset_index()),
            "confusion.csv": csv_bytes(c.agreement.confusion),
            "system_rankings.csv": csv_bytes(c.correlation.scores),
            "items.csv": csv_bytes(_items_with_human(c.result, c.human)),
        },
    )
    try:
        tracker.log_metrics(run_id, _calibration_metrics(c))
        tracker.seal(run_id)
    except Exception as exc:
        tracker.fail(run_id, f"sealing failed: {type(exc).__name__}: {exc}")
        raise
    return CalibrationOutcome(run_id, passed, reasons, c.agreement, c.correlation, c.result)


def _calibration_metrics(c: _Calibration) -> dict[str, float]:
    """The run's metrics, those that are finite (a nan kappa or tau is in calibration.json)."""
    metrics = {
        "passed": float(not c.reasons),
        "weighted_kappa": c.kappa,
        "kendall_tau": c.correlation.tau,
        "kendall_p": c.correlation.p_value,
        "runs": float(len(c.infos)),
        **{f"prelabel/{k}": v for k, v in c.result.summary().items()},
        **_slice_kappas(c.agreement),
    }
    return {k: v for k, v in metrics.items() if np.isfinite(v)}


def _calibration_reasons(
    agreement: Agreement, correlation: RankCorrelation, runs: int, rule: CalibrationRule
) -> list[str]:
    """Why a calibration fails its rule (none: it passes); a nan kappa or tau fails too."""
    kappa = float(agreement.per_slice.loc["all", "weighted_kappa"])
    reasons = []
    if not kappa >= rule.min_weighted_kappa:
        reasons.append(f"weighted kappa {kappa:.3f} < {rule.min_weighted_kappa}")
    if rule.min_kendall_tau is not None and not correlation.tau >= rule.min_kendall_tau:
        reasons.append(f"Kendall's tau {correlation.tau:.3f} < {rule.min_kendall_tau} over {runs} runs")
    return reasons + _slice_reasons(agreement, rule)


def _slice_kappas(agreement: Agreement) -> dict[str, float]:
    return {
        f"weighted_kappa/{scope}": float(row["weighted_kappa"])
        for scope, row in agreement.per_slice.iterrows()
        if scope != "all"
    }


def _slice_reasons(agreement: Agreement, rule: CalibrationRule) -> list[str]:
    """A slice an average hides: each with enough labelled items must reach the slice minimum."""
    if rule.min_slice_weighted_kappa is None:
        return []
    rows = agreement.per_slice.drop(index="all")
    held = rows[rows["labelled"] >= rule.min_slice_items]
    return [
        f"weighted kappa {row['weighted_kappa']:.3f} on slice {scope} ({int(row['labelled'])} items) "
        f"< {rule.min_slice_weighted_kappa}"
        for scope, row in held.iterrows()
        if not row["weighted_kappa"] >= rule.min_slice_weighted_kappa  # nan fails too
    ]


def _some_reply(judge: Judge, result: Prelabels) -> None:
    """Refuse a calibration in which no item got a reply (an endpoint down, a wrong model name):
    there is nothing to measure, so no verdict is recorded."""
    if not result.results or any(r.status != "failed" for r in result.results):
        return
    errors = [f for r in result.results for f in r.failures]
    backend = judge.config.backend
    where = f"the endpoint {backend.base_url} " if hasattr(backend, "base_url") else "the judge "
    raise ConfigError(
        Problem(
            file=str(judge.file),
            field="backend",
            message=f"every one of the {len(result.results)} calibration items failed, none got a reply "
            f"(first error: {errors[0] if errors else 'none recorded'}); no calibration verdict was recorded",
            fix=f"check that {where}is up and serves model {judge.config.model}, then calibrate again",
        )
    )


def _items_with_human(result: Prelabels, human: dict[str, int]) -> Any:
    table = result.table()
    table.insert(3, "human_grade", [human[i] for i in table["item_id"]])
    return table


# --------------------------------------------------------------------------- prelabel
