"""What every record says about where it came from: rageval's version and the git state of the
checkout (commit, dirtiness, the dirty files, the uncommitted diff).

A notebook whose only changes are outputs, execution counts, cell IDs or metadata (JupyterLab's
Run all + Save) does not make a run dirty: papermill executes the cells' sources, so only those
(and the cells' tags, which mark the parameters cell) count. That holds whether or not this
clone has the nbstripout filter installed (:func:`install_notebook_filter`), which keeps such
changes out of ``git status`` in the first place.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

from rageval.config.schema import RunConfig
from rageval.errors import RagevalError
from rageval.hashing import sha256_bytes
from rageval.paths import source_checkout
from rageval.retrieval.schema import PluginConfig, RunFileConfig

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
    status = _status(top, "--untracked-files=no")
    return None if status is None else sorted(name for _, name in status)


def _status(top: Path, *args: str) -> list[tuple[str, str]] | None:
    """``git status`` of the checkout at ``top`` (``args``: options, then pathspecs) as (code, path)
    pairs, leaving out notebooks changed only in outputs, counts or metadata; None if git failed."""
    # A notebook whose stat data git cannot trust is cleaned through nbstripout (a Python process)
    # before it compares: seconds each on a loaded machine, so the status gets more than 10.
    status = _git(top, "status", "--porcelain=v1", "-z", *args, timeout=60)
    if status is None:
        return None
    entries = status.stdout.decode("utf-8", "surrogateescape").split("\0")
    files: list[tuple[str, str]] = []
    index = 0
    while index < len(entries):
        entry = entries[index]
        index += 1
        if len(entry) < 4:
            continue
        code, name = entry[:2], entry[3:]
        if "R" in code or "C" in code:
            index += 1  # a rename's or copy's source path follows
        elif name.endswith(".ipynb") and not {"D", "A", "?"} & set(code) and _output_only(top, name):
            continue
        files.append((code, name))
    return files


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
            timeout=60,  # the clean filter runs per changed notebook: seconds each under load
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


# --- A run's origin: rageval's own revision, and the team repository holding the params file ------


def _top(path: Path) -> Path | None:
    done = _git(path, "rev-parse", "--show-toplevel")
    return Path(done.stdout.decode().strip()).resolve() if done is not None else None


def run_inputs(config_file: Path, config: RunConfig) -> list[Path]:
    """The files a run reads besides rageval: the params file, the benchmark folder, run files,
    and the modules of plugin stages (found without importing them where they are top-level)."""
    paths = [config_file.resolve(), Path(config.benchmark)]
    for stage in config.retrieval.stages:
        if isinstance(stage, RunFileConfig):
            paths.append(Path(stage.path))
        elif isinstance(stage, PluginConfig):
            module = stage.entrypoint.partition(":")[0]
            try:
                spec = importlib.util.find_spec(module)
            except (ImportError, ValueError):
                continue  # the run's preflight names an unimportable plugin
            if spec is not None and spec.origin and spec.origin not in ("built-in", "frozen"):
                origin = Path(spec.origin)
                paths.append(origin.parent if origin.name == "__init__.py" else origin)
    return paths


def changed_inputs(top: Path, paths: Sequence[Path]) -> list[tuple[str, str]] | None:
    """The (code, path) of those ``paths`` (files or folders) inside the checkout at ``top`` that are
    modified or untracked (code ``??``); ignored files are not listed. None if git failed."""
    inside = []
    for path in paths:
        try:
            inside.append(path.resolve().relative_to(top).as_posix())
        except ValueError:
            continue  # outside the repository: its hashes are the record (the benchmark's are)
    if not inside:
        return []
    return _status(top, "--untracked-files=all", "--", *(f":(top,literal){p}" for p in inside))


@dataclass(frozen=True)
class Origin:
    """Where a run came from, read once: the repository holding its params file (``project``, the
    whole tracked tree as :class:`Checkout` reads it), which of the run's own files in it are
    modified or untracked (``inputs``: params, benchmark, plugins), and rageval's own checkout
    (``source``; None for an installed rageval). Tags, warning and patch all come from it."""

    project: Checkout
    top: Path | None  # the project's root; None outside git
    inputs: list[tuple[str, str]] | None  # None outside git
    source: Checkout | None

    @property
    def untracked(self) -> list[str]:
        return sorted(name for code, name in self.inputs or [] if code == "??")

    @property
    def files(self) -> list[str]:
        """The project's dirty files: tracked changes anywhere, and the run's untracked inputs."""
        return sorted({*(self.project.files or []), *self.untracked})

    @property
    def same_repository(self) -> bool:
        """rageval runs from the very checkout that holds the params file."""
        return self.source is not None and self.top is not None and _top(self.source.path) == self.top

    @property
    def warning(self) -> str | None:
        """The warning a run prints first when the project or rageval's checkout is dirty."""
        parts = []
        if self.files:
            parts.append(f"the working tree has uncommitted changes in {', '.join(self.files)}")
        source = self.source
        if source is not None and source.files and not self.same_repository:
            parts.append(f"rageval's checkout {source.path} has uncommitted changes in {', '.join(source.files)}")
        return f"warning: {'; '.join(parts)}; this run is recorded as dirty with their diff" if parts else None

    def tags(self) -> dict[str, str]:
        """``rageval.git.*`` (the project, its untracked inputs counted dirty), ``rageval.project.*``
        (the run's own files only) and ``rageval.source.*`` (rageval's checkout, or "installed")."""
        if self.project.commit is None or self.inputs is None or self.top is None:
            tags = {
                **self.project.tags(),
                "rageval.project.root": "unknown",
                "rageval.project.dirty": "unknown",
            }
        else:
            changed = sorted(name for _, name in self.inputs)
            tags = {
                **Checkout(self.project.path, self.project.commit, self.files).tags(),
                # the project's commit is rageval.git.commit (the same checkout): one column, not two
                "rageval.project.root": str(self.top),
                "rageval.project.dirty": str(bool(changed)).lower(),
                **({"rageval.project.dirty_files": _files_tag(changed)} if changed else {}),
            }
        return {**tags, **source_tags(self.source)}

    def diff(self) -> bytes:
        """The project's uncommitted changes (:meth:`Checkout.diff`) and its untracked inputs as
        new-file patches, so that ``git apply`` on the commit restores what the run read."""
        tracked = Checkout(self.project.path, self.project.commit, self.project.files).diff()
        if self.top is None:
            return tracked
        return tracked + b"".join(_new_file_patch(self.top, name) for name in self.untracked)


def _new_file_patch(top: Path, name: str) -> bytes:
    try:
        done = subprocess.run(
            ["git", "diff", "--no-index", "--binary", "--no-ext-diff", "--no-textconv", "--", "/dev/null", name],
            cwd=top,
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return b""
    return done.stdout if done.returncode in (0, 1) else b""  # 1: there are differences


def source_tags(source: Checkout | None) -> dict[str, str]:
    """rageval's own revision: the commit and dirtiness of its checkout (with the sha256 of its
    uncommitted diff when dirty), or "installed"."""
    if source is None or source.commit is None or source.files is None:
        return {"rageval.source.commit": "installed", "rageval.source.dirty": "installed"}
    dirty = {
        "rageval.source.dirty_files": _files_tag(source.files),
        "rageval.source.diff_sha256": sha256_bytes(source.diff()),
    }
    return {
        "rageval.source.commit": source.commit,
        "rageval.source.dirty": str(bool(source.files)).lower(),
        **(dirty if source.files else {}),
    }


def rageval_source() -> Checkout | None:
    """The git state of rageval's own code in the checkout it runs from, its dirty files those of
    the package (an edited doc or test is no other rageval); None for an installed rageval."""
    folder = source_checkout()
    top = _top(folder) if folder is not None else None
    if folder is None or top is None:
        return None
    state = checkout(folder)
    package = (folder / "rageval").resolve().relative_to(top).as_posix() + "/"
    files = None if state.files is None else [f for f in state.files if f.startswith(package)]
    return Checkout(state.path, state.commit, files)


def origin(config_file: Path, config: RunConfig) -> Origin:
    """The origin of a run of ``config`` read from ``config_file`` (see :class:`Origin`)."""
    folder = config_file.resolve().parent
    project = checkout(folder)
    top = _top(folder) if project.commit is not None else None
    inputs = changed_inputs(top, run_inputs(config_file, config)) if top is not None else None
    return Origin(project, top, inputs, rageval_source())
