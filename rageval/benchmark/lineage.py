"""What a version records of where it came from, checked when it is loaded: its ``labelChunking``
and its ``predecessor``.

A version with a predecessor may drop a case, or change its query or judgments, only where a
changelog entry of this version lists it (with its reason); every new case is listed as added.
Each rule is one small function that returns the problem it finds, or None. :func:`check_lineage`
runs them in order: the predecessor itself (its version, its folder, its cases' hash, its
``benchmark.yaml``), then each case of the predecessor, each case of this version, and each
changelog entry of this version.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rageval.benchmark.chunking import config_hash
from rageval.benchmark.schema import (
    BENCHMARK_FILE,
    CASES_FILE,
    BenchmarkSpec,
    Case,
    ChunkingConfig,
    Predecessor,
    recorded_chunking,
)
from rageval.errors import BenchmarkError, Problem
from rageval.hashing import sha256_file
from rageval.io import is_file, read_jsonl, read_yaml
from rageval.validation import problems_from_validation

Lines = dict[tuple[Any, ...], int]  # a key path of benchmark.yaml -> its line


def check_label_chunking(spec: BenchmarkSpec, lines: Lines, problems: list[Problem]) -> None:
    """``labelChunking`` must be a valid chunking whose hash is the one recorded."""
    recorded = spec.labelChunking
    if recorded is None:
        return
    where = lines.get(("labelChunking",))
    try:
        config = ChunkingConfig.model_validate(recorded_chunking(recorded.config))
    except ValidationError as exc:
        problems.extend(
            problems_from_validation(
                exc,
                file=BENCHMARK_FILE,
                model=ChunkingConfig,
                lines=lines,
                line=where,
                prefix=("labelChunking", "config"),
            )
        )
        return
    if config_hash(config) != recorded.hash:
        problems.append(
            Problem(
                file=BENCHMARK_FILE,
                line=lines.get(("labelChunking", "hash"), where),
                field="labelChunking.hash",
                message=f"the recorded config hashes to {config_hash(config)}, not {recorded.hash}",
                fix="labelChunking is written by `rageval judge adjudicate`; restore it",
            )
        )


def check_lineage(
    root: Path, spec: BenchmarkSpec, lines: Lines, cases: list[tuple[int, Case]], problems: list[Problem]
) -> None:
    """Every rule of a version against its predecessor, in order; nothing to check without one."""
    predecessor = spec.predecessor
    if predecessor is None:
        return
    for rule, later_rules_need_it in PREDECESSOR_RULES:
        problem = rule(root, spec, predecessor, lines)
        if problem:
            problems.append(problem)
            if later_rules_need_it:
                return
    old, unreadable = read_predecessor_cases(root, predecessor, lines)
    if unreadable:
        problems.append(unreadable)
        return
    diff = CaseDiff(spec, predecessor, lines, old, {case.queryId: (number, case) for number, case in cases})
    problems.extend(p for query_id in diff.old for rule in OLD_CASE_RULES if (p := rule(diff, query_id)))
    problems.extend(p for query_id in diff.new if (p := added_case_is_listed(diff, query_id)))
    problems.extend(
        p
        for action, ids in diff.listed.items()
        for query_id, index in ids.items()
        if (p := entry_matches_cases(diff, action, query_id, index))
    )


# --------------------------------------------------------------------------- the predecessor


def _old_cases_path(root: Path, predecessor: Predecessor) -> Path:
    return root / predecessor.path / CASES_FILE


def _predecessor_problem(lines: Lines, message: str, fix: str) -> Problem:
    return Problem(file=BENCHMARK_FILE, line=lines.get(("predecessor",)), field="predecessor", message=message, fix=fix)


def version_is_new(root: Path, spec: BenchmarkSpec, predecessor: Predecessor, lines: Lines) -> Problem | None:
    if predecessor.version != spec.version:
        return None
    return Problem(
        file=BENCHMARK_FILE,
        line=lines.get(("version",)),
        field="version",
        message=f"version '{spec.version}' is the predecessor's version too",
        fix="give this version a new `version`",
    )


def predecessor_folder_exists(
    root: Path, spec: BenchmarkSpec, predecessor: Predecessor, lines: Lines
) -> Problem | None:
    old_cases_path = _old_cases_path(root, predecessor)
    if is_file(old_cases_path):
        return None
    return _predecessor_problem(
        lines,
        f"the predecessor's {CASES_FILE} is not at {old_cases_path}",
        "earlier versions stay beside their successors: restore the folder, or correct predecessor.path",
    )


def predecessor_cases_unchanged(
    root: Path, spec: BenchmarkSpec, predecessor: Predecessor, lines: Lines
) -> Problem | None:
    """The predecessor's cases still hash to what this version recorded when it was started."""
    old_cases_path = _old_cases_path(root, predecessor)
    if sha256_file(old_cases_path) == predecessor.cases:
        return None
    return _predecessor_problem(
        lines,
        f"the predecessor's {CASES_FILE} ({old_cases_path}) changed after this version was started from it",
        "published versions are immutable: restore the predecessor's cases",
    )


def predecessor_version_matches(
    root: Path, spec: BenchmarkSpec, predecessor: Predecessor, lines: Lines
) -> Problem | None:
    """The folder ``predecessor.path`` names holds the version ``predecessor.version`` names."""
    old_root = root / predecessor.path
    try:
        old_spec, _ = read_yaml(old_root / BENCHMARK_FILE, BenchmarkError)
    except BenchmarkError:
        old_spec = None
    found = old_spec.get("version") if isinstance(old_spec, dict) else None
    if isinstance(old_spec, dict) and found == predecessor.version:
        return None
    return _predecessor_problem(
        lines,
        f"the predecessor at {old_root} is version {found!r}, benchmark.yaml records '{predecessor.version}'",
        "correct predecessor.path or predecessor.version",
    )


PredecessorRule = Callable[[Path, BenchmarkSpec, Predecessor, Lines], Problem | None]
# In order; True where the rules after it cannot run when it fails (they read the predecessor's cases).
PREDECESSOR_RULES: tuple[tuple[PredecessorRule, bool], ...] = (
    (version_is_new, False),
    (predecessor_folder_exists, True),
    (predecessor_cases_unchanged, True),
    (predecessor_version_matches, False),
)


def read_predecessor_cases(
    root: Path, predecessor: Predecessor, lines: Lines
) -> tuple[dict[str, tuple[int, Case]], Problem | None]:
    """The predecessor's cases by query ID, with their lines (the first of a repeated ID), or the
    problem that it cannot be read."""
    old_cases_path = _old_cases_path(root, predecessor)
    rows, read_problems = read_jsonl(old_cases_path)
    old: dict[str, tuple[int, Case]] = {}
    for number, value in rows:
        try:
            case = Case.model_validate(value)
        except ValidationError:
            read_problems.append(Problem(file=str(old_cases_path), line=number, message="not a valid case"))
            continue
        old.setdefault(case.queryId, (number, case))
    if read_problems:
        return old, _predecessor_problem(
            lines, f"the predecessor's {CASES_FILE} cannot be read ({read_problems[0]})", "restore the predecessor"
        )
    return old, None


# --------------------------------------------------------------------------- the cases


@dataclass(frozen=True)
class CaseDiff:
    """A version's cases beside its predecessor's, and the cases its changelog lists."""

    spec: BenchmarkSpec
    predecessor: Predecessor
    lines: Lines
    old: dict[str, tuple[int, Case]]  # query ID -> (line in the predecessor's cases.jsonl, case)
    new: dict[str, tuple[int, Case]]  # query ID -> (line in this version's cases.jsonl, case)

    @cached_property
    def listed(self) -> dict[str, dict[str, int]]:
        """action -> query ID -> index of the changelog entry of this version that lists it."""
        listed: dict[str, dict[str, int]] = {}
        for index, entry in enumerate(self.spec.changelog):
            if entry.version == self.spec.version:
                for query_id in entry.cases:
                    listed.setdefault(entry.action, {})[query_id] = index
        return listed

    def is_listed(self, action: str, query_id: str) -> bool:
        return query_id in self.listed.get(action, {})

    def log_hint(self, action: str, query_id: str) -> str:
        """The fix of an unlogged change: the changelog entry that would log it."""
        return (
            f"restore it, or list it in benchmark.yaml's changelog: {{version: '{self.spec.version}', date: YYYY-MM-DD, "
            f"action: {action}, cases: [{query_id}], reason: ...}}"
        )


def _judgment_counter(case: Case) -> Counter[tuple[str, int, int | None, int | None]]:
    return Counter((j.documentId, j.grade, j.start, j.end) for j in case.relevant)


def dropped_case_is_retired(diff: CaseDiff, query_id: str) -> Problem | None:
    if query_id in diff.new or diff.is_listed("retired", query_id):
        return None
    old_line, _ = diff.old[query_id]
    return Problem(
        file=CASES_FILE,
        field="queryId",
        message=f"case '{query_id}' of version {diff.predecessor.version} ({CASES_FILE} line {old_line} there) "
        "was dropped without being retired",
        fix=diff.log_hint("retired", query_id),
    )


def changed_query_is_rejudged(diff: CaseDiff, query_id: str) -> Problem | None:
    if query_id not in diff.new or diff.is_listed("re-judged", query_id):
        return None
    (_, old_case), (line, case) = diff.old[query_id], diff.new[query_id]
    if case.query == old_case.query:
        return None
    return Problem(
        file=CASES_FILE,
        line=line,
        field="query",
        message=f"the query of case '{query_id}' differs from version {diff.predecessor.version}'s",
        fix=diff.log_hint("re-judged", query_id),
    )


def changed_judgments_are_logged(diff: CaseDiff, query_id: str) -> Problem | None:
    """Changed judgments need 're-judged'; 'judgments-added' covers judgments added and none changed."""
    if query_id not in diff.new or diff.is_listed("re-judged", query_id):
        return None
    (_, old_case), (line, case) = diff.old[query_id], diff.new[query_id]
    before, after = _judgment_counter(old_case), _judgment_counter(case)
    if before == after:
        return None
    added_listed = diff.is_listed("judgments-added", query_id)
    if added_listed and not (before - after):
        return None
    message = f"the judgments of case '{query_id}' differ from version {diff.predecessor.version}'s"
    if added_listed:
        message += " ('judgments-added' covers new judgments only; existing ones were changed or removed)"
    return Problem(
        file=CASES_FILE, line=line, field="relevant", message=message, fix=diff.log_hint("re-judged", query_id)
    )


# Each case of the predecessor, in order: the first rule reports a dropped case, the others a kept one.
OLD_CASE_RULES: tuple[Callable[[CaseDiff, str], Problem | None], ...] = (
    dropped_case_is_retired,
    changed_query_is_rejudged,
    changed_judgments_are_logged,
)


def added_case_is_listed(diff: CaseDiff, query_id: str) -> Problem | None:
    if query_id in diff.old or diff.is_listed("added", query_id):
        return None
    line, _ = diff.new[query_id]
    return Problem(
        file=CASES_FILE,
        line=line,
        field="queryId",
        message=f"case '{query_id}' is new in this version but the changelog does not list it as added",
        fix=diff.log_hint("added", query_id),
    )


# --------------------------------------------------------------------------- the changelog


def _retired_is_gone(diff: CaseDiff, action: str, query_id: str) -> str | None:
    if query_id in diff.new:
        return f"case '{query_id}' is listed as retired but is still in {CASES_FILE}"
    return None


def _added_is_new(diff: CaseDiff, action: str, query_id: str) -> str | None:
    if query_id in diff.old:
        return f"case '{query_id}' is listed as added but version {diff.predecessor.version} has it already"
    if query_id not in diff.new:
        return f"case '{query_id}' is listed as added but is not in {CASES_FILE}"
    return None


def _changed_is_in_both(diff: CaseDiff, action: str, query_id: str) -> str | None:
    if query_id in diff.old and query_id in diff.new:
        return None
    return f"case '{query_id}' is listed as {action} but is not in both this version and its predecessor"


# What each changelog action claims of the cases it lists; one per action of ChangelogEntry.
ENTRY_RULES: dict[str, Callable[[CaseDiff, str, str], str | None]] = {
    "retired": _retired_is_gone,
    "added": _added_is_new,
    "re-judged": _changed_is_in_both,
    "judgments-added": _changed_is_in_both,
}


def entry_matches_cases(diff: CaseDiff, action: str, query_id: str, index: int) -> Problem | None:
    """A changelog entry of this version says of a case only what the two versions' cases show."""
    wrong = ENTRY_RULES[action](diff, action, query_id)
    if wrong is None:
        return None
    return Problem(
        file=BENCHMARK_FILE,
        line=diff.lines.get(("changelog", index)),
        field=f"changelog[{index}].cases",
        message=wrong,
        fix="correct the changelog entry",
    )
