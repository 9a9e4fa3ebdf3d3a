"""Reading sealed runs back from the store for a comparison: their artifacts, configurations and the
benchmark judgments they were evaluated against."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from rageval.analysis import (
    CHUNKING_TAG,
    CONTRACT_TAGS,
    ComparisonInputs,
    Judgments,
    check_comparable,
    short_value,
)
from rageval.analysis.records import RunArtifacts, RunInfo
from rageval.benchmark.chunking import chunk_corpus, config_hash
from rageval.benchmark.loading import load_benchmark
from rageval.benchmark.schema import ChunkingConfig
from rageval.config.load import config_from_yaml
from rageval.errors import ComparisonError, TrackingError
from rageval.evaluation.spans import Evidence, evidence_spans
from rageval.tracking.store import Tracker

# --------------------------------------------------------------------------- reading the runs


def recorded_chunking(info: RunInfo, config_yaml: str) -> ChunkingConfig:
    """The chunking a run used, from its recorded configuration, checked against its chunking-hash
    tag: the one way a run's chunks are rebuilt after the fact."""
    chunking = config_from_yaml(config_yaml).chunking
    recorded = info.tags.get(CHUNKING_TAG)
    if recorded and recorded != config_hash(chunking):
        raise TrackingError(
            f"run {info.run_id}: its recorded chunking hashes to {config_hash(chunking)}, its tag says {recorded}"
        )
    return chunking


def judgments_for(runs: Sequence[RunArtifacts]) -> Judgments:
    """Load the benchmark the runs used (refusing one whose hashes differ from the runs') and
    re-chunk it with each run's chunking, for texts; at passage level the judgments are the judged
    spans (each run's passages graded on them, whatever its chunking)."""
    first = runs[0]
    config = config_from_yaml(first.config_yaml)
    try:
        benchmark = load_benchmark(config.benchmark)
    except Exception as exc:  # noqa: BLE001 - any load failure becomes the same explained refusal
        raise ComparisonError(
            f"the benchmark run {first.info.run_id} used ({config.benchmark}) cannot be loaded: {exc}; "
            "per-query diffs need its texts and judgments"
        ) from None
    changed = [
        f"{CONTRACT_TAGS[tag]}: run has {short_value(first.info.tags.get(tag))}, {benchmark.path} has {short_value(benchmark.hashes[tag.rsplit('.', 1)[1]])}"
        for tag in ("rageval.hash.corpus", "rageval.hash.cases", "rageval.hash.qrels")
        if first.info.tags.get(tag) != benchmark.hashes[tag.rsplit(".", 1)[1]]
    ]
    if changed:
        raise ComparisonError(
            f"the benchmark at {benchmark.path} is not the version run {first.info.run_id} used; check out that version",
            differences=changed,
        )
    level = first.info.tags.get("rageval.level") or benchmark.spec.relevanceUnit
    cases = benchmark.cases_for(config.split)
    texts: dict[str, str] = {}
    offsets_of: dict[str, dict[str, tuple[int, int]]] = {}
    for run in runs:
        chunking = recorded_chunking(run.info, run.config_yaml)
        digest = config_hash(chunking)
        if digest not in offsets_of:
            chunks = chunk_corpus(benchmark.document_texts(), chunking)
            texts.update({c.chunk_id: c.text for c in chunks})
            offsets_of[digest] = {c.chunk_id: (c.start, c.end) for c in chunks}
        offsets = offsets_of[digest]
        if not {"start", "end"} <= set(run.rankings.columns):
            # Runs recorded before rankings named their passages' offsets: their chunks' own.
            run.rankings[["start", "end"]] = [offsets.get(c, (0, 0)) for c in run.rankings["chunk_id"]]
        # Another system's passages: their text is their document's, between their offsets.
        for passage, parent, start, end in run.rankings[["chunk_id", "parent_id", "start", "end"]].itertuples(
            index=False
        ):
            if passage not in texts and parent in benchmark.documents:
                texts[passage] = benchmark.documents[parent].text[int(start) : int(end)]
    qrels: dict[str, dict[str, int]] | Evidence = (
        evidence_spans(cases, benchmark.documents) if level == "passage" else benchmark.qrels(config.split)
    )
    return Judgments(level=level, qrels=qrels, queries={c.queryId: c.query for c in cases}, texts=texts)


def candidate_ids(
    tracker: Tracker, baseline: str, candidates: Sequence[str], sweep: str | None
) -> tuple[list[str], list[str], list[str]]:
    """The candidates to compare with ``baseline``: those given, then a sweep's sealed members.
    Returns (candidate IDs, the sweep's sealed members, a note per member left out unsealed)."""
    ids = list(dict.fromkeys(candidates))
    members: list[str] = []
    left_out: list[str] = []
    if sweep is not None:
        for child in sweep_children(tracker, sweep):
            if child.sealed:
                members.append(child.run_id)
            else:
                left_out.append(f"sweep member {child.name} ({child.run_id}) is {child.status}, not sealed: left out")
        ids += [m for m in members if m not in ids]
    ids = [i for i in ids if i != baseline]
    if not ids:
        raise ComparisonError(
            "nothing to compare: give a candidate run (rageval compare --candidate RUN; in compare.ipynb's "
            'parameters cell, candidates = ["RUN"]), or a sweep with sealed members (--sweep PARENT; sweep = "PARENT")'
        )
    return ids, members, left_out


def sweep_children(tracker: Tracker, sweep: str) -> list[RunInfo]:
    """A sweep's member runs. Membership is the members' ``mlflow.parentRunId`` tag, a tag anyone
    can set or remove; so a sealed parent must verify, and where the parent recorded its members
    (``summary.json``, written when the sweep ended) the runs carrying the tag must be exactly those,
    and come in its order (the sweep file's); else in the store's."""
    parent = tracker.run(sweep)
    if parent.tags.get("rageval.kind") != "sweep":
        raise ComparisonError(f"run {sweep} is not a sweep's parent run (no rageval.kind=sweep tag)")
    if parent.sealed:
        tracker.verify_or_raise(sweep)
    # Comparisons and gates of the sweep's members are nested under it too; they are never members.
    children = [c for c in tracker.children(sweep) if c.tags.get("rageval.kind") not in ("comparison", "gate")]
    recorded = _recorded_members(tracker, sweep)
    if recorded is None:
        return children
    found = {c.run_id for c in children}
    differences = [
        f"run {c.run_id} ({c.name}) has mlflow.parentRunId = {sweep}, but the sweep's summary.json does not list it"
        for c in children
        if c.run_id not in recorded
    ] + [
        f"sweep member {name} (run {run_id}) is listed in the sweep's summary.json but no longer has "
        f"mlflow.parentRunId = {sweep}"
        for run_id, name in recorded.items()
        if run_id not in found
    ]
    if differences:
        raise ComparisonError(
            f"the members of sweep {sweep} in the store are not the ones it recorded: a member's tags were changed",
            differences=differences,
        )
    # In the sweep file's order, as summary.json lists them: the store's order is that of the runs'
    # creation, which parallel workers race for (the demo's table swapped two rows between runs).
    order = {run_id: index for index, run_id in enumerate(recorded)}
    return sorted(children, key=lambda c: order[c.run_id])


def _recorded_members(tracker: Tracker, sweep: str) -> dict[str, str] | None:
    """Run ID → member name, from the sweep parent's summary.json (``None``: the sweep recorded no
    summary, e.g. its process was killed)."""
    with tempfile.TemporaryDirectory(prefix="rageval-read-") as tmp:
        try:
            summary = json.loads(tracker.download(sweep, "summary.json", Path(tmp)).read_text(encoding="utf-8"))
        except (TrackingError, ValueError):
            return None
    return {m["run_id"]: m["name"] for m in summary.get("members", []) if m.get("run_id")}


def load_inputs(
    tracker: Tracker,
    baseline: str,
    candidates: Sequence[str] = (),
    *,
    sweep: str | None = None,
    allow_mismatch: bool = False,
    warnings: Sequence[str] = (),
) -> ComparisonInputs:
    """Pull the baseline, the candidates and a sweep's sealed members (candidates too) from the store."""
    if not baseline:
        raise ComparisonError(
            'no baseline run: give one (rageval compare --baseline RUN; in compare.ipynb\'s parameters cell, baseline = "RUN"); '
            "rageval runs lists the runs"
        )
    ids, members, left_out = candidate_ids(tracker, baseline, candidates, sweep)
    notes = list(warnings)
    notes += [note for note in left_out if note not in notes]
    infos = [tracker.run(r) for r in (baseline, *ids)]
    found = check_comparable(infos[0], infos[1:], allow_mismatch=allow_mismatch)
    loaded = {r: tracker.run_artifacts(r) for r in (baseline, *ids)}
    runs = [loaded[baseline], *(loaded[i] for i in ids)]
    return ComparisonInputs(
        baseline=loaded[baseline],
        candidates=[loaded[i] for i in ids],
        judgments=judgments_for(runs),
        sweep=[loaded[m] for m in members if m in loaded] + ([loaded[baseline]] if sweep else []),
        differences=found,
        warnings=notes,
    )


def run_rankings(
    tracker: Tracker, run_ids: Sequence[str]
) -> tuple[dict[str, pd.DataFrame], list[ChunkingConfig], str | None, str | None, dict[str, str | None]]:
    """Each sealed run's rankings, its chunking (see :func:`recorded_chunking`), and the benchmark folder and split the runs share (``None`` where they differ)."""
    frames, configs, benchmarks, splits, cases = {}, [], set(), set(), {}
    for run_id in run_ids:
        info = tracker.run(run_id)
        frames[run_id] = tracker.rankings(run_id)
        with tempfile.TemporaryDirectory(prefix="rageval-read-") as tmp:
            config_yaml = tracker.download_sealed(run_id, "config.yaml", Path(tmp)).read_text(encoding="utf-8")
        config = recorded_chunking(info, config_yaml)
        configs.append(config)
        benchmarks.add(info.params.get("benchmark"))
        splits.add(info.tags.get("rageval.split"))
        cases[run_id] = info.tags.get("rageval.hash.cases")
    return frames, configs, _only(benchmarks), _only(splits), cases


def _only(values: set[str | None]) -> str | None:
    return next(iter(values)) if len(values) == 1 else None
