"""The ``rageval`` command: each command a thin call into the package."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from rageval.errors import InputError, RagevalError, TrackingError

app = typer.Typer(
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    help="Evaluate the retrieval stage of RAG systems: versioned benchmarks, papermill runs, sealed MLflow runs.",
)
benchmark_app = typer.Typer(no_args_is_help=True, help="Validate, hash, import and export benchmarks.")
import_app = typer.Typer(no_args_is_help=True, help="Import a real collection as a rageval benchmark.")
app.add_typer(benchmark_app, name="benchmark")
benchmark_app.add_typer(import_app, name="import")

TrackingUri = Annotated[
    str | None,
    typer.Option(
        "--tracking-uri", help="MLflow tracking URI [default: $MLFLOW_TRACKING_URI, else the project's mlruns/]"
    ),
]
# Options the evaluation commands (run, sweep) share.
Timeout = Annotated[int | None, typer.Option(help="per-cell timeout in seconds")]
RunExperiment = Annotated[str | None, typer.Option(help="MLflow experiment [default: the benchmark name]")]
EvaluateNotebook = Annotated[Path | None, typer.Option(help="[default: notebooks/evaluate.ipynb]")]


def _fail(error: RagevalError) -> None:
    typer.echo(f"error: {error}", err=True)
    raise typer.Exit(2 if isinstance(error, InputError) else 1)


def _pairs(values: list[str], option: str) -> dict[str, str]:
    out = {}
    for value in values:
        key, sep, item = value.partition("=")
        if not sep or not key or not item:
            raise typer.BadParameter(f"expected KEY=VALUE, got {value!r}", param_hint=option)
        out[key] = item
    return out


def _grade_map(values: list[str]) -> dict[int, int]:
    try:
        return {int(k): int(v) for k, v in _pairs(values, "--grade-map").items()}
    except ValueError:
        raise typer.BadParameter("grades must be integers, e.g. 4=3", param_hint="--grade-map") from None


# --------------------------------------------------------------------------- benchmark


@benchmark_app.command("validate")
def benchmark_validate(path: Annotated[Path, typer.Argument(help="benchmark folder")]) -> None:
    """Check a benchmark and report every problem (file, line, field); exit 1 if any."""
    from rageval.benchmark import validate_benchmark

    benchmark, problems = validate_benchmark(path)
    if benchmark is None:
        for problem in problems:
            typer.echo(str(problem), err=True)
        typer.echo(f"{len(problems)} problem{'s' if len(problems) != 1 else ''} in {path}", err=True)
        raise typer.Exit(1)
    spec = benchmark.spec
    typer.echo(f"{spec.name} {spec.version}: valid ({spec.relevanceUnit} relevance, corpus {spec.corpusVersion})")
    typer.echo(f"documents: {len(benchmark.documents)}")
    for split in spec.splits:
        cases = benchmark.cases_for(split)
        unanswerable = sum(not c.answerable for c in cases)
        typer.echo(f"{split} cases: {len(cases)} ({unanswerable} unanswerable)")


@benchmark_app.command("hash")
def benchmark_hash(
    path: Annotated[Path, typer.Argument(help="benchmark folder")],
    write: Annotated[bool, typer.Option("--write", help="record the hashes in benchmark.yaml")] = False,
) -> None:
    """Print the sha256 of a benchmark's files (and record them with --write)."""
    from rageval.benchmark import hash_files, write_hashes

    try:
        hashes = write_hashes(path) if write else hash_files(path)
    except RagevalError as error:
        _fail(error)
    for name, digest in hashes.items():
        typer.echo(f"{digest}  {name}")


@import_app.command("beir")
def import_beir(
    source: Annotated[Path, typer.Argument(help="BEIR folder: corpus.jsonl, queries.jsonl, qrels/*.tsv")],
    out: Annotated[Path, typer.Option(help="new benchmark folder")],
    name: Annotated[str, typer.Option(help="benchmark name")],
    version: Annotated[str, typer.Option(help="benchmark version")],
    split: Annotated[list[str], typer.Option(help="BEIR qrels split = benchmark split, e.g. test=release")],
    corpus_version: Annotated[str | None, typer.Option(help="[default: folder name + corpus sha256]")] = None,
    grade_map: Annotated[list[str], typer.Option(help="map a source grade into 0-3, e.g. 4=3")] = [],
) -> None:
    """Import a BEIR-layout collection."""
    from rageval.importers import import_beir as run_import

    _imported(
        lambda: run_import(
            source,
            out,
            name=name,
            version=version,
            splits=_pairs(split, "--split"),
            corpus_version=corpus_version,
            grade_map=_grade_map(grade_map),
        )
    )


@import_app.command("trec")
def import_trec(
    topics: Annotated[Path, typer.Option(help="TREC topics (SGML) or 'qid<TAB>text' lines")],
    qrels: Annotated[Path, typer.Option(help="TREC qrels")],
    docs: Annotated[Path, typer.Option(help="documents: JSON lines (id, title, text) or TREC <DOC> SGML")],
    out: Annotated[Path, typer.Option(help="new benchmark folder")],
    name: Annotated[str, typer.Option(help="benchmark name")],
    version: Annotated[str, typer.Option(help="benchmark version")],
    field: Annotated[str, typer.Option(help="topic field(s): title, desc, narr, or e.g. title+desc")] = "title",
    release_fraction: Annotated[
        float, typer.Option(help="share of queries for the release split (stable by query ID)")
    ] = 0.0,
    corpus_version: Annotated[str | None, typer.Option()] = None,
    grade_map: Annotated[list[str], typer.Option(help="map a source grade into 0-3, e.g. 4=3")] = [],
) -> None:
    """Import TREC topics, qrels and a document collection."""
    from rageval.importers import import_trec as run_import

    _imported(
        lambda: run_import(
            topics=topics,
            qrels=qrels,
            documents=docs,
            out=out,
            name=name,
            version=version,
            field=field,
            release_fraction=release_fraction,
            corpus_version=corpus_version,
            grade_map=_grade_map(grade_map),
        )
    )


def _imported(run_import: Callable[[], Path]) -> None:
    """Run an importer, then load what it wrote (validating it) and print its counts."""
    from rageval.benchmark import load_benchmark

    try:
        benchmark = load_benchmark(run_import())
    except RagevalError as error:
        _fail(error)
    typer.echo(f"wrote {benchmark.path}: {len(benchmark.documents)} documents")
    for split in benchmark.spec.splits:
        typer.echo(f"{split}: {len(benchmark.cases_for(split))} cases")


@benchmark_app.command("export-qrels")
def export_qrels(
    path: Annotated[Path, typer.Argument(help="benchmark folder")],
    out: Annotated[Path, typer.Option(help="TREC qrels file to write")],
    split: Annotated[str | None, typer.Option(help="one split [default: all]")] = None,
) -> None:
    """Write a benchmark's document-level judgments as TREC qrels."""
    from rageval.benchmark import load_benchmark
    from rageval.trec import write_qrels

    try:
        write_qrels(load_benchmark(path).qrels(split), out)
    except RagevalError as error:
        _fail(error)
    typer.echo(f"wrote {out}")


# --------------------------------------------------------------------------- metrics


@app.command("metrics")
def metrics(
    qrels: Annotated[Path, typer.Argument(help="TREC qrels file")],
    run: Annotated[Path, typer.Argument(help="TREC run file")],
    measure: Annotated[list[str], typer.Option("-m", "--measure", help="e.g. nDCG@10, R@100, RR, Hit@5, MRR, AP")],
    per_query: Annotated[bool, typer.Option("--per-query", "-q", help="also print each query's value")] = False,
    output: Annotated[str, typer.Option("--format", help="trec or json")] = "trec",
    ties: Annotated[str, typer.Option(help="docid-desc (trec_eval), docid-asc or input-order")] = "docid-desc",
    duplicates: Annotated[str, typer.Option(help="keep-first (counted) or error")] = "keep-first",
    relevance: Annotated[
        int, typer.Option("-l", "--relevance", help="lowest grade relevant for binary measures (trec_eval -l)")
    ] = 1,
    gain: Annotated[str, typer.Option(help="nDCG gain: grade (trec_eval) or exp (2^grade - 1)")] = "grade",
    complete: Annotated[
        bool, typer.Option("-c", "--complete", help="score judged queries absent from the run as 0 (trec_eval -c)")
    ] = False,
) -> None:
    """Evaluate a TREC run against TREC qrels; prints 'measure<TAB>query<TAB>value' lines."""
    from rageval.metrics import evaluate
    from rageval.trec import read_qrels, read_run

    try:
        evaluation = evaluate(
            read_run(run),
            read_qrels(qrels),
            measure,
            ties=ties,
            duplicates=duplicates,  # type: ignore[arg-type]
            missing="zero" if complete else "skip",
            relevance=relevance,
            gain=gain,  # type: ignore[arg-type]
        )
    except RagevalError as error:
        _fail(error)
    if output == "json":
        payload = {
            "aggregates": {k: float(v) for k, v in evaluation.aggregates.items()},
            "per_query": evaluation.per_query.to_dict(orient="index") if per_query else None,
            "num_q": evaluation.evaluated,
            "skipped": list(evaluation.skipped),
            "missing": list(evaluation.missing),
            "policy": evaluation.policy,
            "providers": evaluation.providers,
            "duplicates_dropped": evaluation.duplicates,
            "contract": evaluation.contract,
        }
        typer.echo(json.dumps(payload, indent=2))
        return
    if output != "trec":
        raise typer.BadParameter("choose trec or json", param_hint="--format")
    width = max(len(m.text) for m in evaluation.measures) + 2
    for m in evaluation.measures:
        if per_query:
            for qid, value in evaluation.per_query[m.text].items():
                typer.echo(f"{m.text:<{width}}\t{qid}\t{value:.4f}")
        typer.echo(f"{m.text:<{width}}\tall\t{evaluation.aggregates[m.text]:.4f}")
    if evaluation.skipped:
        typer.echo(f"# {len(evaluation.skipped)} queries without a relevant item skipped", err=True)


# --------------------------------------------------------------------------- runs


@app.command("run")
def run(
    config: Annotated[Path, typer.Argument(help="run configuration, e.g. params/bm25.yaml")],
    benchmark: Annotated[Path | None, typer.Option(help="benchmark folder [default: the config's]")] = None,
    split: Annotated[str | None, typer.Option(help="dev or release [default: the config's]")] = None,
    set_: Annotated[list[str], typer.Option("--set", help="override a config key: key.path=value (YAML value)")] = [],
    tracking_uri: TrackingUri = None,
    experiment: RunExperiment = None,
    notebook: EvaluateNotebook = None,
    parameter: Annotated[list[str], typer.Option("-p", "--parameter", help="extra notebook parameter NAME=VALUE")] = [],
    timeout: Timeout = None,
) -> None:
    """Evaluate a configuration through the notebook and record a sealed MLflow run."""
    import yaml

    from rageval.runner import execute_run
    from rageval.tracking import Tracker

    try:
        outcome = execute_run(
            config,
            overrides=set_,
            benchmark=benchmark,
            split=split,
            tracking_uri=tracking_uri,
            experiment=experiment,
            notebook=notebook,
            timeout=timeout,
            notebook_parameters={k: yaml.safe_load(v) for k, v in _pairs(parameter, "-p").items()},
        )
    except RagevalError as error:
        _fail(error)
    typer.echo(f"run {outcome.run_id} sealed (experiment {outcome.experiment}, manifest sha256 {outcome.sealed[:12]}…)")
    m = outcome.metrics
    typer.echo(
        f"queries: {int(m.get('queries_evaluated', 0))} evaluated, {int(m.get('queries_skipped', 0))} skipped "
        f"(no relevant item), {int(m.get('queries_failed', 0))} failed"
    )
    width = max(len(text) for text in outcome.measures.values())
    for key, text in outcome.measures.items():
        typer.echo(f"  {text:<{width}}  {m.get(key, float('nan')):.4f}")
    typer.echo(f"  {'context tokens (mean)':<{width}}  {m.get('context_tokens_mean', float('nan')):.1f}")
    typer.echo(f"verify: rageval verify {outcome.run_id}" + (f" --tracking-uri {tracking_uri}" if tracking_uri else ""))
    typer.echo(f"browse: rageval ui  (store: {Tracker(tracking_uri).uri})")


@app.command("verify")
def verify(run_id: Annotated[str, typer.Argument()], tracking_uri: TrackingUri = None) -> None:
    """Recompute every hash of a sealed run; exit 1 naming what changed."""
    from rageval.tracking import Tracker

    try:
        Tracker(tracking_uri).verify_or_raise(run_id)
    except RagevalError as error:
        _fail(error)
    typer.echo(f"run {run_id}: intact (every artifact, param, metric and tag matches its manifest)")


@app.command("runs")
def runs(
    experiment: Annotated[str | None, typer.Option(help="one experiment [default: all]")] = None,
    tracking_uri: TrackingUri = None,
) -> None:
    """List runs, newest first, with their status and whether they are sealed."""
    from rageval.tracking import Tracker

    for info in Tracker(tracking_uri).runs(experiment):
        state = "sealed" if info.sealed else "UNSEALED"
        typer.echo(f"{info.run_id}  {info.status:<8}  {state:<8}  {info.name}")


@app.command("export-run")
def export_run(
    run_id: Annotated[str, typer.Argument()],
    out: Annotated[Path, typer.Option(help="TREC run file to write")],
    level: Annotated[str, typer.Option(help="document (parent IDs) or passage (chunk IDs)")] = "document",
    tracking_uri: TrackingUri = None,
) -> None:
    """Write a sealed run's rankings as a TREC run file."""
    from rageval.experiment import level_run
    from rageval.tracking import Tracker
    from rageval.trec import write_run

    try:
        frame = level_run(Tracker(tracking_uri).rankings(run_id), level)
    except RagevalError as error:
        _fail(error)
    write_run(frame, out, tag=run_id[:12])
    typer.echo(f"wrote {out}: {frame['query_id'].nunique()} queries")


# --------------------------------------------------------------------------- sweeps, comparisons, the gate


@app.command("sweep")
def sweep(
    file: Annotated[Path, typer.Argument(help="sweep file, e.g. params/sweeps/demo.yaml")],
    workers: Annotated[
        int | None, typer.Option(help="configurations run at once [default: the file's workers]")
    ] = None,
    release: Annotated[
        bool, typer.Option("--release", help="allow a sweep on the frozen release split (recorded and counted)")
    ] = False,
    tracking_uri: TrackingUri = None,
    experiment: RunExperiment = None,
    notebook: EvaluateNotebook = None,
    timeout: Timeout = None,
) -> None:
    """Run every configuration of a sweep as a sealed child of one parent run; exit 1 if any failed."""
    from rageval.sweep import run_sweep

    try:
        outcome = run_sweep(
            file,
            workers=workers,
            release=release,
            tracking_uri=tracking_uri,
            experiment=experiment,
            notebook=notebook,
            timeout=timeout,
            on_parent=lambda run_id: typer.echo(f"sweep parent run {run_id}", err=True),
        )
    except RagevalError as error:
        _fail(error)
    key, text = outcome.primary
    width = max(len(m.name) for m in outcome.members)
    typer.echo(f"{'member':<{width}}  {'status':<11}  {'run':<32}  {'seconds':>7}  {text}")
    for m in outcome.members:
        value = f"{m.metrics[key]:.4f}" if key in m.metrics else ""
        seconds = f"{m.seconds:7.1f}" if m.seconds is not None else " " * 7
        typer.echo(f"{m.name:<{width}}  {m.status:<11}  {m.run_id or '-':<32}  {seconds}  {value}")
    typer.echo(f"parent run {outcome.parent_run_id} ({outcome.experiment}), {outcome.wall_s:.1f}s wall")
    if outcome.failed:
        for m in outcome.failed:
            typer.echo(f"error: {m.name}: {m.status}" + (f": {m.error}" if m.error else ""), err=True)
        raise typer.Exit(130 if outcome.interrupted else 1)
    typer.echo(f"compare: rageval compare --baseline {outcome.members[0].run_id} --sweep {outcome.parent_run_id}")


@app.command("compare")
def compare(
    baseline: Annotated[str, typer.Option(help="run ID of the baseline")],
    candidate: Annotated[list[str], typer.Option(help="run ID of a candidate (repeatable)")] = [],
    sweep: Annotated[
        str | None, typer.Option(help="a sweep's parent run ID: its sealed members are candidates")
    ] = None,
    allow_mismatch: Annotated[
        bool, typer.Option("--allow-mismatch", help="compare runs whose contract differs (recorded)")
    ] = False,
    max_release_evaluations: Annotated[
        int, typer.Option(help="warn past this many release evaluations of a candidate's family")
    ] = 5,
    tracking_uri: TrackingUri = None,
    experiment: Annotated[str | None, typer.Option(help="MLflow experiment [default: the baseline's]")] = None,
    notebook: Annotated[Path | None, typer.Option(help="[default: notebooks/compare.ipynb]")] = None,
    parameter: Annotated[
        list[str], typer.Option("-p", "--parameter", help="extra notebook parameter NAME=VALUE, e.g. top_n=5")
    ] = [],
    timeout: Timeout = None,
) -> None:
    """Compare sealed runs through the comparison notebook; record a sealed comparison run."""
    import yaml

    from rageval.compare import significance_display
    from rageval.runner import execute_comparison

    try:
        outcome = execute_comparison(
            baseline,
            candidate,
            sweep=sweep,
            allow_mismatch=allow_mismatch,
            tracking_uri=tracking_uri,
            experiment=experiment,
            notebook=notebook,
            timeout=timeout,
            max_release_evaluations=max_release_evaluations,
            notebook_parameters={k: yaml.safe_load(v) for k, v in _pairs(parameter, "-p").items()},
        )
    except RagevalError as error:
        _fail(error)
    for difference in outcome.differences:
        typer.echo(f"warning: compared despite a mismatch (--allow-mismatch, recorded): {difference}", err=True)
    for warning in outcome.warnings:
        typer.echo(f"warning: {warning}", err=True)
    typer.echo(
        f"comparison run {outcome.run_id} sealed (experiment {outcome.experiment}, manifest sha256 {outcome.sealed[:12]}…)"
    )
    typer.echo(significance_display(outcome.overall).to_string())
    typer.echo(f"browse: rageval ui  (the executed notebook and figures are artifacts of run {outcome.run_id})")


@app.command("gate")
def gate(
    baseline: Annotated[str, typer.Option(help="run ID of the current baseline (release split)")],
    candidate: Annotated[str, typer.Option(help="run ID of the candidate (release split)")],
    policy: Annotated[Path, typer.Option(help="gate policy file")] = Path("params/gates/release.yaml"),
    tracking_uri: TrackingUri = None,
    experiment: Annotated[str | None, typer.Option(help="MLflow experiment [default: the candidate's]")] = None,
) -> None:
    """Decide whether the candidate may replace the baseline; record a sealed decision run.
    Exit 0 on pass, 1 on fail."""
    from rageval.runner import execute_gate

    try:
        outcome = execute_gate(baseline, candidate, policy, tracking_uri=tracking_uri, experiment=experiment)
    except RagevalError as error:
        _fail(error)
    decision = outcome.decision
    for rule in decision.rules:
        typer.echo(f"{rule.verdict.upper():<4}  {rule.rule}: {rule.reason}")
    if not decision.largest_losses.empty:
        listed = ", ".join(
            f"{q} ({d:+.3f})"
            for q, d in zip(decision.largest_losses["query_id"], decision.largest_losses["delta"], strict=True)
        )
        typer.echo(f"largest losses on {decision.largest_losses['measure'].iloc[0]}: {listed}")
    for warning in decision.warnings:
        typer.echo(f"warning: {warning}", err=True)
    typer.echo(f"decision run {outcome.run_id} sealed: {decision.verdict.upper()}")
    typer.echo(f"rollback: baseline run {baseline} stays named in the decision (baseline_config.yaml)")
    raise typer.Exit(0 if decision.passed else 1)


@app.command("demo")
def demo(
    workers: Annotated[int, typer.Option(help="sweep members run at once")] = 2,
    tracking_uri: TrackingUri = None,
) -> None:
    """The demo's whole loop: sweep on dev, compare, take the best member to release, gate it."""
    from rageval.compare import significance_display
    from rageval.runner import execute_demo
    from rageval.tracking import Tracker

    try:
        outcome = execute_demo(workers=workers, tracking_uri=tracking_uri)
    except RagevalError as error:
        _fail(error)
    swept = outcome.sweep
    typer.echo(f"sweep {swept.parent_run_id} (dev): " + ", ".join(f"{m.name} {m.run_id}" for m in swept.members))
    typer.echo(f"comparison {outcome.comparison.run_id}:")
    typer.echo(significance_display(outcome.comparison.overall).to_string())
    typer.echo(f"chosen for release: {outcome.chosen} (best {swept.primary[1]} on dev)")
    typer.echo(
        f"release runs: baseline {outcome.release_baseline.run_id}, candidate {outcome.release_candidate.run_id}"
    )
    decision = outcome.gate.decision
    for rule in decision.rules:
        typer.echo(f"{rule.verdict.upper():<4}  {rule.rule}: {rule.reason}")
    typer.echo(f"gate {outcome.gate.run_id}: {decision.verdict.upper()}")
    typer.echo(f"browse: rageval ui  (store: {Tracker(tracking_uri).uri})")
    raise typer.Exit(0 if decision.passed else 1)


@app.command("diff-notebooks")
def diff_notebooks(
    run_a: Annotated[str, typer.Argument(help="run ID")],
    run_b: Annotated[str, typer.Argument(help="run ID")],
    metadata: Annotated[bool, typer.Option("--metadata", help="also show metadata, IDs and details")] = False,
    tracking_uri: TrackingUri = None,
) -> None:
    """Show the parameter and output differences of two runs' executed notebooks (nbdime)."""
    import tempfile

    from rageval.tracking import Tracker

    tracker = Tracker(tracking_uri)
    with tempfile.TemporaryDirectory(prefix="rageval-nbdiff-") as tmp:
        paths = []
        try:
            for label, run_id in (("a", run_a), ("b", run_b)):
                folder = tracker.download(run_id, "notebook", Path(tmp) / label)
                found = sorted(folder.glob("*.ipynb"))
                if not found:
                    raise TrackingError(f"run {run_id} has no executed notebook under notebook/")
                paths.append(found[0])
        except RagevalError as error:
            _fail(error)
        # -M -I -D: metadata, cell IDs and execution details are noise between two executions.
        command = [sys.executable, "-m", "nbdime", "diff", *([] if metadata else ["-M", "-I", "-D"])]
        if not sys.stdout.isatty():
            command.append("--no-color")
        done = subprocess.run([*command, str(paths[0]), str(paths[1])], capture_output=True, text=True)
        output = done.stdout.replace(str(paths[0]), f"{run_a}:{paths[0].name}").replace(
            str(paths[1]), f"{run_b}:{paths[1].name}"
        )
        typer.echo(output if output.strip() else "no parameter or output differences")
        if done.returncode != 0:
            typer.echo(done.stderr, err=True)
            raise typer.Exit(done.returncode)


@app.command("reproduce")
def reproduce_run(
    run_id: Annotated[str, typer.Argument(help="a sealed run")],
    allow_dirty: Annotated[
        bool,
        typer.Option("--allow-dirty", help="reproduce a run made from a dirty tree by re-applying its recorded diff"),
    ] = False,
    tracking_uri: TrackingUri = None,
) -> None:
    """Re-execute a sealed run at its commit and compare rankings stage by stage; exit 1 if they differ."""
    from rageval.reproduce import reproduce

    try:
        result = reproduce(run_id, tracking_uri, allow_dirty=allow_dirty)
    except RagevalError as error:
        _fail(error)
    typer.echo(f"original {result.original} → reproduction {result.reproduction} (record {result.record})")
    typer.echo(result.table().to_string(index=False))
    worst = max(result.metric_differences.values(), default=0.0)
    typer.echo(f"largest metric difference: {worst:.3g}")
    typer.echo(f"verdict: {result.verdict}")
    raise typer.Exit(0 if result.reproduced else 1)


@app.command("ui")
def ui(
    port: Annotated[int, typer.Option(help="port on 127.0.0.1")] = 5000,
    tracking_uri: TrackingUri = None,
) -> None:
    """Start the MLflow UI on loopback over the project's store (one worker, job execution off)."""
    from rageval.tracking import artifact_root_for, resolve_tracking_uri

    uri = resolve_tracking_uri(tracking_uri)
    command = [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        "--backend-store-uri",
        uri,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
    ]
    artifacts = artifact_root_for(uri)
    if artifacts:
        command += ["--default-artifact-root", artifacts]
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", "MLFLOW_DISABLE_TELEMETRY": "true"}
    typer.echo(f"MLflow UI: http://127.0.0.1:{port}  (store: {uri}; Ctrl-C stops it)")
    try:
        raise typer.Exit(subprocess.call(command, env=env))
    except KeyboardInterrupt:
        raise typer.Exit(0) from None


from rageval.governance_cli import register as _register_governance  # noqa: E402 - needs the apps above

_register_governance(app, benchmark_app)


def main() -> None:  # pragma: no cover
    app()
