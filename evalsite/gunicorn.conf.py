"""gunicorn settings for `make run` (scripts/serve.py starts `gunicorn -c evalsite/gunicorn.conf.py`).

One process per core, each with a few threads (gthread): a page that waits on the database
does not hold up the others, and the processes use both cores, which one process cannot
(the GIL). Static files are served by whitenoise inside Django, so nothing else is needed.
The README's "Configuration" table lists the variables read here.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evalsite.env import env_int, env_str  # noqa: E402


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


wsgi_app = "evalsite.wsgi:application"
bind = f"{env_str('EVALSITE_HOST', '127.0.0.1')}:{env_int('PORT', 8000, minimum=1)}"
workers = env_int("EVALSITE_WEB_PROCESSES", _cores(), minimum=1)
worker_class = "gthread"
# Pages are mostly Python, so threads do not add throughput; they keep a quick page (a response, a
# progress poll) from queueing behind slow ones for a free thread (tests/bench/bench_load.py, 20 clients,
# on a busy shared machine: a response page's median 3.6-4.0 s with 4 threads, 0.7-3.4 s with 8).
threads = env_int("EVALSITE_WEB_THREADS", 8, minimum=1)
# Load Django once in the master: a broken setting stops the start with its message instead of
# workers failing one after another, and the processes share the loaded code's memory.
preload_app = True
# A streamed report of a big run takes several seconds; nothing legitimate takes 2 minutes.
timeout = 120
# Ctrl+C should not wait long for a slow request.
graceful_timeout = 10
keepalive = 5
# The heartbeat file lives in memory where there is a tmpfs for it (containers' /tmp may be on overlayfs).
worker_tmp_dir = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
# Errors go to stderr like the rest; no access log (htmx polling would drown it).
errorlog = "-"
loglevel = "warning"
proc_name = "evalsite-web"
