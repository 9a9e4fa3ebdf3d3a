"""A sweep's places to run a notebook: ``workers`` of them, granted to members in their order, so
the next member does its checks while one runs its notebook (:mod:`rageval.workflows.sweep`)."""

from __future__ import annotations

import threading


class NotebookSlots:
    """A sweep's ``workers`` places to run a notebook, granted in the members' order (ticket 0, 1,
    …): a member holds one from creating its run until its notebook has ended, so the next member
    does its checks meanwhile and waits, and a member's logging, HTML render and seal overlap the
    next member's notebook. No run is created while waiting."""

    def __init__(self, workers: int) -> None:
        self._free, self._next = workers, 0
        self._skipped: set[int] = set()
        self._cond = threading.Condition()

    def acquire(self, ticket: int, cancel: threading.Event | None) -> bool:
        """Wait for ``ticket``'s turn and a free place; False if ``cancel`` is set meanwhile."""
        with self._cond:
            while not (self._free > 0 and self._next == ticket):
                if cancel is not None and cancel.is_set():
                    return False
                self._cond.wait(0.2)
            self._free -= 1
            self._advance()
            return True

    def skip(self, ticket: int) -> None:
        """``ticket`` will never acquire (its member failed before): the next ones go on."""
        with self._cond:
            self._skipped.add(ticket)
            if self._next == ticket:
                self._next -= 1
                self._advance()
            self._cond.notify_all()

    def release(self) -> None:
        with self._cond:
            self._free += 1
            self._cond.notify_all()

    def _advance(self) -> None:
        self._next += 1
        while self._next in self._skipped:
            self._next += 1


class NotebookSlot:
    """One member's ticket for :class:`NotebookSlots`; without them (``rageval run``) it does nothing.
    :meth:`release` is idempotent: released (or skipped) once, whichever way the run ends."""

    def __init__(self, slots: NotebookSlots | None = None, ticket: int = 0) -> None:
        self._slots, self._ticket = slots, ticket
        self._state = "waiting"  # then "held", then "done"
        self._lock = threading.Lock()

    def acquire(self, cancel: threading.Event | None = None) -> bool:
        if self._slots is None:
            return True
        granted = self._slots.acquire(self._ticket, cancel)
        with self._lock:
            self._state = "held" if granted else self._state
        return granted

    def release(self) -> None:
        if self._slots is None:
            return
        with self._lock:
            state, self._state = self._state, "done"
        if state == "held":
            self._slots.release()
        elif state == "waiting":
            self._slots.skip(self._ticket)
