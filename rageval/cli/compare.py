"""Sweeps, comparisons and the gate: ``rageval sweep``, ``compare``, ``gate``, ``demo``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rageval.cli.common import (
    EvaluateNotebook,
    ResultFormat,
    RunExperiment,
    Timeout,
    TrackingUri,
    app,
    echo,
    input_file,
    open_tracker,
    parse_notebook_parameters,
)

if TYPE_CHECKING:
    from rageval.analysis import Decision
    from rageval.workflows.sweep import SweepOutcome


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
    cluster: Annotated[
        str | None,
        typer.Option(
            help="run the members as tasks on a Dask cluster: tcp://HOST:PORT of a `dask scheduler`, "
            "or `local` for a LocalCluster of --workers processes on 127.0.0.1"
        ),
    ] = None,
) -> None:
    """Run every configuration of a sweep as a sealed child of one parent run; exit 1 if any failed."""
    from rageval.cli.progress import SweepView
    from rageval.safety import strip_control
    from rageval.workflows.provenance import dirty_warning
    from rageval.workflows.sweep import SweepRequest, run_sweep

    executor = None
    if cluster is not None:
        from rageval.workflows.cluster import DaskExecutor

        executor = DaskExecutor(cluster)
    warning = dirty_warning(file.resolve().parent)
    if warning:
        echo(warning, err=True)
    with SweepView() as view:  # each member's current step on stderr
        request = SweepRequest(
            input_file(file, "FILE", "give a sweep file, e.g. params/sweeps/demo.yaml"),
            workers=workers,
            release=release,
            experiment=experiment,
            notebook=notebook,
            timeout=timeout,
        )
        outcome = run_sweep(
            request,
            tracker=open_tracker(tracking_uri),
            progress=view,
            on_parent=lambda run_id: view.note(strip_control(f"sweep parent run {run_id}")),
            executor=executor,
        )
    _print_members(outcome)
    echo(
        f"parent run {outcome.parent_run_id} ({outcome.experiment}) {outcome.parent_status}, {outcome.wall_s:.1f}s wall"
    )
    if not outcome.ok:
        _print_sweep_errors(outcome)
        raise typer.Exit(130 if outcome.interrupted else 1)
    echo(f"compare: rageval compare --baseline {outcome.members[0].run_id} --sweep {outcome.parent_run_id}")


def _print_members(outcome: SweepOutcome) -> None:
    """One line per member (status, run, seconds, the first measure), then dead workers' attempts."""
    key, text = outcome.primary
    width = max(len(m.name) for m in outcome.members)
    echo(f"{'member':<{width}}  {'status':<11}  {'run':<32}  {'seconds':>7}  {text}")
    for m in outcome.members:
        value = f"{m.metrics[key]:.4f}" if key in m.metrics else ""
        seconds = f"{m.seconds:7.1f}" if m.seconds is not None else " " * 7
        echo(f"{m.name:<{width}}  {m.status:<11}  {m.run_id or '-':<32}  {seconds}  {value}")
    for m in outcome.members:
        for attempt in m.attempts:
            if attempt["run_id"] != m.run_id:  # a dead worker's attempt, now KILLED
                echo(
                    f"{m.name}: attempt {attempt['attempt'] or '?'} run {attempt['run_id']} {attempt['status']}: {attempt['note']}"
                )
        if m.retries:
            echo(
                f"{m.name}: retried {m.retries}x after its worker died; final: {m.status}"
                + (f" {m.run_id}" if m.run_id else "")
            )


def _print_sweep_errors(outcome: SweepOutcome) -> None:
    """What did not seal, on stderr: failed members, a store that stopped answering, the parent."""
    for m in outcome.failed:
        echo(f"error: {m.name}: {m.status}" + (f": {m.error}" if m.error else ""), err=True)
    if outcome.store_error:
        echo(f"error: the store stopped answering, so no further member started: {outcome.store_error}", err=True)
    if outcome.parent_status == "RUNNING":
        echo(
            f"error: the store is unreachable: parent run {outcome.parent_run_id} is left RUNNING; "
            "the next command that reaches the store reaps it",
            err=True,
        )
    elif outcome.parent_status != "sealed":
        echo(f"error: parent run {outcome.parent_run_id} is {outcome.parent_status}, not sealed", err=True)


@app.command("compare")
def compare(  # long: a typer command: its options are its parameters, typer's only way to declare them
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
    output: Annotated[
        ResultFormat | None,
        typer.Option("--format", help="also print the results table (rounded, significance marked) in this format"),
    ] = None,
) -> None:
    """Compare sealed runs through the comparison notebook; record a sealed comparison run."""
    from rageval.analysis import significance_display
    from rageval.workflows.compare import ComparisonRequest, execute_comparison

    request = ComparisonRequest(
        baseline,
        candidate,
        sweep=sweep,
        allow_mismatch=allow_mismatch,
        experiment=experiment,
        notebook=notebook,
        notebook_parameters=parse_notebook_parameters(parameter),
        timeout=timeout,
        max_release_evaluations=max_release_evaluations,
    )
    outcome = execute_comparison(request, tracker=open_tracker(tracking_uri))
    for difference in outcome.differences:
        echo(f"warning: compared despite a mismatch (--allow-mismatch, recorded): {difference}", err=True)
    for warning in outcome.warnings:
        echo(f"warning: {warning}", err=True)
    echo(
        f"comparison run {outcome.run_id} sealed (experiment {outcome.experiment}, manifest sha256 {outcome.sealed[:12]}…)"
    )
    echo(significance_display(outcome.overall).to_string())
    if output is not None:
        echo()
        echo(outcome.results.get(output.value, f"(the comparison run recorded no {output.value} results table)"))
    echo(f"browse: rageval ui  (the executed notebook and figures are artifacts of run {outcome.run_id})")


@app.command("gate")
def gate(
    baseline: Annotated[str, typer.Option(help="run ID of the current baseline (release split)")],
    candidate: Annotated[str, typer.Option(help="run ID of the candidate (release split)")],
    policy: Annotated[Path, typer.Option(help="gate policy file")] = Path("params/gates/release.yaml"),
    tracking_uri: TrackingUri = None,
    experiment: Annotated[str | None, typer.Option(help="MLflow experiment [default: rageval-release]")] = None,
) -> None:
    """Decide whether the candidate may replace the baseline; record a sealed decision run.
    With a latency rule in the policy, both pipelines are rebuilt and timed here, side by side.
    Exit 0 on pass, 1 on fail."""
    from rageval.workflows.gate import execute_gate

    policy = input_file(policy, "--policy", "give a gate policy file, e.g. params/gates/release.yaml")
    outcome = execute_gate(baseline, candidate, policy, tracker=open_tracker(tracking_uri), experiment=experiment)
    decision = outcome.decision
    print_rules(decision)
    if not decision.largest_losses.empty:
        listed = ", ".join(
            f"{q} ({d:+.3f})"
            for q, d in zip(decision.largest_losses["query_id"], decision.largest_losses["delta"], strict=True)
        )
        echo(f"largest losses on {decision.largest_losses['measure'].iloc[0]}: {listed}")
    for warning in decision.warnings:
        echo(f"warning: {warning}", err=True)
    echo(f"decision run {outcome.run_id} sealed: {decision.verdict.upper()}")
    echo(f"rollback: baseline run {baseline} stays named in the decision (baseline_config.yaml)")
    raise typer.Exit(0 if decision.passed else 1)


@app.command("demo")
def demo(
    workers: Annotated[int, typer.Option(help="sweep members run at once")] = 2,
    release_policy: Annotated[
        Path | None, typer.Option(help="release policy [default: params/release/policy.yaml]")
    ] = None,
    tracking_uri: TrackingUri = None,
) -> None:
    """The demo's whole loop: sweep on dev, compare, take the best member to release, gate it, then walk
    the release path (scripted review, SIMULATED shadow and online, release, promotion, rollback drill)."""
    from rageval.analysis import significance_display
    from rageval.cli.progress import SweepView
    from rageval.workflows.demo import execute_demo

    tracker = open_tracker(tracking_uri)
    if release_policy is not None:  # refused now, not after the sweep
        release_policy = input_file(
            release_policy, "--release-policy", "give a release policy, e.g. params/release/policy.yaml"
        )
    with SweepView() as view:  # the sweep members' steps on stderr
        outcome = execute_demo(workers=workers, release_policy_file=release_policy, tracker=tracker, progress=view)
    swept = outcome.sweep
    echo(f"sweep {swept.parent_run_id} (dev): " + ", ".join(f"{m.name} {m.run_id}" for m in swept.members))
    echo(f"comparison {outcome.comparison.run_id}:")
    echo(significance_display(outcome.comparison.overall).to_string())
    echo(f"chosen for release: {outcome.chosen} (best {swept.primary[1]} on dev)")
    echo(f"release runs: baseline {outcome.release_baseline.run_id}, candidate {outcome.release_candidate.run_id}")
    decision = outcome.gate.decision
    print_rules(decision)
    echo(f"gate {outcome.gate.run_id}: {decision.verdict.upper()}")
    steps = [
        ("review", outcome.review, "scripted", lambda o: f"{len(o.open)} open rejection(s)"),
        ("shadow", outcome.shadow, "SIMULATED", lambda o: o.decision.verdict.upper() if o.decision else "recorded"),
        ("online", outcome.online, "SIMULATED", lambda o: o.decision.verdict.upper()),
        ("release", outcome.release, "", lambda o: o.decision.verdict.upper()),
        ("promotion", outcome.promotion, _simulated(outcome.promotion), _champion),
        ("rollback drill", outcome.drill, "", lambda o: _drill(o)),
        ("re-promotion", outcome.repromotion, _simulated(outcome.repromotion), _champion),
    ]
    for label, step, mark, verdict in steps:
        if step is not None:
            echo(f"{label} {step.run_id}{' (' + mark + ')' if mark else ''}: {verdict(step)}")
    if outcome.checklist is not None:
        echo(f"release checklist of {outcome.checklist.release_run} (recomputed after the drill):")
        for item in outcome.checklist.items:
            echo(f"{item.number:>2}. {item.verdict.upper():<4}  {item.item}: {item.reason}")
    for reason in outcome.stopped:
        echo(f"stopped: {reason}")
    echo(f"browse: rageval ui  (store: {tracker.uri})")
    raise typer.Exit(0 if decision.passed and not outcome.stopped else 1)


def _champion(promotion: Any) -> str:
    return f"champion {promotion.model} v{promotion.champion.version}"


def _simulated(promotion: Any) -> str:
    """The demo's mark for a promotion resting on simulated evidence (it is recorded as such)."""
    return "SIMULATED" if promotion is not None and promotion.simulated else ""


def _drill(outcome: Any) -> str:
    check = outcome.check
    return (
        f"{'PASS' if outcome.passed else 'FAIL'} v{outcome.rolled_back.version} → v{outcome.restored.version}, "
        f"identical rankings on {len(check.identical)} of {len(check.queries)} sampled queries"
    )


def print_rules(decision: Decision) -> None:
    """Each gate rule, its verdict and its reason, one line each."""
    for rule in decision.rules:
        echo(f"{rule.verdict.upper():<4}  {rule.rule}: {rule.reason}")
