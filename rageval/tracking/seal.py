"""What a seal covers and how a sealed run is checked against it. Pure: no mlflow here;
:class:`~rageval.tracking.store.Tracker` reads the run and writes the seal.

A seal is ``manifest.json`` plus the ``rageval.seal`` tag, the manifest's sha256, written last. The
manifest (``format`` 2, the only one: rageval 0.1.0 reads no other) records:

========================  ==========================================================================
field                     what
========================  ==========================================================================
``format``                ``2``
``run_id``                the run's ID
``artifacts``             path → sha256 of every artifact but itself
``params``                every param
``metrics``               every metric's latest value
``metric_history``        every metric's full history: ``[step, timestamp, value]``
``tags``                  every tag but the seal tags
``inputs``                ``name:digest`` of each dataset input
``run``                   name, experiment, status, lifecycle stage, start and end time, as sealed
``seal``                  keyed or not, the key's ID
``sealed_at``             when
========================  ==========================================================================

A **keyed** seal adds ``rageval.seal.hmac``: the HMAC-SHA256 of the manifest's bytes under a key
from ``RAGEVAL_SEAL_KEY`` (the key itself) or ``RAGEVAL_SEAL_KEY_FILE`` (a file holding it). An
unkeyed seal proves that the run still matches its manifest; it cannot prove that nobody rewrote
the manifest and its seal tag together. A keyed one can, for whoever holds the key. See
docs/records.md.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rageval.errors import TrackingError
from rageval.keys import KEY_ENV, KEY_FILE_ENV, SealKey
from rageval.tracking.records import MANIFEST, SEAL_TAG

MANIFEST_FORMAT = 2  # the one layout this rageval writes and reads
HMAC_TAG = "rageval.seal.hmac"
SEALED_STATUS = "FINISHED"
ACTIVE = "active"
# The run's own fields a manifest records, and how a change to each is named.
RUN_FIELDS = {
    "status": "status",
    "lifecycle_stage": "lifecycle stage",
    "name": "run name",
    "experiment_id": "experiment",
    "start_time": "start time",
    "end_time": "end time",
}
# Why a tag matters, said with its change.
TAG_MEANING = {
    "mlflow.parentRunId": "it decides sweep membership (compare --sweep)",
    "mlflow.runName": "the run's name",
}

UNKEYED_NOTE = (
    "unkeyed seal: it proves the run still matches its manifest, not that nobody rewrote "
    f"{MANIFEST} and the {SEAL_TAG} tag together (seal with {KEY_ENV} or {KEY_FILE_ENV} set to detect that)"
)

# --------------------------------------------------------------------------- the run as it is now


@dataclass(frozen=True)
class RunState:
    """Everything a seal covers, read from the store now (by the Tracker)."""

    run_id: str
    name: str
    experiment_id: str
    status: str
    lifecycle_stage: str
    start_time: int
    end_time: int | None
    artifacts: dict[str, str]  # path → sha256
    params: dict[str, str]
    metrics: dict[str, float]  # latest values
    history: dict[str, list[list[Any]]]  # key → sorted [step, timestamp, value]
    tags: dict[str, str]
    inputs: list[str]


def manifest_body(state: RunState) -> dict[str, Any]:
    """The manifest of ``state`` (what verify recomputes; the seal adds ``seal`` and ``sealed_at``)."""
    return {
        "format": MANIFEST_FORMAT,
        "run_id": state.run_id,
        "artifacts": {path: digest for path, digest in sorted(state.artifacts.items()) if path != MANIFEST},
        "params": dict(sorted(state.params.items())),
        "metrics": dict(sorted(state.metrics.items())),
        "metric_history": {key: state.history[key] for key in sorted(state.history)},
        "tags": {k: v for k, v in sorted(state.tags.items()) if k not in (SEAL_TAG, HMAC_TAG)},
        "inputs": sorted(state.inputs),
        "run": {name: getattr(state, name) for name in RUN_FIELDS},
    }


def sealing_manifest(state: RunState, *, end_time: int, sealed_at: str, key: SealKey | None) -> dict[str, Any]:
    """The manifest a seal writes: ``state`` (a running run) as it will be once ended FINISHED at
    ``end_time``."""
    if state.lifecycle_stage != ACTIVE:
        raise TrackingError(f"run {state.run_id} is {state.lifecycle_stage}: a deleted run is not sealed")
    manifest = manifest_body(state)
    manifest["run"].update(status=SEALED_STATUS, end_time=end_time)
    manifest["seal"] = (
        {"keyed": False} if key is None else {"keyed": True, "algorithm": "hmac-sha256", "key_id": key.key_id}
    )
    manifest["sealed_at"] = sealed_at
    return manifest


def encode(manifest: Mapping[str, Any]) -> bytes:
    return json.dumps(manifest, indent=2, sort_keys=True).encode()


# --------------------------------------------------------------------------- keys


# --------------------------------------------------------------------------- checking


@dataclass(frozen=True)
class Verification:
    """What checking a sealed run found. ``changes``: each reason it is not intact (empty: intact).
    ``notes``: what the check could not prove."""

    run_id: str
    format: int | None
    changes: list[str]
    notes: list[str]
    keyed: bool  # the run carries a keyed seal
    key_checked: bool  # ... and it was checked with the key

    @property
    def intact(self) -> bool:
        return not self.changes


def verification(
    state: RunState, data: bytes | None, seal_tag: str, hmac_tag: str | None, key: SealKey | None
) -> Verification:
    """Check ``state`` against the manifest bytes ``data`` (``None``: no manifest.json), the
    ``rageval.seal`` tag and, for a keyed seal, ``rageval.seal.hmac`` under ``key``."""
    run_id = state.run_id
    if data is None:
        return Verification(run_id, None, [f"{MANIFEST} is missing"], [], hmac_tag is not None, False)
    changes: list[str] = []
    if hashlib.sha256(data).hexdigest() != seal_tag:
        changes.append(f"{MANIFEST} changed: its sha256 no longer matches the {SEAL_TAG} tag")
    try:
        sealed = json.loads(data)
        if not isinstance(sealed, dict):
            raise ValueError("not an object")
    except ValueError:
        return Verification(
            run_id, None, [*changes, f"{MANIFEST} is not a JSON object"], [], hmac_tag is not None, False
        )
    version = sealed.get("format")
    if version != MANIFEST_FORMAT:
        changes.append(_format_change(version))
        return Verification(run_id, None, changes, [], hmac_tag is not None, False)
    try:
        changes += manifest_changes(sealed, state)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        changes.append(f"{MANIFEST} is malformed ({type(exc).__name__}: {exc}): it was not written by rageval")
        return Verification(run_id, version, changes, [], hmac_tag is not None, False)
    notes: list[str] = []
    declared = sealed.get("seal", {}).get("keyed", False) if isinstance(sealed.get("seal"), dict) else False
    keyed = bool(declared or hmac_tag)
    sealed_key = sealed.get("seal", {}).get("key_id") if declared else None
    if key is None:
        if keyed:
            notes.append(
                f"keyed seal (key id {sealed_key or 'unrecorded'}) not checked: no key is configured "
                f"({KEY_ENV} or {KEY_FILE_ENV}); without it this check proves only what an unkeyed seal does"
            )
        else:
            notes.append(UNKEYED_NOTE)
        return Verification(run_id, version, changes, notes, keyed, False)
    changes += _keyed_seal_changes(data, hmac_tag, key, sealed_key, declared)
    return Verification(run_id, version, changes, notes, keyed, hmac_tag is not None)


def _format_change(version: Any) -> str:
    """Why a manifest of format ``version`` (not this rageval's) cannot be checked."""
    newer = isinstance(version, int) and version > MANIFEST_FORMAT
    said = "no format (format 1, which rageval no longer reads)" if version is None else f"format {version!r}"
    upgrade = ": upgrade rageval" if newer else ""
    return f"{MANIFEST} has {said}; this rageval reads format {MANIFEST_FORMAT} only{upgrade}"


def _keyed_seal_changes(data: bytes, hmac_tag: str | None, key: SealKey, sealed_key: Any, declared: bool) -> list[str]:
    """What checking the keyed seal under the configured ``key`` found: no keyed seal, one that does
    not match, or one the manifest does not declare."""
    if hmac_tag is None:
        return [
            f"no keyed seal: a seal key is configured (key id {key.key_id}) but the run has no {HMAC_TAG} tag; "
            "it was sealed without a key, or its keyed seal was removed — a key holder cannot tell which"
        ]
    if not hmac.compare_digest(hmac_tag, key.sign(data)):
        other = (
            f" (sealed with key id {sealed_key}, the configured key is {key.key_id})"
            if sealed_key != key.key_id
            else ""
        )
        return [f"keyed seal does not match: {MANIFEST} and its seal tags were rewritten{other}"]
    if not declared:
        return [f"{MANIFEST} does not declare the keyed seal its {HMAC_TAG} tag carries"]
    return []


def history_keys(data: bytes | None) -> list[str]:
    """The metrics whose history a manifest records (the run may no longer show them)."""
    try:
        history = json.loads(data or b"{}").get("metric_history", {})
    except (ValueError, AttributeError):
        return []
    return [key for key in history if isinstance(key, str)] if isinstance(history, dict) else []


def manifest_changes(sealed: Mapping[str, Any], state: RunState) -> list[str]:
    """Every difference between a sealed manifest and the run as it is now."""
    now = manifest_body(state)
    changes = []
    if sealed.get("run_id") != state.run_id:
        changes.append(f"{MANIFEST} belongs to run {sealed.get('run_id')!r}, not {state.run_id!r}: it was copied here")
    changes += _run_changes(sealed.get("run", {}), now["run"])
    changes += _diff("artifact", sealed.get("artifacts", {}), now["artifacts"], "content changed")
    for kind in ("params", "metrics", "tags"):
        changes += _diff(kind.rstrip("s"), sealed.get(kind, {}), now[kind], "value changed")
    changes += _history_changes(sealed.get("metric_history", {}), now["metric_history"])
    if sealed.get("inputs", []) != now["inputs"]:
        changes.append(f"inputs changed: {sealed.get('inputs')} → {now['inputs']}")
    return changes


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON says them (NaN equals NaN; a tuple equals a list)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _run_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    out = []
    for name, label in RUN_FIELDS.items():
        if name in before and not _same(before[name], after.get(name)):
            why = " (the run was deleted)" if name == "lifecycle_stage" and after.get(name) == "deleted" else ""
            out.append(f"{label} changed: {before[name]!r} → {after.get(name)!r}{why}")
    return out


def _diff(kind: str, before: Mapping[str, Any], after: Mapping[str, Any], changed: str) -> list[str]:
    out = []
    for key in sorted(set(before) | set(after)):
        meaning = f"; {TAG_MEANING[key]}" if kind == "tag" and key in TAG_MEANING else ""
        if key not in after:
            out.append(f"{kind} {key!r} was removed{meaning}")
        elif key not in before:
            out.append(f"{kind} {key!r} was added after sealing{meaning}")
        elif not _same(before[key], after[key]):
            out.append(f"{kind} {key!r}: {changed} ({before[key]!r} → {after[key]!r}){meaning}")
    return out


def _history_changes(before: Mapping[str, Sequence[Any]], after: Mapping[str, Sequence[Any]]) -> list[str]:
    """Per metric sealed with a history: the entries added and removed since (a new metric is
    named by the metrics diff already)."""
    out = []
    for key in sorted(before):
        sealed = Counter(json.dumps(entry) for entry in before[key])
        now = Counter(json.dumps(entry) for entry in after.get(key, []))
        if sealed == now:
            continue
        parts = []
        for verb, entries in (("added", now - sealed), ("removed", sealed - now)):
            if entries:
                shown = [_entry(json.loads(e)) for e in sorted(entries.elements())]
                parts.append(
                    f"{verb} " + ", ".join(shown[:3]) + (f" and {len(shown) - 3} more" if len(shown) > 3 else "")
                )
        out.append(f"metric {key!r}: history changed: " + "; ".join(parts))
    return out


def _entry(entry: Sequence[Any]) -> str:
    step, timestamp, value = entry
    return f"{value!r} at step {step} (timestamp {timestamp})"
