"""What every record says about where it came from: rageval's version and the git state of the
checkout (commit, dirtiness, the dirty files, the uncommitted diff).

A notebook whose only changes are outputs, execution counts, cell IDs or metadata (JupyterLab's
Run all + Save) does not make a run dirty: papermill executes the cells' sources, so only those
(and the cells' tags, which mark the parameters cell) count. That holds whether or not this
clone has the nbstripout filter installed (:func:`install_notebook_filter`), which keeps such
changes out of ``git status`` in the first place.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

from rageval.errors import RagevalError

RAGEVAL_VERSION = version("rageval")

# Tag values stay short enough for any MLflow store (tag values are capped at a few thousand characters).
_DIRTY_FILES_TAG_LIMIT = 2000

# nbstripout's defaults strip outputs, counts and some metadata; these keep it from renumbering the
# committed cell IDs (--keep-id) and strip what a kernel writes into language_info on Save (the
# committed notebooks keep only its `name`).
_LANGUAGE_INFO_KEYS = " ".join(
    f"metadata.language_info.{key}"
    for key in ("codemirror_mode", "file_extension", "mimetype", "nbconvert_exporter", "pygments_lexer", "version")
)


def _git(path: Path, *args: str, timeout: float = 10) -> subprocess.CompletedProcess[bytes] | None:
    try:
        done = subprocess.run(["git", *args], cwd=path, capture_output=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done if done.returncode == 0 else None


def notebook_source(text: str | bytes) -> str | None:
    """What papermill executes of a notebook: its format and each cell's type, source and tags, as
    canonical JSON (``None`` when ``text`` is not a notebook). Outputs, execution counts, cell IDs
    and metadata are left out, so two notebooks that differ only in those compare equal."""
    try:
        nb = json.loads(text)
        cells = [
            [
                cell.get("cell_type"),
                "".join(cell["source"]) if isinstance(cell.get("source"), list) else cell.get("source", ""),
                sorted((cell.get("metadata") or {}).get("tags", [])),
            ]
            for cell in nb["cells"]
        ]
        return json.dumps([nb.get("nbformat"), cells])
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _output_only(top: Path, path: str) -> bool:
    """Whether the working-tree notebook ``path`` differs from HEAD's only in what papermill ignores."""
    head = _git(top, "show", f"HEAD:{path}")
    try:
        current = (top / path).read_bytes()
    except OSError:
        return False
    if head is None:
        return False
    old = notebook_source(head.stdout)
    return old is not None and old == notebook_source(current)


def dirty_files(path: Path) -> list[str] | None:
    """The tracked files of the checkout holding ``path`` that differ from HEAD (paths relative to
    the checkout's top, sorted), leaving out notebooks changed only in outputs, counts or
    metadata; ``None`` outside git."""
    top_done = _git(path, "rev-parse", "--show-toplevel")
    if top_done is None:
        return None
    top = Path(top_done.stdout.decode().strip())
    status = _git(top, "status", "--porcelain=v1", "-z", "--untracked-files=no")
    if status is None:
        return None
    entries = status.stdout.decode("utf-8", "surrogateescape").split("\0")
    files: list[str] = []
    index = 0
    while index < len(entries):
        entry = entries[index]
        index += 1
        if len(entry) < 4:
            continue
        code, name = entry[:2], entry[3:]
        if "R" in code or "C" in code:
            index += 1  # a rename's or copy's source path follows
        elif name.endswith(".ipynb") and "D" not in code and "A" not in code and _output_only(top, name):
            continue
        files.append(name)
    return sorted(files)


@dataclass(frozen=True)
class Checkout:
    """The git state of the checkout holding ``path``, read once (one ``git status`` and, for a
    changed notebook, one ``git show``): a run's tags, warning and patch all come from it."""

    path: Path
    commit: str | None  # None outside git
    files: list[str] | None  # the dirty files (see :func:`dirty_files`); None outside git

    @property
    def warning(self) -> str | None:
        """The warning a run from a dirty checkout prints first (``None`` when clean)."""
        if not self.files:
            return None
        return (
            f"warning: the working tree has uncommitted changes in {', '.join(self.files)}; "
            "this run is recorded as dirty with their diff"
        )

    def tags(self) -> dict[str, str]:
        """Commit and dirtiness ('unknown' outside git); a dirty checkout's changed files are
        listed in ``rageval.git.dirty_files``."""
        if self.commit is None or self.files is None:
            return {"rageval.git.commit": "unknown", "rageval.git.dirty": "unknown"}
        return {
            "rageval.git.commit": self.commit,
            "rageval.git.dirty": str(bool(self.files)).lower(),
            **({"rageval.git.dirty_files": _files_tag(self.files)} if self.files else {}),
            "mlflow.source.git.commit": self.commit,
        }

    def diff(self) -> bytes:
        """The uncommitted changes to the dirty files (``git diff HEAD``), recorded with a run made
        from a dirty tree so that it can be reproduced. The patch is git's own (no textconv or
        external diff driver such as nbdime's or nbstripout's), so ``git apply`` takes it."""
        if not self.files:
            return b""
        done = _git(
            self.path,
            "diff",
            "HEAD",
            "--binary",
            "--no-ext-diff",
            "--no-textconv",
            "--",
            *(f":(top,literal){f}" for f in self.files),
            timeout=30,
        )
        return done.stdout if done is not None else b""


def checkout(path: Path) -> Checkout:
    """The git state of the checkout holding ``path``."""
    commit = _git(path, "rev-parse", "HEAD")
    if commit is None:
        return Checkout(path, None, None)
    return Checkout(path, commit.stdout.decode().strip(), dirty_files(path))


def dirty_warning(path: Path) -> str | None:
    """The warning ``rageval run`` prints before a run from a dirty checkout (``None`` when clean)."""
    return checkout(path).warning


def _files_tag(files: list[str]) -> str:
    shown: list[str] = []
    for position, name in enumerate(files):
        rest = len(files) - position
        if len(", ".join([*shown, name])) + len(f", … ({rest} more)") > _DIRTY_FILES_TAG_LIMIT:
            return ", ".join([*shown, f"… ({rest} more)"])
        shown.append(name)
    return ", ".join(shown)


def git_state(path: Path) -> dict[str, str]:
    """Commit and dirtiness of the git checkout holding ``path`` (see :meth:`Checkout.tags`)."""
    return checkout(path).tags()


def git_diff(path: Path) -> bytes:
    """The uncommitted changes of the checkout holding ``path`` (see :meth:`Checkout.diff`)."""
    return checkout(path).diff()


def install_notebook_filter(path: Path, python: str | None = None) -> dict[str, str]:
    """Configure the clone holding ``path`` (its local ``.git/config``) to strip notebook outputs on
    ``git add`` / ``git status`` / ``git diff`` with nbstripout, run by ``python`` (default: this
    interpreter). Idempotent; returns the settings written. The committed ``.gitattributes`` names
    the filter; a clone without these settings ignores it."""
    top = _git(path, "rev-parse", "--show-toplevel")
    if top is None:
        raise RagevalError(f"{path} is not inside a git checkout; run this from the rageval clone")
    command = f'"{python or sys.executable}" -m nbstripout --keep-id'
    settings = {
        "filter.nbstripout.clean": command,
        "filter.nbstripout.smudge": "cat",
        # A filter that fails must stop `git add` rather than let outputs through.
        "filter.nbstripout.required": "true",
        "filter.nbstripout.extrakeys": _LANGUAGE_INFO_KEYS,
        "diff.ipynb.textconv": f"{command} -t",
    }
    for key, value in settings.items():
        if _git(path, "config", "--local", key, value) is None:
            raise RagevalError(f"git config --local {key} failed in {top.stdout.decode().strip()}")
    return settings
