"""``rageval reproduce RUN``: re-execute a sealed run from its record and compare.

What a run records is enough to run it again: its resolved configuration (``config.yaml``), the
benchmark's path, version and content hashes, the commit of the repository holding its params
file (the project: a team's repository, or the rageval checkout itself) and rageval's own
revision (version, and its checkout's commit and dirtiness, or "installed"). Reproduction

1. refuses a run that is not sealed or no longer verifies (tampered), a run made from a dirty
   working tree (unless ``allow_dirty``: then its recorded ``git/diff.patch`` is applied), a
   commit this repository does not have, a benchmark whose hashes changed since, and — when the
   params lived outside rageval's checkout (a team's repository) — a rageval other than the one
   that made the run (version, checkout commit, uncommitted changes), naming both;
2. checks the project commit out into a temporary git worktree and runs the configuration there,
   into the same tracking store (a new sealed run): with that commit's code when the project is
   the rageval checkout, else with this rageval; a benchmark inside the project is the commit's;
3. compares the two runs stage by stage: identical rankings are required of deterministic stages;
   for stages downstream of a neural model (dense, rerank) the largest score difference and the
   queries whose ranking changed are reported;
4. logs the comparison as a sealed record run tagged with both run IDs.

Our stages use no random numbers, so there are no seeds to restore; the record says so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from rageval.benchmark.loading import load_benchmark
from rageval.config.load import config_from_yaml, dump_config
from rageval.config.schema import RunConfig
from rageval.errors import ReproductionError
from rageval.experiment.stages import CONTEXT_STAGE
from rageval.paths import source_checkout
from rageval.retrieval.pipeline import stage_inputs
from rageval.retrieval.schema import StageConfig
from rageval.safety import csv_bytes
from rageval.tracking.records import NOTE_TAG
from rageval.tracking.store import RunInfo, Tracker
from rageval.workflows.provenance import RAGEVAL_VERSION, rageval_source, source_tags

NEURAL_TYPES = {"dense", "rerank"}
SCORE_TOLERANCE = 1e-4
REPRODUCE_CONFIG = "rageval-reproduce.yaml"
# Metrics that describe how a run went, not what it found: they may differ on a faithful re-run.
NOT_RESULTS = ("time_s/", "latency/", "cache/", "external_calls", "release_evaluations", "run_time_s", "logging_time_s")


@dataclass
class StageComparison:
    stage: str
    deterministic: bool
    identical: bool
    queries_changed: int
    max_score_difference: float


@dataclass
class Reproduction:
    original: str
    reproduction: str
    record: str = ""
    stages: list[StageComparison] = field(default_factory=list)
    metric_differences: dict[str, float] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        if all(s.identical for s in self.stages):
            return "identical"
        if all(s.identical or (not s.deterministic and s.max_score_difference <= SCORE_TOLERANCE) for s in self.stages):
            return "within tolerance"
        return "differs"

    @property
    def reproduced(self) -> bool:
        return self.verdict != "differs"

    def table(self) -> pd.DataFrame:
        return pd.DataFrame([s.__dict__ for s in self.stages])


def _git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise ReproductionError(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done


def neural_stages(stages: Sequence[StageConfig]) -> set[str]:
    """Stages whose scores come from a neural model, every stage fed by one, and the context when
    it is cut from such a stage's ranking. Inputs are wired as the pipeline wires them."""
    out: set[str] = set()
    for stage, inputs in zip(stages, stage_inputs(stages), strict=True):
        if stage.type in NEURAL_TYPES or any(i in out for i in inputs):
            out.add(stage.name)
    if stages and stages[-1].name in out:
        out.add(CONTEXT_STAGE)
    return out


def compare_rankings(a: pd.DataFrame, b: pd.DataFrame, neural: set[str]) -> list[StageComparison]:
    """Per stage: same (query, rank, chunk) rows, and the largest score difference."""
    out = []
    for stage in list(dict.fromkeys(a["stage"])):
        left = a[a["stage"] == stage].set_index(["query_id", "rank"])
        right = b[b["stage"] == stage].set_index(["query_id", "rank"])
        joined = left[["chunk_id", "score"]].join(right[["chunk_id", "score"]], how="outer", suffixes=("_a", "_b"))
        same_chunk = joined["chunk_id_a"] == joined["chunk_id_b"]
        changed = joined.index[~same_chunk].get_level_values(0).unique()
        both = joined[same_chunk]
        difference = float(np.abs(both["score_a"] - both["score_b"]).max()) if len(both) else 0.0
        out.append(
            StageComparison(
                stage=stage,
                deterministic=stage not in neural,
                identical=bool(same_chunk.all()) and difference == 0.0,
                queries_changed=len(changed),
                max_score_difference=difference,
            )
        )
    return out


def reproduce(run_id: str, *, tracker: Tracker, allow_dirty: bool = False, repo: Path | None = None) -> Reproduction:
    tracker.verify_or_raise(run_id)  # unsealed: TrackingError; tampered: VerificationError
    info = tracker.run(run_id)
    commit = info.tags.get("rageval.git.commit", "unknown")
    dirty = info.tags.get("rageval.git.dirty") == "true"
    if commit == "unknown":
        raise ReproductionError(
            f"run {run_id} records no git commit (it was not made from a git checkout); it cannot be re-executed from its record"
        )
    if dirty and not allow_dirty:
        raise ReproductionError(
            f"run {run_id} was made from a dirty working tree (commit {commit[:12]} plus uncommitted changes)",
            fix="pass --allow-dirty to re-apply the diff the run recorded, and have the reproduction marked so",
        )
    # A run whose rageval came from elsewhere than the project's commit re-runs with this rageval.
    own_code = info.tags.get("rageval.source.commit", commit) == commit
    if not own_code:
        check_rageval(run_id, info.tags)
    repo = _repository(run_id, commit, info.tags, repo)
    new_run, config, patch = _rerun_at_commit(tracker, info, repo, commit, dirty=dirty, own_code=own_code)

    result = Reproduction(original=run_id, reproduction=new_run)
    result.stages = _compare_stages(tracker, run_id, new_run, neural_stages(config.retrieval.stages))
    original_metrics, new_metrics = info.metrics, tracker.run(new_run).metrics
    result.metric_differences = {
        k: abs(original_metrics[k] - new_metrics[k])
        for k in original_metrics
        if k in new_metrics and not k.startswith(NOT_RESULTS)
    }
    result.record = _record(tracker, info.experiment_id, result, patch)
    return result


def _rerun_at_commit(
    tracker: Tracker, info: RunInfo, repo: Path, commit: str, *, dirty: bool, own_code: bool
) -> tuple[str, RunConfig, bytes | None]:
    """Run the recorded configuration again in a temporary worktree of ``commit`` (a dirty run's
    recorded diff applied there): the new run's ID, the configuration it ran, and that diff (None
    for a clean run)."""
    run_id = info.run_id
    patch: bytes | None = None
    with tempfile.TemporaryDirectory(prefix="rageval-reproduce-") as tmp:
        tmp_path = Path(tmp)
        config_text = tracker.download_sealed(run_id, "config.yaml", tmp_path / "original").read_text()
        config = config_from_yaml(config_text)
        worktree = tmp_path / "worktree"
        _git(repo, "worktree", "add", "--detach", str(worktree), commit)
        try:
            if dirty:
                patch_file = tracker.download_sealed(run_id, "git/diff.patch", tmp_path / "patch")
                patch = patch_file.read_bytes()
                if patch:
                    _git(worktree, "apply", "--whitespace=nowarn", str(patch_file))
            config, config_text = _commit_benchmark(config, config_text, info.tags, worktree)
            _check_benchmark(run_id, info.tags, config.benchmark)
            # Inside the worktree, so that the new run records the same commit (and git-ignored
            # there, so that it is not a dirty input: see _run_in).
            config_file = worktree / REPRODUCE_CONFIG
            config_file.write_text(config_text)
            new_run = _run_in(
                worktree, config_file, tracker.uri, tracker.experiment_name(info.experiment_id), own_code=own_code
            )
        finally:
            _git(repo, "worktree", "remove", "--force", str(worktree), check=False)
    return new_run, config, patch


def _compare_stages(tracker: Tracker, run_id: str, new_run: str, neural: set[str]) -> list[StageComparison]:
    """The two runs' rankings compared stage by stage (``neural``: the stages not required to be deterministic)."""
    try:
        before, after = (
            tracker.sealed_frame(run_id, "stage_rankings.parquet"),
            tracker.sealed_frame(new_run, "stage_rankings.parquet"),
        )
    except Exception:  # noqa: BLE001 - runs from before per-stage rankings existed: compare the final ranking
        before, after = tracker.rankings(run_id), tracker.rankings(new_run)
    return compare_rankings(before, after, neural)


def _describe(version: str, tags: dict[str, str]) -> str:
    commit = tags.get("rageval.source.commit", "unknown")
    if commit == "installed":
        return f"rageval {version} (installed)"
    state = (
        "clean"
        if tags.get("rageval.source.dirty") == "false"
        else (f"uncommitted changes, diff sha256 {tags.get('rageval.source.diff_sha256', 'unknown')[:12]}")
    )
    return f"rageval {version} (checkout commit {commit[:12]}, {state})"


def check_rageval(run_id: str, tags: dict[str, str]) -> None:
    """Refuse, naming both, when this rageval is not the one that made the run: its version, and
    its checkout's commit and uncommitted diff (or both installed)."""
    recorded = {k: tags.get(k) for k in _SOURCE_KEYS}
    now = source_tags(rageval_source())
    if tags.get("rageval.version") == RAGEVAL_VERSION and all(now.get(k) == v for k, v in recorded.items()):
        return
    made, this = _describe(tags.get("rageval.version", "unknown"), tags), _describe(RAGEVAL_VERSION, now)
    raise ReproductionError(
        f"run {run_id} was made with {made}; this is {this}",
        fix="install the rageval that made the run (pip install rageval==VERSION, or check out its commit in "
        "the rageval checkout and undo local changes), then run reproduce again",
    )


_SOURCE_KEYS = ("rageval.source.commit", "rageval.source.dirty", "rageval.source.diff_sha256")


def _repository(run_id: str, commit: str, tags: dict[str, str], repo: Path | None) -> Path:
    """The repository to check ``commit`` out of: ``repo``, else the one holding the working
    directory, else the project the run recorded (when the working directory's lacks the commit)."""
    candidates = (
        [repo]
        if repo
        else [
            Path(_git(Path.cwd(), "rev-parse", "--show-toplevel", check=False).stdout.strip() or Path.cwd()),
            *(
                [Path(tags["rageval.project.root"])]
                if Path(tags.get("rageval.project.root", "unknown")).is_dir()
                else []
            ),
        ]
    )
    for candidate in candidates:
        if _git(candidate, "cat-file", "-e", f"{commit}^{{commit}}", check=False).returncode == 0:
            return candidate
    raise ReproductionError(
        f"commit {commit} of run {run_id} is not in the repository at {candidates[0]}",
        fix="fetch it (git fetch --all), or run reproduce inside the repository that made the run",
    )


def _commit_benchmark(config: RunConfig, text: str, tags: dict[str, str], worktree: Path) -> tuple[RunConfig, str]:
    """A benchmark inside the project is read from the checked-out commit (its hashes are still
    checked against the run's); one outside it, from where the run read it."""
    try:
        inside = Path(config.benchmark).relative_to(tags.get("rageval.project.root", "unknown"))
    except ValueError:
        return config, text
    if not (worktree / inside).is_dir():
        return config, text
    moved = config.model_copy(update={"benchmark": str(worktree / inside)})
    return moved, dump_config(moved)


def _check_benchmark(run_id: str, tags: dict[str, str], path: str) -> None:
    if not Path(path).is_dir():
        raise ReproductionError(
            f"run {run_id} used the benchmark at {path}, which is gone", fix="restore that benchmark version"
        )
    now = load_benchmark(path).hashes
    changed = [k for k in ("corpus", "cases", "qrels") if tags.get(f"rageval.hash.{k}") != now[k]]
    if changed:
        raise ReproductionError(
            f"the benchmark at {path} changed since run {run_id} ({', '.join(changed)} hash differs)",
            fix="restore the benchmark version the run used (benchmark versions are append-only folders)",
        )


def _run_in(worktree: Path, config_file: Path, tracking_uri: str, experiment: str, *, own_code: bool) -> str:
    """Run the configuration from the worktree (first on the path: the commit's code when the
    project is the rageval checkout, the team's plugin modules otherwise). Without the project's
    own code it runs with this rageval, whose checkout (if any) is put after the worktree."""
    script = (
        "import json, sys\n"
        "try:\n"
        "    from rageval.tracking.store import Tracker\n"
        "    from rageval.workflows.run import execute_run\n"
        "except ImportError:  # a commit from before the package layout of docs/architecture.md\n"
        "    from rageval.runner import execute_run\n"
        "    outcome = execute_run(sys.argv[1], tracking_uri=sys.argv[2], experiment=sys.argv[3])\n"
        "else:\n"
        "    try:\n"
        "        from rageval.workflows.run import RunRequest\n"
        "    except ImportError:  # a commit from before the run request\n"
        "        outcome = execute_run(sys.argv[1], tracker=Tracker(sys.argv[2]), experiment=sys.argv[3])\n"
        "    else:\n"
        "        outcome = execute_run(RunRequest(sys.argv[1], experiment=sys.argv[3]), Tracker(sys.argv[2]))\n"
        "print(json.dumps({'run_id': outcome.run_id}))\n"
    )
    this = [] if own_code or source_checkout() is None else [str(source_checkout())]
    exclude = worktree.parent / "exclude"
    exclude.write_text(f"/{REPRODUCE_CONFIG}\n")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(worktree), *this, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        # For this process's git only: the configuration file is ignored, and the notebooks, fresh
        # from the commit (whose copies are stripped already), are compared as they are rather than
        # through nbstripout (a Python process per notebook on the first `git status`).
        "GIT_CONFIG_COUNT": "2",
        "GIT_CONFIG_KEY_0": "core.excludesFile",
        "GIT_CONFIG_VALUE_0": str(exclude),
        "GIT_CONFIG_KEY_1": "filter.nbstripout.clean",
        "GIT_CONFIG_VALUE_1": "cat",
        # Every index rebuilt: a reproduction trusts no cache entry (one forged together with its
        # hash, by someone without the seal key, would reproduce the forgery).
        "RAGEVAL_CACHE": str(worktree.parent / "cache"),
    }
    done = subprocess.run(
        [sys.executable, "-c", script, str(config_file), tracking_uri, experiment],
        cwd=worktree,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise ReproductionError(f"re-executing the run at its commit failed:\n{done.stderr.strip()[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])["run_id"]


def _record(tracker: Tracker, experiment_id: str, result: Reproduction, patch: bytes | None) -> str:
    """A sealed run holding the comparison; a reproduction of a dirty run carries the re-applied diff."""
    record = tracker.create_run(
        tracker.experiment_name(experiment_id),
        f"reproduce {result.original[:8]}",
        params={"original_run": result.original, "reproduction_run": result.reproduction, "seeds": "none used"},
        tags={
            "rageval.kind": "reproduction",
            "rageval.reproduce.original": result.original,
            "rageval.reproduce.run": result.reproduction,
            "rageval.reproduce.verdict": result.verdict,
            "rageval.reproduce.dirty": str(patch is not None).lower(),
            NOTE_TAG: (
                f"Reproduction of run `{result.original}` at its commit as run `{result.reproduction}`: "
                f"**{result.verdict}**. Per-stage ranking differences in reproduction.csv, metric differences "
                "in metric_differences.json."
            ),
        },
    )
    stages = result.table()
    tracker.log_metrics(
        record,
        {
            "max_score_difference": float(stages["max_score_difference"].max()) if len(stages) else 0.0,
            "queries_changed": int(stages["queries_changed"].max()) if len(stages) else 0,
            "max_metric_difference": max(result.metric_differences.values(), default=0.0),
        },
    )
    tracker.log_bytes(record, "reproduction.csv", csv_bytes(stages))
    if patch is not None:
        tracker.log_bytes(record, "git/diff.patch", patch)
    tracker.log_bytes(
        record, "metric_differences.json", json.dumps(result.metric_differences, indent=2, sort_keys=True).encode()
    )
    tracker.seal(record)
    return record
