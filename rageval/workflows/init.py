"""``rageval init DIR``: lay out a team's project, in a repository of the team's own.

The project holds what a team writes and versions (``params/``, a benchmark, the notebooks) and
names where rageval keeps what it does not (the tracking store ``mlruns/`` and the cache
``.rageval-cache/``, both git-ignored). The marker file :data:`~rageval.paths.PROJECT_MARKER` at
its root makes it the project rageval works in whenever the working directory is inside it: its
notebooks run, its store and cache are used (:mod:`rageval.paths`). The folder becomes a git
repository unless it is inside one already, with the nbstripout filter of ``rageval setup-git``.
Nothing is committed: the team reviews and commits the layout.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from rageval.benchmark.loading import validate_benchmark, write_benchmark
from rageval.benchmark.schema import Case, Document, Judgment
from rageval.errors import RagevalError
from rageval.paths import PROJECT_MARKER, package_notebooks
from rageval.workflows.provenance import install_notebook_filter

NOTEBOOKS = ("evaluate.ipynb", "compare.ipynb")

MARKER_TEXT = """\
# This folder is a rageval project (made by `rageval init`); see rageval's docs/team-repository.md.
# Inside it, rageval runs notebooks/evaluate.ipynb and compare.ipynb from here, keeps its tracking
# store in mlruns/ and its cache in .rageval-cache/ (MLFLOW_TRACKING_URI and RAGEVAL_CACHE override
# those two). This file is not read: it only marks the project's root.
"""

GITIGNORE = """\
# rageval: the local tracking store and the content-addressed cache never go to git.
mlruns/
.rageval-cache/
.ipynb_checkpoints/
__pycache__/
"""

GITATTRIBUTES = """\
# Notebooks are committed without outputs: `rageval setup-git` defines the nbstripout filter in
# .git/config (rageval init did it for this clone; run it once in every other clone).
*.ipynb filter=nbstripout diff=ipynb
"""

PARAMS = """\
# A BM25 baseline over the project's benchmark. Paths are relative to this file.
# Override any key with `rageval run params/bm25.yaml --set key=value`.
version: 1
name: bm25-baseline
description: Lexical BM25 over markdown-aware chunks.
benchmark: ../benchmark
split: dev

chunking:
  method: markdown
  tokenizer: words
  size: 200
  overlap: 30

retrieval:
  stages:
    - type: bm25
      k1: 0.9
      b: 0.4

final_k: 5

evaluation:
  level: auto
  measures: [nDCG@5, R@5, Hit@5, MRR]   # cut-offs up to final_k: what the generator receives
"""

SPEC = {
    "name": "team-benchmark",
    "version": "0.1.0",
    "description": "A skeleton from `rageval init`: replace the document and the case with your own.",
    "corpusVersion": "corpus-1",
    "relevanceUnit": "document",
    "splits": ["dev", "release"],
    "provenance": {"source": "expert-written", "access": ["team"]},
}
DOCUMENT = Document(
    id="getting-started",
    title="Getting started",
    text="# Getting started\n\nInstall the client, then sign in with your team account to publish.",
)
CASE = Case(
    queryId="q-0001",
    query="How do I sign in to publish?",
    corpusVersion="corpus-1",
    relevant=[Judgment(documentId="getting-started", grade=3)],
    split="dev",
)


@dataclass
class InitResult:
    root: Path
    written: list[str] = field(default_factory=list)  # paths relative to root
    kept: list[str] = field(default_factory=list)  # already there (--force), left as they were
    git_init: bool = False  # a new repository was made
    filter: dict[str, str] = field(default_factory=dict)  # the nbstripout settings written

    def next_commands(self) -> list[str]:
        return [
            f"cd {self.root}",
            "rageval benchmark validate benchmark",
            "git add -A && git commit -m 'rageval project'",
            "rageval run params/bm25.yaml",
            "rageval runs",
        ]


def init_project(folder: Path, *, force: bool = False) -> InitResult:
    """Lay out a team's rageval project in ``folder`` (see the module docstring). A folder with
    files in it is refused unless ``force``; then no file already there is overwritten."""
    root = folder.resolve()
    if root.is_file():
        raise RagevalError(f"{root} is a file; rageval init makes a project folder")
    if root.is_dir() and any(root.iterdir()) and not force:
        raise RagevalError(
            f"{root} is not empty; rageval init lays a project out in a new or empty folder "
            "(fix: choose another folder, or pass --force to add the files that are missing, overwriting none)"
        )
    source = package_notebooks()
    if source is None or not all((source / name).is_file() for name in NOTEBOOKS):
        raise RagevalError(
            f"this rageval has no notebooks to copy ({source or 'an installed rageval holds none'}); "
            "run rageval init from a rageval checkout's environment"
        )
    _mkdir(root)
    result = InitResult(root)
    files = {
        PROJECT_MARKER: MARKER_TEXT,
        ".gitignore": GITIGNORE,
        ".gitattributes": GITATTRIBUTES,
        "params/bm25.yaml": PARAMS,
    }
    for name, text in files.items():
        _write(result, name, text.encode())
    for name in NOTEBOOKS:
        _write(result, f"notebooks/{name}", (source / name).read_bytes())
    if (root / "benchmark").exists():
        result.kept.append("benchmark/")
    else:
        write_benchmark(root / "benchmark", SPEC, [DOCUMENT], [CASE])
        result.written += [f"benchmark/{p.name}" for p in sorted((root / "benchmark").iterdir())]
    _, problems = validate_benchmark(root / "benchmark")
    if problems and "benchmark/" not in result.kept:  # the skeleton is ours: it must validate
        raise RagevalError(f"the benchmark skeleton does not validate: {problems[0]}")
    if _git(root, "rev-parse", "--show-toplevel").returncode != 0:
        done = _git(root, "init", "-q")
        if done.returncode != 0:
            raise RagevalError(f"git init failed in {root}: {done.stderr.strip()}")
        result.git_init = True
    result.filter = install_notebook_filter(root)
    return result


def _write(result: InitResult, name: str, data: bytes) -> None:
    path = result.root / name
    if path.exists():
        result.kept.append(name)
        return
    _mkdir(path.parent)
    try:
        path.write_bytes(data)
    except OSError as exc:
        raise RagevalError(f"cannot write {path}: {exc.strerror}") from None
    result.written.append(name)


def _mkdir(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file in the way, no permission
        raise RagevalError(f"cannot make the folder {folder}: {exc.strerror or exc}") from None


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
