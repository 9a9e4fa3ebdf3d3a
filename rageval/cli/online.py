"""Online evidence: ``rageval online LOG --policy P --metrics M`` and ``rageval online simulate``."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from rageval.cli.common import TrackingUri, app, echo, input_file, open_tracker
from rageval.errors import InputError, Problem


class OnlineGroup(TyperGroup):
    """``rageval online LOG ...`` is ``rageval online analyze LOG ...``: a first word that names no
    subcommand is the log."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["analyze", *args]
        return super().parse_args(ctx, args)


online_app = typer.Typer(
    cls=OnlineGroup,
    no_args_is_help=True,
    help="Online evidence: analyse an A/B cohort's log (rageval online LOG ...), or simulate one.",
)
app.add_typer(online_app, name="online")


@online_app.command("analyze")
def analyze(
    log: Annotated[Path, typer.Argument(help="the cohort's log, .jsonl or .parquet (one unit a record)")],
    policy: Annotated[Path, typer.Option(help="import policy: authorization, redaction, retention")],
    metrics: Annotated[Path, typer.Option(help="metric definitions, e.g. params/online/metrics.yaml")],
    baseline: Annotated[str | None, typer.Option(help="sealed evaluation run of the baseline's configuration")] = None,
    candidate: Annotated[
        str | None, typer.Option(help="sealed evaluation run of the candidate's configuration")
    ] = None,
    tracking_uri: TrackingUri = None,
    experiment: Annotated[str | None, typer.Option(help="MLflow experiment [default: rageval-release]")] = None,
    today: Annotated[str | None, typer.Option(help="YYYY-MM-DD the retention date is checked against")] = None,
) -> None:
    """Analyse an A/B cohort per metric; record a sealed online run. Exit 0 on pass, 1 on fail."""
    from rageval.workflows.release.online import execute_online

    outcome = execute_online(
        input_file(log, "LOG", "give the cohort's log (.jsonl or .parquet)"),
        input_file(policy, "--policy", "give the import policy, e.g. params/online/policy.yaml"),
        input_file(metrics, "--metrics", "give the metric definitions, e.g. params/online/metrics.yaml"),
        tracker=open_tracker(tracking_uri),
        baseline=baseline,
        candidate=candidate,
        experiment=experiment,
        today=_date(today),
    )
    decision = outcome.decision
    if outcome.simulated:
        echo("note: the log is SIMULATED (synthetic units, not real users); the run is tagged rageval.simulated=true")
    srm = decision.sample_ratio
    counts = ", ".join(f"{arm} {n}" for arm, n in srm.counts.items())
    echo(f"{'PASS' if srm.passed else 'FAIL':<4}  sample ratio: {counts}, chi-square p = {srm.p_value:.3g}")
    for verdict in decision.verdicts:
        echo(f"{verdict.verdict.upper():<4}  {verdict.role} {verdict.metric}: {verdict.reason}")
    if not srm.passed:
        echo(f"error: {decision.reasons[0]}", err=True)
    echo(f"online run {outcome.run_id} sealed (experiment {outcome.experiment}): {decision.verdict.upper()}")
    raise typer.Exit(0 if decision.passed else 1)


@online_app.command("simulate")
def simulate(  # long: a typer command: its options are its parameters, typer's only way to declare them
    baseline: Annotated[str, typer.Option(help="sealed evaluation run: the baseline arm's rankings")],
    candidate: Annotated[str, typer.Option(help="sealed evaluation run: the candidate arm's rankings")],
    out: Annotated[Path, typer.Option(help="the log to write (.jsonl)")],
    sessions: Annotated[int, typer.Option(help="sessions before any injected loss")] = 20_000,
    seed: Annotated[int, typer.Option()] = 0,
    candidate_share: Annotated[float, typer.Option(help="the planned split")] = 0.5,
    eta: Annotated[float, typer.Option(help="examination probability 1 / rank**eta")] = 1.0,
    srm_drop: Annotated[float, typer.Option(help="share of candidate sessions lost (injects an SRM)")] = 0.0,
    latency_factor: Annotated[
        float, typer.Option(help="candidate latency multiplier (> 1 injects a regression)")
    ] = 1.0,
    tracking_uri: TrackingUri = None,
) -> None:
    """Simulate an A/B cohort from two sealed runs' rankings and their benchmark's judgments
    (position-biased clicks); every unit is labelled simulated."""
    from pydantic import ValidationError

    from rageval.release.simulate_online import Simulation
    from rageval.validation import problems_from_validation
    from rageval.workflows.release.online import simulate_log

    try:
        knobs = Simulation(
            sessions=sessions,
            seed=seed,
            candidate_share=candidate_share,
            eta=eta,
            srm_drop=srm_drop,
            candidate_latency_factor=latency_factor,
        )
    except ValidationError as exc:
        raise InputError(problems_from_validation(exc, file="command line", model=Simulation)) from None
    if out.suffix != ".jsonl":
        raise InputError(Problem(file=str(out), field="--out", message="not a .jsonl path", fix="end it in .jsonl"))
    path, count = simulate_log(baseline, candidate, out, knobs, tracker=open_tracker(tracking_uri))
    echo(f"wrote {count} SIMULATED units to {path} (knobs in {path.name}.simulation.json)")


def _date(value: str | None) -> dt.date | None:
    if value is None:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise typer.BadParameter(f"expected YYYY-MM-DD, got {value!r}", param_hint="--today") from None
