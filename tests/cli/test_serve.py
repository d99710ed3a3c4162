"""`make run` (scripts/run.sh -> scripts/serve.py): gunicorn and the task worker, watched together.

Each test starts the real script on a free port with its own data directory, as `make run` does,
and always ends every process it started (they share the script's session), within bounded time.
"""

import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 120  # a fresh database is migrated first, on a busy 2-core machine
STARTED = re.compile(r"serve: (task worker \(qcluster\)|web server \(gunicorn\)) started, pid (\d+)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def healthz(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as answer:
            return answer.read().decode()
    except OSError as exc:
        return f"no answer: {exc}"


def session_pids(sid: int) -> list[int]:
    """Every live process of a session (the script and all it started, whatever their group)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[3]) == sid and fields[0] != "Z":
                pids.append(int(entry.name))
    return pids


def group_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def alive(pid: int) -> bool:
    try:
        return (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]) != "Z"
    except OSError:
        return False


class Served:
    def __init__(self, tmp_path: Path, *args: str, **extra_env: str):
        self.port = free_port()
        self.log_path = tmp_path / "serve.log"
        env = {k: v for k, v in os.environ.items()
               if k not in ("EVALSITE_TASKS_SYNC", "DATABASE_URL", "REDIS_URL", "EVALSITE_API_TOKEN")}
        env.update(PORT=str(self.port), EVALSITE_DATA_DIR=str(tmp_path / "data"), EVALSITE_WORKERS="1",
                   EVALSITE_WEB_PROCESSES="1", **extra_env)
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen([str(REPO / "scripts" / "run.sh"), *args], cwd=REPO, env=env,
                                        stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

    def output(self) -> str:
        return self.log_path.read_text()

    def wait_for(self, condition, timeout_s: float, what: str):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            value = condition()
            if value:
                return value
            if self.process.poll() is not None:
                break
            time.sleep(0.2)
        pytest.fail(f"{what} within {timeout_s} s; exit status {self.process.poll()}; output:\n{self.output()}")

    def started(self, name: str) -> list[int]:
        return [int(pid) for found, pid in STARTED.findall(self.output()) if found.startswith(name)]

    def wait_healthy(self):
        self.wait_for(lambda: healthz(self.port) == "ok", START_TIMEOUT_S, "/healthz did not answer ok")

    def close(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
        for pid in session_pids(self.process.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)
        self.log.close()


@pytest.fixture
def serve(tmp_path):
    """Starts scripts/run.sh with the given arguments; ends everything it started afterwards."""
    started = []

    def start(*args: str, **extra_env: str) -> Served:
        started.append(Served(tmp_path, *args, **extra_env))
        return started[-1]

    try:
        yield start
    finally:
        for served in started:
            served.close()


@pytest.fixture
def served(serve):
    return serve()


def test_it_restarts_a_killed_worker_and_says_so_then_stops_everything_on_sigterm(served):
    served.wait_healthy()
    served.wait_for(lambda: f"evalsite is running at http://127.0.0.1:{served.port}/" in served.output(), 10,
                    "the address was not printed")
    [worker] = served.started("task worker")
    [web] = served.started("web server")

    def cluster():  # qcluster and the processes it forked (its sentinel, workers, pusher, monitor)
        members = [pid for pid in session_pids(served.process.pid) if group_of(pid) == worker]
        return members if len(members) > 1 else None

    worker_group = served.wait_for(cluster, 30, "qcluster did not start its worker processes")

    os.kill(worker, signal.SIGKILL)

    restarted = served.wait_for(lambda: served.started("task worker")[1:], 30, "the worker was not restarted")
    assert restarted[0] != worker and alive(restarted[0])
    assert (f"serve: the task worker (qcluster, pid {worker}) was killed by SIGKILL" in served.output())
    assert "restarting it (restart 1 of at most 5 within 60 s)" in served.output()
    # What the killed qcluster left in its group (its worker processes) is gone, not orphaned.
    served.wait_for(lambda: not any(alive(pid) for pid in worker_group), 15, "the old worker processes lingered")
    assert healthz(served.port) == "ok" and alive(web)

    served.process.send_signal(signal.SIGTERM)
    assert served.process.wait(timeout=30) == 128 + signal.SIGTERM
    assert "SIGTERM received; stopping the web server and the task worker" in served.output()
    assert session_pids(served.process.pid) == []


def test_when_the_web_server_dies_it_stops_the_worker_and_says_why(served):
    served.wait_healthy()
    [worker] = served.started("task worker")
    [web] = served.started("web server")

    os.kill(web, signal.SIGKILL)

    assert served.process.wait(timeout=30) == 1
    assert f"serve: the web server (gunicorn, pid {web}) was killed by SIGKILL" in served.output()
    assert "Stopping the task worker too." in served.output()
    assert not alive(worker)
    assert session_pids(served.process.pid) == []


def test_a_worker_that_keeps_dying_stops_everything_with_the_reason(serve):
    served = serve("--max-restarts", "1", "--restart-window", "60")
    served.wait_healthy()
    [first] = served.started("task worker")
    [web] = served.started("web server")

    os.kill(first, signal.SIGKILL)
    [second] = served.wait_for(lambda: served.started("task worker")[1:], 30, "the worker was not restarted")
    os.kill(second, signal.SIGKILL)

    assert served.process.wait(timeout=30) == 1
    assert (f"serve: the task worker (qcluster, pid {second}) was killed by SIGKILL (the kernel's out-of-memory "
            "killer, or someone, killed it), and it was already restarted 1 time within 60 s; giving up."
            in served.output())
    assert "Stopping the web server too." in served.output()
    assert served.started("task worker") == [first, second]
    assert not alive(web)
    assert session_pids(served.process.pid) == []


# -- slow clients (issue "Hostile input, third round", case 5) ------------------------------------------------


class Trickler:
    """Connections that send a request a byte at a time, one byte every ``every_s`` on each, and never finish."""

    def __init__(self, port: int, count: int, every_s: float = 0.5):
        import threading

        self.sockets: list[socket.socket] = []
        heads = [b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ",
                 b"POST /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 100000\r\n\r\n{\"blueprint\": \""]
        for index in range(count):
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.sendall(heads[index % 2])  # a header line never ended, or a body that never arrives
            self.sockets.append(sock)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._trickle, args=(every_s,), daemon=True)
        self.thread.start()

    def _trickle(self, every_s: float) -> None:
        while not self.stopped.wait(every_s):
            for sock in self.sockets:
                try:
                    sock.send(b"a")
                except OSError:
                    pass

    def closed_by_server(self) -> int:
        """How many of the connections the server has closed."""
        closed = 0
        for sock in self.sockets:
            sock.setblocking(False)
            try:
                closed += sock.recv(1) == b""
            except BlockingIOError:
                pass
            except OSError:
                closed += 1
            finally:
                sock.setblocking(True)
        return closed

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=5)
        for sock in self.sockets:
            sock.close()


def timed_get(port: int, path: str, timeout_s: float) -> tuple[int | str, float]:
    started = time.monotonic()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout_s) as answer:
            return answer.status, time.monotonic() - started
    except urllib.error.HTTPError as exc:
        return exc.code, time.monotonic() - started
    except OSError as exc:
        return f"no answer: {exc}", time.monotonic() - started


def raw_exchange(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
            if b"\r\n\r\n" in b"".join(chunks) and b"}" in chunk:
                break
        return b"".join(chunks)


TOKEN = "serve-test-token-0123456789"


def test_slow_clients_hold_no_worker_and_the_site_keeps_answering(serve):
    """Twenty-four connections trickling headers or a body, on one web process: pages still answer at once,
    and each slow connection is closed once its request has not arrived whole within the deadline."""
    served = serve(EVALSITE_REQUEST_ARRIVAL_S="8")
    served.wait_healthy()
    assert timed_get(served.port, "/runs/", 30)[0] == 200  # warm: the first page loads the templates
    slow = Trickler(served.port, 24)
    opened = time.monotonic()
    try:
        time.sleep(2)  # every slow connection has been taken in and is trickling
        for path in ("/healthz", "/runs/", "/api/runs/1"):
            status, took = timed_get(served.port, path, 10)
            assert status in (200, 404) and took < 3, (path, status, took, served.output()[-2000:])
        if time.monotonic() - opened < 7:  # (on a machine slow enough, the deadline may have come already)
            assert slow.closed_by_server() == 0  # they were all still open while the pages answered
        time.sleep(max(0.0, opened + 11 - time.monotonic()))
        assert slow.closed_by_server() == 24  # the deadline, though every one kept sending
    finally:
        slow.close()
    # Loopback alone may not change anything through the API; the API's refusals are JSON with the reason.
    refused = raw_exchange(served.port, b"POST /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                                        b"application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
    assert refused.startswith(b"HTTP/1.1 403") and b"needs EVALSITE_API_TOKEN" in refused, refused


def test_the_real_server_answers_api_errors_as_json(serve):
    """As served by `make run`, with a token: a chunked body is refused with the reason, a body over the limit is
    refused before it is read, a request the engine sent is refused whatever its token."""
    served = serve(EVALSITE_API_TOKEN=TOKEN)
    served.wait_healthy()
    auth = b"Authorization: Bearer " + TOKEN.encode() + b"\r\n"
    chunked = raw_exchange(served.port, b"POST /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n" + auth + b"Content-Type: "
                                        b"application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                                        b"2\r\n{}\r\n0\r\n\r\n")
    assert chunked.startswith(b"HTTP/1.1 411") and b"send the body with a Content-Length" in chunked, chunked
    huge = raw_exchange(served.port, b"POST /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n" + auth + b"Content-Type: "
                                     b"application/json\r\nContent-Length: 99999999999\r\n\r\n{")
    assert huge.startswith(b"HTTP/1.1 413") and b'"error": "the body is larger than' in huge, huge
    engine = raw_exchange(served.port, b"GET /api/runs/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n" + auth + b"X-Evalsite-Engine: 1\r\n"
                                       b"Connection: close\r\n\r\n")
    assert engine.startswith(b"HTTP/1.1 403") and b"own engine" in engine, engine
