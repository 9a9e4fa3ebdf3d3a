"""Which process owns a run, and whether it still lives.

Every run rageval creates records its owner: the host, the process ID and the process's start
time (so that a PID the system has since given to another process is not mistaken for the owner).
A run left RUNNING by an owner that is gone (SIGKILL, a crash, a reboot) never ends by itself;
:meth:`rageval.tracking.store.Tracker.reap` marks it KILLED. Only the owner's host can tell whether
the owner lives: a run owned elsewhere is left alone.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

HOST_TAG = "rageval.owner.host"
PID_TAG = "rageval.owner.pid"
STARTED_TAG = "rageval.owner.started"  # the process's start time, seconds since the epoch
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
    return {HOST_TAG: socket.gethostname(), PID_TAG: str(me.pid), STARTED_TAG: repr(me.create_time())}


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
