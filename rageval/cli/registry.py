"""``rageval promote RELEASE_RUN`` and ``rageval rollback FAMILY``, thin calls into
:mod:`rageval.workflows.release.registry`."""

from __future__ import annotations

from typing import Annotated

import typer

from rageval.cli.common import TrackingUri, app, echo, open_tracker

Sample = Annotated[int, typer.Option(help="queries of the evaluation run re-run to check a bundle")]
Seed = Annotated[int, typer.Option(help="seed drawing the sample")]
Experiment = Annotated[str | None, typer.Option(help="MLflow experiment of the record [default: rageval-release]")]


@app.command("promote")
def promote(
    release_run: Annotated[str, typer.Argument(help="a sealed release run whose evidence still passes")],
    model: Annotated[
        str | None, typer.Option(help="release slot (registered model) [default: the candidate's family]")
    ] = None,
    allow_simulated: Annotated[
        bool, typer.Option(help="promote a release resting on simulated evidence (recorded as SIMULATED)")
    ] = False,
    sample: Sample = 20,
    seed: Seed = 0,
    tracking_uri: TrackingUri = None,
    experiment: Experiment = None,
) -> None:
    """Re-derive the release's decision from its linked runs (refused unless it holds), register its
    candidate (and baseline) in the release slot, bundle their serving inputs, move the alias `champion`
    to the candidate and `previous` to the former champion; record a sealed promotion run."""
    from rageval.workflows.release.registry import PromoteRequest, execute_promote

    request = PromoteRequest(release_run, model, allow_simulated, sample, seed, experiment)
    outcome = execute_promote(request, tracker=open_tracker(tracking_uri))
    if outcome.simulated:
        echo(f"SIMULATED: the release rests on simulated evidence ({', '.join(outcome.simulated)}); marked so")
    for run, bundle in outcome.bundles.items():
        echo(f"bundle {bundle.run_id} of run {run}: {len(bundle.entries)} cache entries, {bundle.bytes} bytes, sealed")
    echo(f"{outcome.model}: champion → v{outcome.champion.version} (run {outcome.champion.evaluation_run})")
    if outcome.previous is not None:
        echo(f"{outcome.model}: previous → v{outcome.previous.version} (run {outcome.previous.evaluation_run})")
    echo(f"promotion run {outcome.run_id} sealed")


@app.command("rollback")
def rollback(
    family: Annotated[str, typer.Argument(help="registered model: the retriever family (the configs' name)")],
    sample: Sample = 20,
    seed: Seed = 0,
    tracking_uri: TrackingUri = None,
    experiment: Experiment = None,
) -> None:
    """Move `champion` back to `previous` once that version, rebuilt from the artifact store alone,
    reproduces its recorded rankings on a sample. Exit 1, aliases untouched, when it does not."""
    from rageval.workflows.release.rollback import execute_rollback

    outcome = execute_rollback(
        family, tracker=open_tracker(tracking_uri), sample=sample, seed=seed, experiment=experiment
    )
    check = outcome.check
    echo(
        f"v{outcome.restored.version} rebuilt from bundle {outcome.restored.bundle_run}: "
        f"{len(check.identical)} of {len(check.queries)} sampled queries ranked identically"
    )
    if not outcome.passed:
        echo(f"rollback refused, aliases not moved: {check.problem or 'rankings differ'}", err=True)
        echo(f"rollback run {outcome.run_id} FAILED")
        raise typer.Exit(1)
    echo(f"{family}: champion → v{outcome.restored.version} (was v{outcome.rolled_back.version})")
    echo(f"rollback run {outcome.run_id} sealed")
