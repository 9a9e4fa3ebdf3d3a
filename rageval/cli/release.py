"""The release decision and its checklist: ``rageval release --gate G --review R --shadow S --online O
--policy P`` and ``rageval checklist RELEASE_RUN``, thin calls into :mod:`rageval.workflows.release.record`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from rageval.cli.common import TrackingUri, app, echo, input_file, open_tracker

if TYPE_CHECKING:
    from rageval.release.checklist import Item

RunOption = Annotated[str | None, typer.Option(help="sealed run ID of this layer")]


def print_items(items: Sequence[Item]) -> None:
    for item in items:
        echo(f"{item.verdict.upper():<4}  {item.number:>2}. {item.item}: {item.reason}  [{item.record}]")


@app.command("release")
def release(
    gate: RunOption = None,
    review: RunOption = None,
    shadow: RunOption = None,
    online: RunOption = None,
    policy: Annotated[Path, typer.Option(help="release policy file")] = Path("params/release/policy.yaml"),
    tracking_uri: TrackingUri = None,
    experiment: Annotated[str | None, typer.Option(help="MLflow experiment [default: rageval-release]")] = None,
) -> None:
    """Decide a release from its evidence layers (gate, review, shadow, online runs; all about one baseline
    and candidate); record a sealed release run linking them, with the checklist. Exit 0 on pass, 1 on fail."""
    from rageval.workflows.release.record import execute_release

    policy = input_file(policy, "--policy", "give a release policy, e.g. params/release/policy.yaml")
    outcome = execute_release(
        {"gate": gate, "review": review, "shadow": shadow, "online": online},
        policy,
        tracker=open_tracker(tracking_uri),
        experiment=experiment,
    )
    decision = outcome.decision
    for layer in decision.layers:
        run = f" {layer.run_id}" if layer.run_id else ""
        echo(f"{layer.verdict.upper():<6} {layer.layer}{run}: {layer.reason}")
    for reason in decision.reasons:
        echo(f"reason: {reason}")
    echo("checklist:")
    print_items(outcome.checklist)
    echo(f"release run {outcome.run_id} sealed: {decision.verdict.upper()}")
    raise typer.Exit(0 if decision.passed else 1)


@app.command("checklist")
def checklist(
    release_run: Annotated[str, typer.Argument(help="run ID of a release run (rageval release)")],
    tracking_uri: TrackingUri = None,
) -> None:
    """The ten release-checklist items of a release run, recomputed from its linked records and compared
    with the checklist stored at release time. Exit 0 when all pass, 1 otherwise."""
    from rageval.workflows.release.record import execute_checklist

    outcome = execute_checklist(release_run, tracker=open_tracker(tracking_uri))
    print_items(outcome.items)
    for change in outcome.changed:
        echo(f"changed since the release run: {change}")
    for override in outcome.overrides:
        echo(f"override: {override}")
    passed = sum(i.verdict == "pass" for i in outcome.items)
    echo(f"{passed}/{len(outcome.items)} PASS (stored with release run {release_run}: checklist.json)")
    raise typer.Exit(0 if passed == len(outcome.items) else 1)
