"""Faults of the store and of processes, with real processes: a sqlite store write-locked by another
process, a disk that fills while a store is created, a first migration killed half-way, a run
killed between FINISHED and its seal tag, clocks that run behind, SIGTERM to a sweep as it ends."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from conftest import ROOT
from typer.testing import CliRunner

from rageval.cli import app
from rageval.errors import TrackingError
from rageval.tracking.records import SEAL_TAG
from rageval.tracking.store import Tracker

BM25 = ROOT / "params" / "bm25.yaml"
CLI = [sys.executable, "-c", "from rageval.cli import main; main()"]


def python(code: str, **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, **kwargs)


def cli(*args: str, **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300, **kwargs)


def rows(db: Path, query: str) -> list[tuple]:
    with contextlib.closing(sqlite3.connect(db, timeout=30)) as connection:
        return connection.execute(query).fetchall()


@contextlib.contextmanager
def write_locked(db: Path, seconds: float = 60) -> Iterator[subprocess.Popen[str]]:
    """Another process holding ``db`` write-locked (BEGIN EXCLUSIVE) for ``seconds`` or until the context ends."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys, time\n"
            f"c = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
            "c.execute('BEGIN EXCLUSIVE')\nprint('locked', flush=True)\n"
            f"time.sleep({seconds})\nc.execute('COMMIT')\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    try:
        yield holder
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait()
        holder.stdout.close()


# --------------------------------------------------------------------------- locked sqlite


def test_a_store_locked_by_another_process_is_a_clear_error_within_seconds(tmp_path):
    db = tmp_path / "mlflow.db"
    store = f"sqlite:///{db}"
    Tracker(store).create_run("e", "r", params={}, tags={})
    with write_locked(db):
        begun = time.perf_counter()
        listed = cli("runs", "--tracking-uri", store)
        waited = time.perf_counter() - begun
    assert listed.returncode == 1, listed.stderr
    assert f"the store {store} failed" in listed.stderr and "database is locked" in listed.stderr
    assert f"another process holds {db} write-locked" in listed.stderr
    assert "internal error" not in listed.stderr and "Traceback" not in listed.stderr
    assert waited < 60
    assert cli("runs", "--tracking-uri", store).returncode == 0  # the lock gone, the store works


def test_a_run_whose_store_is_locked_while_logging_ends_failed_with_the_reason(tmp_path):
    db = tmp_path / "mlflow.db"
    tracker = Tracker(f"sqlite:///{db}")
    run_id = tracker.create_run("e", "r", params={}, tags={})
    with write_locked(db, seconds=26):  # MLflow waits 20 s for a lock on a write
        with pytest.raises(TrackingError, match="database is locked") as raised:
            tracker.log_metrics(run_id, {"m": 1.0})
        # What the run's workflow does with the error: fail the run. The store is still locked for
        # a few seconds; fail waits for it (bounded) instead of leaving the run RUNNING.
        tracker.fail(run_id, f"logging failed: {raised.value}")
    info = tracker.run(run_id)
    assert info.status == "FAILED" and "database is locked" in info.tags["rageval.error"]


# --------------------------------------------------------------------------- creating a store


def test_a_store_created_on_a_full_disk_names_the_path_and_leaves_nothing_half_made(tmp_path):
    """The disk "fills" by RLIMIT_FSIZE in the child (files past 64 KiB cannot grow: the error a
    full disk gives sqlite), which needs no root and no filesystem of its own."""
    db = tmp_path / "new" / "mlflow.db"
    full = python(
        f"""
        import resource, signal, sys
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))
        sys.argv = ["rageval", "runs", "--tracking-uri", "sqlite:///{db}"]
        from rageval.cli import main
        main()
        """,
        timeout=300,
    )
    assert full.returncode == 1, full.stderr
    assert f"could not create the store {db}" in full.stderr and "nothing was created" in full.stderr
    assert "internal error" not in full.stderr and "Traceback" not in full.stderr
    assert not db.exists() and sorted(p.name for p in db.parent.iterdir() if p.suffix != ".lock") == []
    # Space back: the next command creates the store and works.
    assert cli("runs", "--tracking-uri", f"sqlite:///{db}").returncode == 0 and db.is_file()


def test_a_first_migration_killed_half_way_leaves_no_store_and_the_next_command_makes_one(tmp_path):
    db = tmp_path / "new" / "mlflow.db"
    killed = python(
        f"""
        import os, signal
        import mlflow.store.db.utils as utils
        # The tables exist; the migrations after them never run: the process dies here.
        utils._upgrade_db = lambda engine: os.kill(os.getpid(), signal.SIGKILL)
        from rageval.tracking.store import Tracker
        Tracker("sqlite:///{db}")
        """,
        timeout=300,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not db.exists() and (db.parent / f".{db.name}.creating").exists()  # the half-made one, aside
    tracker = Tracker(f"sqlite:///{db}")
    run_id = tracker.create_run("e", "r", params={"a": 1}, tags={})
    assert tracker.run(run_id).params == {"a": "1"} and not (db.parent / f".{db.name}.creating").exists()


# --------------------------------------------------------------------------- ownership and names


def test_a_run_killed_between_finished_and_its_seal_tag_is_never_sealed_not_tampered(tmp_path):
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    died = python(
        f"""
        import os
        from rageval.tracking.store import Tracker
        tracker = Tracker("{store}")
        run_id = tracker.create_run("e", "r", params={{"a": 1}}, tags={{}})
        print(run_id, flush=True)
        set_tag = tracker.client.set_tag
        def dies_at_the_seal(run, key, value):
            if key == "{SEAL_TAG}":
                os._exit(9)  # the process dies after the run ended FINISHED, before its seal tag
            set_tag(run, key, value)
        tracker.client.set_tag = dies_at_the_seal
        tracker.seal(run_id)
        """,
        timeout=300,
    )
    assert died.returncode == 9, died.stderr
    run_id = died.stdout.strip()
    tracker = Tracker(store)
    assert tracker.run(run_id).status == "FINISHED" and not tracker.run(run_id).sealed
    # Verified in this process (the owner is judged by its PID; a new process proves no more).
    verified = CliRunner().invoke(app, ["verify", run_id, "--tracking-uri", store])
    assert verified.exit_code == 1 and "never sealed: its process died between ending it FINISHED" in verified.stderr
    assert "tag was removed" not in verified.stderr
    [(reaped, reason)] = tracker.reap()
    assert reaped == run_id and "between ending FINISHED and its seal tag" in reason
    assert tracker.run(run_id).status == "KILLED"
    again = CliRunner().invoke(app, ["verify", run_id, "--tracking-uri", store])
    assert "KILLED and not sealed" in again.stderr and "never sealed" in again.stderr
    assert tracker.reap() == []


def test_names_stay_unique_when_the_clock_runs_behind_or_ahead(tmp_path):
    tracker = Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}")
    first = tracker.create_run("e", "bm25", params={}, tags={})
    tracker.seal(first)
    tracker.clock = lambda: time.time() - 86400  # a machine a day behind
    behind = tracker.create_run("e", "bm25", params={}, tags={})
    running = tracker.create_run("e", "bm25", params={}, tags={})  # still RUNNING, also behind
    tracker.clock = lambda: time.time() + 365 * 86400  # a year ahead
    ahead = tracker.create_run("e", "bm25", params={}, tags={})
    names = [tracker.run(r).name for r in (first, behind, running, ahead)]
    assert names == ["bm25", "bm25 #2", "bm25 #3", "bm25 #4"]


def test_runs_created_at_once_by_several_processes_start_apart_and_are_named_and_counted_once(tmp_path):
    """Sweep workers start members at the same moment: each run still starts in its own millisecond,
    after every run created before it, so numbers and release-evaluation counts are never shared."""
    store, go = f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path / "go"
    Tracker(store)  # the store exists before the processes race on runs, not on its creation
    script = textwrap.dedent(
        f"""
        import pathlib, time
        from rageval.tracking.store import Tracker
        tracker = Tracker({store!r})
        print("ready", flush=True)
        while not pathlib.Path({str(go)!r}).exists():
            time.sleep(0.001)
        for _ in range(4):
            run_id = tracker.create_run("e", "bm25", params={{}}, tags={{
                "rageval.split": "release", "rageval.benchmark.name": "b",
                "rageval.benchmark.version": "1", "rageval.config.family": "f"}})
            print(run_id, tracker.count_release_evaluations("b", "1", "f", until_ms=tracker.started_ms(run_id)))
        """
    )
    workers = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) for _ in range(3)]
    assert [w.stdout.readline() for w in workers] == ["ready\n"] * 3
    go.touch()  # all three create their first run now
    counted = dict(line.split() for w in workers for line in w.communicate(timeout=120)[0].splitlines())
    assert all(w.returncode == 0 for w in workers) and len(counted) == 12
    tracker = Tracker(store)
    runs = sorted((tracker.client.get_run(r).info.start_time, r) for r in counted)
    assert len({start for start, _ in runs}) == 12  # twelve distinct milliseconds
    assert [int(counted[r]) for _, r in runs] == list(range(1, 13))  # each counted once, in start order
    assert sorted(tracker.run(r).name for r in counted) == sorted(["bm25", *(f"bm25 #{n}" for n in range(2, 13))])


# --------------------------------------------------------------------------- exit codes


@pytest.mark.e2e
def test_sigterm_as_a_sweeps_last_member_seals_never_exits_0_with_an_unsealed_parent(tmp_path):
    db = tmp_path / "mlflow.db"
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        yaml.safe_dump({"version": 1, "name": "end", "base": str(BM25), "variants": [{"name": "only", "set": {}}]})
    )
    swept = subprocess.Popen(
        [*CLI, "sweep", str(sweep), "--tracking-uri", f"sqlite:///{db}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    query = "SELECT t.run_uuid FROM tags t JOIN tags p ON p.run_uuid = t.run_uuid WHERE t.key = 'rageval.seal' AND p.key = 'mlflow.parentRunId'"
    deadline = time.monotonic() + 240
    try:
        while swept.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(sqlite3.Error):
                if db.exists() and rows(db, query):
                    os.kill(swept.pid, signal.SIGTERM)  # right after the last member sealed
                    break
            time.sleep(0.05)
        out, err = swept.communicate(timeout=120)
    finally:
        if swept.poll() is None:
            swept.kill()
            swept.wait()
    parent = rows(
        db,
        "SELECT r.run_uuid, r.status FROM runs r JOIN tags t ON t.run_uuid = r.run_uuid WHERE t.key = 'rageval.kind' AND t.value = 'sweep'",
    )
    [(parent_id, status)] = parent
    sealed = bool(rows(db, f"SELECT 1 FROM tags WHERE run_uuid = '{parent_id}' AND key = 'rageval.seal'"))
    print(f"\nSIGTERM after the member sealed: exit {swept.returncode}, parent {status}, sealed {sealed}")
    # The exit code tells the truth: 0 only with the parent sealed; otherwise the reason is printed.
    assert (swept.returncode == 0) == sealed, (swept.returncode, status, out, err)
    if not sealed:
        assert swept.returncode in (130, 1, -signal.SIGTERM) and "compare:" not in out
        assert f"parent run {parent_id}" in out + err


# --------------------------------------------------------------------------- owners: PID namespaces and boots


def test_an_owner_in_another_pid_namespace_is_elsewhere_and_one_from_an_earlier_boot_is_dead():
    from rageval.tracking.owners import BOOT_TAG, PIDNS_TAG, owner_fields, owner_of, owner_tags

    mine = owner_tags()
    assert owner_fields(mine)["boot"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert owner_fields(mine)["pidns"] == os.readlink("/proc/self/ns/pid")
    # PID 1 lives here, started long ago: without the namespace it would pass for a reused PID (dead).
    other = owner_of({**mine, "rageval.owner.pid": "1", PIDNS_TAG: "pid:[1]", "rageval.owner.started": "1.0"})
    assert other.state == "elsewhere" and "PID namespace pid:[1]" in other.reason
    rebooted = owner_of({**mine, BOOT_TAG: "00000000-0000-0000-0000-000000000000", PIDNS_TAG: "pid:[1]"})
    assert rebooted.state == "dead" and "rebooted" in rebooted.reason
    assert owner_of(mine).state == "alive"


def test_a_live_run_in_another_pid_namespace_is_not_reaped(tmp_path):
    """A real process in a PID namespace of its own (``unshare --pid``; where the system does not
    allow one, the test says so and skips) owns a RUNNING run; the host's reap leaves it alone."""
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    Tracker(store)  # created here: the namespaced process only adds a run
    code = (
        "import sys, time\nfrom rageval.tracking.store import Tracker\n"
        f"print(Tracker({store!r}).create_run('e', 'r', params={{}}, tags={{}}), flush=True)\ntime.sleep(120)\n"
    )
    try:
        inside = subprocess.Popen(
            ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", sys.executable, "-c", code],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    except FileNotFoundError:
        pytest.skip("no unshare(1) here")
    try:
        assert inside.stdout is not None
        run_id = inside.stdout.readline().strip()
        if not run_id:
            inside.wait(timeout=30)
            pytest.skip(f"this system allows no PID namespace: {inside.stderr.read() if inside.stderr else ''}")
        tracker = Tracker(store)
        from rageval.tracking.owners import owner_fields

        assert owner_fields(tracker.run(run_id).tags)["pid"] in ("1", "2")  # its PID inside the namespace
        assert tracker.reap() == [] and tracker.run(run_id).status == "RUNNING"
        assert tracker.owner(tracker.run(run_id)).state == "elsewhere"
    finally:
        inside.kill()
        inside.wait()
        for stream in (inside.stdout, inside.stderr):
            if stream is not None:
                stream.close()


# --------------------------------------------------------------------------- a read-only store


@contextlib.contextmanager
def immutable(*paths: Path) -> Iterator[None]:
    """``chattr +i``: read-only even for root (the tests run as root in CI, where chmod does not
    bind). Where the system refuses it (no CAP_LINUX_IMMUTABLE), the test says so and skips."""
    done: list[Path] = []
    try:
        for path in paths:
            made = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
            if made.returncode != 0:
                pytest.skip(f"cannot make {path} read-only here: {made.stderr.strip()}")
            done.append(path)
        yield
    finally:
        for path in reversed(done):
            subprocess.run(["chattr", "-i", str(path)], check=True)


def test_a_read_only_store_reads_and_refuses_writes_with_a_clear_error(tmp_path):
    folder = tmp_path / "store"
    db = folder / "mlflow.db"
    store = f"sqlite:///{db}"
    tracker = Tracker(store)
    run_id = tracker.create_run("e", "r", params={"a": 1}, tags={})
    tracker.seal(run_id)
    with immutable(db, folder):
        listed = cli("runs", "--tracking-uri", store, cwd=tmp_path)
        assert listed.returncode == 0 and run_id in listed.stdout, listed.stderr
        verified = cli("verify", run_id, "--tracking-uri", store, cwd=tmp_path)
        assert verified.returncode == 0 and f"run {run_id}: intact" in verified.stdout, verified.stderr
        with pytest.raises(TrackingError, match="read-only: read commands") as refused:
            Tracker(store).create_run("e", "r2", params={}, tags={})
        assert str(db) in str(refused.value) and "give a writable --tracking-uri" in str(refused.value)


# --------------------------------------------------------------------------- a temporary folder that cannot be written


def test_a_full_tmpdir_names_the_path_and_the_run_still_ends_failed(tmp_path, monkeypatch):
    """Fault injection: TMPDIR is a folder that cannot take a file (a path through a plain file:
    ENOTDIR, as a full disk gives ENOSPC), so every temporary file fails as on a full TMPDIR."""
    import tempfile

    tracker = Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run_id = tracker.create_run("e", "r", params={}, tags={})
    blocker = tmp_path / "tmp-is-a-file"
    blocker.write_text("")
    monkeypatch.setattr(tempfile, "tempdir", str(blocker / "tmp"))
    with pytest.raises(TrackingError, match="could not write artifacts of run") as raised:
        tracker.log_bytes(run_id, "a.txt", b"x")
    assert str(blocker / "tmp") in str(raised.value) and "free space there" in str(raised.value)
    tracker.fail(run_id, f"logging failed: {raised.value}")  # what the run's workflow does with it
    info = tracker.run(run_id)
    assert info.status == "FAILED" and "error.txt not written" in info.tags["rageval.error"]
