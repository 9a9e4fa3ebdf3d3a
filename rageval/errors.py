"""rageval's one exception tree.

::

    RagevalError
    ├── InputError                 bad user input; names the file, line or field, and the fix
    │   ├── BenchmarkError         a benchmark folder or an imported collection is invalid
    │   ├── ConfigError            a run configuration (params/*.yaml or --set) is invalid
    │   ├── ParameterError         notebook parameters do not match its `parameters` cell
    │   ├── MeasureError           a measure string cannot be parsed
    │   └── PolicyError            a gate, online, shadow or query-import policy file is invalid or names what runs lack
    ├── EvaluationError            a ranking cannot be evaluated as asked (duplicates, ...)
    ├── NotebookExecutionError     a cell raised while a run's notebook executed
    ├── ComparisonError            runs cannot be compared or gated (unsealed, not comparable, wrong split)
    ├── SweepError                 a sweep ended with failed or interrupted members
    ├── ReproductionError          a run cannot be re-executed from its record
    ├── ServiceError               a retrieval service failed a query (recorded per query, not raised to the user)
    └── TrackingError              the tracking store refused or a run is not what was expected
        ├── RunSealedError         something tried to log into a sealed (immutable) run
        └── VerificationError      a sealed run's contents differ from its manifest

Input errors carry their problems as data (:class:`Problem`), so the CLI and tests can read the
file, line and field instead of parsing messages.
"""

from __future__ import annotations

from dataclasses import dataclass

# Where a problem found deep in a stage or tokenizer stands until its caller, which knows the params
# file, the line and the stage's index, places it (rageval.retrieval.pipeline.locate).
CONFIG = "the run configuration"
# How many problems an error's message lists (the rest are counted).
SHOWN_PROBLEMS = 50


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input, located as precisely as the input allows."""

    file: str
    message: str
    line: int | None = None
    field: str | None = None
    fix: str | None = None

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        text = f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"
        return f"{text} ({self.fix})" if self.fix else text


class RagevalError(Exception):
    """Base of every error rageval raises on purpose."""


class InputError(RagevalError):
    """Bad user input. ``problems`` lists every problem found, not just the first."""

    def __init__(self, problems: list[Problem] | Problem | str, *, file: str = "<input>") -> None:
        if isinstance(problems, str):
            problems = [Problem(file=file, message=problems)]
        elif isinstance(problems, Problem):
            problems = [problems]
        self.problems: list[Problem] = list(problems)
        count = len(self.problems)
        head = f"{count} problem{'s' if count != 1 else ''} found:\n" if count > 1 else ""
        shown = [str(p) for p in self.problems[:SHOWN_PROBLEMS]]
        if count > SHOWN_PROBLEMS:  # a hostile file can hold millions; all of them stay in .problems
            shown.append(f"… and {count - SHOWN_PROBLEMS} more")
        super().__init__(head + "\n".join(shown))


class BenchmarkError(InputError):
    """A benchmark folder (or a collection being imported) is invalid."""


class ConfigError(InputError):
    """A run configuration or an override is invalid."""


class ParameterError(InputError):
    """Parameters given to a notebook do not match its `parameters` cell."""


class MeasureError(InputError):
    """A measure string is not one rageval can evaluate."""


class EvaluationError(RagevalError):
    """A ranking cannot be evaluated under the chosen policy."""


class NotebookExecutionError(RagevalError):
    """A cell raised while a run's notebook executed; the run was ended as FAILED. For a cell
    error, ``cell_index``, ``ename`` and ``evalue`` are papermill's: which cell, and what it raised."""

    def __init__(
        self,
        message: str,
        *,
        run_id: str | None = None,
        cell_index: int | None = None,
        ename: str | None = None,
        evalue: str | None = None,
    ) -> None:
        self.run_id = run_id
        self.cell_index = cell_index
        self.ename = ename
        self.evalue = evalue
        super().__init__(message)


class TrackingError(RagevalError):
    """The tracking store refused an operation, or a run is not in the expected state."""


class RunSealedError(TrackingError):
    """Logging into a sealed run was refused: sealed runs are immutable."""


class VerificationError(TrackingError):
    """A sealed run no longer matches its manifest. ``changes`` names each difference."""

    def __init__(self, run_id: str, changes: list[str]) -> None:
        self.run_id = run_id
        self.changes = changes
        super().__init__(f"run {run_id} was altered after sealing:\n" + "\n".join(f"- {c}" for c in changes))


class ComparisonError(RagevalError):
    """Runs cannot be compared or gated as asked: not sealed, not comparable (``differences``
    names each mismatch), or not on the split the command requires."""

    def __init__(self, message: str, *, differences: list[str] | None = None) -> None:
        self.differences = list(differences or [])
        super().__init__(message + "".join(f"\n- {d}" for d in self.differences))


class PolicyError(InputError):
    """A release-gate policy file (params/gates/*.yaml) is invalid or names what the runs lack."""


class SweepError(RagevalError):
    """A sweep ended with failed or interrupted members; finished members stay sealed."""

    def __init__(self, message: str, *, parent_run_id: str, failed: list[str], interrupted: bool = False) -> None:
        self.parent_run_id = parent_run_id
        self.failed = list(failed)
        self.interrupted = interrupted
        super().__init__(message)


class ServiceError(RagevalError):
    """A service failed one query (after the retries it was allowed). ``reason`` is one of
    ``timeout``, ``connect``, ``transport``, ``status``, ``malformed``, ``unknown-ids``, ``error``."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class ReproductionError(RagevalError):
    """A run cannot be re-executed from its record (dirty tree, missing commit, changed benchmark)."""

    def __init__(self, message: str, *, fix: str | None = None) -> None:
        self.fix = fix
        super().__init__(message + (f" (fix: {fix})" if fix else ""))
