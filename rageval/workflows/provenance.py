"""What every record says about where it came from: rageval's version and the git state of the
checkout (commit, dirtiness, the uncommitted diff)."""

from __future__ import annotations

import subprocess
from importlib.metadata import version
from pathlib import Path

RAGEVAL_VERSION = version("rageval")


def git_state(path: Path) -> dict[str, str]:
    """Commit and dirtiness of the git checkout holding ``path`` ('unknown' outside git)."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=path, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {"rageval.git.commit": "unknown", "rageval.git.dirty": "unknown"}
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return {
        "rageval.git.commit": commit,
        "rageval.git.dirty": str(bool(dirty)).lower(),
        "mlflow.source.git.commit": commit,
    }


def git_diff(path: Path) -> bytes:
    """The uncommitted changes to tracked files of the checkout holding ``path`` (``git diff
    HEAD``), recorded with a run made from a dirty tree so that it can be reproduced."""
    try:
        done = subprocess.run(["git", "diff", "HEAD", "--binary"], cwd=path, capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return b""
    return done.stdout if done.returncode == 0 else b""
