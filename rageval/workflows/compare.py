"""``rageval compare``: check the runs (sealed, intact, comparable), then execute the comparison
notebook into a new comparison run and seal it."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from rageval.analysis import (
    check_comparable,
)
from rageval.analysis.comparison import refuse_failed_queries
from rageval.analysis.formats import RESULT_FILES
from rageval.analysis.records import RunInfo
from rageval.errors import NotebookExecutionError, TrackingError
from rageval.execution.notebooks import check_parameters, execute_into
from rageval.execution.render import notebook_html
from rageval.paths import project_root
from rageval.tracking.notes import comparison_note
from rageval.tracking.records import NOTE_TAG, PARENT_TAG, role_tags, sweep_parent
from rageval.tracking.store import Tracker
from rageval.workflows.guards import release_warnings, sealed_and_intact
from rageval.workflows.provenance import RAGEVAL_VERSION, git_state
from rageval.workflows.readback import candidate_ids

COMPARE_PARAMETERS = ("baseline", "candidates", "sweep", "allow_mismatch", "notes", "run_id", "tracking_uri")
DEFAULT_MAX_RELEASE_EVALUATIONS = 5


def default_compare_notebook() -> Path:
    return project_root() / "notebooks" / "compare.ipynb"


@dataclass(frozen=True)
class ComparisonOutcome:
    run_id: str
    experiment: str
    sealed: str
    baseline: str
    candidates: list[str]
    overall: pd.DataFrame
    differences: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    results: dict[str, str] = field(default_factory=dict)  # format → the results table (results.txt/.md/.tex)


@dataclass(frozen=True)
class ComparisonRequest:
    """One comparison, as ``rageval compare``, the demo and the tests give it: the baseline and the
    candidates, or a sweep's parent whose sealed members are candidates; ``allow_mismatch``: compare
    runs whose contract differs (recorded); ``experiment`` defaults to the baseline's, ``notebook`` to
    notebooks/compare.ipynb, run with ``notebook_parameters``; a candidate's family past
    ``max_release_evaluations`` release evaluations is warned of."""

    baseline: str
    candidates: Sequence[str] = ()
    sweep: str | None = None
    allow_mismatch: bool = False
    experiment: str | None = None
    notebook: str | Path | None = None
    notebook_parameters: Mapping[str, Any] | None = None
    timeout: int | None = None
    max_release_evaluations: int = DEFAULT_MAX_RELEASE_EVALUATIONS


def execute_comparison(request: ComparisonRequest, *, tracker: Tracker) -> ComparisonOutcome:
    """Check the runs (sealed, intact, comparable), then execute the comparison notebook into a
    new comparison run and seal it."""
    notebook = Path(request.notebook) if request.notebook else default_compare_notebook()
    extra = dict(request.notebook_parameters or {})
    check_parameters(notebook, extra, required=COMPARE_PARAMETERS)
    baseline, sweep, allow_mismatch = request.baseline, request.sweep, request.allow_mismatch
    base = sealed_and_intact(tracker, baseline)
    ids, _, left_out = candidate_ids(tracker, baseline, request.candidates, sweep)
    infos = [sealed_and_intact(tracker, i) for i in ids]
    refuse_failed_queries([("baseline", base, None), *(("candidate", i, None) for i in infos)])
    found = check_comparable(base, infos, allow_mismatch=allow_mismatch)
    release = release_warnings(tracker, infos, request.max_release_evaluations)
    warnings = left_out + release

    name = request.experiment or tracker.experiment_name(base.experiment_id)
    names = ", ".join(i.name for i in infos[:3]) + (f" and {len(infos) - 3} more" if len(infos) > 3 else "")
    link = sweep_link(sweep, [base, *infos])
    notes = {
        "rageval.compare.mismatches": found,
        "rageval.warning.release": release,
        "rageval.compare.left_out": left_out,
    }
    tags = comparison_tags(base, ids, allow_mismatch, link) | {k: "\n".join(v)[:4000] for k, v in notes.items() if v}
    # The baseline, candidates, sweep and allow_mismatch are tags (rageval.baseline, rageval.candidates,
    # rageval.compare.*): a param each too would be 4 more columns of the same values.
    params = {
        "max_release_evaluations": request.max_release_evaluations,
        **{f"notebook.{k}": v for k, v in extra.items()},
    }
    run_id = tracker.create_run(name, f"compare {base.name} vs {names}", params=params, tags=tags)
    parameters = {
        **extra,
        "baseline": baseline,
        "candidates": ids,
        "sweep": sweep,
        "allow_mismatch": allow_mismatch,
        "notes": warnings,
    }
    execute_into(tracker, run_id, notebook, parameters, request.timeout)
    overall, results = read_results(tracker, run_id)
    try:
        with tempfile.TemporaryDirectory(prefix="rageval-read-") as tmp:
            executed = tracker.download(run_id, f"notebook/{notebook.name}", Path(tmp))
            tracker.log_bytes(run_id, f"notebook/{notebook.with_suffix('.html').name}", notebook_html(executed))
        rows = overall[overall["role"] == "candidate"].dropna(subset=["delta"]) if "role" in overall else overall[:0]
        deltas = {f"{r.run}/{r.measure}": float(r.delta) for r in rows.itertuples(index=False)}
        tracker.set_tags(run_id, {NOTE_TAG: comparison_note(base.name, [i.name for i in infos], deltas, link)})
        digest = tracker.seal(run_id)
    except Exception as exc:
        tracker.fail(run_id, f"sealing failed: {type(exc).__name__}: {exc}")
        raise
    return ComparisonOutcome(run_id, name, digest, baseline, ids, overall, found, warnings, results)


def sweep_link(sweep: str | None, runs: Sequence[RunInfo]) -> str | None:
    """The sweep a comparison belongs to: the one asked for, else the one parent all its runs share."""
    parents = {sweep_parent(r.tags) for r in runs} - {None}
    return sweep or (parents.pop() if len(parents) == 1 else None)


def comparison_tags(base: RunInfo, ids: Sequence[str], allow_mismatch: bool, link: str | None) -> dict[str, str]:
    """A comparison run's tags: provenance, the runs compared (role tags), their split and benchmark,
    and its sweep (nested under it in the UI, never counted as a member)."""
    return {
        **git_state(project_root()),
        "rageval.version": RAGEVAL_VERSION,
        "rageval.kind": "comparison",
        # the split's own column (an evaluation run's rageval.split), not one more of the comparison's
        "rageval.split": base.tags.get("rageval.split", ""),
        # only when given: a column that said "false" on every comparison told nothing
        **({"rageval.compare.allow_mismatch": "true"} if allow_mismatch else {}),
        "rageval.benchmark.name": base.tags.get("rageval.benchmark.name", ""),
        "rageval.benchmark.version": base.tags.get("rageval.benchmark.version", ""),
        **role_tags(base.run_id, ids),
        **({PARENT_TAG: link} if link else {}),
    }


def read_results(tracker: Tracker, run_id: str) -> tuple[pd.DataFrame, dict[str, str]]:
    """The overall table and the results tables (format → text) the notebook logged; a notebook that
    logged no comparison ends the run FAILED."""
    with tempfile.TemporaryDirectory(prefix="rageval-read-") as tmp:
        try:
            logged = tracker.download(run_id, "overall.csv", Path(tmp))
        except TrackingError as exc:
            tracker.fail(
                run_id, "the comparison notebook ran but logged no overall.csv; it must call Tracker.log_comparison"
            )
            raise NotebookExecutionError(
                f"run {run_id} FAILED: the notebook logged no comparison", run_id=run_id
            ) from exc
        overall = pd.read_csv(logged)
        results = {}
        for form, file in RESULT_FILES.items():
            try:
                results[form] = tracker.download(run_id, file, Path(tmp)).read_text(encoding="utf-8")
            except TrackingError:
                continue  # a notebook of its own may log only the tables it needs
    return overall, results
