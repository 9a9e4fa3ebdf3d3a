"""``rageval benchmark …``: validate, hash, import, export, and start or log a new version."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from rageval.cli.common import (
    ChangeAction,
    DateOption,
    benchmark_app,
    fail,
    import_app,
    parse_date,
    parse_grade_map,
    parse_pairs,
)
from rageval.errors import RagevalError


@benchmark_app.command("validate")
def benchmark_validate(path: Annotated[Path, typer.Argument(help="benchmark folder")]) -> None:
    """Check a benchmark and report every problem (file, line, field); exit 1 if any."""
    from rageval.benchmark.loading import validate_benchmark

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
    from rageval.benchmark.loading import hash_files, write_hashes

    try:
        hashes = write_hashes(path) if write else hash_files(path)
    except RagevalError as error:
        fail(error)
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
    from rageval.benchmark.importers import import_beir as run_import

    _imported(
        lambda: run_import(
            source,
            out,
            name=name,
            version=version,
            splits=parse_pairs(split, "--split"),
            corpus_version=corpus_version,
            grade_map=parse_grade_map(grade_map),
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
    from rageval.benchmark.importers import import_trec as run_import

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
            grade_map=parse_grade_map(grade_map),
        )
    )


def _imported(run_import: Callable[[], Path]) -> None:
    """Run an importer, then load what it wrote (validating it) and print its counts."""
    from rageval.benchmark.loading import load_benchmark

    try:
        benchmark = load_benchmark(run_import())
    except RagevalError as error:
        fail(error)
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
    from rageval.benchmark.loading import load_benchmark
    from rageval.benchmark.trec import write_qrels

    try:
        write_qrels(load_benchmark(path).qrels(split), out)
    except RagevalError as error:
        fail(error)
    typer.echo(f"wrote {out}")


@benchmark_app.command("new-version")
def benchmark_new_version(
    path: Annotated[Path, typer.Argument(help="the last version's folder")],
    version: Annotated[str, typer.Option(help="the new version, e.g. 1.1.0")],
    out: Annotated[Path | None, typer.Option(help="[default: <name>-v<version> beside PATH]")] = None,
) -> None:
    """Start a new version: a new folder naming its predecessor; edit its cases.jsonl, then list each
    change with `rageval benchmark log-change` and record the hashes with `rageval benchmark hash --write`."""
    from rageval.benchmark.versions import new_version

    try:
        folder = new_version(path, version, out)
    except RagevalError as error:
        fail(error)
    typer.echo(f"wrote {folder} (version {version}, predecessor {path})")
    typer.echo(
        "next: edit cases.jsonl; `rageval benchmark log-change` per change; `rageval benchmark hash --write`; validate"
    )


@benchmark_app.command("log-change")
def benchmark_log_change(
    path: Annotated[Path, typer.Argument(help="benchmark folder (the new version)")],
    action: Annotated[ChangeAction, typer.Argument(help="what changed in the listed cases")],
    case: Annotated[list[str], typer.Option("--case", help="query ID (repeat)")],
    reason: Annotated[str, typer.Option(help="why the cases changed")],
    date: DateOption = None,
) -> None:
    """Record a change to the cases in the version's changelog (benchmark.yaml)."""
    from rageval.benchmark.versions import log_change

    try:
        entry = log_change(path, action.value, case, reason, parse_date(date))
    except RagevalError as error:
        fail(error)
    typer.echo(f"{entry.version} {entry.date}: {entry.action} {', '.join(entry.cases)} ({entry.reason})")
