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

import json
import platform
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from rageval.analysis.comparability import EVALUATION_OPTIONS, EVALUATION_PARAM, evaluation_param
from rageval.benchmark.chunking import config_hash
from rageval.benchmark.loading import Benchmark, load_benchmark
from rageval.benchmark.schema import RELEASE_SPLIT
from rageval.config.load import dump_config, load_config
from rageval.config.schema import RunConfig
from rageval.errors import NotebookExecutionError, ParameterError, Problem
from rageval.evaluation import CONTRACT, CONTRACT_DIGEST, parse_measures
from rageval.execution.handoff import EarlyLog, shown_figures
from rageval.execution.kernels import WarmKernel
from rageval.execution.notebooks import check_parameters, execute_notebook, failure, notebook_timings
from rageval.execution.render import notebook_html, warm_html
from rageval.execution.slots import NotebookSlot
from rageval.hashing import sha256_bytes
from rageval.paths import default_notebook
from rageval.progress import SILENT, Event, Reporter, channel
from rageval.tracking.datasets import RunDataset
from rageval.tracking.environment import environment
from rageval.tracking.notes import evaluation_note
from rageval.tracking.records import KIND_TAG, NOTE_TAG
from rageval.tracking.store import Tracker
from rageval.workflows.guards import record_release_evaluation
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
        "rageval.platform": f"Python {platform.python_version()} on {platform.platform()}",
    }


def pipeline_summary(config: RunConfig) -> str:
    """The retrieval stages in order, one word each (``bm25 → dense → rrf → rerank → filter``): a
    stage's type (a fusion's method), behind its name where it has its own (``bm25-service:http``)."""
    words = []
    for stage in config.retrieval.stages:
        kind, name, method = stage.type, getattr(stage, "name", None), getattr(stage, "method", None)
        word = method if kind == "fusion" and method else kind
        words.append(f"{name}:{word}" if name and name != kind else word)
    return " → ".join(words)


def chunking_summary(config: RunConfig) -> str:
    """``markdown 200/30 minilm``: the chunking's method, size/overlap and tokenizer."""
    c = config.chunking
    return "none (whole documents)" if c.method == "none" else f"{c.method} {c.size}/{c.overlap} {c.tokenizer}"


def run_params(config: RunConfig, overrides: Sequence[str]) -> dict[str, Any]:
    """The few params a reviewer compares runs by (one column each); the whole resolved configuration
    is the artifact ``config.yaml`` and each measure's definition is in ``metrics.json``. The metric
    contract's params are what :mod:`rageval.analysis.comparability` checks."""
    evaluation = config.evaluation
    return {
        "benchmark": config.benchmark,  # the split is the tag rageval.split: one column, not two
        "pipeline": pipeline_summary(config),
        "final_k": config.final_k,
        "chunking": chunking_summary(config),
        "measures": ", ".join(m.text for m in parse_measures(evaluation.measures)),
        "rageval.overrides": list(overrides),
        "metrics.contract": CONTRACT,
        "metrics.contract_digest": CONTRACT_DIGEST,
        EVALUATION_PARAM: evaluation_param({k: getattr(evaluation, k) for k in EVALUATION_OPTIONS}),
    }


def cases_dataset(benchmark: Benchmark, split: str) -> RunDataset:
    """The split's cases as the run's dataset input, named by benchmark, version and split."""
    rows = [case.model_dump(mode="json", exclude_none=True) for case in benchmark.cases_for(split)]
    frame = pd.DataFrame(
        {
            "queryId": [r["queryId"] for r in rows],
            "query": [r["query"] for r in rows],
            "slice": [",".join(r.get("slice", [])) for r in rows],
            "relevant": [json.dumps(r["relevant"]) for r in rows],
            "split": [r["split"] for r in rows],
        }
    )
    name = f"{benchmark.spec.name}-{benchmark.spec.version}-{split}"
    return RunDataset(frame, name, str(benchmark.path), benchmark.hashes["cases"][:16], split)


@dataclass(frozen=True)
class RunRequest:
    """One configuration to run through one notebook into a sealed run: what every entry point
    (``rageval run``, a sweep member in a thread or on a Dask worker, the papermill door, the demo,
    ``rageval reproduce``) hands to :func:`execute_run`. Plain values, picklable to a worker.

    ``run_name`` defaults to :func:`config_label` ``@split``; ``label``, the configuration's own name
    (tag ``rageval.config.label``), to :func:`config_label` (a sweep gives its member's); ``tags`` are
    added to the run's own (a sweep's parent link); ``family`` names the configuration family release
    evaluations are counted in (default: the config's name); ``notebook`` defaults to the project's
    evaluation notebook, ``notebook_parameters`` are its extra parameters."""

    config_file: Path
    overrides: tuple[str, ...] = ()
    benchmark: Path | None = None
    split: str | None = None
    experiment: str | None = None
    notebook: Path = field(default_factory=default_notebook)
    notebook_parameters: Mapping[str, Any] = field(default_factory=dict)
    timeout: int | None = None
    run_name: str | None = None
    label: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    family: str | None = None

    def __post_init__(self) -> None:
        # Callers hand lists and strings; the request holds one type for each.
        object.__setattr__(self, "config_file", Path(self.config_file))
        object.__setattr__(self, "overrides", tuple(self.overrides))
        object.__setattr__(self, "notebook", Path(self.notebook))
        if self.benchmark is not None:
            object.__setattr__(self, "benchmark", Path(self.benchmark))


def execute_run(
    request: RunRequest,
    tracker: Tracker,
    *,
    cancel: threading.Event | None = None,
    reporter: Reporter | None = None,
    warn: Callable[[str], None] | None = None,
    kernel: WarmKernel | None = None,
    notebook_slot: NotebookSlot | None = None,
) -> RunOutcome:
    """Run ``request`` through its notebook and seal the MLflow run.

    When ``cancel`` is set while the notebook runs (a sweep was interrupted), the run ends KILLED.
    ``reporter`` receives the steps as they go, the notebook kernel's among them; ``warn``, the
    warnings before the run exists: the configuration's (a measure cut off past ``final_k``) and that
    of a checkout with uncommitted changes (naming the files). ``kernel``: a warm kernel for the
    notebook (:mod:`rageval.execution.kernels`), which this call closes; without one a kernel is
    started here, to come up while the checks run. ``notebook_slot``: this member's turn at a
    sweep's places to run a notebook (:class:`~rageval.execution.slots.NotebookSlots`).
    """
    kernel = kernel or WarmKernel(request.notebook.parent)
    slot = notebook_slot or NotebookSlot()
    reporter = reporter or SILENT
    try:
        started = time.perf_counter()
        reporter.step("checks")
        prepared = prepare_run(request, warn)
        if not slot.acquire(cancel) or (cancel is not None and cancel.is_set()):  # interrupted while waiting
            raise InterruptedError("the sweep was interrupted before this member's run was created")
        reporter.step("create run")
        reaped = tuple(tracker.reap())
        run_id = create_run(prepared, tracker)
        created = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="rageval-run-") as tmp:
            executed, early = _run_notebook(prepared, tracker, run_id, Path(tmp), cancel, reporter, kernel, slot)
            executed_at = time.perf_counter()
            timings = {"prepare": created - started, "notebook": executed_at - created}
            digest, timings, result = _attach_and_seal(prepared, tracker, run_id, executed, early, timings, reporter)
    finally:
        slot.release()
        kernel.close()
    timings["seal"] = time.perf_counter() - executed_at
    reporter.end()
    info = tracker.run(run_id)
    return RunOutcome(run_id, prepared.experiment, digest, info.metrics, prepared.measures, timings, reaped, result)


@dataclass(frozen=True)
class PreparedRun:
    """A request checked and resolved, before its run exists."""

    request: RunRequest
    config: RunConfig
    config_yaml: str
    benchmark: Benchmark
    declared: dict[str, Any]  # the notebook's parameters cell
    overrides: list[str]  # as recorded: the request's, and a benchmark or split given apart
    experiment: str
    label: str
    tags: dict[str, str]
    source: Origin

    @property
    def measures(self) -> dict[str, str]:
        """MLflow key → measure string."""
        return {m.key: m.text for m in parse_measures(self.config.evaluation.measures)}


def prepare_run(request: RunRequest, warn: Callable[[str], None] | None = None) -> PreparedRun:
    """Everything that can be checked, checked before a run exists: the configuration and its
    overrides, the notebook's parameters, the benchmark and the split."""
    config = load_config(
        request.config_file, request.overrides, benchmark=request.benchmark, split=request.split, warn=warn
    )
    declared = check_parameters(request.notebook, dict(request.notebook_parameters), required=RUN_PARAMETERS)
    if request.notebook_parameters.get("record"):  # the papermill door's switch (rageval.workflows.door)
        raise ParameterError(
            Problem(
                file=str(request.notebook),
                field="record",
                message="rageval run records the run itself",
                fix="leave it out",
            )
        )
    bench = load_benchmark(config.benchmark)
    bench.cases_for(config.split)  # an undeclared split fails here, before a run exists
    overrides = [*request.overrides]
    if request.benchmark is not None:
        overrides.append(f"benchmark={config.benchmark}")
    if request.split is not None:
        overrides.append(f"split={request.split}")
    label = request.label or config_label(config.name, overrides)
    source = origin(request.config_file, config)  # read once: tags, warning and patch
    if warn is not None and source.warning:
        warn(source.warning)
    tags = {
        **run_tags(config, bench, request.config_file, request.family, source),
        "rageval.config.label": label,
        **request.tags,
    }
    experiment = request.experiment or bench.spec.name
    return PreparedRun(
        request, config, dump_config(config), bench, declared, overrides, experiment, label, tags, source
    )


def create_run(prepared: PreparedRun, tracker: Tracker) -> str:
    """The run, with its configuration, environment, patch and cases; on the release split counted
    as a release evaluation of its family."""
    config, bench = prepared.config, prepared.benchmark
    run_id = tracker.create_run(
        prepared.experiment,
        prepared.request.run_name or f"{prepared.label}@{config.split}",
        params=run_params(config, prepared.overrides),
        tags=prepared.tags,
        files={
            "config.yaml": prepared.config_yaml.encode(),
            "environment.txt": environment().encode(),
            **({"git/diff.patch": prepared.source.diff()} if prepared.source.files else {}),
        },
        dataset=cases_dataset(bench, config.split),
    )
    if config.split == RELEASE_SPLIT:
        try:
            record_release_evaluation(tracker, run_id, bench, prepared.request.family or config.name)
        except Exception as exc:
            tracker.fail(run_id, f"counting the release evaluation failed: {type(exc).__name__}: {exc}")
            raise
    return run_id


def _run_notebook(
    prepared: PreparedRun,
    tracker: Tracker,
    run_id: str,
    tmp: Path,
    cancel: threading.Event | None,
    reporter: Reporter,
    kernel: WarmKernel,
    slot: NotebookSlot,
) -> tuple[Path, EarlyLog]:
    """The notebook executed into ``tmp``; a cell error, a timeout or Ctrl-C ends the run FAILED
    (KILLED when cancelled) and raises."""
    notebook = prepared.request.notebook
    executed = tmp / notebook.name
    parameters = {
        **prepared.request.notebook_parameters,
        "config_yaml": prepared.config_yaml,
        "run_id": run_id,
        "tracking_uri": tracker.uri,
    }
    # A notebook that can hand its result back (notebooks/evaluate.ipynb) leaves the logging to
    # this process, whose store is open already: the kernel then never imports mlflow nor opens
    # the store (about 3 s of a run). A notebook without `handoff` logs into run_id itself.
    handoff = tmp / "result.pickle"
    if "handoff" in prepared.declared:
        parameters["handoff"] = str(handoff)
    # Its figures are the notebook's to draw (door.show_figures): logged once it has run (_log_figures).
    early = EarlyLog(handoff, lambda handed: tracker.log_result(run_id, handed, {}), warm=warm_html)
    try:
        if cancel is not None and cancel.is_set():
            raise InterruptedError("the sweep was interrupted before this run's notebook started")
        reporter.step("kernel start")
        with channel(_kernel_events(reporter) if reporter.enabled else None, kernel.channel):
            execute_notebook(notebook, executed, parameters, timeout=prepared.request.timeout, kernel=kernel)
    except BaseException as exc:
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
    return executed, early


def _attach_and_seal(
    prepared: PreparedRun,
    tracker: Tracker,
    run_id: str,
    executed: Path,
    early: EarlyLog,
    timings: dict[str, float],
    reporter: Reporter,
) -> tuple[str, dict[str, float], ExperimentResult | None]:
    """The handed-back result logged, the executed notebook and its HTML attached, the timings and
    note written, and the run sealed: the manifest's sha256, every step's seconds, and the result
    (None for a notebook that logged itself). Any failure ends the run FAILED."""
    notebook = prepared.request.notebook
    try:
        result = None
        if "handoff" in prepared.declared:
            reporter.step("logging")
            result = early.finish()
            if result is not None:
                _log_figures(tracker, run_id, result, executed)
        else:
            early.abandon()
        reporter.step("attach notebook")
        tracker.log_file(run_id, f"notebook/{notebook.name}", executed)
        tracker.log_bytes(run_id, f"notebook/{Path(notebook.name).with_suffix('.html')}", notebook_html(executed))
        steps = {**notebook_timings(executed), **timings}
        tracker.log_tables(
            run_id, {"run_timings": pd.DataFrame({"step": list(steps), "seconds": list(steps.values())})}
        )
        info = tracker.run(run_id)
        headline = {text: info.metrics[key] for key, text in prepared.measures.items() if key in info.metrics}
        tracker.set_tags(run_id, {NOTE_TAG: evaluation_note(info.tags, headline)})
        reporter.step("seal")
        return tracker.seal(run_id), steps, result
    except Exception as exc:
        tracker.fail(run_id, f"sealing failed: {type(exc).__name__}: {exc}")
        raise


def _log_figures(tracker: Tracker, run_id: str, result: ExperimentResult, executed: Path) -> None:
    """The run's figures as its notebook showed them; any it did not show (a notebook of one's
    own may leave them out) drawn here, from the result it handed back."""
    from rageval.analysis.plots import EVALUATION_FIGURES, evaluation_pngs

    shown = shown_figures(json.loads(executed.read_text(encoding="utf-8"))["cells"], EVALUATION_FIGURES)
    drawn = evaluation_pngs(result, skip=shown)
    tracker.log_files(run_id, {f"figures/{name}": data for name, data in {**drawn, **shown}.items()})


def _kernel_events(reporter: Reporter) -> Callable[[Event], None]:
    """Where the kernel's events go: to ``reporter``, the end of its experiment being the start of
    what the notebook does next (draw its displays; log the result, for a notebook that logs itself)."""

    def emit(event: Event) -> None:
        if event.get("kind") == "end":
            event = {"kind": "step", "name": "notebook displays", "t": event.get("t")}
        reporter.emit(event)

    return emit
