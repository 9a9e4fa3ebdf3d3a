"""``rageval review start GATE_RUN --out DIR`` (select the queries a person should look at and
write the sheet) and ``rageval review record DIR --reviewer NAME`` (import the filled sheets into a
sealed review run), each a thin call into :mod:`rageval.workflows.release.review`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rageval.cli.common import TrackingUri, app, echo, input_folder, open_tracker

review_app = typer.Typer(
    no_args_is_help=True,
    help="Human review of a gate: `rageval review start GATE_RUN --out DIR` writes the sheet; "
    "`rageval review record DIR --reviewer NAME` records the decisions as a sealed review run.",
)
app.add_typer(review_app, name="review")


@review_app.command("start")
def start(  # long: a typer command: its options are its parameters, typer's only way to declare them
    run: Annotated[str, typer.Argument(help="sealed gate (or comparison) run ID")],
    out: Annotated[Path, typer.Option(help="the review folder to write (must hold no review)")],
    n: Annotated[int, typer.Option("-n", help="largest losses and gains to include, each")] = 5,
    k: Annotated[int, typer.Option("-k", help="depth of the side-by-side top lists")] = 10,
    measure: Annotated[
        str | None, typer.Option(help="measure of losses and gains [default: the policy's first]")
    ] = None,
    critical: Annotated[
        list[str] | None, typer.Option(help="a critical slice (besides the policy's); repeatable")
    ] = None,
    candidate: Annotated[str | None, typer.Option(help="the candidate, for a comparison of several")] = None,
    resolves: Annotated[str | None, typer.Option(help="an earlier review run whose open rejections to revisit")] = None,
    tracking_uri: TrackingUri = None,
) -> None:
    """Select the queries a gate decision rests on and write the review sheet."""
    from rageval.workflows.release.review import ReviewRequest, start_review

    request = ReviewRequest(
        run, out, n=n, k=k, measure=measure, critical=critical or [], candidate=candidate, resolves=resolves
    )
    started = start_review(request, tracker=open_tracker(tracking_uri))
    for query_id, reasons in started.manifest["reasons"].items():
        echo(f"{query_id}: {reasons}")
    echo(f"{len(started.manifest['queries'])} queries to review: fill {out / 'review.csv'} (decision, reviewer, note)")


@review_app.command("record")
def record(
    folder: Annotated[Path, typer.Argument(help="the folder `rageval review start` wrote")],
    reviewer: Annotated[str | None, typer.Option(help="reviewer of rows whose reviewer column is empty")] = None,
    sheet: Annotated[
        list[Path] | None, typer.Option(help="a filled sheet [default: DIR/review.csv]; repeatable")
    ] = None,
    scripted: Annotated[
        bool, typer.Option(help="decide by the demo's script (reviewer scripted-demo; the run is labelled simulated)")
    ] = False,
    pool_out: Annotated[
        Path | None, typer.Option(help="where the needs-judgment pool goes [default: DIR/pool]")
    ] = None,
    tracking_uri: TrackingUri = None,
) -> None:
    """Import the filled review sheets; record a sealed review run. Exit 1 when rejections stay open
    or the review is incomplete."""
    from rageval.workflows.release.review import record_review

    folder = input_folder(folder, "DIR", "give the folder `rageval review start` wrote")
    outcome = record_review(
        folder,
        tracker=open_tracker(tracking_uri),
        sheets=sheet or [],
        reviewer=reviewer,
        scripted=scripted,
        pool_out=pool_out,
    )
    counts = outcome.decisions.counts()
    label = "SIMULATED " if outcome.simulated else ""
    echo(
        f"{label}review: {', '.join(f'{v} {d}' for d, v in counts.items())}; {len(outcome.decisions.undecided)} undecided"
    )
    for entry in outcome.resolved:
        echo(f"resolved: {entry['query_id']} ({entry['resolution']})")
    for entry in outcome.open:
        echo(f"open rejection: {entry['query_id']} ({entry['note']})")
    if outcome.pool_items:
        echo(f"needs-judgment pool: {outcome.pool_items} unjudged items (judge them with `rageval judge import`)")
    echo(f"review run {outcome.run_id} sealed: {outcome.status}, {len(outcome.open)} open rejection(s)")
    raise typer.Exit(0 if outcome.status == "complete" and not outcome.open else 1)
