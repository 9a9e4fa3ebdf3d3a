"""Progress on stderr: the steps of a run (and its notebook kernel's) as they go, with rich.

:class:`RunView` shows one run; :class:`SweepView`, the members of a sweep. Both are
:class:`~rageval.progress.Reporter` s handed to a workflow, and both are context managers. On a
terminal they draw live (rich); anywhere else (CI logs, pipes) they print plain lines: one per
finished step with its seconds, and a line every few seconds while a bar runs. rich is imported
only when a view opens, so ``rageval --help`` never pays for it.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TextIO

from rageval.progress import Event, Reporter
from rageval.safety import strip_control

PLAIN_BAR_EVERY = 5.0  # seconds between two plain lines of one running bar


def _text(value: object) -> str:
    return " ".join(strip_control(str(value)).split())


@dataclass
class _Steps:
    """One run's current step, its bar, and when things started (the emitter's clock)."""

    name: str | None = None
    since: float = 0.0
    bar: tuple[str, int, int | None] | None = None  # desc, n, total
    printed: float = 0.0  # when the current step last had a plain line (this process's clock)
    started: float = field(default_factory=time.time)

    def count(self) -> str:
        if self.bar is None:
            return ""
        desc, n, total = self.bar
        return f"{desc} {n}/{total}" if total is not None else f"{desc} {n}"

    def finish(self, at: float) -> tuple[str, float, str] | None:
        """The step that ends at ``at``: name, seconds, bar count; None when none was open."""
        if self.name is None:
            return None
        done = (self.name, max(0.0, at - self.since), self.count())
        self.name, self.bar = None, None
        return done

    def apply(self, event: Event) -> tuple[str, float, str] | None:
        """Take one event; the step it ended, if any."""
        at = float(event.get("t") or time.time())
        kind = event.get("kind")
        if kind in ("step", "end"):
            ended = self.finish(at)
            if kind == "step":
                self.name, self.since, self.printed = _text(event.get("name", "?")), at, time.time()
            return ended
        if kind == "bar" and self.name is not None:
            total = event.get("total")
            self.bar = (
                _text(event.get("desc", "")),
                int(event.get("n") or 0),
                int(total) if total is not None else None,
            )
        return None


def _due(steps: _Steps, event: Event) -> bool:
    """Whether a running bar is due a plain line (not when it has just finished: its step's line says it)."""
    running = event.get("kind") == "bar" and not event.get("done") and steps.bar is not None
    return running and time.time() - steps.printed >= PLAIN_BAR_EVERY


def _line(stream: TextIO, live: Any, text: str) -> None:
    """One line of text above a live display (rich's ``Progress`` or ``Live``), else on ``stream``."""
    if live is not None:
        live.console.print(text, markup=False, highlight=False)
    else:
        stream.write(text + "\n")
        stream.flush()


def _plain_done(prefix: str, done: tuple[str, float, str], failed: bool = False) -> str:
    name, seconds, count = done
    detail = f"{seconds:.2f} s" + (f"; {count}" if count else "") + ("; failed" if failed else "")
    return f"{prefix}{name} ({detail})\n"


class RunView(Reporter):
    """One run's steps: a live line for the current step (a bar where it has one) below the
    finished steps and their seconds on a terminal; plain lines elsewhere."""

    enabled = True

    def __init__(self, stream: TextIO | None = None, live: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.live = bool(getattr(self.stream, "isatty", lambda: False)()) if live is None else live
        self.steps = _Steps()
        self.lock = threading.Lock()
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> RunView:
        if self.live:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.fields[count]}"),
                TimeElapsedColumn(),
                console=Console(file=self.stream),
                transient=True,
            )
            self._progress.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        with self.lock:
            self._ended(self.steps.finish(time.time()), failed=kind is not None)
            if self._progress is not None:
                self._progress.stop()

    def emit(self, event: Event) -> None:
        if event.get("kind") == "warning":
            self.note(f"warning: {_text(event.get('message', ''))}")
            return
        with self.lock:
            self._ended(self.steps.apply(event))
            steps = self.steps
            if steps.name is None:
                return
            if self._progress is not None:
                self._show(steps)
            elif _due(steps, event):
                steps.printed = time.time()
                self.stream.write(f"{steps.name}: {steps.count()}\n")
                self.stream.flush()

    def note(self, text: str) -> None:
        """One line above the live step (or among the plain lines)."""
        with self.lock:
            _line(self.stream, self._progress, text)

    def _show(self, steps: _Steps) -> None:
        total = steps.bar[2] if steps.bar is not None else None
        completed = steps.bar[1] if steps.bar is not None else 0
        if self._task is None:
            self._task = self._progress.add_task(steps.name, total=total, completed=completed, count=steps.count())
        else:
            self._progress.update(
                self._task, description=steps.name, total=total, completed=completed, count=steps.count()
            )

    def _ended(self, done: tuple[str, float, str] | None, failed: bool = False) -> None:
        if done is None:
            return
        if self._progress is None:
            self.stream.write(_plain_done("", done, failed))
            self.stream.flush()
            return
        from rich.text import Text

        name, seconds, count = done
        mark = ("✗ ", "red") if failed else ("✓ ", "green")
        self._progress.console.print(
            Text.assemble(mark, f"{name:<32} ", (f"{seconds:7.2f} s", "cyan"), f"  {count}" if count else "")
        )
        if self._task is not None:
            self._progress.remove_task(self._task)
            self._task = None


@dataclass
class _Member:
    status: str = "waiting"
    steps: _Steps = field(default_factory=_Steps)
    began: float | None = None
    ended: float | None = None


class SweepView(Reporter):
    """A sweep's members: on a terminal a live table (member, status, current step, its progress,
    elapsed) under the finished members; elsewhere each member's finished steps as plain lines
    ``[member] step (seconds)``, and the sweep's count after each member ends."""

    enabled = True

    def __init__(self, stream: TextIO | None = None, live: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.live = bool(getattr(self.stream, "isatty", lambda: False)()) if live is None else live
        self.members: dict[str, _Member] = {}
        self.summary = ""
        self.lock = threading.Lock()
        self._live: Any = None

    def __enter__(self) -> SweepView:
        if self.live:
            from rich.console import Console
            from rich.live import Live

            self._live = Live(
                get_renderable=self._table, console=Console(file=self.stream), refresh_per_second=4, transient=True
            )
            self._live.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        with self.lock:
            if self._live is not None:
                self._live.stop()

    def note(self, text: str) -> None:
        """One line above the live table (or among the plain lines)."""
        with self.lock:
            _line(self.stream, self._live, text)

    def emit(self, event: Event) -> None:
        name = _text(event.get("member", ""))
        if event.get("kind") == "warning":
            self.note(f"[{name}] warning: {_text(event.get('message', ''))}")
            return
        with self.lock:
            member = self.members.setdefault(name, _Member())
            if event.get("kind") == "sweep":
                self._sweep(name, member, event)
                return
            if member.began is None:
                member.began, member.status = time.time(), "running"
            done = member.steps.apply(event)
            if self._live is None:
                if done is not None:
                    self.stream.write(_plain_done(f"[{name}] ", done))
                steps = member.steps
                if _due(steps, event):
                    steps.printed = time.time()
                    self.stream.write(f"[{name}] {steps.name}: {steps.count()}\n")
                self.stream.flush()

    def _sweep(self, name: str, member: _Member, event: Event) -> None:
        status = str(event.get("status", ""))
        self.summary = _text(event.get("line", ""))
        if status == "start":
            member.status, member.began = "running", time.time()
            return
        done = member.steps.finish(time.time())
        member.status, member.ended = status, time.time()
        if self._live is None:
            if done is not None:
                self.stream.write(_plain_done(f"[{name}] ", done, failed=status != "sealed"))
            self.stream.write(f"{name}: {status} | {self.summary}\n")
            self.stream.flush()
            return
        from rich.text import Text

        seconds = (member.ended - member.began) if member.began is not None else 0.0
        mark = ("✓ ", "green") if status == "sealed" else ("✗ ", "red")
        self._live.console.print(Text.assemble(mark, f"{name}: {status} ", (f"({seconds:.1f} s)", "cyan")))

    def _table(self) -> Any:
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        now = time.time()
        # No lock here: rich calls this under its own lock, which emit() may be waiting for.
        members = list(self.members.items())
        table = Table(box=None, pad_edge=False)
        for column in ("member", "status", "step", "progress", "step s", "total s"):
            table.add_column(column, justify="right" if column.endswith(" s") else "left")
        for name, member in members:
            if member.ended is not None:
                continue
            steps = member.steps
            table.add_row(
                name,
                member.status,
                steps.name or "",
                steps.count(),
                f"{now - steps.since:.1f}" if steps.name else "",
                f"{now - member.began:.1f}" if member.began is not None else "",
            )
        return Group(table, Text(self.summary, style="dim")) if self.summary else table
