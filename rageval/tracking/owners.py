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

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

HOST_TAG = "rageval.owner.host"
PID_TAG = "rageval.owner.pid"
STARTED_TAG = "rageval.owner.started"  # the process's start time, seconds since the epoch
BOOT_TAG = "rageval.owner.boot"  # /proc/sys/kernel/random/boot_id: new at every boot
PIDNS_TAG = "rageval.owner.pidns"  # readlink /proc/self/ns/pid, e.g. pid:[4026531836]
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
    """The tags naming this process as a run's owner."""
    import psutil

    me = psutil.Process()
    tags = {HOST_TAG: socket.gethostname(), PID_TAG: str(me.pid), STARTED_TAG: repr(me.create_time())}
    boot, namespace = boot_id(), pid_namespace()
    if boot:
        tags[BOOT_TAG] = boot
    if namespace:
        tags[PIDNS_TAG] = namespace
    return tags


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

    host, pid_text, started_text = tags.get(HOST_TAG), tags.get(PID_TAG), tags.get(STARTED_TAG)
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
    boot, namespace = tags.get(BOOT_TAG), tags.get(PIDNS_TAG)
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
