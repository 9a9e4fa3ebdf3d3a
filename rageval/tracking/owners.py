"""Which process owns a run, and whether it still lives.

Every run rageval creates records its owner: the host, the process ID and the process's start
time (so that a PID the system has since given to another process is not mistaken for the owner),
the kernel's boot ID and the process's PID namespace. A run left RUNNING by an owner that is gone
(SIGKILL, a crash, a reboot) never ends by itself; :meth:`rageval.tracking.store.Tracker.reap`
marks it KILLED — only when the owner is provably gone:

- same host, boot and PID namespace: the PID and its start time tell (exited, a zombie, or the
  PID reused by a later process);
- same host name, another boot ID: the machine has rebooted since, so every process of the old
  boot is gone (dead) — whatever the namespace;
- same host name and boot, another PID namespace (a container sharing the host name): its PIDs
  mean nothing here, so the run is left alone (elsewhere);
- another host: left alone (elsewhere); no owner recorded: left alone (unknown).

Clocks decide nothing here but the start-time check, whose tolerance absorbs a clock adjustment.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

OWNER_TAG = "rageval.owner"  # one JSON tag: {"host", "pid", "started", "boot", "pidns"}
# The keys runs recorded before OWNER_TAG hold, one tag each (still read: a key present overrides the JSON's).
HOST_TAG = "rageval.owner.host"
PID_TAG = "rageval.owner.pid"
STARTED_TAG = "rageval.owner.started"  # the process's start time, seconds since the epoch
BOOT_TAG = "rageval.owner.boot"  # /proc/sys/kernel/random/boot_id: new at every boot
PIDNS_TAG = "rageval.owner.pidns"  # readlink /proc/self/ns/pid, e.g. pid:[4026531836]
FIELDS = {"host": HOST_TAG, "pid": PID_TAG, "started": STARTED_TAG, "boot": BOOT_TAG, "pidns": PIDNS_TAG}
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
PID_NAMESPACE = Path("/proc/self/ns/pid")
# Start times read in two processes may differ by a wall-clock adjustment in between; a reused PID
# belongs to a process started long after its first owner.
START_TOLERANCE_S = 30.0

OwnerState = Literal["alive", "dead", "elsewhere", "unknown"]


@dataclass(frozen=True)
class Owner:
    state: OwnerState
    reason: str


def owner_tags() -> dict[str, str]:
    """The tag naming this process as a run's owner (:data:`OWNER_TAG`: one column, not five)."""
    import psutil

    me = psutil.Process()
    fields = {"host": socket.gethostname(), "pid": str(me.pid), "started": repr(me.create_time())}
    boot, namespace = boot_id(), pid_namespace()
    if boot:
        fields["boot"] = boot
    if namespace:
        fields["pidns"] = namespace
    return {OWNER_TAG: json.dumps(fields, sort_keys=True)}


def owner_fields(tags: Mapping[str, str]) -> dict[str, str]:
    """The owner a run's tags name, by field (host, pid, started, boot, pidns): the :data:`OWNER_TAG`
    JSON, and the one-key-each tags of runs recorded before it (a key present wins)."""
    try:
        recorded = json.loads(tags.get(OWNER_TAG) or "{}")
    except ValueError:
        recorded = {}
    fields = {k: str(v) for k, v in recorded.items() if k in FIELDS} if isinstance(recorded, dict) else {}
    return fields | {field: tags[key] for field, key in FIELDS.items() if tags.get(key)}


def boot_id() -> str:
    """This boot's ID ("" where the system has none: not Linux)."""
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return ""


def pid_namespace() -> str:
    """This process's PID namespace ("" where the system shows none)."""
    try:
        return os.readlink(PID_NAMESPACE)
    except OSError:
        return ""


def owner_of(tags: Mapping[str, str]) -> Owner:
    """Whether the process a run's tags name as its owner still runs (judged on its host only)."""
    import psutil

    fields = owner_fields(tags)
    host, pid_text, started_text = fields.get("host"), fields.get("pid"), fields.get("started")
    if not host or not pid_text:
        return Owner("unknown", "no owner recorded (made before rageval recorded owners, or by another tool)")
    try:
        pid = int(pid_text)
        started = float(started_text) if started_text else None
    except ValueError:
        return Owner("unknown", f"owner tags unreadable ({PID_TAG}={pid_text!r}, {STARTED_TAG}={started_text!r})")
    who = f"process {pid} on {host}"
    if host != socket.gethostname():
        return Owner("elsewhere", f"owned by {who}; only that host can tell whether it still runs")
    boot, namespace = fields.get("boot"), fields.get("pidns")
    if boot and boot_id() and boot != boot_id():
        return Owner("dead", f"owner {who} ran before the host rebooted (boot {boot[:8]}…, now {boot_id()[:8]}…)")
    if namespace and pid_namespace() and namespace != pid_namespace():
        return Owner(
            "elsewhere",
            f"owned by {who} in PID namespace {namespace} (this is {pid_namespace()}): its PIDs mean nothing here",
        )
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return Owner("dead", f"owner {who} has exited")
        if started is not None and abs(process.create_time() - started) > START_TOLERANCE_S:
            return Owner("dead", f"owner {who} has exited (PID {pid} now belongs to another process)")
    except psutil.NoSuchProcess:
        return Owner("dead", f"owner {who} has exited")
    except psutil.AccessDenied:
        return Owner("alive", f"{who} exists (not ours to inspect)")
    return Owner("alive", f"owner {who} is running")
