"""``rageval promote RELEASE_RUN`` and ``rageval rollback SLOT``: the Model Registry's aliases
``champion`` and ``previous`` moved only on evidence, each move recorded as a sealed run.

Promotion believes no tag of the release run: it re-derives the decision from the linked gate,
review, shadow and online runs under the recorded policy (:func:`rageval.workflows.release.record.rederive_release`)
and refuses what does not hold; a release resting on simulated evidence is promoted only when
allowed, and every record of it (promotion run, bundles, registry version and slot) says SIMULATED.

A version's serving inputs outlive ``.rageval-cache``: promoting a configuration records a sealed
``rageval.kind=bundle`` run holding its ``config.yaml`` and the content-addressed cache entries its
pipeline reads (BM25 index, embeddings; each entry with its ``entry.json`` of sha256s), once a
sample of its queries re-run on them gives the evaluation run's recorded rankings. A rollback
downloads that bundle into a fresh temporary cache, rebuilds the
pipeline from it (every cached stage must be a hit: nothing is rebuilt), re-runs a sample of the
evaluation run's queries and requires the rankings it recorded; only then are the aliases moved.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rageval.benchmark.chunking import chunk_corpus
from rageval.benchmark.loading import Benchmark, load_benchmark
from rageval.config.load import config_from_yaml
from rageval.errors import RagevalError, TrackingError
from rageval.experiment.latency import sample_queries
from rageval.experiment.run import corpus_for
from rageval.experiment.stages import rankings_frame
from rageval.hashing import sha256_bytes, sha256_file
from rageval.paths import project_root
from rageval.release.marks import SIMULATED_TAG, named_pair, overrides_tag
from rageval.retrieval.base import Corpus
from rageval.retrieval.cache import ENTRY, Cache, CacheResult
from rageval.retrieval.pipeline import Pipeline
from rageval.tracking.records import NOTE_TAG, RELEASE_EXPERIMENT
from rageval.tracking.registry import (
    BUNDLE_SEAL_TAG,
    BUNDLE_TAG,
    CHAMPION,
    CONFIG_SHA_TAG,
    PREVIOUS,
    Registry,
    Version,
)
from rageval.tracking.store import Tracker
from rageval.workflows.guards import sealed_and_intact
from rageval.workflows.provenance import RAGEVAL_VERSION, git_state
from rageval.workflows.release.record import Rederived, rederive_release

BUNDLE_FILE = "bundle.json"
BUNDLE_OF_TAG = "rageval.bundle.evaluation"  # on the bundle run: whose serving inputs it holds


@dataclass(frozen=True)
class Bundle:
    run_id: str
    seal: str
    bytes: int  # config + cache entries, as uploaded
    entries: list[dict[str, Any]]


@dataclass
class Check:
    """A bundle re-run on a sample of its evaluation run's queries."""

    queries: list[str]
    identical: list[str] = field(default_factory=list)
    differing: list[str] = field(default_factory=list)
    cache_hits: dict[str, bool] = field(default_factory=dict)
    problem: str | None = None

    @property
    def passed(self) -> bool:
        return self.problem is None and not self.differing and bool(self.identical)


@dataclass(frozen=True)
class PromotionOutcome:
    run_id: str
    model: str
    champion: Version
    previous: Version | None
    bundles: dict[str, Bundle]  # evaluation run → bundle made now
    simulated: list[str] = field(default_factory=list)  # the simulated runs the release rests on


# ---------------------------------------------------------------------------- bundles


def _benchmark_for(tracker: Tracker, evaluation_run: str, config_yaml: str) -> Benchmark:
    """The benchmark the run's configuration names, refused unless it is the version the run used."""
    info = tracker.run(evaluation_run)
    benchmark = load_benchmark(config_from_yaml(config_yaml).benchmark)
    changed = [
        part
        for part in ("corpus", "cases")
        if info.tags.get(f"rageval.hash.{part}") not in (None, benchmark.hashes[part])
    ]
    if changed:
        raise TrackingError(
            f"the benchmark at {benchmark.path} is not the version run {evaluation_run} used "
            f"({', '.join(changed)} hash differs): check out that version"
        )
    return benchmark


def _build(config_yaml: str, benchmark: Benchmark, cache: Cache) -> tuple[Pipeline, Corpus]:
    config = config_from_yaml(config_yaml)
    chunks = chunk_corpus(benchmark.document_texts(), config.chunking)
    corpus = corpus_for(config, benchmark, chunks, cache)
    pipeline = Pipeline.from_config(config.retrieval.stages, corpus, source="the bundled config.yaml")
    return pipeline, corpus


class _Recording(Cache):
    """The cache, noting every entry a pipeline reads or builds: those are what it serves from."""

    def __init__(self, root: str | Path | None = None) -> None:
        super().__init__(root)
        self.used: list[Path] = []

    def get_or_build(self, kind: str, key: Mapping[str, Any], build: Callable[[Path], None]) -> CacheResult:
        result = super().get_or_build(kind, key, build)
        self.used.append(result.path)
        return result


def make_bundle(
    tracker: Tracker, evaluation_run: str, *, sample: int, seed: int, marks: Mapping[str, str] | None = None
) -> Bundle:
    """Check the run's configuration against its recorded rankings with the project's cache (its
    entries read, or built when absent), and record the configuration and the entries it used as
    a sealed bundle run."""
    info = sealed_and_intact(tracker, evaluation_run)
    with tempfile.TemporaryDirectory(prefix="rageval-bundle-") as tmp:
        config_yaml = tracker.download(evaluation_run, "config.yaml", Path(tmp)).read_text()
        cache = _Recording()
        benchmark = _benchmark_for(tracker, evaluation_run, config_yaml)
        check = _rerun(tracker, evaluation_run, config_yaml, benchmark, cache, sample=sample, seed=seed, hits=False)
        if not check.passed:
            raise TrackingError(
                f"run {evaluation_run}'s configuration, rebuilt here, does not reproduce its recorded rankings "
                f"({check.problem or 'differing queries: ' + ', '.join(check.differing[:5])}): it cannot be bundled"
            )
        cached, entries = _cache_files(cache.used)
    files = {"config.yaml": config_yaml.encode(), **cached}
    record = {
        "evaluation_run": evaluation_run,
        "config": {"path": "config.yaml", "sha256": sha256_bytes(files["config.yaml"])},
        "entries": entries,
        "bytes": sum(len(d) for d in files.values()),
        "checked_queries": check.queries,
        "cache_hits": check.cache_hits,  # False: the entry was not in the project's cache and was built now
    }
    files[BUNDLE_FILE] = json.dumps(record, indent=2).encode()
    run_id = tracker.create_run(
        RELEASE_EXPERIMENT,
        f"bundle {info.name}",
        params={},  # the evaluation run is the tag rageval.bundle.evaluation
        tags={
            **git_state(project_root()),
            "rageval.version": RAGEVAL_VERSION,
            "rageval.kind": "bundle",
            BUNDLE_OF_TAG: evaluation_run,
            CONFIG_SHA_TAG: record["config"]["sha256"],
            "rageval.config.name": info.tags.get("rageval.config.name", ""),
            "rageval.config.label": config_of(info.tags),
            **(marks or {}),
        },
        files=files,
    )
    try:
        tracker.log_metrics(run_id, {"bundle_bytes": record["bytes"], "cache_entries": len(entries)})
        seal = tracker.seal(run_id)
    except Exception as exc:
        tracker.fail(run_id, f"sealing failed: {type(exc).__name__}: {exc}")
        raise
    return Bundle(run_id, seal, record["bytes"], entries)


def _cache_files(used: list[Path]) -> tuple[dict[str, bytes], list[dict[str, Any]]]:
    """The cache entries a pipeline used, each once: as the bundle's files under ``cache/KIND/DIGEST/``
    (the entry's files and its entry.json), and as bundle.json lists them."""
    files: dict[str, bytes] = {}
    entries = []
    for folder in dict.fromkeys(used):
        entry = folder / ENTRY
        record = json.loads(entry.read_text())
        payload = {name: (folder / name).read_bytes() for name in record["files"]}
        for name, data in payload.items():
            files[f"cache/{folder.parent.name}/{folder.name}/{name}"] = data
        files[f"cache/{folder.parent.name}/{folder.name}/{ENTRY}"] = entry.read_bytes()
        entries.append(
            {
                "kind": folder.parent.name,
                "digest": folder.name,
                "files": record["files"],
                "bytes": sum(len(d) for d in payload.values()),
            }
        )
    return files, entries


def config_of(tags: Mapping[str, str]) -> str:
    """The configuration a run evaluated, as its runs are named: the label (overrides included,
    ``bm25-baseline[k1=1.2]``), else the configuration's name."""
    return tags.get("rageval.config.label") or tags.get("rageval.config.name", "")


def _rerun(
    tracker: Tracker,
    evaluation_run: str,
    config_yaml: str,
    benchmark: Benchmark,
    cache: Cache,
    *,
    sample: int,
    seed: int,
    hits: bool,
) -> Check:
    """Re-run ``sample`` of the run's queries (drawn with ``seed``) through the pipeline built on
    ``cache``; with ``hits``, every cached stage must have read its entry, not rebuilt it."""
    config = config_from_yaml(config_yaml)
    queries = sample_queries(benchmark, config.split, sample, seed)
    check = Check([q.query_id for q in queries])
    if not queries:
        check.problem = f"split {config.split!r} of the benchmark has no query to re-run"
        return check
    pipeline, corpus = _build(config_yaml, benchmark, cache)
    check.cache_hits = pipeline.cache_hits()
    if hits and not all(check.cache_hits.values()):
        missed = [stage for stage, hit in check.cache_hits.items() if not hit]
        check.problem = f"the bundle lacks the cache entries of stage(s) {', '.join(missed)}: they had to be rebuilt"
        return check
    output = pipeline.run(queries)
    if output.failures:  # a service down is said so, not read as "rankings differ"
        query, stage, kind, message = output.failures[0]
        failed = len({f[0] for f in output.failures})
        check.problem = (
            f"stage {stage}'s service failed {failed} of {len(queries)} sampled queries (first, query {query}: "
            f"{kind}: {message}): it is unreachable or failing; start it, then roll back again"
        )
        return check
    now = rankings_frame(output.hits, pipeline.names[-1], corpus.by_id)
    recorded = tracker.rankings(evaluation_run)
    for qid in check.queries:
        a = recorded[recorded["query_id"] == qid].sort_values("rank")[["rank", "chunk_id", "score"]]
        b = now[now["query_id"] == qid].sort_values("rank")[["rank", "chunk_id", "score"]]
        same = a.reset_index(drop=True).equals(b.reset_index(drop=True))
        (check.identical if same else check.differing).append(qid)
    return check


def verify_version(tracker: Tracker, version: Version, *, sample: int, seed: int) -> Check:
    """The version's configuration and cache entries, from the artifact store only, re-run on a
    sample of its evaluation run's queries. A missing or altered bundle is a failed check."""
    if not version.bundle_run:
        return Check([], problem=f"version {version.version} of {version.model} names no bundle ({BUNDLE_TAG})")
    try:
        release = version.tags.get("rageval.promotion.release", "")
        if not release or sealed_and_intact(tracker, release).tags.get("rageval.kind") != "release":
            raise TrackingError(
                f"version {version.version} of {version.model} was not registered by a sealed release run "
                f"(rageval.promotion.release is {release or 'absent'}): it was not promoted by rageval"
            )
        bundle = sealed_and_intact(tracker, version.bundle_run)
        if bundle.tags.get(BUNDLE_OF_TAG) != version.evaluation_run:
            raise TrackingError(f"bundle run {version.bundle_run} is not of evaluation run {version.evaluation_run}")
        sealed_and_intact(tracker, version.evaluation_run)
        with tempfile.TemporaryDirectory(prefix="rageval-rollback-") as tmp:
            root = tracker.download(version.bundle_run, "", Path(tmp) / "bundle")
            record = json.loads((root / BUNDLE_FILE).read_text())
            config_file = root / record["config"]["path"]
            if sha256_file(config_file) != version.tags.get(CONFIG_SHA_TAG):
                raise TrackingError(f"the bundled config.yaml is not the configuration version {version.version} names")
            config_yaml = config_file.read_text()
            benchmark = _benchmark_for(tracker, version.evaluation_run, config_yaml)
            return _rerun(
                tracker,
                version.evaluation_run,
                config_yaml,
                benchmark,
                Cache(root / "cache"),
                sample=sample,
                seed=seed,
                hits=True,
            )
    except (RagevalError, OSError, ValueError, KeyError) as exc:
        return Check([], problem=f"{type(exc).__name__}: {exc}")


# ---------------------------------------------------------------------------- promote


@dataclass(frozen=True)
class PromoteRequest:
    """What ``rageval promote`` is asked: the release run, the release slot (registered model; None:
    the release's family), whether simulated evidence may be promoted (recorded plainly when it is),
    and the bundle check's sample."""

    release_run: str
    model: str | None = None
    allow_simulated: bool = False
    sample: int = 20
    seed: int = 0
    experiment: str | None = None


def _promotable(tracker: Tracker, request: PromoteRequest) -> tuple[Rederived, list[str]]:
    """The release re-derived from its evidence, refused unless it holds; and the simulated runs it rests on."""
    found = rederive_release(tracker, request.release_run)
    if not found.holds:
        raise TrackingError(
            f"release run {request.release_run} is not promoted: its evidence does not hold: {found.refusal()}"
        )
    simulated = found.simulated
    if simulated and not request.allow_simulated:
        raise TrackingError(
            f"release run {request.release_run} rests on SIMULATED or scripted evidence ({', '.join(simulated)}): "
            "it is not promoted; give --allow-simulated to promote it anyway (the promotion run and the registry "
            "version are then marked SIMULATED)"
        )
    return found, simulated


def _marks(release_run: str, simulated: list[str]) -> tuple[dict[str, str], str]:
    """The tags and description every record of this promotion carries."""
    if not simulated:
        return {SIMULATED_TAG: "false"}, f"promoted by release run {release_run}"
    text = f"SIMULATED: promoted by release run {release_run} on simulated evidence ({', '.join(simulated)})"
    return {SIMULATED_TAG: "true", **overrides_tag([f"--allow-simulated: {text}"])}, text


def _register(
    registry: Registry, family: str, runs: dict[str, str], request: PromoteRequest, marks: dict[str, str], text: str
) -> tuple[dict[str, Version], dict[str, Bundle]]:
    """The baseline's and candidate's versions in the slot (registered, with a bundle, when new);
    the candidate's version marked with this promotion."""
    tracker = registry.tracker
    bundles: dict[str, Bundle] = {}
    versions: dict[str, Version] = {}
    for role, run in runs.items():
        existing = registry.version_of(family, run)
        if existing is not None:
            versions[role] = existing
            continue
        bundles[run] = make_bundle(tracker, run, sample=request.sample, seed=request.seed, marks=marks)
        version_tags = {
            BUNDLE_TAG: bundles[run].run_id,
            BUNDLE_SEAL_TAG: bundles[run].seal,
            CONFIG_SHA_TAG: tracker.run(bundles[run].run_id).tags[CONFIG_SHA_TAG],
            "rageval.promotion.release": request.release_run,
        }
        described = f"{text}; configuration {config_of(tracker.run(run).tags)}"
        versions[role] = registry.register(family, run, version_tags | marks, description=described)
    candidate = versions["candidate"].version
    registry.tag_version(family, candidate, {**marks, "rageval.promotion.last_release": request.release_run})
    registry.describe(family, candidate, f"{text}; configuration {config_of(tracker.run(runs['candidate']).tags)}")
    return versions, bundles


def execute_promote(request: PromoteRequest, *, tracker: Tracker) -> PromotionOutcome:
    """Re-derive the release's decision from its evidence (refused unless it holds); register its
    candidate (and its baseline when new) in the release slot, bundle their serving inputs, move
    ``champion`` to the candidate and ``previous`` to the former champion (or the baseline), and
    record a sealed promotion run. Simulated evidence is promoted only when allowed, and marked."""
    found, simulated = _promotable(tracker, request)
    release_run, tags = request.release_run, found.tags
    family = request.model or tags["rageval.release.family"]
    marks, text = _marks(release_run, simulated)
    registry = Registry(tracker)
    registry.settle(family)
    registry.ensure_model(family, f"rageval release slot {family!r}: each version one configuration")
    baseline, candidate = named_pair(tags)
    runs = {"baseline": baseline or "", "candidate": candidate or ""}
    versions, bundles = _register(registry, family, runs, request, marks, text)
    history = registry.history(family) or [versions["baseline"].version]
    if history[-1] != versions["candidate"].version:
        history.append(versions["candidate"].version)
    former = registry.alias(family, CHAMPION)
    record = {
        "release_run": release_run,
        "model": family,
        "simulated": simulated,
        "champion": versions["candidate"].__dict__,
        "previous": (registry.get(family, history[-2]).__dict__ if len(history) > 1 else None),
        "former_champion": former.__dict__ if former else None,
        "history": history,
        "bundles": {run: b.__dict__ for run, b in bundles.items()},
    }
    run_id = tracker.create_run(
        request.experiment or tracker.experiment_name(tracker.run(release_run).experiment_id),
        f"promote {family} v{versions['candidate'].version}" + (" (SIMULATED)" if simulated else ""),
        params={},  # the release run and the slot are its tags, the rest promotion.json
        tags={
            **git_state(project_root()),
            "rageval.version": RAGEVAL_VERSION,
            "rageval.kind": "promotion",
            "rageval.promotion.release": release_run,
            "rageval.registry.model": family,
            # the slot's champion before and after, the keys a rollback uses too; previous is promotion.json's
            "rageval.registry.from": former.version if former else "",
            "rageval.registry.to": versions["candidate"].version,
            NOTE_TAG: text,
            **marks,
        },
        files={"promotion.json": json.dumps(record, indent=2).encode()},
    )
    try:  # sealed before any alias moves; a kill half way is finished by the next promote or rollback
        registry.move_champions(
            family, history, run_id, model_tags={"rageval.champion.simulated": marks[SIMULATED_TAG]}
        )
    except Exception as exc:
        registry.fail_unsealed(run_id, f"promotion failed: {type(exc).__name__}: {exc}")
        raise
    return PromotionOutcome(run_id, family, versions["candidate"], registry.alias(family, PREVIOUS), bundles, simulated)


# ---------------------------------------------------------------------------- rollback
