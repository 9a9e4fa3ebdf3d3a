"""``rageval judge pool|import|label-view|agreement|adjudicate|calibrate|prelabel`` and
``rageval migrate-labels``: each a thin call into :mod:`rageval.judging` (calibrate and prelabel:
:mod:`rageval.workflows.judge`) and :mod:`rageval.benchmark.migration`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from rageval.cli.common import (
    DateOption,
    TrackingUri,
    app,
    echo,
    input_file,
    judge_app,
    open_tracker,
    output_file,
    parse_date,
)
from rageval.errors import InputError, Problem


@judge_app.command("pool")
def judge_pool(  # long: a typer command: its options are its parameters, typer's only way to declare them
    out: Annotated[Path, typer.Option(help="new folder for pool.json, sheet.csv and sheet.jsonl")],
    depth: Annotated[int, typer.Option(help="pool the top K items of each run")] = 10,
    runs: Annotated[list[str], typer.Option("--runs", help="sealed MLflow run ID (repeat)")] = [],
    rankings: Annotated[
        list[str],
        typer.Option(
            "--rankings", help="NAME=FILE: a rankings parquet (query_id, rank, chunk_id, parent_id) instead of a run"
        ),
    ] = [],
    chunking: Annotated[
        list[Path],
        typer.Option(help="params or chunking YAML of --rankings files at passage level (repeat per chunking)"),
    ] = [],
    benchmark: Annotated[Path | None, typer.Option(help="benchmark folder [default: the runs']")] = None,
    split: Annotated[str | None, typer.Option(help="[default: the runs' split]")] = None,
    add: Annotated[
        Path | None,
        typer.Option("--add", help="JSONL of items from targeted search: queryId, documentId[, start, end]"),
    ] = None,
    seed: Annotated[int, typer.Option(help="seed of the sheet's random order")] = 0,
    tracking_uri: TrackingUri = None,
) -> None:
    """Pool the unjudged top-K items of several runs into a blind assessment sheet."""
    from rageval.benchmark.loading import load_benchmark
    from rageval.benchmark.migration import load_chunking
    from rageval.judging import pool, read_extra, write_pool
    from rageval.workflows.readback import run_rankings

    frames, configs, run_benchmark, run_split, run_cases = (
        run_rankings(open_tracker(tracking_uri), runs) if runs else ({}, [], None, None, {})
    )
    for spec in rankings:
        name, sep, file = spec.partition("=")
        if not sep or not name or not file:
            raise typer.BadParameter(f"expected NAME=FILE, got {spec!r}", param_hint="--rankings")
        frames[name] = _read_rankings(Path(file))
    configs += [
        load_chunking(input_file(path, "--chunking", "give a params file or a chunking YAML")) for path in chunking
    ]
    if not frames:
        raise typer.BadParameter("give --runs or --rankings", param_hint="--runs")
    bench_path = benchmark or run_benchmark
    if bench_path is None:
        raise typer.BadParameter("give --benchmark (no run names one)", param_hint="--benchmark")
    bench = load_benchmark(bench_path)
    chosen = split or run_split
    if chosen is None:
        raise typer.BadParameter("give --split", param_hint="--split")
    if runs:
        _check_runs_match(run_cases, bench, chosen, run_split)
    extra = read_extra(add, bench, chosen) if add else None
    result = pool(frames, bench, chosen, depth, extra, seed, chunking=configs, extra_file=str(add))
    paths = write_pool(result, out)
    items = result.manifest.items
    echo(
        f"pooled {len(items)} unjudged items of {len({i.queryId for i in items})} cases from {len(frames)} runs at depth {depth}"
    )
    echo(f"sheet (blind, seed {seed}): {paths['csv']}  {paths['jsonl']}")
    echo(f"provenance (not for assessors): {paths['pool']}")


def _read_rankings(path: Path):
    import io

    import pandas as pd

    from rageval.errors import BenchmarkError
    from rageval.io import read_text

    if not path.is_file():
        raise BenchmarkError(Problem(file=str(path), message="file not found", fix="check the --rankings path"))
    try:
        if path.suffix == ".parquet":
            return pd.read_parquet(path)
        # Text goes through rageval.io: UTF-8 with or without BOM, else the line and byte offset.
        text = read_text(path, BenchmarkError)
        return pd.read_csv(io.StringIO(text), sep="\t" if path.suffix == ".tsv" else ",")
    except (ValueError, OSError) as exc:  # pyarrow's ArrowInvalid, pandas' ParserError, bad UTF-8 are ValueErrors
        kind = "parquet" if path.suffix == ".parquet" else "TSV" if path.suffix == ".tsv" else "CSV"
        raise BenchmarkError(
            Problem(
                file=str(path),
                field="--rankings",
                message=f"cannot be read as {kind}: {' '.join(str(exc).split())[:200]}",
                fix="give a rankings file (.parquet, .csv or .tsv) with query_id, rank, chunk_id, parent_id",
            )
        ) from None


def _check_runs_match(cases: dict[str, str | None], bench, split: str, run_split: str | None) -> None:
    """Pooled runs must have ranked this benchmark version's cases, on the pooled split."""
    from rageval.errors import BenchmarkError

    problems = [
        Problem(
            file=f"run {run_id}",
            message=f"ranked other cases (sha256 {digest[:12]}…, not {bench.hashes['cases'][:12]}…)",
            fix="pool runs of the benchmark version being judged",
        )
        for run_id, digest in cases.items()
        if digest and digest != bench.hashes["cases"]
    ]
    if run_split is None or run_split != split:
        problems.append(
            Problem(file="--runs", message=f"the runs did not all run on split '{split}'", fix="pool runs of one split")
        )
    if problems:
        raise BenchmarkError(problems)


@judge_app.command("import")
def judge_import(
    pool_dir: Annotated[Path, typer.Argument(help="the pool folder")],
    sheets: Annotated[list[Path], typer.Argument(help="assessors' filled sheets (.csv or .jsonl)")],
    out: Annotated[Path | None, typer.Option(help="[default: POOL_DIR/labels.jsonl]")] = None,
) -> None:
    """Import assessors' sheets; every bad row is reported with file and line, and nothing is written."""
    from rageval.judging import LABELS_FILE, import_sheets, read_pool, write_labels

    for sheet in sheets:
        input_file(sheet, "SHEETS", "give each assessor's filled sheet (.csv or .jsonl)")
    labels = import_sheets(read_pool(pool_dir), sheets)
    target = output_file(out or pool_dir / LABELS_FILE, "--out")
    path = write_labels(labels, target)
    per = labels.groupby("assessor")["item_id"].nunique()
    echo(f"wrote {path}: {len(labels)} labels on {labels['item_id'].nunique()} items")
    for assessor, count in per.items():
        echo(f"  {assessor}: {count} items")


@judge_app.command("label-view")
def judge_label_view(
    sheet: Annotated[
        Path,
        typer.Argument(
            help="the sheet to fill (.csv or .jsonl, as `judge pool` wrote it), or a label-migration review "
            "file (chunk-labels-<hash>.jsonl in a benchmark folder)"
        ),
    ],
    port: Annotated[int, typer.Option(help="port on 127.0.0.1 (0: a free one)")] = 8765,
    pool_file: Annotated[Path | None, typer.Option("--pool", help="pool.json [default: beside the sheet]")] = None,
    benchmark: Annotated[Path | None, typer.Option(help="benchmark folder [default: the pool's]")] = None,
) -> None:
    """Label a sheet in the browser: read each document, select the evidence, pick a grade, save. Or
    review migrated labels: accept or reject each, change its grade, save."""
    from rageval.judging.labelview import SheetSource, open_sheet, serve

    input_file(sheet, "SHEET", "give the sheet.csv or sheet.jsonl of a pool folder, or a chunk-labels-*.jsonl")
    labels = open_sheet(SheetSource(sheet=sheet, pool=pool_file, benchmark=benchmark))
    try:
        server = serve(labels, port)
    except OSError as error:
        message = f"cannot listen on 127.0.0.1:{port} ({error.strerror})"
        raise InputError(Problem(file="--port", message=message, fix="choose another --port, or 0")) from None
    echo(f"labeling {sheet} at http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C to stop)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        echo("stopped")
    finally:
        server.server_close()


@judge_app.command("agreement")
def judge_agreement(
    pool_dir: Annotated[Path, typer.Argument(help="the pool folder")],
    labels: Annotated[Path | None, typer.Option(help="[default: POOL_DIR/labels.jsonl]")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="also write the report as JSON")] = None,
) -> None:
    """Cohen's kappa per assessor pair, Fleiss' kappa and Krippendorff's alpha (ordinal), overall and
    per slice, and the items the assessors disagree on."""
    import pandas as pd

    from rageval.evaluation.agreement import agreement
    from rageval.judging import LABELS_FILE, read_labels, read_pool

    manifest = read_pool(pool_dir)
    frame = read_labels(input_file(labels or pool_dir / LABELS_FILE, "--labels", "run `rageval judge import` first"))
    if json_out is not None:
        output_file(json_out, "--json")
    report = agreement(frame, {i.itemId: i.slice for i in manifest.items}, list(manifest.rubric))
    with pd.option_context("display.width", 160, "display.max_columns", 20, "display.max_rows", 200):
        echo("Agreement (fleiss_items: labelled by every assessor; alpha: ordinal, items labelled twice or more)")
        echo(report.summary.round(3).to_string())
        echo("\nCohen's kappa per pair")
        echo(report.pairs.round(3).to_string(index=False))
        echo(f"\nDisagreements: {len(report.disagreements)}")
        if len(report.disagreements):
            echo(report.disagreements.to_string())
    if json_out:
        payload = {
            "summary": json.loads(report.summary.reset_index().to_json(orient="records")),
            "pairs": json.loads(report.pairs.to_json(orient="records")),
            "disagreements": json.loads(report.disagreements.reset_index().to_json(orient="records")),
        }
        json_out.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
        echo(f"wrote {json_out}")


@judge_app.command("adjudicate")
def judge_adjudicate(
    pool_dir: Annotated[Path, typer.Argument(help="the pool folder")],
    file: Annotated[
        Path, typer.Option("--file", help="adjudication file (.csv or .jsonl): itemId, grade, note[, start, end]")
    ],
    labels: Annotated[Path | None, typer.Option(help="[default: POOL_DIR/labels.jsonl]")] = None,
    benchmark: Annotated[Path | None, typer.Option(help="[default: the benchmark the pool was made on]")] = None,
    version: Annotated[str | None, typer.Option(help="the new version [default: the last number + 1]")] = None,
    out: Annotated[Path | None, typer.Option(help="[default: <name>-v<version> beside the benchmark]")] = None,
    date: DateOption = None,
) -> None:
    """Write a new benchmark version holding the adjudicated judgments, keeping assessor notes."""
    from rageval.benchmark.loading import load_benchmark
    from rageval.judging import LABELS_FILE, adjudicate, read_adjudication, read_labels, read_pool

    manifest = read_pool(pool_dir)
    bench = load_benchmark(benchmark or manifest.path)
    folder = adjudicate(
        bench,
        manifest,
        read_labels(input_file(labels or pool_dir / LABELS_FILE, "--labels", "run `rageval judge import` first")),
        read_adjudication(input_file(file, "--file", "give the adjudication file (.csv or .jsonl)"), manifest),
        version=version,
        out=out,
        date=parse_date(date),
        file=str(file),
    )
    new = load_benchmark(folder)
    echo(f"wrote {new.spec.name} {new.spec.version} at {folder} (predecessor {bench.spec.version})")
    for entry in new.spec.changelog:
        if entry.version == new.spec.version:
            echo(f"  {entry.action}: {len(entry.cases)} cases ({entry.reason})")


@app.command("migrate-labels")
def migrate_labels(
    benchmark: Annotated[Path, typer.Argument(help="benchmark folder")],
    to: Annotated[Path, typer.Option("--to", help="the new chunking: a params file or a chunking YAML")],
    from_: Annotated[
        Path | None, typer.Option("--from", help="the chunking the labels were made for (params or chunking YAML)")
    ] = None,
    review: Annotated[bool, typer.Option("--review", help="mark the rows that have a decision as reviewed")] = False,
    reviewer: Annotated[str | None, typer.Option(help="recorded with --review")] = None,
    force: Annotated[bool, typer.Option(help="discard the reviews of an existing review file and start over")] = False,
) -> None:
    """Propose chunk labels for a new chunking by character overlap (then review them with --review)."""
    from rageval.benchmark.loading import load_benchmark
    from rageval.benchmark.migration import load_chunking, review_labels
    from rageval.benchmark.migration import migrate_labels as propose

    bench = load_benchmark(benchmark)
    target = load_chunking(input_file(to, "--to", "give a params file or a chunking YAML"))
    if review:
        summary = review_labels(bench, target, reviewer=reviewer)
    else:
        if from_ is None:
            raise typer.BadParameter("give --from (or --review)", param_hint="--from")
        source = load_chunking(input_file(from_, "--from", "give a params file or a chunking YAML"))
        path, proposals = propose(bench, source, target, force=force)
    if review:
        echo(
            f"{summary.path}: {summary.reviewed} reviewed ({summary.accepted} accepted, {summary.rejected} rejected), {summary.proposed} still proposed"
        )
        return
    low = sum(p.overlap < 0.5 for p in proposals)
    kept = sum(p.status == "reviewed" for p in proposals)
    echo(
        f"wrote {path}: {len(proposals)} proposed chunk labels for {len({p.queryId for p in proposals})} cases ({low} with overlap < 0.5)"
    )
    if kept:
        echo(f"{kept} rows keep their review (chunk and judgments unchanged)")
    echo('review: set "decision": "accept" or "reject" per row (grade may be changed), then run with --review')


JudgeOption = Annotated[Path, typer.Option("--judge", help="judge configuration (params/judges/NAME.yaml)")]


@judge_app.command("calibrate")
def judge_calibrate(
    judge: JudgeOption,
    benchmark: Annotated[Path | None, typer.Option(help="[default: the config's calibration.benchmark]")] = None,
    split: Annotated[str | None, typer.Option(help="[default: the config's calibration.split]")] = None,
    runs: Annotated[
        list[str], typer.Option("--runs", help="sealed run IDs for Kendall's tau [default: the store's matching runs]")
    ] = [],
    experiment: Annotated[str | None, typer.Option(help="[default: judge-<name>]")] = None,
    seed: Annotated[int, typer.Option(help="seed of the judging order")] = 0,
    tracking_uri: TrackingUri = None,
) -> None:
    """Measure a judge against human labels (weighted kappa per slice, Kendall's tau of system
    rankings) and record a sealed calibration run; pre-labeling needs one that passed."""
    from rageval.workflows.calibrate import CalibrationRequest, execute_calibrate

    request = CalibrationRequest(
        input_file(judge, "--judge", "give a params/judges/*.yaml file"),
        benchmark=benchmark,
        split=split,
        runs=runs,
        experiment=experiment,
        seed=seed,
    )
    outcome = execute_calibrate(request, tracker=open_tracker(tracking_uri))
    c = outcome.correlation
    echo(outcome.agreement.per_slice.round(3).to_string())
    echo(
        f"\nKendall's tau of {len(c.scores)} runs' {c.measure} under human vs judge labels: {c.tau:.3f} (p {c.p_value:.3g})"
    )
    echo(c.scores.round(4).to_string(index=False))
    verdict = "PASSED" if outcome.passed else "FAILED: " + "; ".join(outcome.reasons)
    echo(f"\ncalibration {verdict}; sealed run {outcome.run_id}")


@judge_app.command("prelabel")
def judge_prelabel(
    pool_dir: Annotated[Path, typer.Argument(help="the pool folder")],
    judge: JudgeOption,
    out: Annotated[Path | None, typer.Option(help="[default: POOL_DIR]")] = None,
    benchmark: Annotated[Path | None, typer.Option(help="[default: the benchmark the pool was made on]")] = None,
    experiment: Annotated[str | None, typer.Option(help="[default: judge-<name>]")] = None,
    seed: Annotated[int, typer.Option(help="seed of the judging order")] = 0,
    calibration: Annotated[
        str | None,
        typer.Option(help="a passing calibration run made on another benchmark or split (recorded as such)"),
    ] = None,
    tracking_uri: TrackingUri = None,
) -> None:
    """Pre-label a pool with a judge calibrated on the pool's benchmark version and split: labels
    (marked with the judge's assessor), the per-item detail, and a blind review sheet of the items that
    need a human."""
    from rageval.workflows.judge import PrelabelRequest, execute_prelabel

    request = PrelabelRequest(
        pool_dir,
        input_file(judge, "--judge", "give a params/judges/*.yaml file"),
        out=out,
        benchmark=benchmark,
        experiment=experiment,
        seed=seed,
        calibration_run=calibration,
    )
    done = execute_prelabel(request, tracker=open_tracker(tracking_uri))
    if done.across:
        echo(f"note: {done.across} (recorded on the prelabel run)")
    s = done.prelabels.summary()
    echo(
        f"{int(s['items_labelled'])}/{int(s['items'])} items labelled, {int(s['items_rejected'])} rejected, "
        f"{int(s['items_failed'])} failed; {int(s['review'])} routed to review "
        f"({int(s['injection_flagged'])} with instruction-like text, {int(s['samples_disagree'])} samples disagree)"
    )
    echo(f"tokens {int(s['tokens_in'])} in / {int(s['tokens_out'])} out, cost {s['cost']:.4f}, {s['latency_s']:.1f}s")
    echo(f"labels: {done.paths['labels']}  detail: {done.paths['detail']}  review sheet: {done.paths['review']}")
    echo(f"calibrated in run {done.calibration}; sealed run {done.run_id}")
