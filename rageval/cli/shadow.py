"""``rageval shadow LOG --policy POLICY --benchmark B`` (record a sealed shadow run) and
``rageval shadow simulate`` (write a simulated shadow log), each a thin call into
:mod:`rageval.workflows.release.shadow` or :mod:`rageval.release.simulate_shadow`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from rageval.cli.common import TrackingUri, app, echo, input_file, input_folder, open_tracker, parse_date
from rageval.errors import InputError, Problem

if TYPE_CHECKING:
    from rageval.workflows.release.shadow import ShadowOutcome


class _RecordByDefault(TyperGroup):
    """``rageval shadow LOG ...`` means ``rageval shadow record LOG ...``: a first argument that is
    no subcommand is the log."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["record", *args]
        return super().parse_args(ctx, args)


shadow_app = typer.Typer(
    cls=_RecordByDefault,
    no_args_is_help=True,
    help="Shadow evidence: `rageval shadow LOG --policy P --benchmark B` records a sealed shadow run; "
    "`rageval shadow simulate` writes a simulated log.",
)
app.add_typer(shadow_app, name="shadow")


@shadow_app.command("record")
def record(  # long: a typer command: its options are its parameters, typer's only way to declare them
    log: Annotated[Path, typer.Argument(help="shadow log (.jsonl or .parquet)")],
    policy: Annotated[
        Path | None, typer.Option(help="import policy: authorization, redaction, retention (required)")
    ] = None,
    benchmark: Annotated[Path | None, typer.Option(help="benchmark folder: ACLs, judgments, cases")] = None,
    rules: Annotated[Path | None, typer.Option(help="shadow rules, e.g. params/shadow/rules.yaml")] = None,
    baseline: Annotated[str | None, typer.Option(help="sealed run ID of the baseline configuration")] = None,
    candidate: Annotated[str | None, typer.Option(help="sealed run ID of the candidate configuration")] = None,
    chunking: Annotated[
        Path | None,
        typer.Option(help="params or chunking YAML of the candidate (passage pools) [default: --candidate's]"),
    ] = None,
    pool_out: Annotated[
        Path | None, typer.Option(help="write the judgment pool (pool.json + sheets) per split here")
    ] = None,
    k: Annotated[int, typer.Option("-k", help="depth of Jaccard@k, the unjudged share and the pool")] = 10,
    p: Annotated[float, typer.Option("-p", help="RBO persistence")] = 0.9,
    resamples: Annotated[int, typer.Option(help="bootstrap resamples of the latency intervals")] = 2000,
    seed: Annotated[int, typer.Option(help="seed of the bootstrap and the pool's sheet order")] = 0,
    today: Annotated[
        str | None, typer.Option(help="YYYY-MM-DD the retention is checked against [default: today]")
    ] = None,
    tracking_uri: TrackingUri = None,
    experiment: Annotated[str | None, typer.Option(help="MLflow experiment [default: rageval-release]")] = None,
) -> None:
    """Analyse a shadow log under its import policy; record a sealed shadow run. Exit 1 when rules fail."""
    from rageval.benchmark.migration import load_chunking
    from rageval.workflows.release.shadow import ShadowRequest, execute_shadow

    log = input_file(log, "LOG", "give a shadow log (.jsonl or .parquet)")
    if policy is not None:
        policy = input_file(policy, "--policy", "give an import policy, e.g. params/shadow/policy.yaml")
    if benchmark is None:
        raise InputError(Problem(file="--benchmark", message="missing", fix="give the benchmark folder"))
    benchmark = input_folder(benchmark, "--benchmark", "give the benchmark folder")
    request = ShadowRequest(
        log,
        policy,
        benchmark,
        rules_file=input_file(rules, "--rules", "give a rules file") if rules else None,
        baseline_run=baseline,
        candidate_run=candidate,
        chunking=load_chunking(chunking) if chunking else None,
        pool_out=pool_out,
        experiment=experiment,
        k=k,
        p=p,
        resamples=resamples,
        seed=seed,
        today=parse_date(today),
    )
    outcome = execute_shadow(request, tracker=open_tracker(tracking_uri))
    _print_shadow(outcome, pool_out)
    raise typer.Exit(1 if outcome.decision is not None and not outcome.decision.passed else 0)


def _print_shadow(outcome: ShadowOutcome, pool_out: Path | None) -> None:
    """The analysis in a few lines, the proposed pools, warnings, every rule and the verdict."""
    a, o = outcome.analysis, outcome.analysis.overall
    p95 = a.latency_row(0.95)
    label = "SIMULATED " if outcome.simulated else ""
    echo(f"{label}shadow log: {o['requests']} requests, {o['compared']} compared (both arms answered)")
    echo(
        f"RBO_ext {o['rbo_ext_mean']:.3f} (min {o['rbo_min_mean']:.3f}, res {o['rbo_res_mean']:.3f}, p={a.p})  "
        f"Jaccard@{a.k} {o['jaccard_mean']:.3f}  top-1 changed {o['top1_change_rate']:.1%}"
    )
    if "delta_ms" in p95:
        echo(
            f"p95 latency {p95['baseline_ms']:.1f} → {p95['candidate_ms']:.1f} ms ({p95['delta_ms']:+.1f} ms, "
            f"{a.confidence:.0%} CI {p95['delta_low']:+.1f} to {p95['delta_high']:+.1f})"
        )
    echo(
        f"errors {o['baseline_error_rate']:.1%} → {o['candidate_error_rate']:.1%}  candidate leaks {o['candidate_leaks']}  "
        f"unjudged share of top-{a.k} {o['unjudged_share']:.1%} ({o['matched_requests']} requests matched to cases)"
    )
    for split, manifest in outcome.pools.items():
        where = f" (sheets in {pool_out / split})" if pool_out else ""
        echo(f"proposed pool, split {split}: {len(manifest.items)} unjudged items{where}")
    for warning in outcome.warnings:
        echo(f"warning: {warning}", err=True)
    if outcome.decision is not None:
        for rule in outcome.decision.rules:
            echo(f"{rule.verdict.upper():<4}  {rule.rule}: {rule.reason}")
    verdict = outcome.decision.verdict.upper() if outcome.decision else "recorded (no rules given)"
    echo(f"shadow run {outcome.run_id} sealed: {verdict}")


@shadow_app.command("simulate")
def simulate(  # long: a typer command: its options are its parameters, typer's only way to declare them
    out: Annotated[Path, typer.Option(help="the log to write (.jsonl or .parquet)")],
    benchmark: Annotated[Path, typer.Option(help="benchmark folder the rankings are of")],
    baseline: Annotated[str, typer.Option(help="baseline: a sealed run ID, or a rankings .parquet/.csv")],
    candidate: Annotated[str, typer.Option(help="candidate: a sealed run ID, or a rankings .parquet/.csv")],
    requests: Annotated[int, typer.Option("-n", "--requests", help="requests to simulate")] = 200,
    seed: Annotated[int, typer.Option(help="seed of the sampling, latencies and faults")] = 0,
    baseline_ms: Annotated[float, typer.Option(help="median baseline latency")] = 20.0,
    candidate_ms: Annotated[
        float | None, typer.Option(help="median candidate latency [default: the baseline's]")
    ] = None,
    rbo_drop: Annotated[
        float, typer.Option(help="fault: share of requests whose candidate serves another case's ranking")
    ] = 0.0,
    leaks: Annotated[int, typer.Option(help="fault: requests whose candidate shows a forbidden document first")] = 0,
    latency_factor: Annotated[float, typer.Option(help="fault: the candidate's latencies times this")] = 1.0,
    candidate_errors: Annotated[float, typer.Option(help="fault: share of failed candidate requests")] = 0.0,
    tracking_uri: TrackingUri = None,
) -> None:
    """Write a seeded, SIMULATED shadow log from two arms' rankings (labelled simulated in every record)."""
    from rageval.benchmark.loading import load_benchmark
    from rageval.cli.judge import _read_rankings
    from rageval.release.simulate_shadow import Faults, SimulatedTraffic, simulate_shadow, write_log

    bench = load_benchmark(input_folder(benchmark, "--benchmark", "give the benchmark folder"))
    frames = {}
    for role, spec in (("baseline", baseline), ("candidate", candidate)):
        path = Path(spec)
        frames[role] = (
            _read_rankings(path)
            if path.suffix in (".parquet", ".csv", ".tsv")
            else open_tracker(tracking_uri).rankings(spec)
        )
    records = simulate_shadow(
        frames["baseline"],
        frames["candidate"],
        bench,
        SimulatedTraffic(
            requests,
            seed=seed,
            baseline_ms=baseline_ms,
            candidate_ms=candidate_ms,
            faults=Faults(rbo_drop, leaks, latency_factor, candidate_errors),
        ),
        baseline_config=baseline,
        candidate_config=candidate,
    )
    write_log(records, out)
    echo(f"wrote {len(records)} SIMULATED requests (seed {seed}) to {out}")
