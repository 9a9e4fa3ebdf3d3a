"""``rageval judge calibrate`` and ``rageval judge prelabel``: a judge measured against human labels
(a sealed ``judge-calibration`` run, tagged with the judge configuration's hash), and a pool
pre-labeled by a judge only where such a run records a pass.

Raw query text never reaches the store: the runs hold item IDs, grades, counts and the judge's
identity; the judge's reasons and evidence stay in the output folder beside the pool.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rageval.analysis.records import RunInfo
from rageval.benchmark.loading import Benchmark, load_benchmark
from rageval.errors import BenchmarkError, ConfigError, Problem
from rageval.io import make_folder
from rageval.judging.backends import Backend, ChatBackend, SimilarityJudge, check_template
from rageval.judging.judges import Judge, SimilarityBackend, load_judge
from rageval.judging.prelabel import Prelabels, detail, prelabel, review_sheet
from rageval.judging.schema import PoolManifest
from rageval.judging.sheets import read_pool, sheet_csv, write_labels
from rageval.paths import project_root
from rageval.release.checklist import ASSESSOR_TAG
from rageval.release.checklist import CALIBRATION_PASSED_TAG as PASSED_TAG
from rageval.release.marks import overrides_tag
from rageval.safety import csv_bytes
from rageval.tracking.records import KIND_TAG, NOTE_TAG
from rageval.tracking.store import Tracker
from rageval.workflows.guards import sealed_and_intact
from rageval.workflows.provenance import RAGEVAL_VERSION, git_state

CALIBRATION_KIND = "judge-calibration"
PRELABEL_KIND = "judge-prelabel"
HASH_TAG = "rageval.judge.config_hash"
JUDGE_LABELS = "judge-labels.jsonl"
DETAIL_FILE = "prelabels.jsonl"
REVIEW_SHEET = "review-sheet.csv"


def make_backend(judge: Judge) -> tuple[Backend, dict[str, str]]:
    """The judge's backend and what identifies its model beyond the config (a local model's sha256)."""
    check_template(judge)
    if isinstance(judge.config.backend, SimilarityBackend):
        from rageval.retrieval.encoders import bi_encoder, encode, model_identity, resolve_model

        _check_package_revision(judge)
        path = resolve_model(judge.config.model, field="model")
        model = bi_encoder(path, "cpu")
        batch = judge.config.backend.batch_size
        identity = model_identity(judge.config.model, path)

        def vectors(texts: list[str]) -> np.ndarray:
            return encode(model, texts, batch_size=batch, max_seq_length=None)

        return SimilarityJudge(judge, vectors), {"rageval.judge.model_sha256": identity["sha256"]}
    return ChatBackend(judge), {}


def _check_package_revision(judge: Judge) -> None:
    """An offline model package must be the pinned revision (its version); a model folder is
    identified by its files' sha256 instead, recorded with the run."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version(judge.config.model)
    except PackageNotFoundError:
        return
    if installed != judge.config.revision:
        raise ConfigError(
            Problem(
                file=str(judge.file),
                field="revision",
                message=f"the installed {judge.config.model} is {installed}, not the pinned revision {judge.config.revision}",
                fix="install the pinned revision, or pin the installed one and run `rageval judge calibrate` again",
            )
        )


def benchmark_path(name: str) -> Path:
    path = Path(name)
    return path if path.is_absolute() or path.exists() else project_root() / path


def judge_tags(judge: Judge, extra: dict[str, str]) -> dict[str, str]:
    c = judge.config
    return {
        **git_state(project_root()),
        "rageval.version": RAGEVAL_VERSION,
        HASH_TAG: judge.config_hash,
        "rageval.judge.name": c.name,
        "rageval.judge.model": c.model,
        "rageval.judge.revision": c.revision,
        "rageval.judge.backend": c.backend.type,
        "rageval.judge.prompt_sha256": c.prompt_sha256,
        ASSESSOR_TAG: judge.assessor,
        **extra,
    }


# --------------------------------------------------------------------------- calibrate


@dataclass(frozen=True)
class Domain:
    """What a calibration is valid for beyond the judge: the benchmark (name, version, cases hash)
    and the split it was measured on."""

    benchmark: str
    version: str
    cases: str
    split: str

    @classmethod
    def of(cls, bench: Benchmark, split: str) -> Domain:
        return cls(bench.spec.name, bench.spec.version, bench.hashes["cases"], split)

    @classmethod
    def recorded(cls, tags: dict[str, str]) -> Domain:
        keys = ("benchmark.name", "benchmark.version", "hash.cases", "split")
        return cls(*(tags.get(f"rageval.{k}", "") for k in keys))

    def __str__(self) -> str:
        return f"benchmark {self.benchmark} {self.version}@{self.split} (cases {self.cases[:12]}…)"


@dataclass(frozen=True)
class Calibrated:
    """The calibration a pre-labeling rests on; ``across``: why it was made on another domain (an
    explicit ``--calibration``), empty when it is this one's."""

    run: RunInfo
    across: str = ""


def _calibrations(tracker: Tracker, judge: Judge) -> list[RunInfo]:
    return [
        info
        for info in tracker.runs()
        if info.sealed and info.tags.get(KIND_TAG) == CALIBRATION_KIND and info.tags.get(HASH_TAG) == judge.config_hash
    ]


def _chosen_calibration(tracker: Tracker, judge: Judge, domain: Domain, run_id: str) -> Calibrated:
    info = sealed_and_intact(tracker, run_id)
    wrong = (
        f"is a {info.tags.get(KIND_TAG) or 'untyped'} run"
        if info.tags.get(KIND_TAG) != CALIBRATION_KIND
        else "calibrated another judge configuration"
        if info.tags.get(HASH_TAG) != judge.config_hash
        else "failed its threshold"
        if info.tags.get(PASSED_TAG) != "true"
        else ""
    )
    if wrong:
        raise ConfigError(
            Problem(
                file=str(judge.file),
                field="calibration",
                message=f"--calibration run {run_id} {wrong}",
                fix="give a passing calibration run of this judge configuration",
            )
        )
    made = Domain.recorded(info.tags)
    across = "" if made == domain else f"calibrated on {made}, used on {domain} by --calibration {run_id}"
    return Calibrated(info, across)


def passing_calibration(
    tracker: Tracker, judge: Judge, domain: Domain | None = None, chosen: str | None = None
) -> Calibrated:
    """The newest sealed, intact, passing calibration of exactly this judge configuration on
    ``domain`` (the benchmark version and split to be pre-labeled; None: any); ``chosen``: that run,
    used across domains when it was made on another (said in ``across``). Refuses the judge, naming
    the fix, when there is none."""
    if chosen:
        return _chosen_calibration(tracker, judge, domain or Domain("", "", "", ""), chosen)
    found = _calibrations(tracker, judge)
    passing = [info for info in found if info.tags.get(PASSED_TAG) == "true"]
    for info in passing:
        if domain is None or Domain.recorded(info.tags) == domain:
            return Calibrated(sealed_and_intact(tracker, info.run_id))
    rule = judge.config.calibration
    if passing and domain is not None:
        elsewhere = "; ".join(f"run {i.run_id} on {Domain.recorded(i.tags)}" for i in passing[:3])
        message = (
            f"judge '{judge.config.name}' is calibrated only elsewhere ({elsewhere}), not on {domain}: a judge "
            "measured on one benchmark says nothing of its labels on another"
        )
        fix = (
            f"calibrate it on this benchmark (`rageval judge calibrate --judge {judge.file} --benchmark PATH "
            f"--split {domain.split}`), or give --calibration RUN to use one made elsewhere (recorded on the run)"
        )
    else:
        failed = f" ({len(found)} calibration run(s) of it failed its threshold)" if found else ""
        message = (
            f"judge '{judge.config.name}' (config sha256 {judge.config_hash[:12]}…) has no passing "
            f"calibration in {tracker.uri}{failed}; an uncalibrated judge may not pre-label"
        )
        fix = (
            f"run `rageval judge calibrate --judge {judge.file}` (same --tracking-uri) and meet "
            f"min_weighted_kappa {rule.min_weighted_kappa}"
        )
    raise ConfigError(Problem(file=str(judge.file), field="calibration", message=message, fix=fix))


@dataclass(frozen=True)
class PrelabelOutcome:
    run_id: str
    calibration: str
    prelabels: Prelabels
    paths: dict[str, Path]
    across: str = ""  # the calibration was made on another domain: how (recorded on the run)


@dataclass(frozen=True)
class PrelabelRequest:
    """One pool to pre-label, as ``rageval judge prelabel`` and the tests give it: ``out`` defaults
    to the pool folder, ``benchmark`` to the one the pool was made on, ``experiment`` to
    ``judge-<name>``; ``calibration_run``: a passing calibration made on another benchmark or split."""

    pool_dir: str | Path
    judge_file: str | Path
    out: str | Path | None = None
    benchmark: str | Path | None = None
    experiment: str | None = None
    seed: int = 0
    calibration_run: str | None = None


def execute_prelabel(
    request: PrelabelRequest,
    *,
    tracker: Tracker,
    backend: Backend | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> PrelabelOutcome:
    """Pre-label a pool with a judge calibrated on the pool's benchmark version and split (or on
    another, given as ``request.calibration_run`` and recorded so); writes the labels, the per-item
    detail and the review sheet into ``request.out`` and records a sealed prelabel run. ``backend``:
    a judge backend of the caller's (kept open), instead of the one the judge configuration names."""
    judge = load_judge(request.judge_file)
    manifest: PoolManifest = read_pool(request.pool_dir)
    bench = load_benchmark(request.benchmark or manifest.path)
    calibrated = passing_calibration(tracker, judge, Domain.of(bench, manifest.split), request.calibration_run)
    calibration = calibrated.run
    paths = _prelabel_paths(request)  # before any judging: a second run must not overwrite the first's labels
    made, identity = (backend, {}) if backend is not None else make_backend(judge)
    result = prelabel_pool(manifest, bench, judge, made, request.seed, progress, owned=backend is None)
    _write_prelabels(result, bench, paths)

    summary = result.summary()
    run_id = tracker.create_run(
        request.experiment or f"judge-{judge.config.name}",
        f"prelabel {manifest.benchmark} {manifest.version}@{manifest.split} with {judge.config.name}",
        params={"judge": judge.config.name, "model": judge.config.model, "pool_items": len(manifest.items)},
        tags={
            **judge_tags(judge, identity),
            KIND_TAG: PRELABEL_KIND,
            "rageval.judge.calibration": calibration.run_id,
            "rageval.judge.calibration.domain": "other" if calibrated.across else "same",
            **(overrides_tag([calibrated.across]) if calibrated.across else {}),
            "rageval.benchmark.name": manifest.benchmark,
            "rageval.benchmark.version": manifest.version,
            "rageval.split": manifest.split,
            NOTE_TAG: f"Pre-labels by `{judge.config.name}` ({judge.assessor}), calibrated in run "
            f"{calibration.run_id}: {int(summary['items_labelled'])}/{int(summary['items'])} labelled, "
            f"{int(summary['review'])} routed to review, {int(summary['injection_flagged'])} with instruction-like text",
        },
        files={"items.csv": csv_bytes(result.table()), "judge.yaml": judge.file.read_bytes()},
    )
    try:
        tracker.log_metrics(run_id, summary)
        tracker.seal(run_id)
    except Exception as exc:
        tracker.fail(run_id, f"sealing failed: {type(exc).__name__}: {exc}")
        raise
    return PrelabelOutcome(run_id, calibration.run_id, result, paths, calibrated.across)


def _prelabel_paths(request: PrelabelRequest) -> dict[str, Path]:
    """Where the labels, the per-item detail and the review sheet go; refused where labels exist."""
    pool_dir = Path(request.pool_dir)
    folder = Path(request.out) if request.out is not None else pool_dir if pool_dir.is_dir() else pool_dir.parent
    paths = {"labels": folder / JUDGE_LABELS, "detail": folder / DETAIL_FILE, "review": folder / REVIEW_SHEET}
    if paths["labels"].exists():
        raise BenchmarkError(
            Problem(file=str(paths["labels"]), message="pre-labels exist here already", fix="choose a new --out folder")
        )
    return paths


def _write_prelabels(result: Prelabels, bench: Benchmark, paths: dict[str, Path]) -> None:
    make_folder(paths["labels"].parent, BenchmarkError)
    write_labels(result.labels(), paths["labels"])
    with paths["detail"].open("w", encoding="utf-8") as handle:
        for row in detail(result):
            handle.write(json.dumps(row, ensure_ascii=False, default=json_plain) + "\n")
    paths["review"].write_bytes(sheet_csv(review_sheet(result, bench)))


def prelabel_pool(
    manifest: PoolManifest,
    bench: Benchmark,
    judge: Judge,
    backend: Backend,
    seed: int,
    progress: Callable[[int, int], None] | None,
    *,
    owned: bool,
) -> Prelabels:
    """Judge the items; a backend made here is closed after (its HTTP connections)."""
    try:
        return prelabel(manifest, bench, judge, backend, seed=seed, progress=progress)
    finally:
        close = getattr(backend, "close", None)
        if owned and close is not None:
            close()


def json_plain(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


__all__ = ["PrelabelRequest", "execute_prelabel", "load_judge", "passing_calibration"]
