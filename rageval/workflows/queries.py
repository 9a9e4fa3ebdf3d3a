"""``rageval queries import``: a search log → a redacted query set in a new folder, and the import's
record as a sealed run (``rageval.kind=query-import``).

What leaves the process: the redacted query set (``queries.jsonl``, draft ``cases.jsonl`` when a
corpus version is given) and ``import.json`` — counts, rules, redactions by type, dropped counts.
The run holds the same record and the policy; never a query, raw or redacted, nor an ID or the salt.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rageval.benchmark.querylog import (
    QueryPolicy,
    build_query_set,
    case_lines,
    load_query_policy,
    log_name,
    query_lines,
    read_log,
)
from rageval.errors import InputError, PolicyError, Problem
from rageval.hashing import sha256_bytes, sha256_file
from rageval.io import file_problem
from rageval.paths import project_root
from rageval.tracking.store import Tracker
from rageval.workflows.provenance import RAGEVAL_VERSION, git_state

EXPERIMENT = "query-imports"


@dataclass(frozen=True)
class ImportOutcome:
    run_id: str
    experiment: str
    sealed: str
    files: dict[str, Path]
    record: dict[str, Any]


def execute_query_import(
    log: str | Path,
    policy_file: str | Path,
    out: str | Path,
    *,
    tracker: Tracker,
    corpus_version: str | None = None,
    split: str = "dev",
    experiment: str = EXPERIMENT,
) -> ImportOutcome:
    """Import ``log`` under ``policy_file`` into the new folder ``out`` and record the import.
    The policy is checked (its authorization first) before the log is opened."""
    policy_file, log, out = Path(policy_file), Path(log), Path(out)
    policy = load_query_policy(policy_file)
    salt = _salt(policy, policy_file)
    _check_paths(log, out)
    rows, dropped_fields = read_log(log, policy.fields)
    query_set = build_query_set(rows, policy, salt)
    lines = query_lines(query_set.entries, policy)

    out.mkdir(parents=True, exist_ok=True)
    files = {"queries": out / "queries.jsonl"}
    _write_jsonl(files["queries"], lines)
    if corpus_version is not None:
        files["cases"] = out / "cases.jsonl"
        _write_jsonl(files["cases"], case_lines(lines, corpus_version, split))
    record = {
        "policy": {"name": policy.name, "file": str(policy_file), "sha256": sha256_file(policy_file)},
        "authorization": policy.authorization,
        "source": policy.source,
        "access": list(policy.access),
        "log": {"file": log_name(log), "sha256": sha256_file(log)},
        "redaction": {
            "rules": policy.redaction.rules,
            "version": policy.redaction.version,
            "detectors": list(policy.redaction.detectors),
        },
        "identifiers": policy.identifiers.mode,
        "fields_dropped": dropped_fields,
        "fields_kept": list(policy.fields.keep),
        "retention": policy.retention.model_dump(mode="json", exclude_none=True),
        **query_set.counts,
        "outputs": {name: {"file": path.name, "sha256": sha256_file(path)} for name, path in files.items()},
        "next": "add the cases to a new benchmark version's dev split, run the pipelines, then `rageval judge pool`",
    }
    files["record"] = out / "import.json"
    record_bytes = json.dumps(record, indent=2).encode()
    files["record"].write_bytes(record_bytes)
    run_id, sealed = _record(tracker, experiment, policy, policy_file, record, record_bytes)
    return ImportOutcome(run_id, experiment, sealed, files, record)


def _check_paths(log: Path, out: Path) -> None:
    """Refuse an ``out`` that is not a new (or empty) folder, and a ``log`` that is not a readable file."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(
            Problem(
                file=str(out),
                field="--out",
                message="exists and is not an empty folder",
                fix="give a new folder: an import never overwrites another",
            )
        )
    missing = file_problem(log)
    if missing is not None:
        raise InputError(Problem(file=str(log), field="LOG", message=missing.message, fix="give a .jsonl or .csv log"))


def _salt(policy: QueryPolicy, policy_file: Path) -> str | None:
    if policy.identifiers.mode != "salted-hash":
        return None
    salt = os.environ.get(policy.identifiers.salt_env, "")
    if len(salt) < 16:
        raise PolicyError(
            Problem(
                file=str(policy_file),
                field="identifiers.salt_env",
                message=f"${policy.identifiers.salt_env} is unset or shorter than 16 characters: "
                "user and session IDs cannot be salted-hashed",
                fix=f"export {policy.identifiers.salt_env}=$(openssl rand -hex 32) and keep it secret "
                "(the same salt links IDs across imports), or set `identifiers.mode: drop`",
            )
        )
    return salt


def _write_jsonl(path: Path, lines: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")


def _record(
    tracker: Tracker,
    experiment: str,
    policy: QueryPolicy,
    policy_file: Path,
    record: dict[str, Any],
    record_bytes: bytes,
) -> tuple[str, str]:
    counts = {
        "rows_read": record["rows_read"],
        "rows_dropped_residual": record["rows_dropped_residual"],
        "queries": record["queries"],
        "issued": record["issued"],
        "clusters": record["clusters"],
        "near_duplicate_queries": record["near_duplicate_queries"],
        **{f"redactions/{name}": n for name, n in record["redactions_by_type"].items()},
        **{f"queries_redacted/{name}": n for name, n in record["queries_redacted_by_type"].items()},
        **{f"dropped/{reason}": n for reason, n in record["dropped_by_reason"].items()},
        "queries_expired": record["queries_expired"],
        **{f"band/{band}": n for band, n in record["bands"].items()},
    }
    run_id = tracker.create_run(
        experiment,
        f"query import {policy.name}",
        params={
            "policy": policy.name,
            "authorization": policy.authorization,
            "source": policy.source,
            "redaction.rules": policy.redaction.rules,
            "redaction.version": policy.redaction.version,
            "redaction.detectors": ",".join(policy.redaction.detectors),
            "identifiers": policy.identifiers.mode,
            "log.sha256": record["log"]["sha256"],
        },
        tags={
            **git_state(project_root()),
            "rageval.version": RAGEVAL_VERSION,
            "rageval.kind": "query-import",
            "rageval.query_import.policy": policy.name,
            "rageval.query_import.authorization": policy.authorization,
            "rageval.query_import.record": sha256_bytes(record_bytes),
        },
        files={"import.json": record_bytes, "policy.yaml": policy_file.read_bytes()},
    )
    try:
        tracker.log_metrics(run_id, counts)
        digest = tracker.seal(run_id)
    except Exception as exc:
        tracker.fail(run_id, f"sealing failed: {type(exc).__name__}: {exc}")
        raise
    return run_id, digest
