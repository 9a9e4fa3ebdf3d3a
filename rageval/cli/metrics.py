"""``rageval metrics``: trec_eval-style evaluation of a qrels file and a run file.

Its defaults are trec_eval's, because it claims trec_eval's values: equal scores ordered by
document ID descending, and a judged query with nothing relevant scored (0 on the binary
measures) and averaged in. ``--ties docid-asc --no-relevant skip -c`` gives what a sealed run
records under the metric contract's defaults.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from rageval.cli.common import (
    DuplicatePolicy,
    Gain,
    NoRelevantPolicy,
    TiePolicy,
    app,
    echo,
    input_file,
)

if TYPE_CHECKING:
    from rageval.evaluation import Evaluation


@app.command("metrics")
def metrics(  # long: a typer command: its options are its parameters, typer's only way to declare them
    qrels: Annotated[Path, typer.Argument(help="TREC qrels file")],
    run: Annotated[Path, typer.Argument(help="TREC run file")],
    measure: Annotated[list[str], typer.Option("-m", "--measure", help="e.g. nDCG@10, R@100, RR, Hit@5, MRR, AP")],
    per_query: Annotated[bool, typer.Option("--per-query", "-q", help="also print each query's value")] = False,
    output: Annotated[str, typer.Option("--format", help="trec or json")] = "trec",
    ties: Annotated[TiePolicy, typer.Option(help="tie order; docid-desc is trec_eval's")] = TiePolicy["docid-desc"],
    duplicates: Annotated[
        DuplicatePolicy, typer.Option(help="a repeated ID: counted once at its first rank, or an error")
    ] = DuplicatePolicy["keep-first"],
    relevance: Annotated[
        int, typer.Option("-l", "--relevance", help="lowest grade relevant for binary measures (trec_eval -l)")
    ] = 1,
    gain: Annotated[Gain, typer.Option(help="nDCG gain: grade (trec_eval's) or exp (2^grade - 1)")] = Gain["grade"],
    complete: Annotated[
        bool, typer.Option("-c", "--complete", help="score judged queries absent from the run as 0 (trec_eval -c)")
    ] = False,
    no_relevant: Annotated[
        NoRelevantPolicy,
        typer.Option(
            "--no-relevant",
            help="a judged query with nothing relevant: score it and average it in (trec_eval's), "
            "or skip it (the metric contract's default, as runs do)",
        ),
    ] = NoRelevantPolicy["score"],
) -> None:
    """Evaluate a TREC run against TREC qrels; prints 'measure<TAB>query<TAB>value' lines."""
    from rageval.benchmark.lookalike import near_misses
    from rageval.benchmark.trec import read_qrels_and_run
    from rageval.evaluation import ContractOptions, evaluate

    if output not in ("trec", "json"):
        raise typer.BadParameter("choose trec or json", param_hint="--format")
    input_file(qrels, "QRELS", "give a TREC qrels file: 'query 0 document grade' lines")
    input_file(run, "RUN", "give a TREC run file: 'query Q0 document rank score tag' lines")
    # Both files read, and refused together when they cannot give a number (no shared query,
    # nothing relevant at the threshold).
    judged, frame = read_qrels_and_run(qrels, run, relevance=relevance)
    evaluation = evaluate(
        frame,
        judged,
        measure,
        ContractOptions(
            ties=ties.value,
            duplicates=duplicates.value,
            missing="zero" if complete else "skip",
            no_relevant=no_relevant.value,
            relevance=relevance,
            gain=gain.value,
        ),
    )
    # IDs are compared as written; say so where unmatched IDs would match once normalised.
    retrieved = {q: group.tolist() for q, group in frame.groupby("query_id", sort=False)["doc_id"]}
    if missed := near_misses(retrieved, judged):
        echo(missed.message(), err=True)
    _print(evaluation, as_json=output == "json", per_query=per_query, scored=no_relevant.value == "score")


def _print(evaluation: Evaluation, *, as_json: bool, per_query: bool, scored: bool) -> None:
    """The values as JSON, or as trec_eval's 'measure<TAB>query<TAB>value' lines (notes on stderr);
    ``scored``: judged queries with nothing relevant were scored, so only unjudged ones were skipped."""
    if as_json:
        payload = {
            "aggregates": {k: float(v) for k, v in evaluation.aggregates.items()},
            "per_query": evaluation.per_query.to_dict(orient="index") if per_query else None,
            "num_q": evaluation.evaluated,
            "skipped": list(evaluation.skipped),
            "missing": list(evaluation.missing),
            "policy": evaluation.policy,
            "providers": evaluation.providers,
            "duplicates_dropped": evaluation.duplicates,
            "contract": evaluation.contract,
        }
        # JSON escapes control characters itself; the query IDs stay as the files hold them.
        typer.echo(json.dumps(payload, indent=2))
        return
    width = max(len(m.text) for m in evaluation.measures) + 2
    for m in evaluation.measures:
        if per_query:
            for qid, value in evaluation.per_query[m.text].items():
                echo(f"{m.text:<{width}}\t{qid}\t{value:.4f}")
        echo(f"{m.text:<{width}}\tall\t{evaluation.aggregates[m.text]:.4f}")
    if not evaluation.evaluated:
        echo("# no query evaluated: the run and the qrels share no judged query", err=True)
    if evaluation.skipped:
        reason = "no judgment" if scored else "no judgment or no relevant item"
        echo(f"# {len(evaluation.skipped)} queries skipped ({reason}); num_q {evaluation.evaluated}", err=True)
