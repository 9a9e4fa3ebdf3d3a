"""``rageval benchmark …``: validate, hash, import, export, and start or log a new version."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from rageval.cli.common import (
    ChangeAction,
    DateOption,
    Level,
    benchmark_app,
    echo,
    fail,
    import_app,
    input_file,
    input_folder,
    output_file,
    parse_date,
    parse_grade_map,
    parse_pairs,
)
from rageval.errors import RagevalError

if TYPE_CHECKING:
    from rageval.progress import Reporter


@benchmark_app.command("validate")
def benchmark_validate(
    path: Annotated[Path, typer.Argument(help="benchmark folder")],
    json_out: Annotated[
        Path | None, typer.Option("--json", help="also write the problems or the diagnostics as JSON")
    ] = None,
    per_case: Annotated[bool, typer.Option("--cases", help="list each case's lexical overlaps")] = False,
) -> None:
    """Check a benchmark and report every problem (file, line, field); exit 1 if any. A valid one gets
    its diagnostics: slice coverage, rule-derived slices beside the labels, heading-like questions."""
    import json

    from rageval.benchmark.diagnostics import diagnose, format_report
    from rageval.benchmark.loading import validate_benchmark

    try:
        if json_out is not None:
            output_file(json_out, "--json")
    except RagevalError as error:
        fail(error)
    benchmark, problems = validate_benchmark(path)
    if benchmark is None:
        for problem in problems:
            echo(str(problem), err=True)
        echo(f"{len(problems)} problem{'s' if len(problems) != 1 else ''} in {path}", err=True)
        if json_out is not None:
            payload = {"valid": False, "problems": [problem.__dict__ for problem in problems]}
            json_out.write_text(json.dumps(payload, indent=2, ensure_ascii=False), encoding="utf-8")
        raise typer.Exit(1)
    spec = benchmark.spec
    echo(f"{spec.name} {spec.version}: valid ({spec.relevanceUnit} relevance, corpus {spec.corpusVersion})")
    echo(f"documents: {len(benchmark.documents)}")
    for split in spec.splits:
        cases = benchmark.cases_for(split)
        unanswerable = sum(not c.answerable for c in cases)
        echo(f"{split} cases: {len(cases)} ({unanswerable} unanswerable)")
    diagnostics = diagnose(benchmark)
    for line in format_report(diagnostics, per_case=per_case):
        echo(line, err=line.startswith("warning: "))
    if json_out is not None:
        payload = {"valid": True, "diagnostics": diagnostics.to_json()}
        json_out.write_text(json.dumps(payload, indent=2, ensure_ascii=False), encoding="utf-8")
        echo(f"wrote {json_out}")


@benchmark_app.command("hash")
def benchmark_hash(
    path: Annotated[Path, typer.Argument(help="benchmark folder")],
    write: Annotated[bool, typer.Option("--write", help="record the hashes in benchmark.yaml")] = False,
) -> None:
    """Print the sha256 of a benchmark's files (and record them with --write)."""
    from rageval.benchmark.loading import hash_files, write_hashes

    try:
        input_folder(path, "PATH", "give the benchmark's folder")
        hashes = write_hashes(path) if write else hash_files(path)
    except RagevalError as error:
        fail(error)
    for name, digest in hashes.items():
        echo(f"{digest}  {name}")


@import_app.command("beir")
def import_beir(
    source: Annotated[Path, typer.Argument(help="BEIR folder: corpus.jsonl, queries.jsonl, qrels/*.tsv")],
    out: Annotated[Path, typer.Option(help="new benchmark folder")],
    name: Annotated[str, typer.Option(help="benchmark name")],
    version: Annotated[str, typer.Option(help="benchmark version")],
    split: Annotated[list[str], typer.Option(help="BEIR qrels split = benchmark split, e.g. test=release")],
    corpus_version: Annotated[
        str | None,
        typer.Option(help="the corpus's version, recorded with every run [default: folder name + corpus sha256]"),
    ] = None,
    grade_map: Annotated[list[str], typer.Option(help="map a source grade into 0-3, e.g. 4=3")] = [],
) -> None:
    """Import a BEIR-layout collection."""
    from rageval.benchmark.importers import import_beir as run_import

    _imported(
        lambda reporter: run_import(
            source,
            out,
            name=name,
            version=version,
            splits=parse_pairs(split, "--split"),
            corpus_version=corpus_version,
            grade_map=parse_grade_map(grade_map),
            reporter=reporter,
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
    corpus_version: Annotated[
        str | None,
        typer.Option(help="the corpus's version, recorded with every run [default: docs file name + its sha256]"),
    ] = None,
    grade_map: Annotated[list[str], typer.Option(help="map a source grade into 0-3, e.g. 4=3")] = [],
) -> None:
    """Import TREC topics, qrels and a document collection."""
    from rageval.benchmark.importers import import_trec as run_import

    def checked(reporter: Reporter) -> Path:
        for path, option in ((topics, "--topics"), (qrels, "--qrels"), (docs, "--docs")):
            input_file(path, option, f"give the file {option} names, not its folder")
        return run_import(
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
            reporter=reporter,
        )

    _imported(checked)


def _imported(run_import: Callable[[Reporter], Path]) -> None:
    """Run an importer (its steps and bars on stderr), then load what it wrote (validating it) and
    print its counts."""
    from rageval.benchmark.loading import load_benchmark
    from rageval.cli.progress import RunView

    try:
        with RunView() as view:
            written = run_import(view)
            view.step("validate")
            benchmark = load_benchmark(written)
    except RagevalError as error:
        fail(error)
    echo(f"wrote {benchmark.path}: {len(benchmark.documents)} documents")
    for split in benchmark.spec.splits:
        echo(f"{split}: {len(benchmark.cases_for(split))} cases")


@benchmark_app.command("export-qrels")
def export_qrels(
    path: Annotated[Path, typer.Argument(help="benchmark folder")],
    out: Annotated[Path, typer.Option(help="TREC qrels file to write")],
    split: Annotated[str | None, typer.Option(help="one split [default: all]")] = None,
    level: Annotated[
        Level, typer.Option(help="document: document IDs; passage: chunk IDs under --config's chunking")
    ] = Level["document"],
    config: Annotated[
        Path | None,
        typer.Option(help="with --level passage: the run's params file (its chunking) or a chunking YAML"),
    ] = None,
) -> None:
    """Write a benchmark's judgments as TREC qrels: per document, or per chunk as a passage-level run
    is measured (`rageval export-run RUN --level passage` writes the matching run file)."""
    from rageval.benchmark.loading import load_benchmark
    from rageval.benchmark.trec import write_qrels

    try:
        output_file(out, "--out")
        benchmark = load_benchmark(path)
        if level.value == "passage":
            qrels = _passage_qrels(benchmark, config, split)
        elif config is not None:
            raise typer.BadParameter("a chunking is only used with --level passage", param_hint="--config")
        else:
            qrels = benchmark.qrels(split)
        write_qrels(qrels, out)
    except RagevalError as error:
        fail(error)
    unit = benchmark.spec.relevanceUnit
    if level.value != unit:
        echo(
            f"warning: {benchmark.spec.name} is judged per {unit} (relevanceUnit), these qrels are per {level.value}: "
            f"they reproduce {level.value}-level runs only"
            + (" (runs evaluate per passage unless evaluation.level says otherwise)" if unit == "passage" else ""),
            err=True,
        )
    judgments = sum(len(judged) for judged in qrels.values())
    echo(f"wrote {out}: {judgments} {level.value} judgments of {sum(bool(j) for j in qrels.values())} queries")


def _passage_qrels(benchmark, config: Path | None, split: str | None) -> dict[str, dict[str, int]]:
    """Chunk qrels exactly as a passage-level run of ``split`` under ``config``'s chunking measures them."""
    from rageval.benchmark.chunking import chunk_corpus
    from rageval.benchmark.migration import chunk_qrels_for, load_chunking

    if config is None:
        raise typer.BadParameter(
            "--level passage needs the chunking the run used: give its params file, e.g. --config params/bm25.yaml",
            param_hint="--config",
        )
    chunking = load_chunking(input_file(config, "--config", "give the run's params file or a chunking YAML"))
    chunks = chunk_corpus(benchmark.documents.values(), chunking)
    return chunk_qrels_for(benchmark, chunks, chunking, split)


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
    echo(f"wrote {folder} (version {version}, predecessor {path})")
    echo(
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
        input_folder(path, "PATH", "give the new version's benchmark folder")
        entry = log_change(path, action.value, case, reason, parse_date(date))
    except RagevalError as error:
        fail(error)
    echo(f"{entry.version} {entry.date}: {entry.action} {', '.join(entry.cases)} ({entry.reason})")
