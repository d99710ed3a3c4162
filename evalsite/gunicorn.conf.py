"""gunicorn settings for `make run` (scripts/serve.py starts `gunicorn -c evalsite/gunicorn.conf.py`).

One process per core, each an asynchronous server (uvicorn, through the uvicorn-worker package) in front
of Django's ASGI application: a connection costs a coroutine while its request arrives, so clients that
trickle their headers or their body hold no worker (evalsite/serving.py; with a thread per connection,
sixteen of them took the site down). Each request's view then runs on a thread of its own, so a page
that waits on the database does not hold up the others, and the processes use both cores, which one
process cannot (the GIL). Static files are served by whitenoise inside Django, so nothing else is
needed. The README's "Configuration" table lists the variables read here.
"""

import asyncio
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from uvicorn.protocols.http.h11_impl import H11Protocol  # noqa: E402
from uvicorn_worker import UvicornWorker  # noqa: E402

from evalsite.env import env_float, env_int, env_str  # noqa: E402


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


# A request must have arrived whole (headers and body) this many seconds after its first byte (or after the
# connection opened); past that the connection is closed. A slow client then holds a connection, never a
# worker, and only for this long.
REQUEST_ARRIVAL_S = env_float("EVALSITE_REQUEST_ARRIVAL_S", 60.0, minimum=1)


class ArrivalDeadlineH11(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with a deadline for each request to arrive whole (REQUEST_ARRIVAL_S)."""

    _deadline: asyncio.TimerHandle | None = None

    def _start_deadline(self) -> None:
        if self._deadline is None:
            self._deadline = self.loop.call_later(REQUEST_ARRIVAL_S, self._too_slow)

    def _stop_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._start_deadline()  # a connection that sends nothing is closed too

    def data_received(self, data: bytes) -> None:
        if self.cycle is None or self.cycle.response_complete:
            self._start_deadline()  # the first bytes of the next request on this connection
        super().data_received(data)
        cycle = self.cycle
        if cycle is not None and not cycle.more_body and not cycle.response_complete:
            self._stop_deadline()  # the whole request is in: the view's time is its own

    def connection_lost(self, exc) -> None:
        self._stop_deadline()
        super().connection_lost(exc)

    def _too_slow(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()


class Worker(UvicornWorker):
    """uvicorn in a gunicorn process: asyncio and h11 (pure Python, no compiled extras) with the arrival
    deadline above; no lifespan events (Django has none); the client's address is the connection's, never
    an X-Forwarded-For header (which anyone can send), so the loopback rule (evalsite/security.py) holds
    behind no proxy and behind one."""

    CONFIG_KWARGS = {"loop": "asyncio", "http": ArrivalDeadlineH11, "lifespan": "off", "proxy_headers": False}


wsgi_app = "evalsite.asgi:application"
bind = f"{env_str('EVALSITE_HOST', '127.0.0.1')}:{env_int('PORT', 8000, minimum=1)}"
workers = env_int("EVALSITE_WEB_PROCESSES", _cores(), minimum=1)
worker_class = Worker
# Load Django once in the master: a broken setting stops the start with its message instead of
# workers failing one after another, and the processes share the loaded code's memory.
preload_app = True
# A streamed report of a big run takes several seconds; nothing legitimate takes 2 minutes.
timeout = 120
# Ctrl+C should not wait long for a slow request.
graceful_timeout = 10
keepalive = 5  # seconds an idle keep-alive connection is kept
# The heartbeat file lives in memory where there is a tmpfs for it (containers' /tmp may be on overlayfs).
worker_tmp_dir = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
# Errors go to stderr like the rest; no access log (htmx polling would drown it).
errorlog = "-"
loglevel = "warning"
proc_name = "evalsite-web"
