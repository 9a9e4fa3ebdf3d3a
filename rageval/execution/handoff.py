"""The result a notebook hands back to the process that runs it, logged as soon as it is written
(:class:`EarlyLog`); the kernel side is :func:`rageval.workflows.door.evaluate`."""

from __future__ import annotations

import pickle
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rageval.experiment.run import ExperimentResult


class EarlyLog:
    """Logs the result a notebook hands back (``handoff``) as soon as the kernel has written it,
    while the notebook still draws its displays: this process would otherwise wait for the kernel,
    then log. The file is our own, written by the kernel we started in a folder only we know, and
    renamed into place whole (:func:`rageval.workflows.door.evaluate`). ``warm``: what to do on
    the same thread before the result comes, and after it is logged (imports, the HTML templates)."""

    def __init__(
        self,
        handoff: Path,
        log: Callable[[ExperimentResult], None],
        interval: float = 0.02,
        warm: tuple[Callable[[], None], Callable[[], None]] | None = None,
    ) -> None:
        self._handoff, self._log, self._interval = handoff, log, interval
        self._warm = warm or (_nothing, _nothing)
        self._stop = threading.Event()
        self._result: ExperimentResult | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._watch, name="rageval-early-log", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        # All on this one thread (two threads importing one package can deadlock): what logging
        # needs, while the kernel starts; the result once handed back; then what comes after.
        _head_start(self._warm[0])
        try:
            while not self._handoff.is_file():
                if self._stop.wait(self._interval) and not self._handoff.is_file():
                    return  # the notebook ended without handing a result back
            try:
                self._result = pickle.loads(self._handoff.read_bytes())
                self._log(self._result)
            except BaseException as exc:  # noqa: BLE001 - raised by finish(), in the run's own thread
                self._error = exc
        finally:
            _head_start(self._warm[1])

    def finish(self) -> ExperimentResult | None:
        """Once the notebook has ended: the logged result (None if none was handed back); raises
        what logging raised."""
        self._stop.set()
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._result

    def abandon(self) -> None:
        """The notebook failed, or hands nothing back: stop watching, and wait for logging begun."""
        self._stop.set()
        self._thread.join()


def _nothing() -> None:
    pass


def _head_start(step: Callable[[], None]) -> None:
    try:
        step()
    except Exception:  # noqa: BLE001, S110 - only a head start; the real step reports any error
        pass
