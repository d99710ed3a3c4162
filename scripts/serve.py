"""Serve evalsite: the web server (gunicorn) and the task worker (qcluster), watched together.

    .venv/bin/python scripts/serve.py [--port 8000] [--host 127.0.0.1]

`make run` starts this through scripts/run.sh. It migrates the database, collects the static
files, starts both processes, prints the address once /healthz answers, and then watches them:

* the worker stops (a crash, the OOM killer, a kill): it says so on stderr and starts it again,
  at most --max-restarts times within --restart-window seconds; past that it stops everything
  and says why;
* the web server stops: it stops the worker and says why;
* Ctrl+C, SIGTERM or SIGHUP: it stops both and waits for them (at most 10 s, then kills them).

Each child runs in its own process group, so a Ctrl+C reaches only this script, which stops the
children (qcluster then stops its own worker processes), and a group left behind by a
killed parent process is ended too. On Linux the children also get SIGTERM if this script dies.
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
MANAGE = str(REPO / "manage.py")
GUNICORN_CONF = str(REPO / "evalsite" / "gunicorn.conf.py")
STOP_WAIT_S = 10.0
POLL_S = 0.2


def say(message: str) -> None:
    print(f"serve: {message}", file=sys.stderr, flush=True)


def how_it_ended(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        hint = " (the kernel's out-of-memory killer, or someone, killed it)" if name == "SIGKILL" else ""
        return f"was killed by {name}{hint}"
    return f"exited with status {returncode}"


def _child_setup() -> None:
    """In the child before exec: its own process group; on Linux, SIGTERM when this script dies."""
    os.setpgid(0, 0)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def group_alive(pgid: int) -> bool:
    """Whether any process of the group still runs (zombies do not count)."""
    proc = Path("/proc")
    if not (proc / "self" / "stat").exists():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            return True
    return False


class Child:
    def __init__(self, role: str, program: str, argv: list[str], env: dict[str, str]):
        self.role, self.program, self.argv, self.env = role, program, argv, env
        self.name = f"{role} ({program})"
        self.process: subprocess.Popen | None = None

    def __str__(self) -> str:
        return f"{self.role} ({self.program}, pid {self.pid})"

    def start(self) -> None:
        self.process = subprocess.Popen(self.argv, cwd=REPO, env=self.env, preexec_fn=_child_setup)
        say(f"{self.name} started, pid {self.process.pid}")

    @property
    def pid(self) -> int:
        return self.process.pid

    def ended(self) -> int | None:
        return self.process.poll()

    def terminate(self) -> None:
        """SIGTERM to the leader, or to its group if the leader is gone (what it left behind)."""
        if self.process is None:
            return
        try:
            if self.process.poll() is None:
                self.process.send_signal(signal.SIGTERM)
            else:
                os.killpg(self.pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass

    def wait(self, deadline: float) -> None:
        """Wait until the whole group is gone; at the deadline, SIGKILL what is left."""
        if self.process is None:
            return
        while time.monotonic() < deadline:
            self.process.poll()
            if self.process.returncode is not None and not group_alive(self.pid):
                return
            time.sleep(0.1)
        say(f"the {self.name} (process group {self.pid}) did not stop within {STOP_WAIT_S:.0f} s; killing it")
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.process.wait()

    def clear_leftovers(self) -> None:
        """After the leader died: end what it left in its group (qcluster's worker processes)."""
        self.terminate()
        self.wait(time.monotonic() + STOP_WAIT_S)


signals_received: list[int] = []


def _on_signal(signum, frame):
    signals_received.append(signum)


def port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.settimeout(1)
        return sock.connect_ex((host, port)) == 0


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "healthz", timeout=2) as answer:
            return answer.read() == b"ok"
    except OSError:
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT") or 8000))
    parser.add_argument("--host", default=os.environ.get("EVALSITE_HOST") or "127.0.0.1")
    parser.add_argument("--max-restarts", type=int, default=5, help="worker restarts allowed within the window")
    parser.add_argument("--restart-window", type=float, default=60.0, help="seconds")
    parser.add_argument("--skip-setup", action="store_true", help="do not migrate or collect static files")
    parser.add_argument("--dev", action="store_true",
                        help="Django's development server (reloads on code changes) instead of gunicorn")
    args = parser.parse_args(argv)

    if port_in_use(args.host, args.port):
        say(f"something already answers on {args.host}:{args.port}; stop it, or choose another port: "
            f"make run PORT={args.port + 1}")
        return 1
    # Both children learn where the site is served: no request a run sends may go there (the worker's too).
    env = dict(os.environ, PYTHONUNBUFFERED="1", PORT=str(args.port), EVALSITE_HOST=args.host)
    if not args.skip_setup:
        for command in (["migrate", "--noinput", "--verbosity", "0"],
                        ["collectstatic", "--noinput", "--verbosity", "0"]):
            try:
                done = subprocess.run([PYTHON, MANAGE, *command], cwd=REPO, env=env)
            except KeyboardInterrupt:  # the child had the Ctrl+C too
                return 130
            if done.returncode:
                say(f"`manage.py {command[0]}` failed (status {done.returncode}); not starting")
                return 1

    host = f"[{args.host}]" if ":" in args.host else args.host
    url = f"http://{host}:{args.port}/"
    worker = Child("task worker", "qcluster", [PYTHON, MANAGE, "qcluster"], env)
    if args.dev:
        web = Child("web server", "runserver", [PYTHON, MANAGE, "runserver", f"{host}:{args.port}"], env)
    else:
        web = Child("web server", "gunicorn", [PYTHON, "-m", "gunicorn", "--config", GUNICORN_CONF,
                                              "--bind", f"{host}:{args.port}"], env)
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _on_signal)
    try:
        worker.start()
        web.start()
        status = supervise(web, worker, url, args.max_restarts, args.restart_window)
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)  # a second Ctrl+C does not cut the stopping short
        for child in (web, worker):
            child.terminate()
        deadline = time.monotonic() + STOP_WAIT_S
        for child in (web, worker):
            child.wait(deadline)
    say("stopped both")
    return status


def supervise(web: Child, worker: Child, url: str, max_restarts: int, window_s: float) -> int:
    """Watch both children until one must stop everything; the exit status to return."""
    restarts: collections.deque[float] = collections.deque()
    announced = False
    while True:
        if signals_received:
            signum = signals_received[0]
            say(f"{signal.Signals(signum).name} received; stopping the web server and the task worker")
            return 128 + signum
        code = web.ended()
        if code is not None:
            say(f"the {web} {how_it_ended(code)}; its last messages are above. "
                "Stopping the task worker too.")
            return 1
        code = worker.ended()
        if code is not None:
            now = time.monotonic()
            while restarts and now - restarts[0] > window_s:
                restarts.popleft()
            if len(restarts) >= max_restarts:
                times = f"{len(restarts)} time{'' if len(restarts) == 1 else 's'}"
                say(f"the {worker} {how_it_ended(code)}, and it was already restarted {times} within "
                    f"{window_s:.0f} s; giving up. Its last messages are above. Stopping the web server too.")
                return 1
            restarts.append(now)
            say(f"the {worker} {how_it_ended(code)}; restarting it "
                f"(restart {len(restarts)} of at most {max_restarts} within {window_s:.0f} s). "
                "Runs continue where they stopped.")
            worker.clear_leftovers()
            worker.start()
        if not announced and healthy(url):
            announced = True
            print(f"\n  evalsite is running at {url}\n"
                  "  (web server and task worker; press Ctrl+C to stop both)\n", file=sys.stderr, flush=True)
        time.sleep(POLL_S)


if __name__ == "__main__":
    sys.exit(main())
