"""Throwaway PostgreSQL and Redis servers on 127.0.0.1, for tests and scripts.

    with start_postgres() as postgres, start_redis() as redis:
        os.environ["DATABASE_URL"] = postgres.url   # postgres://evalsite:...@127.0.0.1:PORT/evalsite
        os.environ["REDIS_URL"] = redis.url         # redis://127.0.0.1:PORT/0

Each server runs from Debian's binaries (scripts/ensure-services.sh installs
them) in its own temporary directory, on a free port, tuned for speed over
durability (no fsync, no Redis persistence). stop() ends the process and
removes the directory; it also runs at interpreter exit for any server still
up, and the servers get SIGKILL if this process dies without stopping them.

`python -m tests.services` starts both and prints their URLs until Ctrl-C.
"""

from __future__ import annotations

import atexit
import glob
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
ENSURE_HINT = "run scripts/ensure-services.sh (as root, or with sudo) to install Debian's packages"


class ServiceError(RuntimeError):
    """A server could not be found, started or reached; the message says why."""


@dataclass
class Service:
    name: str
    url: str
    port: int
    process: subprocess.Popen
    directory: Path
    log: Path
    # The signal that shuts the server down cleanly and quickly.
    stop_signal: int = signal.SIGTERM
    _stopped: bool = field(default=False, repr=False)

    def stop(self) -> None:
        """End the server (SIGKILL if it ignores stop_signal) and remove its directory."""
        if self._stopped:
            return
        self._stopped = True
        _running.discard(self)
        try:
            _end_process_group(self.process, self.stop_signal)
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:]) or "(empty log)"

    def __enter__(self) -> Service:
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def __hash__(self) -> int:
        return id(self)


_running: set[Service] = set()


@atexit.register
def _stop_all() -> None:
    for service in list(_running):
        service.stop()


# Finding the binaries -----------------------------------------------------------


def postgres_bin_dir() -> Path:
    """The newest /usr/lib/postgresql/N/bin (Debian's layout), else initdb's folder on PATH."""
    candidates = sorted(
        (Path(path).parent for path in glob.glob("/usr/lib/postgresql/*/bin/initdb")),
        key=lambda bin_dir: _version_key(bin_dir.parent.name),
    )
    if candidates:
        return candidates[-1]
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).resolve().parent
    raise ServiceError(f"PostgreSQL's initdb was not found under /usr/lib/postgresql: {ENSURE_HINT}.")


def redis_server_binary() -> Path:
    path = shutil.which("redis-server") or (
        "/usr/bin/redis-server" if os.access("/usr/bin/redis-server", os.X_OK) else None
    )
    if not path:
        raise ServiceError(f"redis-server was not found: {ENSURE_HINT}.")
    return Path(path)


def missing_binaries() -> list[str]:
    """Sentences naming what is missing; empty when both servers can be started."""
    missing = []
    for find in (postgres_bin_dir, redis_server_binary):
        try:
            find()
        except ServiceError as error:
            missing.append(str(error))
    return missing


def _version_key(name: str) -> tuple:
    return tuple(int(part) if part.isdigit() else 0 for part in name.split("."))


# PostgreSQL -------------------------------------------------------------------------


def start_postgres(*, user: str = "evalsite", database: str = "evalsite") -> Service:
    """initdb a new cluster in a temp dir, start it on 127.0.0.1, create user and database.

    PostgreSQL refuses to run as root, so as root the cluster is owned and run
    by the `postgres` account that Debian's package creates (else `nobody`).
    """
    bin_dir = postgres_bin_dir()
    owner = _postgres_owner()
    directory = Path(tempfile.mkdtemp(prefix="evalsite-postgres-"))
    try:
        data, log, password_file = directory / "data", directory / "postgres.log", directory / "pw"
        password = secrets.token_hex(16)
        password_file.write_text(password + "\n", encoding="utf-8")
        if owner:
            os.chown(directory, owner.pw_uid, owner.pw_gid)
            os.chown(password_file, owner.pw_uid, owner.pw_gid)
        _run(
            [
                bin_dir / "initdb",
                f"--pgdata={data}",
                f"--username={user}",
                f"--pwfile={password_file}",
                "--auth-host=scram-sha-256",
                "--auth-local=peer",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
                "--no-instructions",
            ],
            owner=owner,
            what="initdb",
        )
        password_file.unlink()
        # Unix sockets are off (unix_socket_directories=''): Debian's default
        # /var/run/postgresql may not exist or be writable, and tests use TCP.
        settings = {
            "listen_addresses": "127.0.0.1",
            "unix_socket_directories": "",
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "max_connections": "50",
        }

        def command(port: int) -> list:
            options = [f"--{name.replace('_', '-')}={value}" for name, value in settings.items()]
            return [bin_dir / "postgres", "-D", data, f"--port={port}", *options]

        process, port = _start_on_free_port(command, log=log, owner=owner, what="postgres")
        service = Service(
            name="postgres",
            url=f"postgres://{user}:{password}@127.0.0.1:{port}/{database}",
            port=port,
            process=process,
            directory=directory,
            log=log,
            # SIGINT is PostgreSQL's "fast" shutdown: it ends open sessions
            # instead of waiting for them as SIGTERM ("smart") does.
            stop_signal=signal.SIGINT,
        )
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    _running.add(service)
    try:
        _wait_until(
            service,
            lambda: _run_quietly([bin_dir / "pg_isready", "-q", "-h", "127.0.0.1", "-p", str(port)]),
        )
        environment = {**os.environ, "PGPASSWORD": password, "PGCONNECT_TIMEOUT": "10"}
        _run(
            [bin_dir / "createdb", "-h", "127.0.0.1", "-p", str(port), "-U", user, database],
            env=environment,
            what="createdb",
        )
    except BaseException:
        service.stop()
        raise
    return service


def _postgres_owner() -> pwd.struct_passwd | None:
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise ServiceError(
        "running as root, and neither a `postgres` nor a `nobody` account exists "
        "to run PostgreSQL as (it refuses to run as root)."
    )


# Redis ------------------------------------------------------------------------------


def start_redis() -> Service:
    """A redis-server on 127.0.0.1 with no persistence, in a temp dir."""
    binary = redis_server_binary()
    directory = Path(tempfile.mkdtemp(prefix="evalsite-redis-"))
    log = directory / "redis.log"

    def command(port: int) -> list:
        return [
            binary,
            "--bind", "127.0.0.1",
            "--port", str(port),
            "--save", "",
            "--appendonly", "no",
            "--dir", directory,
            "--daemonize", "no",
        ]  # fmt: skip

    try:
        process, port = _start_on_free_port(command, log=log, owner=None, what="redis-server")
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    service = Service(
        name="redis",
        url=f"redis://127.0.0.1:{port}/0",
        port=port,
        process=process,
        directory=directory,
        log=log,
    )
    _running.add(service)
    try:
        _wait_until(service, lambda: _redis_ping(port))
    except BaseException:
        service.stop()
        raise
    return service


def _redis_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as connection:
            connection.sendall(b"PING\r\n")
            return connection.recv(64).startswith(b"+PONG")
    except OSError:
        return False


# Processes --------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _start_on_free_port(command, *, log: Path, owner, what: str, attempts: int = 3):
    """Start command(port) on a free port; try another port if the first was taken meanwhile."""
    for attempt in range(attempts):
        port = free_port()
        process = _spawn([str(part) for part in command(port)], log=log, owner=owner)
        # A server that lost the race for its port exits at once.
        try:
            process.wait(timeout=0.3)
        except subprocess.TimeoutExpired:
            return process, port
        text = log.read_text(encoding="utf-8", errors="replace")
        if "in use" not in text or attempt == attempts - 1:
            raise ServiceError(f"{what} exited at start (code {process.returncode}):\n{text[-2000:]}")
    raise AssertionError("unreachable")


def _spawn(argv: list[str], *, log: Path, owner) -> subprocess.Popen:
    # Its own process group, so stop() can end every child it forks; and, where
    # util-linux's setpriv exists, SIGKILL when this process dies without stop().
    if shutil.which("setpriv"):
        argv = ["setpriv", "--pdeathsig", "KILL", "--", *argv]
    with open(log, "ab") as output:
        if owner:
            os.chown(log, owner.pw_uid, owner.pw_gid)
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            **_as(owner),
        )


def _as(owner) -> dict:
    if not owner:
        return {}
    return {"user": owner.pw_uid, "group": owner.pw_gid, "extra_groups": []}


def _run(argv: list, *, what: str, owner=None, env=None) -> None:
    result = subprocess.run(
        [str(part) for part in argv],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=READY_TIMEOUT_S * 2,
        **_as(owner),
    )
    if result.returncode != 0:
        raise ServiceError(f"{what} failed (code {result.returncode}):\n{result.stdout}{result.stderr}")


def _run_quietly(argv: list) -> bool:
    return subprocess.run([str(part) for part in argv], stdin=subprocess.DEVNULL).returncode == 0


def _wait_until(service: Service, ready, timeout: float = READY_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if service.process.poll() is not None:
            raise ServiceError(
                f"{service.name} exited while starting (code {service.process.returncode}); "
                f"its log ends:\n{service.log_tail()}"
            )
        if time.monotonic() > deadline:
            raise ServiceError(
                f"{service.name} on 127.0.0.1:{service.port} was not ready after {timeout:.0f} s; "
                f"its log ends:\n{service.log_tail()}"
            )
        time.sleep(0.1)


def _end_process_group(process: subprocess.Popen, stop_signal: int) -> None:
    # start_new_session made the server its group's leader; while the leader is
    # unreaped (even exited) its group id cannot be reused, so killpg is safe.
    group = process.pid
    if process.poll() is None:
        _signal_group(group, stop_signal)
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
            return
        except subprocess.TimeoutExpired:
            _signal_group(group, signal.SIGKILL)
    process.wait(timeout=STOP_TIMEOUT_S)


def _signal_group(group: int, number: int) -> None:
    try:
        os.killpg(group, number)
    except (ProcessLookupError, PermissionError):
        pass


def main() -> None:
    # Ctrl-C or SIGTERM both end the with-block, so stop() runs (a shell may
    # have started this with SIGINT ignored).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    with start_postgres() as postgres, start_redis() as redis:
        print(f"DATABASE_URL={postgres.url}")
        print(f"REDIS_URL={redis.url}")
        print("Both stop and are removed on Ctrl-C.", flush=True)
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
