"""``rageval queries import``: a search log → a redacted query set, the import a sealed run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rageval.cli.common import TrackingUri, app, echo, open_tracker

queries_app = typer.Typer(no_args_is_help=True, help="Import real information needs: search logs, redacted.")
app.add_typer(queries_app, name="queries")


@queries_app.command("import")
def queries_import(
    log: Annotated[Path, typer.Argument(help="the search log: .jsonl or .csv (query, time[, count, user, session])")],
    policy: Annotated[Path, typer.Option(help="the import policy, e.g. params/queries/policy.yaml")],
    out: Annotated[Path, typer.Option(help="new folder for queries.jsonl, import.json[, cases.jsonl]")],
    corpus_version: Annotated[
        str | None, typer.Option(help="also write draft cases.jsonl for this corpus version (unjudged)")
    ] = None,
    split: Annotated[str, typer.Option(help="the draft cases' split")] = "dev",
    tracking_uri: TrackingUri = None,
    experiment: Annotated[str, typer.Option(help="MLflow experiment of the import's record")] = "query-imports",
) -> None:
    """Redact a search log under a policy into a query set; record the import as a sealed run."""
    from rageval.workflows.queries import execute_query_import

    outcome = execute_query_import(
        log,
        policy,
        out,
        tracker=open_tracker(tracking_uri),
        corpus_version=corpus_version,
        split=split,
        experiment=experiment,
    )
    record = outcome.record
    removed = ", ".join(f"{name} {n}" for name, n in record["redactions_by_type"].items())
    echo(
        f"read {record['rows_read']} rows; {record['queries']} distinct redacted queries, {record['clusters']} clusters"
    )
    echo(f"redacted: {removed}")
    dropped = ", ".join(f"{reason} {n}" for reason, n in record["dropped_by_reason"].items()) or "none"
    echo(f"dropped (still secret-like after redaction): {record['rows_dropped_residual']} ({dropped})")
    echo(f"dropped (past their retention date already): {record['queries_expired']}")
    echo("bands: " + ", ".join(f"{band} {n}" for band, n in record["bands"].items()))
    for name, path in outcome.files.items():
        echo(f"{name}: {path}")
    echo(f"import run {outcome.run_id} ({outcome.experiment}), sealed {outcome.sealed[:12]}")
    echo("next: " + record["next"] + " (docs/queries.md)")
