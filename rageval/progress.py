"""Progress of long work as events: named steps, and bars over iterables.

Code that works long takes a :class:`Reporter` and calls ``step(name)`` as it enters each step and
``bar(items, total=…, desc=…)`` around a long loop; the reporter turns these into small event dicts
(``{"kind": "step", "name", "t"}``, ``{"kind": "bar", "desc", "n", "total", "t"}``,
``{"kind": "end", "t"}``, ``{"kind": "warning", "message", "t"}``) and hands them to :meth:`Reporter.emit`. The base reporter is silent.

Inside a notebook kernel started by ``rageval run``, :func:`from_environment` gives a
:class:`ChannelWriter` that appends the events as JSON lines to the file named by
``RAGEVAL_PROGRESS`` — set in that kernel's environment only (parallel sweep members are threads of
one process). The CLI follows the file (:func:`channel`) and renders the events on stderr. Without
the variable (JupyterLab, plain papermill) nothing is reported: an executed notebook is a sealed
record, and progress bars have no place in its outputs.

Standard library only: ``rageval --help`` must stay fast.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
Event = Mapping[str, Any]

ENV_VAR = "RAGEVAL_PROGRESS"
BAR_INTERVAL = 0.2  # seconds between two events of one bar: a bar over 10,000 queries writes ~50 lines a run


class Reporter:
    """Where progress events go; this base reporter drops them (and its bars cost nothing)."""

    enabled = False

    def emit(self, event: Event) -> None:
        """Receive one event; subclasses deliver it."""

    def step(self, name: str) -> None:
        """Enter step ``name``; the previous step ends here."""
        self.emit({"kind": "step", "name": name, "t": time.time()})

    def end(self) -> None:
        """The last step ends here."""
        self.emit({"kind": "end", "t": time.time()})

    def warn(self, message: str) -> None:
        """Something a person must know to read the results (shown on the terminal as it happens)."""
        self.emit({"kind": "warning", "message": message, "t": time.time()})

    def bar(
        self,
        items: Iterable[T],
        *,
        desc: str,
        total: int | None = None,
        size: Callable[[T], int] | None = None,
    ) -> Iterator[T]:
        """``items``, reporting how many have been consumed out of ``total`` (``len(items)`` when
        it has one). ``size``: how much each item counts (a batch counts its texts)."""
        if not self.enabled:
            return iter(items)
        if total is None and hasattr(items, "__len__"):
            total = len(items)  # type: ignore[arg-type]
        return self._bar(items, desc, total, size)

    def _bar(self, items: Iterable[T], desc: str, total: int | None, size: Callable[[T], int] | None) -> Iterator[T]:
        done, last = 0, time.monotonic()
        self.emit({"kind": "bar", "desc": desc, "n": 0, "total": total, "t": time.time()})
        try:
            for item in items:
                yield item
                done += size(item) if size is not None else 1
                now = time.monotonic()
                if now - last >= BAR_INTERVAL:
                    last = now
                    self.emit({"kind": "bar", "desc": desc, "n": done, "total": total, "t": time.time()})
        finally:  # also when the loop stops early: the bar shows where it stopped
            self.emit({"kind": "bar", "desc": desc, "n": done, "total": total, "t": time.time(), "done": True})

    def member(self, name: str) -> Reporter:
        """A reporter whose events carry ``"member": name`` (one sweep member's)."""
        return Labelled(self, name) if self.enabled else self


SILENT = Reporter()


class Labelled(Reporter):
    enabled = True

    def __init__(self, parent: Reporter, name: str) -> None:
        self.parent, self.name = parent, name

    def emit(self, event: Event) -> None:
        self.parent.emit({**event, "member": self.name})


class ChannelWriter(Reporter):
    """Appends each event as one JSON line to ``path`` (opened per event: nothing is left open
    when the kernel dies)."""

    enabled = True

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def emit(self, event: Event) -> None:
        line = json.dumps(dict(event), ensure_ascii=False) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as handle:
            handle.write(line)


def from_environment() -> Reporter:
    """The channel named by ``RAGEVAL_PROGRESS``, else the silent reporter."""
    path = os.environ.get(ENV_VAR)
    return ChannelWriter(path) if path else SILENT


def read_events(path: str | Path, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
    """The complete event lines of ``path`` from byte ``offset``, and the offset after them. A line
    still being written is left for the next read; a line that is not an event is skipped (progress
    is a courtesy: it never fails a run)."""
    with Path(path).open("rb") as handle:
        handle.seek(offset)
        data = handle.read()
    end = data.rfind(b"\n") + 1
    events = []
    for raw in data[:end].splitlines():
        try:
            event = json.loads(raw)
        except ValueError:
            continue
        if isinstance(event, dict) and isinstance(event.get("kind"), str):
            events.append(event)
    return events, offset + end


def follow(path: str | Path, emit: Callable[[Event], None], stop: threading.Event, interval: float = 0.1) -> None:
    """Hand every event appended to ``path`` to ``emit`` until ``stop`` is set, then the rest."""
    offset = 0
    while True:
        stopping = stop.wait(interval)
        events, offset = read_events(path, offset)
        for event in events:
            emit(event)
        if stopping:
            return


@contextmanager
def channel(emit: Callable[[Event], None] | None, path: str | Path | None = None) -> Iterator[Path | None]:
    """A channel file, followed in a thread that hands its events to ``emit``; every event written
    before the block ends has been handed on when it ends. ``path``: an existing channel (a warm
    kernel's, fixed when it started), else a fresh one, removed after. ``None`` when ``emit`` is None."""
    if emit is None:
        yield None
        return
    with contextlib.ExitStack() as stack:
        if path is None:
            path = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rageval-progress-"))) / "events.jsonl"
            path.touch()
        stop = threading.Event()
        thread = threading.Thread(target=follow, args=(path, emit, stop), name="rageval-progress", daemon=True)
        thread.start()
        try:
            yield Path(path)
        finally:
            stop.set()
            thread.join()


# The reporter in effect for code whose signature is fixed (a retrieval stage is built as
# ``Stage(config, corpus)``): set by run_experiment for its own duration, per thread and task.
_CURRENT: ContextVar[Reporter] = ContextVar("rageval_progress", default=SILENT)


def current() -> Reporter:
    return _CURRENT.get()


@contextmanager
def reporting(reporter: Reporter) -> Iterator[Reporter]:
    token = _CURRENT.set(reporter)
    try:
        yield reporter
    finally:
        _CURRENT.reset(token)


@contextmanager
def no_tqdm_notice() -> Iterator[None]:
    """Around the first import of a library that imports ``tqdm.auto`` (bm25s, transformers): in a
    notebook kernel without ipywidgets that import warns once ("IProgress not found"), a red notice
    in a run's first notebook about bars rageval never shows. The filter is undone on exit."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="IProgress not found")
        yield
