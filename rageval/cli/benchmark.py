"""``rageval benchmark …``: validate, hash, import, export, and start or log a new version."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rageval.benchmark.docs.steps import STEPS, TABLE_MODES, TABLE_STEPS
from rageval.cli.common import (
    ChangeAction,
    DateOption,
    Level,
    benchmark_app,
    echo,
    import_app,
    input_file,
    input_folder,
    output_file,
    parse_date,
    parse_grade_map,
    parse_pairs,
)

if TYPE_CHECKING:
    from rageval.benchmark.labeling import Question
    from rageval.progress import Reporter

CHOOSABLE_STEPS = tuple(name for name in STEPS if name not in TABLE_STEPS.values())


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
    from rageval.benchmark.notices import benchmark_warnings

    if json_out is not None:
        output_file(json_out, "--json")
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
    for line in benchmark_warnings(benchmark):
        echo(line, err=True)
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

    input_folder(path, "PATH", "give the benchmark's folder")
    hashes = write_hashes(path) if write else hash_files(path)
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
    from rageval.benchmark.beir import BeirImport
    from rageval.benchmark.beir import import_beir as run_import

    def import_folder(reporter: Reporter) -> Path:
        request = BeirImport(
            source=source,
            out=out,
            name=name,
            version=version,
            splits=parse_pairs(split, "--split"),
            corpus_version=corpus_version,
            grade_map=parse_grade_map(grade_map),
        )
        return run_import(request, reporter)

    _imported(import_folder)


@import_app.command("trec")
def import_trec(  # long: a typer command: its options are its parameters, typer's only way to declare them
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
    from rageval.benchmark.importers import TrecImport
    from rageval.benchmark.importers import import_trec as run_import

    def checked(reporter: Reporter) -> Path:
        for path, option in ((topics, "--topics"), (qrels, "--qrels"), (docs, "--docs")):
            input_file(path, option, f"give the file {option} names, not its folder")
        request = TrecImport(
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
        return run_import(request, reporter)

    _imported(checked)


def _imported(run_import: Callable[[Reporter], Path]) -> None:
    """Run an importer (its steps and bars on stderr), then load what it wrote (validating it) and
    print its counts."""
    from rageval.benchmark.loading import load_benchmark
    from rageval.cli.progress import RunView

    with RunView() as view:
        written = run_import(view)
        view.step("validate")
        benchmark = load_benchmark(written)
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
    """Write a benchmark's judgments as TREC qrels: per document, or per chunk of a chunking (the
    chunks that cover a judged span, with its grade) for trec_eval-style tools."""
    from rageval.benchmark.loading import load_benchmark
    from rageval.benchmark.trec import write_qrels

    output_file(out, "--out")
    benchmark = load_benchmark(path)
    if level.value == "passage":
        qrels = _passage_qrels(benchmark, config, split)
    elif config is not None:
        raise typer.BadParameter("a chunking is only used with --level passage", param_hint="--config")
    else:
        qrels = benchmark.qrels(split)
    write_qrels(qrels, out)
    unit = benchmark.spec.relevanceUnit
    if level.value != unit:
        echo(
            f"warning: {benchmark.spec.name} is judged per {unit} (relevanceUnit), these qrels are per {level.value}: "
            f"they reproduce {level.value}-level runs only"
            + (" (runs evaluate per passage unless evaluation.level says otherwise)" if unit == "passage" else ""),
            err=True,
        )
    if level.value == "passage":
        echo(
            "warning: rageval grades passages on the judged spans and credits each span once (docs/metric-contract.md, "
            "passages); ID-matching tools count every chunk covering a span as its own relevant item, so their "
            "passage-level values differ from a run's where two chunks cover one span or one chunk covers two",
            err=True,
        )
    judgments = sum(len(judged) for judged in qrels.values())
    echo(f"wrote {out}: {judgments} {level.value} judgments of {sum(bool(j) for j in qrels.values())} queries")


def _passage_qrels(benchmark, config: Path | None, split: str | None) -> dict[str, dict[str, int]]:
    """The chunk qrels of ``config``'s chunking on ``split`` (each chunk's grade from the spans it covers)."""
    from rageval.benchmark.chunking import chunk_corpus
    from rageval.benchmark.migration import chunk_qrels_for, load_chunking

    if config is None:
        raise typer.BadParameter(
            "--level passage needs the chunking the run used: give its params file, e.g. --config params/bm25.yaml",
            param_hint="--config",
        )
    chunking = load_chunking(input_file(config, "--config", "give the run's params file or a chunking YAML"))
    chunks = chunk_corpus(benchmark.document_texts(), chunking)
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

    folder = new_version(path, version, out)
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

    input_folder(path, "PATH", "give the new version's benchmark folder")
    entry = log_change(path, action.value, case, reason, parse_date(date))
    echo(f"{entry.version} {entry.date}: {entry.action} {', '.join(entry.cases)} ({entry.reason})")


TableMode = Enum("TableMode", {mode: mode for mode in TABLE_MODES}, type=str)  # type: ignore[misc]


@import_app.command("docs")
def import_docs(  # long: a typer command: its options are its parameters, typer's only way to declare them
    source: Annotated[Path, typer.Argument(help="documentation tree: .md/.markdown, .html/.htm and .txt pages")],
    out: Annotated[Path, typer.Option(help="new benchmark folder")],
    name: Annotated[str, typer.Option(help="benchmark name")],
    version: Annotated[str, typer.Option(help="benchmark version")],
    corpus_version: Annotated[str | None, typer.Option(help="[default: folder name + sha256 of the pages]")] = None,
    steps: Annotated[
        list[str] | None,
        typer.Option("--steps", help=f"preprocessing step (repeat) [default: all]: {', '.join(CHOOSABLE_STEPS)}"),
    ] = None,
    tables: Annotated[
        TableMode | None, typer.Option(help="a table as rows of 'header: value', or kept whole [default: rows]")
    ] = None,
    acl_map: Annotated[
        Path | None, typer.Option(help="YAML: pages: [{match: GLOB, acl: [...], metadata: {...}}]")
    ] = None,
    include_root: Annotated[Path | None, typer.Option(help="folder include directives are relative to")] = None,
    previous: Annotated[
        Path | None, typer.Option(help="re-import: the last version's folder (pages compared, judgments carried over)")
    ] = None,
    report: Annotated[Path | None, typer.Option(help="also write the import report as JSON")] = None,
) -> None:
    """Import a documentation tree (mkdocs or plain Markdown, HTML, text) as a benchmark corpus; add
    cases with `rageval benchmark label`. With --previous, write the next version and report the pages
    added, changed and removed and every judgment moved or dropped."""
    import json

    from rageval.benchmark.docs.importer import DocsImport
    from rageval.benchmark.docs.importer import import_docs as run_import
    from rageval.benchmark.docs.pages import read_acl_map
    from rageval.benchmark.labeling import load_draft
    from rageval.cli.progress import RunView

    input_folder(source, "SOURCE", "give the folder of the documentation pages")
    if report is not None:
        output_file(report, "--report")
    request = DocsImport(
        source=source,
        out=out,
        name=name,
        version=version,
        corpus_version=corpus_version,
        steps=tuple(steps) if steps else None,
        tables=tables.value if tables is not None else None,
        include_root=input_folder(include_root, "--include-root", "give a folder") if include_root else None,
        acl_map=read_acl_map(input_file(acl_map, "--acl-map", "give the YAML file")) if acl_map else None,
        previous=load_draft(input_folder(previous, "--previous", "give the last version's folder"))
        if previous
        else None,
    )
    with RunView() as view:
        result = run_import(request, view)
    _print_import(result, again=previous is not None)
    if report is not None:
        report.write_text(json.dumps(result.to_json(), indent=2, ensure_ascii=False), encoding="utf-8")


def _print_import(result, again: bool) -> None:  # type: ignore[no-untyped-def]
    echo(f"wrote {result.out}: {result.documents} documents; preprocessing: {', '.join(result.steps)}")
    echo("converted: " + (", ".join(f"{n} {what}" for what, n in sorted(result.counts.items())) or "nothing"))
    for skipped in result.skipped:
        echo(f"skipped {skipped}")
    if not again:
        echo(
            f'next: rageval benchmark label {result.out} --query-id Q --query "…" --doc DOC --quote "…" --grade 3 --split dev'
        )
        return
    for what, pages in (("added", result.added), ("changed", result.changed), ("removed", result.removed)):
        echo(f"pages {what}: {len(pages)}" + (f" ({', '.join(pages)})" if pages else ""))
    for moved in result.judgments:
        echo(f"judgment {moved.line()}")
    for entry in result.changelog:
        echo(f"changelog: {entry.action} {', '.join(entry.cases)}")


@benchmark_app.command("label")
def benchmark_label(  # long: a typer command: its options are its parameters, typer's only way to declare them
    path: Annotated[Path, typer.Argument(help="benchmark folder")],
    from_file: Annotated[
        Path | None, typer.Option("--from", help="questions YAML: cases: [{id, query, split, slice, evidence}]")
    ] = None,
    query_id: Annotated[str | None, typer.Option(help="the case's ID")] = None,
    query: Annotated[str | None, typer.Option(help="the question")] = None,
    doc: Annotated[str | None, typer.Option(help="document ID")] = None,
    quote: Annotated[str | None, typer.Option(help="the evidence, quoted from the document")] = None,
    heading: Annotated[str | None, typer.Option(help="the heading whose section is the evidence")] = None,
    regex: Annotated[str | None, typer.Option(help="a regular expression matching the evidence")] = None,
    grade: Annotated[int | None, typer.Option(help="the evidence's grade")] = None,
    split: Annotated[str | None, typer.Option(help="the case's split")] = None,
    slice_: Annotated[list[str], typer.Option("--slice", help="slice label (repeat)")] = [],
) -> None:
    """Write judgments without offsets: rageval finds the span of a quote, a heading's section or a
    regex match (ambiguity lists every candidate and writes nothing)."""
    from rageval.benchmark.labeling import label, read_questions
    from rageval.errors import InputError, Problem

    input_folder(path, "PATH", "give the benchmark's folder")
    if from_file is not None:
        given = [o for o, v in (("--query-id", query_id), ("--query", query), ("--doc", doc)) if v is not None]
        if given:
            raise InputError(
                Problem(
                    file="--from",
                    message=f"--from cannot be combined with {', '.join(given)}",
                    fix="put every case in the file, or drop --from",
                )
            )
        questions, lines = read_questions(input_file(from_file, "--from", "give the questions YAML"))
        batch = [(q, f"{from_file}:{lines.get(('cases', i), '')}".rstrip(":")) for i, q in enumerate(questions)]
    else:
        evidence = {"doc": doc, "quote": quote, "heading": heading, "regex": regex, "grade": grade}
        batch = [(_one_question(query_id, query, split, slice_, evidence), "the options")]
    done = label(path, batch)
    echo(
        f"wrote {path}: {len(done.added)} cases added, {len(done.extended)} given judgments, {done.judgments} judgments"
    )


def _one_question(
    query_id: str | None, query: str | None, split: str | None, slices: list[str], evidence: Mapping[str, Any]
) -> Question:
    """The case the options give; ``evidence`` (doc, quote, heading, regex, grade) is its one judgment,
    given a document."""
    from pydantic import ValidationError

    from rageval.benchmark.labeling import Question
    from rageval.errors import InputError
    from rageval.validation import problems_from_validation

    raw = {
        "id": query_id,
        "query": query,
        "split": split,
        "slice": slices,
        "evidence": [{k: v for k, v in evidence.items() if v is not None}] if evidence["doc"] is not None else [],
    }
    try:
        return Question.model_validate({k: v for k, v in raw.items() if v is not None})
    except ValidationError as exc:
        raise InputError(problems_from_validation(exc, file="the options", model=Question)) from None
