"""``rageval run``: configuration → MLflow run → executed notebook → sealed run.

Order matters for honesty: everything that can be checked is checked before a run exists
(configuration, overrides, notebook parameters, the benchmark and its hashes, the chunk labels a
passage-level evaluation will use — on the release split, unreviewed migrated labels are refused
here, so the refused run is neither created nor counted as a release evaluation). The notebook then
logs results into the run; the executed notebook is attached; the run is sealed last. A notebook
error ends the run FAILED (never sealed). A killed process leaves a RUNNING, unsealed run that
nothing treats as a result; the next run (or ``rageval runs --reap``) ends it KILLED, since its
owner process is gone.
"""

from __future__ import annotations

import functools
import json
import pickle
import platform
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from rageval.benchmark.chunking import config_hash
from rageval.benchmark.loading import Benchmark, load_benchmark
from rageval.benchmark.schema import RELEASE_SPLIT
from rageval.config.load import dump_config, flatten, load_config
from rageval.config.schema import RunConfig
from rageval.errors import NotebookExecutionError, ParameterError, Problem
from rageval.evaluation import CONTRACT, CONTRACT_DIGEST, parse_measures
from rageval.hashing import sha256_bytes
from rageval.paths import default_notebook
from rageval.progress import SILENT, Event, Reporter, channel
from rageval.tracking.records import KIND_TAG, NOTE_TAG, RUN_TIME_METRIC, environment, evaluation_note
from rageval.tracking.store import Tracker
from rageval.workflows.guards import record_release_evaluation
from rageval.workflows.kernels import WarmKernel
from rageval.workflows.notebooks import check_parameters, execute_notebook, failure, notebook_timings
from rageval.workflows.provenance import RAGEVAL_VERSION, Origin, origin

if TYPE_CHECKING:
    from rageval.experiment.run import ExperimentResult

# What rageval passes to every evaluation notebook; its parameters cell must declare them.
RUN_PARAMETERS = ("config_yaml", "run_id", "tracking_uri")


@dataclass(frozen=True)
class RunOutcome:
    run_id: str
    experiment: str
    sealed: str  # the manifest's sha256
    metrics: dict[str, float]
    measures: dict[str, str]  # MLflow key → measure string
    seconds: dict[str, float]
    reaped: tuple[tuple[str, str], ...] = ()  # runs of dead processes this run ended KILLED: (ID, reason)
    result: ExperimentResult | None = None  # what the notebook handed back and was logged (None: it logged itself)


def evaluation_level(config: RunConfig, benchmark: Benchmark) -> str:
    return benchmark.spec.relevanceUnit if config.evaluation.level == "auto" else config.evaluation.level


def config_label(name: str, overrides: Sequence[str]) -> str:
    """A configuration's readable name: its own name, then what was overridden, in order
    (``bm25-baseline``, ``bm25-baseline[k1=1.2,b=0.5]``), short enough for the MLflow runs table.

    A key is shown without the ``retrieval.`` and ``retrieval.stages.0.`` prefixes where the rest
    cannot be read as another key (``k1``; ``stages.1.k1`` for a later stage); a value is shown as
    written when it is short and plain (letters, digits, ``._+-``), else as ``#`` and a hash of it,
    after the stages' types for a stage list (``stages=bm25+dense+fusion+filter#3f2a9c``).
    Past 60 characters of overrides the label keeps what fits, then ``...]+`` and a hash of them
    all. Two different override lists never share a label (short of a hash collision)."""
    import yaml

    if not overrides:
        return name
    digest = sha256_bytes(json.dumps(list(overrides)).encode())[:8]
    taken = set(RunConfig.model_fields) | set(RunConfig.model_fields["retrieval"].annotation.model_fields)
    pairs = []
    for text in overrides:
        key, _, raw = (part.strip() for part in text.partition("="))
        parts = key.split(".")
        if parts[0] == "retrieval" and len(parts) > 1 and parts[1] not in RunConfig.model_fields:
            parts = parts[1:]  # retrieval.stages... → stages...
            if len(parts) > 2 and parts[:2] == ["stages", "0"] and parts[2] not in taken:
                parts = parts[2:]  # the first stage's keys: stages.0.k1 → k1
        plain = 0 < len(raw) <= 16 and all(c.isascii() and (c.isalnum() or c in "._+-") for c in raw)
        if not plain:  # a stage list shows its stages' types: stages=bm25+dense+fusion#3f2a9c
            try:
                stages = yaml.safe_load(raw)
            except yaml.YAMLError:
                stages = None
            kinds = [s.get("type") if isinstance(s, dict) else None for s in stages] if isinstance(stages, list) else []
            gist = "+".join(k for k in kinds if isinstance(k, str) and k.isidentifier())
            raw = f"{gist if len(gist) <= 32 and len(kinds) == gist.count('+') + 1 else ''}#{sha256_bytes(raw.encode())[:6]}"
        pairs.append(f"{'.'.join(parts)}={raw}")
    shown = ",".join(pairs)
    if len(shown) <= 60:
        return f"{name}[{shown}]"
    kept = shown[:52].rsplit(",", 1)[0] if "," in shown[:52] else shown[:52]
    return f"{name}[{kept},...]+{digest}"


def notebook_html(executed: Path) -> bytes:
    """An executed notebook rendered as HTML (nbconvert), which the MLflow UI can preview: rageval's
    template (``workflows/templates/rageval``), JupyterLab's look with its CSS inlined, so the page is
    styled offline, and no scripts (the stock templates load require.js and MathJax from a CDN, which
    an offline viewer cannot reach and an artifact page should not run); figures inline."""
    import nbformat

    resources = {"metadata": {"name": executed.stem}}
    with _HTML_LOCK:  # one exporter, its templates compiled once per process; not made for threads
        page, _ = _html_exporter().from_notebook_node(nbformat.read(executed, as_version=4), resources=resources)
    return page.encode()


_HTML_LOCK = threading.Lock()


@functools.cache
def _html_exporter() -> Any:
    from nbconvert import HTMLExporter

    return HTMLExporter(template_name="rageval", extra_template_basedirs=[str(Path(__file__).parent / "templates")])


def warm_imports() -> None:
    """What this process needs once the kernel hands its result back (matplotlib, for the figures)
    and once the notebook has run (nbconvert, for the HTML): imported while it waits on the kernel."""
    import matplotlib.figure  # noqa: F401
    import nbconvert  # noqa: F401


def warm_html() -> None:
    """The HTML exporter's templates compiled ahead of the notebook's end."""
    import nbformat

    with _HTML_LOCK:
        _html_exporter().from_notebook_node(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")]))


def run_tags(
    config: RunConfig,
    benchmark: Benchmark,
    config_file: Path,
    family: str | None = None,
    source: Origin | None = None,
) -> dict[str, str]:
    """An evaluation run's tags; ``source``: the run's origin (the params file's repository and
    rageval's own checkout, :func:`~rageval.workflows.provenance.origin`), if read already."""
    level = evaluation_level(config, benchmark)
    return {
        **(source or origin(config_file, config)).tags(),
        "rageval.version": RAGEVAL_VERSION,
        KIND_TAG: "evaluation",
        "rageval.config.name": config.name,
        # Release evaluations are counted per family: a sweep's members share their base's.
        "rageval.config.family": family or config.name,
        "rageval.config.file": str(config_file),
        "rageval.benchmark.name": benchmark.spec.name,
        "rageval.benchmark.version": benchmark.spec.version,
        "rageval.benchmark.corpus_version": benchmark.spec.corpusVersion,
        "rageval.hash.corpus": benchmark.hashes["corpus"],
        "rageval.hash.cases": benchmark.hashes["cases"],
        "rageval.hash.qrels": benchmark.hashes["qrels"],
        "rageval.chunking.hash": config_hash(config.chunking),
        "rageval.split": config.split,
        "rageval.level": level,
        "rageval.python": platform.python_version(),
        "rageval.platform": platform.platform(),
    }


def run_params(config: RunConfig, overrides: Sequence[str]) -> dict[str, Any]:
    params = flatten(config.model_dump(mode="json"))
    for measure in parse_measures(config.evaluation.measures):
        params[f"measure.{measure.key}"] = measure.text
        params[f"measure_definition.{measure.key}"] = measure.definition
    params["rageval.overrides"] = list(overrides)
    params["metrics.contract"] = CONTRACT
    params["metrics.contract_digest"] = CONTRACT_DIGEST
    return params


def cases_frame(benchmark: Benchmark, split: str) -> pd.DataFrame:
    rows = [case.model_dump(mode="json", exclude_none=True) for case in benchmark.cases_for(split)]
    return pd.DataFrame(
        {
            "queryId": [r["queryId"] for r in rows],
            "query": [r["query"] for r in rows],
            "slice": [",".join(r.get("slice", [])) for r in rows],
            "relevant": [json.dumps(r["relevant"]) for r in rows],
            "split": [r["split"] for r in rows],
        }
    )


def execute_run(
    config_file: str | Path,
    *,
    overrides: Sequence[str] = (),
    benchmark: str | Path | None = None,
    split: str | None = None,
    tracker: Tracker,
    experiment: str | None = None,
    notebook: str | Path | None = None,
    notebook_parameters: Mapping[str, Any] | None = None,
    timeout: int | None = None,
    run_name: str | None = None,
    label: str | None = None,
    tags: Mapping[str, str] | None = None,
    family: str | None = None,
    cancel: threading.Event | None = None,
    reporter: Reporter | None = None,
    warn: Callable[[str], None] | None = None,
    kernel: WarmKernel | None = None,
    notebook_slot: NotebookSlot | None = None,
) -> RunOutcome:
    """Run one configuration through the evaluation notebook and seal the MLflow run.

    ``run_name`` defaults to :func:`config_label` ``@split`` (numbered when repeated); ``label``,
    the configuration's own name (tag ``rageval.config.label``), to :func:`config_label` (a sweep
    passes its member's). ``tags`` are added to the run's own (a sweep's parent link); ``family`` names the
    configuration family release evaluations are counted in (default: the config's name). When
    ``cancel`` is set while the notebook runs (a sweep was interrupted), the run ends KILLED.
    ``reporter`` receives the steps as they go, the notebook kernel's among them; ``warn``, the
    warnings before the run exists: the configuration's (a measure cut off past ``final_k``) and that of a
    checkout with uncommitted changes (naming the files). ``kernel``: a warm kernel for the notebook
    (:mod:`rageval.workflows.kernels`), which this call closes; without one a kernel is started here,
    to come up while the checks run. ``notebook_slot``: this member's turn at a sweep's places to
    run a notebook (:class:`NotebookSlots`).
    """
    notebook = Path(notebook) if notebook else default_notebook()
    kernel = kernel or WarmKernel(notebook.parent)
    slot = notebook_slot or NotebookSlot()
    try:
        return _execute_run(
            Path(config_file),
            overrides=overrides,
            benchmark=benchmark,
            split=split,
            tracker=tracker,
            experiment=experiment,
            notebook=notebook,
            notebook_parameters=notebook_parameters,
            timeout=timeout,
            run_name=run_name,
            label=label,
            tags=tags,
            family=family,
            cancel=cancel,
            reporter=reporter or SILENT,
            warn=warn,
            kernel=kernel,
            slot=slot,
        )
    finally:
        slot.release()
        kernel.close()


class NotebookSlots:
    """A sweep's ``workers`` places to run a notebook, granted in the members' order (ticket 0, 1,
    …): a member holds one from creating its run until its notebook has ended, so the next member
    does its checks meanwhile and waits, and a member's logging, HTML render and seal overlap the
    next member's notebook. No run is created while waiting."""

    def __init__(self, workers: int) -> None:
        self._free, self._next = workers, 0
        self._skipped: set[int] = set()
        self._cond = threading.Condition()

    def acquire(self, ticket: int, cancel: threading.Event | None) -> bool:
        """Wait for ``ticket``'s turn and a free place; False if ``cancel`` is set meanwhile."""
        with self._cond:
            while not (self._free > 0 and self._next == ticket):
                if cancel is not None and cancel.is_set():
                    return False
                self._cond.wait(0.2)
            self._free -= 1
            self._advance()
            return True

    def skip(self, ticket: int) -> None:
        """``ticket`` will never acquire (its member failed before): the next ones go on."""
        with self._cond:
            self._skipped.add(ticket)
            if self._next == ticket:
                self._next -= 1
                self._advance()
            self._cond.notify_all()

    def release(self) -> None:
        with self._cond:
            self._free += 1
            self._cond.notify_all()

    def _advance(self) -> None:
        self._next += 1
        while self._next in self._skipped:
            self._next += 1


class NotebookSlot:
    """One member's ticket for :class:`NotebookSlots`; without them (``rageval run``) it does nothing.
    :meth:`release` is idempotent: released (or skipped) once, whichever way the run ends."""

    def __init__(self, slots: NotebookSlots | None = None, ticket: int = 0) -> None:
        self._slots, self._ticket = slots, ticket
        self._state = "waiting"  # then "held", then "done"
        self._lock = threading.Lock()

    def acquire(self, cancel: threading.Event | None = None) -> bool:
        if self._slots is None:
            return True
        granted = self._slots.acquire(self._ticket, cancel)
        with self._lock:
            self._state = "held" if granted else self._state
        return granted

    def release(self) -> None:
        if self._slots is None:
            return
        with self._lock:
            state, self._state = self._state, "done"
        if state == "held":
            self._slots.release()
        elif state == "waiting":
            self._slots.skip(self._ticket)


def _execute_run(
    config_file: Path,
    *,
    overrides: Sequence[str],
    benchmark: str | Path | None,
    split: str | None,
    tracker: Tracker,
    experiment: str | None,
    notebook: Path,
    notebook_parameters: Mapping[str, Any] | None,
    timeout: int | None,
    run_name: str | None,
    label: str | None,
    tags: Mapping[str, str] | None,
    family: str | None,
    cancel: threading.Event | None,
    reporter: Reporter,
    warn: Callable[[str], None] | None,
    kernel: WarmKernel,
    slot: NotebookSlot,
) -> RunOutcome:
    started = time.perf_counter()
    reporter.step("checks")
    config = load_config(config_file, overrides, benchmark=benchmark, split=split, warn=warn)
    extra = dict(notebook_parameters or {})
    declared = check_parameters(notebook, extra, required=RUN_PARAMETERS)
    if extra.get("record"):  # the papermill door's switch (rageval.workflows.door): this run records already
        raise ParameterError(
            Problem(
                file=str(notebook), field="record", message="rageval run records the run itself", fix="leave it out"
            )
        )
    bench = load_benchmark(config.benchmark)
    bench.cases_for(config.split)  # an undeclared split fails here, before a run exists

    recorded_overrides = [*overrides]
    if benchmark is not None:
        recorded_overrides.append(f"benchmark={config.benchmark}")
    if split is not None:
        recorded_overrides.append(f"split={split}")
    experiment = experiment or bench.spec.name
    config_yaml = dump_config(config)
    label = label or config_label(config.name, recorded_overrides)
    source = origin(config_file, config)  # read once: tags, warning and patch
    if warn is not None and source.warning:
        warn(source.warning)
    all_tags = {**run_tags(config, bench, config_file, family, source), "rageval.config.label": label, **(tags or {})}
    if not slot.acquire(cancel) or (cancel is not None and cancel.is_set()):  # interrupted while waiting
        raise InterruptedError("the sweep was interrupted before this member's run was created")
    reporter.step("create run")
    reaped = tuple(tracker.reap())
    run_id = tracker.create_run(
        experiment,
        run_name or f"{label}@{config.split}",
        params=run_params(config, recorded_overrides),
        tags=all_tags,
        files={
            "config.yaml": config_yaml.encode(),
            "environment.txt": environment().encode(),
            **({"git/diff.patch": source.diff()} if source.files else {}),
        },
        dataset=cases_frame(bench, config.split),
        dataset_name=f"{bench.spec.name}-{bench.spec.version}-{config.split}",
        dataset_source=str(bench.path),
        dataset_digest=bench.hashes["cases"][:16],
        dataset_context=config.split,
    )
    if config.split == RELEASE_SPLIT:
        try:
            record_release_evaluation(tracker, run_id, bench, family or config.name)
        except Exception as exc:
            tracker.fail(run_id, f"counting the release evaluation failed: {type(exc).__name__}: {exc}")
            raise
    prepared = time.perf_counter()

    with tempfile.TemporaryDirectory(prefix="rageval-run-") as tmp:
        executed = Path(tmp) / notebook.name
        parameters = {**extra, "config_yaml": config_yaml, "run_id": run_id, "tracking_uri": tracker.uri}
        # A notebook that can hand its result back (notebooks/evaluate.ipynb) leaves the logging to
        # this process, whose store is open already: the kernel then never imports mlflow nor opens
        # the store (about 3 s of a run). A notebook without `handoff` logs into run_id itself.
        handoff = Path(tmp) / "result.pickle"
        if "handoff" in declared:
            parameters["handoff"] = str(handoff)
        result: ExperimentResult | None = None
        early = EarlyLog(handoff, lambda handed: tracker.log_result(run_id, handed), warm=(warm_imports, warm_html))
        try:
            if cancel is not None and cancel.is_set():
                raise InterruptedError("the sweep was interrupted before this run's notebook started")
            reporter.step("kernel start")
            with channel(_kernel_events(reporter) if reporter.enabled else None, kernel.channel):
                execute_notebook(notebook, executed, parameters, timeout=timeout, kernel=kernel)
        except BaseException as exc:  # a cell error, a timeout, or Ctrl-C: the run ends FAILED (KILLED when cancelled)
            early.abandon()  # its logging, if begun, ends before the run's status is written
            message, fields = failure(exc)
            partial = executed if executed.exists() else None
            killed = cancel is not None and cancel.is_set()
            if killed:
                tracker.kill(run_id, f"interrupted: {message}", partial)
            else:
                tracker.fail(run_id, message, partial, details=str(exc))
            if isinstance(exc, Exception):
                status = "KILLED" if killed else "FAILED"
                raise NotebookExecutionError(f"run {run_id} {status}: {message}", run_id=run_id, **fields) from exc
            raise
        finally:
            slot.release()  # the notebook has ended: the next member's may start
        executed_at = time.perf_counter()
        try:
            if "handoff" in declared:
                reporter.step("logging")
                result = early.finish()
            else:
                early.abandon()
            reporter.step("attach notebook")
            timings = notebook_timings(executed)
            tracker.log_file(run_id, f"notebook/{notebook.name}", executed)
            tracker.log_bytes(run_id, f"notebook/{Path(notebook.name).with_suffix('.html')}", notebook_html(executed))
            timings["prepare"] = prepared - started
            timings["notebook"] = executed_at - prepared
            tracker.log_tables(
                run_id, {"run_timings": pd.DataFrame({"step": list(timings), "seconds": list(timings.values())})}
            )
            tracker.log_metrics(run_id, {RUN_TIME_METRIC: timings["prepare"] + timings["notebook"]})
            info = tracker.run(run_id)
            measures = {m.key: m.text for m in parse_measures(config.evaluation.measures)}
            headline = {text: info.metrics[key] for key, text in measures.items() if key in info.metrics}
            tracker.set_tags(run_id, {NOTE_TAG: evaluation_note(info.tags, headline)})
            reporter.step("seal")
            digest = tracker.seal(run_id)
        except Exception as exc:
            tracker.fail(run_id, f"sealing failed: {type(exc).__name__}: {exc}")
            raise
    timings["seal"] = time.perf_counter() - executed_at
    reporter.end()
    info = tracker.run(run_id)
    measures = {m.key: m.text for m in parse_measures(config.evaluation.measures)}
    return RunOutcome(run_id, experiment, digest, info.metrics, measures, timings, reaped, result)


class EarlyLog:
    """Logs the result a notebook hands back (``handoff``) as soon as the kernel has written it,
    while the notebook still draws its displays: this process would otherwise wait for the kernel,
    then log. The file is our own, written by the kernel we started in a folder only we know, and
    renamed into place whole (:func:`rageval.workflows.door.evaluate`). ``warm``: what to do on
    the same thread before the result comes, and after it is logged (imports, the HTML templates)."""

    def __init__(
        self,
        handoff: Path,
        log: Callable[[ExperimentResult], None],
        interval: float = 0.02,
        warm: tuple[Callable[[], None], Callable[[], None]] | None = None,
    ) -> None:
        self._handoff, self._log, self._interval = handoff, log, interval
        self._warm = warm or (_nothing, _nothing)
        self._stop = threading.Event()
        self._result: ExperimentResult | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._watch, name="rageval-early-log", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        # All on this one thread (two threads importing one package can deadlock): what logging
        # needs, while the kernel starts; the result once handed back; then what comes after.
        _head_start(self._warm[0])
        try:
            while not self._handoff.is_file():
                if self._stop.wait(self._interval) and not self._handoff.is_file():
                    return  # the notebook ended without handing a result back
            try:
                self._result = pickle.loads(self._handoff.read_bytes())
                self._log(self._result)
            except BaseException as exc:  # noqa: BLE001 - raised by finish(), in the run's own thread
                self._error = exc
        finally:
            _head_start(self._warm[1])

    def finish(self) -> ExperimentResult | None:
        """Once the notebook has ended: the logged result (None if none was handed back); raises
        what logging raised."""
        self._stop.set()
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._result

    def abandon(self) -> None:
        """The notebook failed, or hands nothing back: stop watching, and wait for logging begun."""
        self._stop.set()
        self._thread.join()


def _nothing() -> None:
    pass


def _head_start(step: Callable[[], None]) -> None:
    try:
        step()
    except Exception:  # noqa: BLE001, S110 - only a head start; the real step reports any error
        pass


def _kernel_events(reporter: Reporter) -> Callable[[Event], None]:
    """Where the kernel's events go: to ``reporter``, the end of its experiment being the start of
    what the notebook does next (draw its displays; log the result, for a notebook that logs itself)."""

    def emit(event: Event) -> None:
        if event.get("kind") == "end":
            event = {"kind": "step", "name": "notebook displays", "t": event.get("t")}
        reporter.emit(event)

    return emit
