"""The store facade, the only code that talks to MLflow: create, log, fail, seal, verify and reap runs.

Everything goes through ``MlflowClient`` with explicit run IDs; the fluent API, with its active-run
stack, is never used. MLflow itself lets anyone log into a finished run, so immutability is ours:
a run is *sealed* by a manifest (the sha256 of every artifact; every param, metric with its
history, and tag; the inputs; the run's status, lifecycle and times — :mod:`rageval.tracking.seal`)
whose own hash becomes the ``rageval.seal`` tag, with an HMAC of it when a seal key is configured.
Every logging call here refuses a sealed run, and :meth:`Tracker.verify` recomputes everything. A
run without the seal tag — failed, interrupted or in progress — is never a result. Every run
records the process that owns it (:mod:`rageval.tracking.owners`); :meth:`Tracker.reap` ends the
runs of owners that died as KILLED.
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from rageval.analysis.records import RunArtifacts, RunInfo
from rageval.errors import RunSealedError, TrackingError, VerificationError
from rageval.hashing import sha256_bytes
from rageval.keys import seal_key
from rageval.paths import default_tracking_uri
from rageval.retry import call_with_retries
from rageval.tracking.artifacts import Written, artifact_hashes
from rageval.tracking.connect import (
    FAIL_RETRIES,
    creation_lock,
    locked,
    open_client,
    probe,
    store_failure,
    unreachable,
)
from rageval.tracking.datasets import RunDataset, log_dataset
from rageval.tracking.naming import unique_name
from rageval.tracking.owners import Owner, owner_of, owner_tags
from rageval.tracking.records import (
    ERROR_TAG,
    LOGGING_METRIC,
    MANIFEST,
    NAME_TAG,
    RUN_METRICS,
    SEAL_TAG,
    TABLES_TAG,
    Record,
    comparison_record,
    evaluation_record,
    read_evaluation,
    source_tags,
    table_files,
    tables_tag,
)
from rageval.tracking.seal import (
    HMAC_TAG,
    Verification,
    encode,
    history_keys,
    sealing_manifest,
    verification,
)
from rageval.tracking.search import ensure_experiment, reapable, run_state, search_all
from rageval.tracking.views import ensure_headline_view
from rageval.validation import metric_key

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from rageval.analysis import Comparison
    from rageval.experiment.run import ExperimentResult

_BATCH = 100


def resolve_tracking_uri(uri: str | None = None) -> str:
    """``uri``, else ``MLFLOW_TRACKING_URI``, else the project's embedded store (absolute)."""
    return uri or default_tracking_uri()


class Tracker:
    """A tracking store. ``tracking_uri`` follows :func:`resolve_tracking_uri`."""

    def __init__(self, tracking_uri: str | None = None) -> None:
        self.uri = resolve_tracking_uri(tracking_uri)
        self._written = Written()
        self.client = open_client(self.uri)
        # Every run this Tracker created, with its tags, kept from creation: a sweep names its runs
        # from here when the store dies, not from the store.
        self.created: dict[str, dict[str, str]] = {}
        self._created_lock = threading.Lock()
        self.clock = time.time  # the one place run start times come from (a test may set it)

    def unanswered(self) -> str | None:
        """Why the store does not answer now (``None`` when it does)."""
        return probe(self.client)

    def created_run(self, tags: Mapping[str, str]) -> str | None:
        """The last run this Tracker created whose tags include ``tags`` (kept from creation)."""
        with self._created_lock:
            found = [run_id for run_id, held in self.created.items() if all(held.get(k) == v for k, v in tags.items())]
        return found[-1] if found else None

    # ------------------------------------------------------------------ reading

    def run(self, run_id: str) -> RunInfo:
        from mlflow.exceptions import MlflowException

        try:
            run = self.client.get_run(run_id)
        except MlflowException as exc:
            if unreachable(exc):
                raise store_failure(self.uri, f"reading run {run_id}", exc) from None
            raise TrackingError(f"no run {run_id!r} in {self.uri}: {exc.message}") from None
        return RunInfo(
            run_id=run.info.run_id,
            name=run.info.run_name,
            experiment_id=run.info.experiment_id,
            status=run.info.status,
            sealed=SEAL_TAG in run.data.tags,
            params=dict(run.data.params),
            metrics=dict(run.data.metrics),
            tags=dict(run.data.tags),
            artifact_uri=run.info.artifact_uri,
        )

    def runs(self, experiment: str | None = None) -> list[RunInfo]:
        """Runs of one experiment (all experiments for ``None``), newest first."""
        experiments = self.client.search_experiments()
        ids = [e.experiment_id for e in experiments if experiment is None or e.name == experiment]
        if not ids:
            return []
        found = self.client.search_runs(ids, order_by=["attributes.start_time DESC"], max_results=1000)
        return [self.run(r.info.run_id) for r in found]

    def require_sealed(self, run_id: str, error: type[Exception] = TrackingError) -> RunInfo:
        """The run, if sealed; a failed, killed or unfinished run is not a result and is refused
        (with ``error``: a comparison refuses it as a :class:`~rageval.errors.ComparisonError`)."""
        info = self.run(run_id)
        if not info.sealed:
            holds = any(f.path == MANIFEST for f in self.client.list_artifacts(run_id))
            dead = holds and info.status == "FINISHED" and owner_of(info.tags).state == "dead"
            why = info.tags.get(ERROR_TAG, "") if "never sealed" in info.tags.get(ERROR_TAG, "") else ""
            if dead:
                why = "never sealed: its process died between ending it FINISHED and writing its seal tag"
            elif holds and not why:
                why = f"it holds a {MANIFEST}, so its {SEAL_TAG} tag was removed"
            raise error(
                f"run {run_id} is {info.status} and not sealed: only sealed runs are results"
                + (f"; {why}" if why else "")
            )
        return info

    def sealed_frame(self, run_id: str, artifact_path: str) -> pd.DataFrame:
        """A parquet artifact of a sealed run; unsealed runs are not results and are refused."""
        import mlflow.artifacts

        self.require_sealed(run_id)
        with tempfile.TemporaryDirectory(prefix="rageval-read-") as tmp:
            local = mlflow.artifacts.download_artifacts(
                run_id=run_id, artifact_path=artifact_path, dst_path=tmp, tracking_uri=self.uri
            )
            return pd.read_parquet(local)

    def rankings(self, run_id: str) -> pd.DataFrame:
        return self.sealed_frame(run_id, "rankings.parquet")

    # ------------------------------------------------------------------ writing

    def experiment_id(self, name: str) -> str:
        """The experiment called ``name``, created (with its note) when the store has none."""
        return ensure_experiment(self.client, self.uri, name)

    def create_run(
        self,
        experiment: str,
        run_name: str,
        *,
        params: Mapping[str, Any],
        tags: Mapping[str, str],
        files: Mapping[str, bytes] | None = None,
        dataset: RunDataset | None = None,
    ) -> str:
        """Create a run in RUNNING state with its params, tags, files and dataset input, owned by
        this process (see :mod:`rageval.tracking.owners`). ``run_name`` is numbered (``name #2``)
        when the experiment already has a run of that name, so that names stay unique."""
        experiment_id = self.experiment_id(experiment)
        all_tags = {**source_tags(tags), **dict(tags), **owner_tags(), NAME_TAG: run_name}
        with creation_lock(self.uri):
            started = int(self.clock() * 1000)
            run = self.client.create_run(experiment_id, start_time=started, tags=all_tags, run_name=run_name)
            time.sleep(0.001)  # the next run created here reads a later millisecond
        run_id = run.info.run_id
        with self._created_lock:
            self.created[run_id] = all_tags
        # Numbered after creating (see :mod:`rageval.tracking.naming`).
        name = unique_name(self.client, experiment_id, run_name, me=(run.info.start_time, run_id))
        if name != run_name:
            self.client.update_run(run_id, name=name)
        self.log_params(run_id, params)
        self._put(run_id, files or {})
        if dataset is not None:
            log_dataset(self.client, run_id, dataset)
        return run_id

    def _writable(self, run_id: str) -> None:
        self._check_writable(self.run(run_id))

    def _check_writable(self, info: RunInfo) -> None:
        run_id = info.run_id
        if info.sealed:
            raise RunSealedError(
                f"run {run_id} is sealed (manifest sha256 {info.tags[SEAL_TAG][:12]}…) and cannot change; "
                "start a new run with `rageval run`"
            )
        if info.status != "RUNNING":
            raise TrackingError(f"run {run_id} is {info.status}; only a running run accepts new records")

    def log_params(self, run_id: str, params: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        self._writable(run_id)
        items = [Param(k, v if isinstance(v, str) else json.dumps(v)) for k, v in params.items()]
        for start in range(0, len(items), _BATCH):
            self.client.log_batch(run_id, params=items[start : start + _BATCH])

    def log_metrics(self, run_id: str, metrics: Mapping[str, float]) -> None:
        from mlflow.entities import Metric

        self._writable(run_id)
        now = int(time.time() * 1000)
        items = [Metric(k, float(v), now, 0) for k, v in metrics.items()]
        for start in range(0, len(items), 1000):
            self.client.log_batch(run_id, metrics=items[start : start + 1000])

    def set_tags(self, run_id: str, tags: Mapping[str, str]) -> None:
        from mlflow.entities import RunTag

        self._writable(run_id)
        self.client.log_batch(run_id, tags=[RunTag(k, str(v)) for k, v in tags.items()])

    def log_bytes(self, run_id: str, artifact_path: str, data: bytes) -> None:
        self.log_files(run_id, {artifact_path: data})

    def log_files(self, run_id: str, files: Mapping[str, bytes]) -> None:
        """Write ``files`` (artifact path → bytes) into a running run: one check that it may still
        change and one upload of the whole tree (a record's dozens of files, not a call each)."""
        self._writable(run_id)
        self._put(run_id, files)

    def _put(self, run_id: str, files: Mapping[str, bytes]) -> None:
        if not files:
            return
        try:
            with tempfile.TemporaryDirectory(prefix="rageval-artifact-") as tmp:
                for path, data in files.items():
                    local = Path(tmp) / path
                    local.parent.mkdir(parents=True, exist_ok=True)
                    local.write_bytes(data)
                self.client.log_artifacts(run_id, tmp)
        except OSError as exc:  # a full disk, TMPDIR's or the store's: name the path
            where = exc.filename or tempfile.gettempdir()
            raise TrackingError(
                f"could not write artifacts of run {run_id}: {exc.strerror or exc} ({where}); free space there "
                "(TMPDIR holds temporary files, the store its artifacts) and run again"
            ) from None
        self._written.add(run_id, files)  # hashed now: sealing needs no download of what we wrote

    def log_file(self, run_id: str, artifact_path: str, path: Path) -> None:
        self.log_bytes(run_id, artifact_path, Path(path).read_bytes())

    def log_frame(self, run_id: str, artifact_path: str, frame: pd.DataFrame) -> None:
        self.log_bytes(run_id, artifact_path, frame.to_parquet(index=False))

    def log_tables(self, run_id: str, tables: Mapping[str, pd.DataFrame]) -> None:
        """Write tables as ``tables/NAME.json`` (MLflow's table format, which the UI shows), ``.csv``
        and ``.parquet``, and name them in ``mlflow.loggedArtifacts`` as ``log_table`` does."""
        info = self.run(run_id)
        self._check_writable(info)
        listed = json.loads(info.tags.get(TABLES_TAG, "[]"))
        paths = [entry["path"] for entry in listed if entry.get("type") == "table"]
        files: dict[str, bytes] = {}
        for name, frame in tables.items():
            files.update(table_files(name, frame))
            if f"tables/{name}.json" not in paths:
                paths.append(f"tables/{name}.json")
        self._put(run_id, files)
        self.client.set_tag(run_id, TABLES_TAG, tables_tag(paths))

    def log_record(self, run_id: str, record: Record) -> None:
        """Write a record's artifacts, tables, metrics and tags into a running run."""
        self.log_files(run_id, record.files)
        if record.tables:
            self.log_tables(run_id, record.tables)
        if record.metrics:
            self.log_metrics(run_id, record.metrics)
        if record.tags:
            self.set_tags(run_id, record.tags)

    def log_result(self, run_id: str, result: ExperimentResult, figures: Mapping[str, bytes] | None = None) -> None:
        """Log an experiment's metrics, per-query artifacts and figures into a running run.
        ``figures``: the PNGs to record, by file name; None draws every evaluation figure here."""
        from rageval.analysis.plots import evaluation_pngs

        started = time.perf_counter()
        record = evaluation_record(result, evaluation_pngs(result) if figures is None else figures)
        self.log_record(run_id, record)
        self.log_metrics(run_id, {LOGGING_METRIC: time.perf_counter() - started})
        # The experiment's saved view "Headline first": this run's metric keys in its own order.
        measures = [metric_key(m) for m in result.evaluation.aggregates.index]
        charts = [*record.metrics, *(k for k in RUN_METRICS if k not in record.metrics)]
        ensure_headline_view(self.client, self.client.get_run(run_id).info.experiment_id, charts, measures)

    def fail(self, run_id: str, error: str, notebook: Path | None = None, *, details: str | None = None) -> None:
        """End a run as FAILED with its error (one line in the tag; ``details``, e.g. the traceback,
        in error.txt) and, if any, the partial executed notebook. A store write-locked by another
        process is waited for a while (:data:`~rageval.tracking.connect.FAIL_RETRIES`): the error
        that ends a run is often that lock, and a failure must not leave the run RUNNING."""
        text = f"{error}\n\n{details}" if details else error
        call_with_retries(
            lambda: self._end(run_id, "FAILED", error, text, notebook),
            retries=FAIL_RETRIES,
            backoff_s=1.0,
            retry_if=locked,
        )

    def kill(self, run_id: str, reason: str, notebook: Path | None = None) -> None:
        """End an interrupted run as KILLED (never sealed), with the reason and any partial notebook."""
        self._end(run_id, "KILLED", reason, reason, notebook)

    def _end(self, run_id: str, status: str, error: str, text: str, notebook: Path | None) -> None:
        self._writable(run_id)
        self.set_tags(run_id, {ERROR_TAG: error[:4000]})
        try:
            self.log_bytes(run_id, "error.txt", text.encode())
            if notebook is not None and Path(notebook).is_file():
                self.log_file(run_id, f"notebook/{Path(notebook).name}", Path(notebook))
        except TrackingError as exc:  # no room for the files: the run still ends, its reason in the tag
            self.set_tags(run_id, {ERROR_TAG: f"{error[:3000]} (error.txt not written: {exc})"[:4000]})
        self.client.set_terminated(run_id, status)

    def owner(self, info: RunInfo) -> Owner:
        """Whether the process that created a run still runs (see :mod:`rageval.tracking.owners`)."""
        return owner_of(info.tags)

    def reap(self) -> list[tuple[str, str]]:
        """End as KILLED every unsealed run whose owner provably died (:func:`~rageval.tracking.search.reapable`);
        returns (run ID, reason) for each. A run owned elsewhere or by an unknown owner is left alone."""
        reaped = []
        for run_id, status, reason in reapable(self.client):
            try:
                if status == "RUNNING":
                    self.kill(run_id, reason)
                else:  # ended FINISHED: marked, so that no one takes it for a tampered result
                    self.client.set_tag(run_id, ERROR_TAG, reason[:4000])
                    self.client.set_terminated(run_id, "KILLED")
            except TrackingError:
                continue  # it ended meanwhile (another process reaped it first)
            reaped.append((run_id, reason))
        return reaped

    def _search(self, filter_string: str) -> list[Any]:
        return search_all(self.client, filter_string)

    def children(self, parent_run_id: str) -> list[RunInfo]:
        """The runs whose ``mlflow.parentRunId`` is ``parent_run_id`` (a sweep's members), oldest first."""
        self.run(parent_run_id)
        return [self.run(r.info.run_id) for r in self._search(f"tags.`mlflow.parentRunId` = '{parent_run_id}'")]

    def started_ms(self, run_id: str) -> int:
        return int(self.client.get_run(run_id).info.start_time)

    def experiment_name(self, experiment_id: str) -> str:
        return self.client.get_experiment(experiment_id).name

    def download(self, run_id: str, artifact_path: str, dst: Path) -> Path:
        """Download an artifact of any run (sealed or not: for checks before sealing) into ``dst``."""
        import mlflow.artifacts
        from mlflow.exceptions import MlflowException

        try:
            local = mlflow.artifacts.download_artifacts(
                run_id=run_id, artifact_path=artifact_path, dst_path=str(dst), tracking_uri=self.uri
            )
        except (OSError, MlflowException) as exc:
            raise TrackingError(f"run {run_id} has no artifact {artifact_path!r}: {exc}") from None
        return Path(local)

    def count_release_evaluations(
        self, benchmark: str, version: str, family: str, *, until_ms: int | None = None, split: str = "release"
    ) -> int:
        """Evaluation runs on ``split`` of one benchmark version and configuration family, started
        at or before ``until_ms`` (all for ``None``). Every status counts, deleted runs too: a failed
        or deleted run may still have shown release results to someone."""
        wanted = {
            "rageval.benchmark.name": benchmark,
            "rageval.benchmark.version": version,
            "rageval.config.family": family,
        }
        return sum(
            1
            for run in self._search(f"tags.`rageval.split` = '{split}'")
            if all(run.data.tags.get(k) == v for k, v in wanted.items())
            and (until_ms is None or run.info.start_time <= until_ms)
        )

    def download_sealed(self, run_id: str, artifact_path: str, dst: Path) -> Path:
        """Download an artifact (file or folder) of a sealed run into ``dst``."""
        self.require_sealed(run_id)
        return self.download(run_id, artifact_path, dst)

    def run_artifacts(self, run_id: str) -> RunArtifacts:
        """Read a sealed evaluation run's configuration and per-query artifacts."""
        info = self.require_sealed(run_id)
        with tempfile.TemporaryDirectory(prefix="rageval-read-") as tmp:
            return read_evaluation(info, self.download(run_id, "", Path(tmp)))

    def log_comparison(self, run_id: str, comparison: Comparison, figures: Mapping[str, Figure]) -> None:
        """Log a comparison's tables, per-query diffs and figures into a running run."""
        self.log_record(run_id, comparison_record(comparison, figures))

    # ------------------------------------------------------------------ sealing

    def _download_all(self, run_id: str, dst: Path) -> dict[str, str]:
        """Every artifact of a run downloaded into ``dst``: path → sha256."""
        import mlflow.artifacts

        mlflow.artifacts.download_artifacts(run_id=run_id, dst_path=str(dst), tracking_uri=self.uri)
        return {
            p.relative_to(dst).as_posix(): sha256_bytes(p.read_bytes()) for p in sorted(dst.rglob("*")) if p.is_file()
        }

    def seal(self, run_id: str) -> str:
        """Write the manifest (and, with a seal key, its HMAC tag), end the run FINISHED, then set
        the seal tag: the last write, so that a run interrupted on the way is never sealed."""
        self._writable(run_id)
        key = seal_key()  # a misconfigured key fails here, before anything is written
        end_time = int(time.time() * 1000)
        state = run_state(self.client, run_id, artifact_hashes(self.client, run_id, self._written.get(run_id)))
        manifest = sealing_manifest(state, end_time=end_time, sealed_at=datetime.now(UTC).isoformat(), key=key)
        data = encode(manifest)
        self.log_bytes(run_id, MANIFEST, data)
        if key is not None:
            self.client.set_tag(run_id, HMAC_TAG, key.sign(data))
        self.client.set_terminated(run_id, "FINISHED", end_time=end_time)
        digest = sha256_bytes(data)
        self.client.set_tag(run_id, SEAL_TAG, digest)
        self._written.forget(run_id)
        return digest

    def verification(self, run_id: str) -> Verification:
        """Check a sealed run against its manifest: every artifact, param, metric and its history,
        tag, input, its status, lifecycle and times, and its keyed seal where it has one."""
        info = self.require_sealed(run_id)
        key = seal_key()
        with tempfile.TemporaryDirectory(prefix="rageval-verify-") as tmp:
            artifacts = self._download_all(run_id, Path(tmp))
            manifest_file = Path(tmp) / MANIFEST
            data = manifest_file.read_bytes() if manifest_file.is_file() else None
        state = run_state(self.client, run_id, artifacts, history_keys(data))
        return verification(state, data, info.tags[SEAL_TAG], info.tags.get(HMAC_TAG), key)

    def verify(self, run_id: str) -> list[str]:
        """What changed in a sealed run since sealing (empty when intact); see :meth:`verification`."""
        return self.verification(run_id).changes

    def verify_or_raise(self, run_id: str) -> None:
        changes = self.verify(run_id)
        if changes:
            raise VerificationError(run_id, changes)
