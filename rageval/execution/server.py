"""A shared tracking server on loopback: a PostgreSQL cluster in a folder and a real ``mlflow server``
on it with proxied artifacts — for a team (``rageval server``) or for tests.

Layout of the folder (kept between starts, so a team's runs survive a restart)::

    DIR/postgres/        the cluster (initdb), owned by the user PostgreSQL runs as
    DIR/postgres.secret  the database password (0600): the cluster accepts password logins only
    DIR/artifacts/       the artifact store the server proxies (--artifacts-destination)
    DIR/mlflow-server.log

Every listener binds 127.0.0.1 only; PostgreSQL's unix socket is off (a TCP port is all it serves).
PostgreSQL refuses to run as root: as root, the cluster runs as an unprivileged user (``--pg-user``,
Debian's ``postgres`` by default) through ``runuser``. ``mlflow server`` starts uvicorn children, so
it runs in its own process group and the whole group is stopped. Both are stopped when the context
ends — on an error or Ctrl-C too. This module starts processes only: it does not import mlflow.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rageval.errors import ConfigError, Problem, TrackingError

HOST = "127.0.0.1"
DATABASE = "mlflow"
DB_USER = "rageval"
DEFAULT_PG_USER = "postgres"  # the unprivileged account Debian's postgresql package creates
# MLflow's own test of whether the server answers; it needs no database round trip.
HEALTH = "/health"
FIX_POSTGRES = (
    "install PostgreSQL (Debian/Ubuntu: apt-get install -y postgresql), put its bin folder on PATH, "
    "or give --pg-bindir (e.g. /usr/lib/postgresql/15/bin)"
)


# --------------------------------------------------------------------------- small helpers


def _port_taken(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((HOST, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return True
            raise
    return False


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def _holder(port: int) -> str:
    """Who listens on ``port``, where the system says (root sees every process)."""
    import psutil

    with contextlib.suppress(psutil.Error):
        for conn in psutil.net_connections(kind="inet"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
                with contextlib.suppress(psutil.Error):
                    return f" (by process {conn.pid}, {psutil.Process(conn.pid).name()})"
    return ""


def require_free(port: int, option: str) -> int:
    """``port``, if nothing listens on it on 127.0.0.1; else a :class:`TrackingError` naming the fix."""
    if not 0 < port < 65536:
        raise ConfigError(Problem(file=option, message=f"{port} is not a TCP port", fix="give 1-65535"))
    if _port_taken(port):
        raise TrackingError(
            f"port {port} on {HOST} is taken{_holder(port)}: give another {option}, or stop what listens there"
        )
    return port


def _tail(path: Path, lines: int = 15) -> str:
    if not path.is_file():
        return ""
    text = path.read_text(errors="replace").strip().splitlines()
    return "\n  " + "\n  ".join(text[-lines:]) if text else ""


def postgres_bindir(bindir: Path | None = None) -> Path:
    """The folder holding ``initdb``, ``pg_ctl`` and ``postgres``: ``bindir``, else the one of
    ``initdb`` on PATH, else ``pg_config --bindir``, else the newest ``/usr/lib/postgresql/*/bin``."""
    candidates: list[Path] = []
    if bindir is not None:
        candidates = [Path(bindir)]
    else:
        if found := shutil.which("initdb"):
            candidates.append(Path(found).resolve().parent)
        if pg_config := shutil.which("pg_config"):
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=10)
                candidates.append(Path(out.stdout.strip()))
        versions = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name), reverse=True)
        candidates.extend(p for p in versions if p.parent.name.isdigit())
    for folder in candidates:
        if all((folder / name).is_file() and os.access(folder / name, os.X_OK) for name in ("initdb", "pg_ctl")):
            return folder
    looked = ", ".join(str(c) for c in candidates) or "PATH, pg_config, /usr/lib/postgresql/*/bin"
    raise TrackingError(f"PostgreSQL's initdb and pg_ctl were not found (looked in {looked}): {FIX_POSTGRES}")


def require_psycopg2() -> None:
    """The PostgreSQL driver MLflow's ``postgresql+psycopg2://`` URIs need, else the fix."""
    try:
        import psycopg2  # noqa: F401
    except ImportError:
        raise TrackingError(
            "the PostgreSQL driver psycopg2 is not installed: pip install 'rageval[server]' (psycopg2-binary)"
        ) from None


def check_backend_store_uri(uri: str, option: str = "--backend-store-uri") -> str:
    """A PostgreSQL URI MLflow can open with the installed driver; plain ``postgresql://`` makes
    SQLAlchemy 2 look for psycopg 3, which rageval does not install."""
    scheme, sep, _ = uri.partition("://")
    if not sep:
        raise ConfigError(
            Problem(
                file=option,
                message=f"{uri!r} is not a database URI",
                fix="e.g. postgresql+psycopg2://USER:PASSWORD@HOST:5432/mlflow",
            )
        )
    if scheme in ("postgresql", "postgres"):
        fixed = "postgresql+psycopg2://" + uri.partition("://")[2]
        raise ConfigError(
            Problem(
                file=option,
                message=f"{scheme}:// lets SQLAlchemy pick psycopg 3, which is not installed",
                fix=f"name the driver: {_redact(fixed)}",
            )
        )
    if not scheme.startswith("postgresql+"):
        raise ConfigError(
            Problem(
                file=option,
                message=f"{scheme}:// is not PostgreSQL",
                fix="give postgresql+psycopg2://USER:PASSWORD@HOST:PORT/DATABASE (for sqlite, use --tracking-uri sqlite:///… without a server)",
            )
        )
    if scheme == "postgresql+psycopg2":
        require_psycopg2()
    return uri


def _redact(uri: str) -> str:
    """``uri`` without its password (for messages and logs)."""
    scheme, sep, rest = uri.partition("://")
    credentials, at, location = rest.rpartition("@")
    if not sep or not at or ":" not in credentials:
        return uri
    return f"{scheme}://{credentials.partition(':')[0]}:***@{location}"


# --------------------------------------------------------------------------- PostgreSQL


@dataclass(frozen=True)
class Postgres:
    """A running loopback cluster: ``uri`` is what ``mlflow server --backend-store-uri`` takes."""

    data_dir: Path
    port: int
    pid: int  # the postmaster's
    password: str = field(repr=False)

    @property
    def uri(self) -> str:
        return f"postgresql+psycopg2://{DB_USER}:{self.password}@{HOST}:{self.port}/{DATABASE}"


class _Cluster:
    """initdb / pg_ctl on one data folder, run as ``user`` (through ``runuser`` when we are root)."""

    def __init__(self, folder: Path, bindir: Path, pg_user: str | None) -> None:
        self.data = folder / "postgres"
        self.secret = folder / "postgres.secret"
        self.log = self.data / "server.log"
        self.bindir = bindir
        self.prefix: list[str] = []
        self.owner: pwd.struct_passwd | None = None
        if os.geteuid() == 0:
            name = pg_user or DEFAULT_PG_USER
            try:
                self.owner = pwd.getpwnam(name)
            except KeyError:
                raise TrackingError(
                    f"PostgreSQL refuses to run as root and there is no user {name!r} to run it as: "
                    "give --pg-user NAME of an unprivileged user (Debian's postgresql package creates 'postgres'), "
                    "or run rageval as an unprivileged user"
                ) from None
            if self.owner.pw_uid == 0:
                raise TrackingError(f"--pg-user {name!r} is root; PostgreSQL needs an unprivileged user")
            runuser = shutil.which("runuser")
            if runuser is None:
                raise TrackingError(
                    "running PostgreSQL as root needs util-linux's runuser: apt-get install -y util-linux"
                )
            self.prefix = [runuser, "-u", name, "--"]

    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.prefix, *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )

    def prepare(self) -> str:
        """The cluster's password, creating the cluster on first use."""
        if (self.data / "PG_VERSION").is_file():
            if not self.secret.is_file():
                raise TrackingError(
                    f"{self.data} holds a cluster but {self.secret} is missing: restore it, or start in a new --dir"
                )
            return self.secret.read_text().strip()
        if self.data.exists() and any(self.data.iterdir()):
            raise TrackingError(f"{self.data} exists, is not empty and holds no PostgreSQL cluster: give a new --dir")
        self.data.mkdir(parents=True, exist_ok=True, mode=0o700)
        password = secrets.token_urlsafe(24)
        self.secret.write_text(password + "\n")
        self.secret.chmod(0o600)
        pwfile = self.data.parent / ".postgres.pw"
        pwfile.write_text(password + "\n")
        try:
            if self.owner is not None:
                os.chown(self.data, self.owner.pw_uid, self.owner.pw_gid)
                os.chown(pwfile, self.owner.pw_uid, self.owner.pw_gid)
                pwfile.chmod(0o600)
                if self._run("test", "-w", str(self.data)).returncode != 0:
                    raise TrackingError(
                        f"user {self.owner.pw_name!r}, who runs PostgreSQL, cannot reach {self.data}: "
                        f"give a --dir whose parent folders others may enter (e.g. under /srv or /var/tmp, not under a 0700 folder)"
                    )
            done = self._run(
                str(self.bindir / "initdb"),
                "-D", str(self.data),
                "-U", DB_USER,
                f"--pwfile={pwfile}",
                "--auth=scram-sha-256",
                "-E", "UTF8",
                "--locale=C",
            )  # fmt: skip
        finally:
            pwfile.unlink(missing_ok=True)
        if done.returncode != 0:
            shutil.rmtree(self.data, ignore_errors=True)
            self.secret.unlink(missing_ok=True)
            raise TrackingError(f"initdb failed in {self.data}:\n  {(done.stderr or done.stdout).strip()}")
        # Loopback TCP only: no unix socket (whose folder root would have to share), no other address.
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(f"\n# rageval server\nlisten_addresses = '{HOST}'\nunix_socket_directories = ''\n")
        return password

    def start(self, port: int) -> int:
        done = self._run(
            str(self.bindir / "pg_ctl"), "start", "-w", "-t", "60", "-D", str(self.data), "-l", str(self.log),
            "-o", f"-p {port}",
        )  # fmt: skip
        if done.returncode != 0:
            raise TrackingError(
                f"PostgreSQL did not start on {HOST}:{port}: {(done.stderr or done.stdout).strip()}{_tail(self.log)}"
            )
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def stop(self) -> None:
        if (self.data / "postmaster.pid").is_file():
            self._run(str(self.bindir / "pg_ctl"), "stop", "-w", "-t", "60", "-m", "fast", "-D", str(self.data))


def _create_database(port: int, password: str) -> None:
    import psycopg2

    connection = psycopg2.connect(host=HOST, port=port, user=DB_USER, password=password, dbname="postgres")
    try:
        connection.autocommit = True  # CREATE DATABASE cannot run in a transaction
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,))
            if cursor.fetchone() is None:
                cursor.execute(f"CREATE DATABASE {DATABASE}")
    finally:
        connection.close()


@contextlib.contextmanager
def postgres(
    folder: str | Path, *, port: int | None = None, pg_user: str | None = None, bindir: Path | None = None
) -> Iterator[Postgres]:
    """A PostgreSQL cluster in ``folder/postgres`` listening on 127.0.0.1:``port`` (a free one for
    ``None``) with a database for MLflow; stopped when the context ends."""
    require_psycopg2()
    folder = Path(folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    cluster = _Cluster(folder, postgres_bindir(bindir), pg_user)
    password = cluster.prepare()
    port = require_free(port, "--pg-port") if port else free_port()
    pid = cluster.start(port)
    try:
        _create_database(port, password)
        yield Postgres(data_dir=cluster.data, port=port, password=password, pid=pid)
    finally:
        cluster.stop()


# --------------------------------------------------------------------------- mlflow server


@dataclass(frozen=True)
class MlflowServer:
    """A running ``mlflow server``: ``tracking_uri`` is what ``--tracking-uri`` takes."""

    port: int
    pid: int  # the process group's leader; its uvicorn children share its group
    artifacts: Path
    log: Path

    @property
    def tracking_uri(self) -> str:
        return f"http://{HOST}:{self.port}"


def _stop_group(process: subprocess.Popen[bytes], grace_s: float = 15.0) -> None:
    """SIGTERM to the process group, SIGKILL to what is left after ``grace_s``."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    # Children may outlive the leader (killing the parent alone leaves them serving).
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=grace_s)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return bool(reply.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def mlflow_server(
    backend_store_uri: str,
    artifacts: str | Path,
    *,
    port: int | None = None,
    log: Path | None = None,
    timeout_s: float = 180.0,
) -> Iterator[MlflowServer]:
    """``mlflow server`` on 127.0.0.1:``port`` over ``backend_store_uri`` with artifacts proxied
    into ``artifacts``, one worker and no job runner; returns once it answers, stopped (its whole
    process group) when the context ends."""
    check_backend_store_uri(backend_store_uri)
    artifacts = Path(artifacts).resolve()
    artifacts.mkdir(parents=True, exist_ok=True)
    port = require_free(port, "--port") if port else free_port()
    log = Path(log) if log else artifacts.parent / "mlflow-server.log"
    env = {
        **os.environ,
        # In the environment, not argv: the URI carries the password, which `ps` would show.
        "MLFLOW_BACKEND_STORE_URI": backend_store_uri,
        # Measured: 4 workers + the job runner answer in 13 s using 1.9 GB; 1 worker without it, 5 s and 0.5 GB.
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
        "MLFLOW_DISABLE_TELEMETRY": "true",
    }
    command = [
        sys.executable, "-m", "mlflow", "server",
        "--host", HOST, "--port", str(port), "--workers", "1",
        "--artifacts-destination", str(artifacts),
    ]  # fmt: skip
    with log.open("ab") as out:
        process = subprocess.Popen(
            command, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
    try:
        url = f"http://{HOST}:{port}{HEALTH}"
        deadline = time.monotonic() + timeout_s
        while not _answers(url):
            if process.poll() is not None:
                raise TrackingError(
                    f"mlflow server exited with status {process.returncode} before answering (log {log}):{_tail(log)}"
                )
            if time.monotonic() > deadline:
                raise TrackingError(
                    f"mlflow server did not answer on {url} within {timeout_s:.0f} s (log {log}):{_tail(log)}"
                )
            time.sleep(0.25)
        yield MlflowServer(port=port, pid=process.pid, artifacts=artifacts, log=log)
    finally:
        _stop_group(process)


# --------------------------------------------------------------------------- both


@dataclass(frozen=True)
class TrackingServer:
    """What ``rageval server`` (and the tests' ``mlflow_server`` fixture) runs.

    ``tracking_uri``: give it as ``--tracking-uri`` or ``MLFLOW_TRACKING_URI``.
    ``backend_store_uri``: the PostgreSQL database behind it (with its password).
    ``postgres``: the cluster rageval started, ``None`` when given an existing database.
    """

    mlflow: MlflowServer
    postgres: Postgres | None
    started_s: float  # wall seconds from the call to the server answering
    backend_store_uri: str = field(repr=False)  # it holds the password

    @property
    def tracking_uri(self) -> str:
        return self.mlflow.tracking_uri

    @property
    def pids(self) -> list[int]:
        """The processes it started that listen (the mlflow server's group leader, the postmaster)."""
        return [self.mlflow.pid] + ([self.postgres.pid] if self.postgres else [])


@contextlib.contextmanager
def tracking_server(
    folder: str | Path,
    *,
    port: int | None = None,
    backend_store_uri: str | None = None,
    pg_user: str | None = None,
    pg_bindir: Path | None = None,
) -> Iterator[TrackingServer]:
    """A PostgreSQL cluster in ``folder`` (or the database at ``backend_store_uri``) and an
    ``mlflow server`` on it, artifacts in ``folder/artifacts``; both stopped when the context ends."""
    started = time.perf_counter()
    folder = Path(folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    if port is not None:
        require_free(port, "--port")  # before PostgreSQL starts: a taken port fails fast
    if backend_store_uri is not None:
        check_backend_store_uri(backend_store_uri)
    with contextlib.ExitStack() as stack:
        database = None
        if backend_store_uri is None:
            database = stack.enter_context(postgres(folder, pg_user=pg_user, bindir=pg_bindir))
            backend_store_uri = database.uri
        server = stack.enter_context(
            mlflow_server(backend_store_uri, folder / "artifacts", port=port, log=folder / "mlflow-server.log")
        )
        yield TrackingServer(
            mlflow=server,
            postgres=database,
            started_s=time.perf_counter() - started,
            backend_store_uri=backend_store_uri,
        )
