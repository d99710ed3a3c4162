"""gunicorn settings for `make run` (scripts/serve.py starts `gunicorn -c evalsite/gunicorn.conf.py`).

One process per core, each an asynchronous server (uvicorn, through the uvicorn-worker package) in front
of Django's ASGI application: a connection costs a coroutine while its request arrives, so clients that
trickle their headers or their body hold no worker (evalsite/serving.py; with a thread per connection,
sixteen of them took the site down). Each request's view then runs on a thread of its own, so a page
that waits on the database does not hold up the others, and the processes use both cores, which one
process cannot (the GIL). Static files are served by whitenoise inside Django, so nothing else is
needed. The README's "Configuration" table lists the variables read here.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from uvicorn_worker import UvicornWorker  # noqa: E402

from evalsite.env import env_int, env_str  # noqa: E402


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class Worker(UvicornWorker):
    """uvicorn in a gunicorn process: asyncio and h11 (pure Python, no compiled extras); no lifespan events
    (Django has none); the client's address is the connection's, never an X-Forwarded-For header (which
    anyone can send), so the loopback rule (evalsite/security.py) holds behind no proxy and behind one."""

    CONFIG_KWARGS = {"loop": "asyncio", "http": "h11", "lifespan": "off", "proxy_headers": False}


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
