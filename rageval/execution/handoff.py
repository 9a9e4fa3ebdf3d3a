"""What a notebook hands back to the process that runs it: its result, logged as soon as it is
written (:class:`EarlyLog`), and the run's figures as the notebook showed them
(:func:`shown_figures`); the kernel side is :func:`rageval.workflows.door.evaluate` and
:func:`~rageval.workflows.door.show_figures`."""

from __future__ import annotations

import base64
import binascii
import pickle
import threading
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rageval.experiment.run import ExperimentResult


class EarlyLog:
    """Logs the result a notebook hands back (``handoff``) as soon as the kernel has written it,
    while the notebook still draws its displays: this process would otherwise wait for the kernel,
    then log. The file is our own, written by the kernel we started in a folder only we know, and
    renamed into place whole (:func:`rageval.workflows.door.evaluate`). ``warm``: what to do on
    the same thread while the result has not come yet (the HTML templates, needed once the notebook
    has run)."""

    def __init__(
        self,
        handoff: Path,
        log: Callable[[ExperimentResult], None],
        interval: float = 0.02,
        warm: Callable[[], None] | None = None,
    ) -> None:
        self._handoff, self._log, self._interval = handoff, log, interval
        self._warm = warm
        self._stop = threading.Event()
        self._result: ExperimentResult | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._watch, name="rageval-early-log", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        # Both on this one thread (two threads importing one package can deadlock): what comes
        # after the notebook, while the kernel works; then the result, once handed back.
        if self._warm is not None:
            try:
                self._warm()
            except Exception:  # noqa: BLE001, S110 - only a head start; the real step reports any error
                pass
        while not self._handoff.is_file():
            if self._stop.wait(self._interval) and not self._handoff.is_file():
                return  # the notebook ended without handing a result back
        try:
            self._result = pickle.loads(self._handoff.read_bytes())
            self._log(self._result)
        except BaseException as exc:  # noqa: BLE001 - raised by finish(), in the run's own thread
            self._error = exc

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


# The display metadata key that marks an image output as one of the run's figures, its value the
# figure's file name (``figures/NAME`` in the run).
FIGURE_METADATA = "rageval/figure"


def shown_figures(cells: list[Any], names: Collection[str]) -> dict[str, bytes]:
    """The figures an executed notebook's ``cells`` showed under :data:`FIGURE_METADATA`, as PNG
    bytes by file name: only the ``names`` expected, the last one shown of each (a notebook shows a
    figure once; a user's copy may show more, or other images, which are not the run's)."""
    found: dict[str, bytes] = {}
    for cell in cells:
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get(FIGURE_METADATA)
            data = output.get("data", {}).get("image/png")
            if name in names and isinstance(data, str):
                try:
                    found[name] = base64.b64decode(data, validate=True)
                except binascii.Error:
                    continue  # not a PNG this notebook made; the figure is drawn again
    return found
