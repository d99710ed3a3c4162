"""``manage.py run_blueprint PATH`` in this process, with the moment each phase ends (bench_cli_run.py --timeline).

    .venv/bin/python tests/bench/cli_timeline.py PATH

Prints to standard error, after the command's own output, one line a phase: the seconds since the process
started (as the kernel counts it, so the interpreter's own start is in) and the process's CPU seconds so far.
The phases are the command's, in order: Django set up, the command imported, the blueprint stored, the run and
its items written, the first call sent, the last answer read, the run finished, the command returned (what is
left of the bench's wall time after it is the interpreter's exit). Linux only (/proc).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_TICKS = os.sysconf("SC_CLK_TCK")


def _started() -> float:
    """When this process started, on time.time()'s clock."""
    start_ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
    booted = time.time() - float(Path("/proc/uptime").read_text().split()[0])
    return booted + start_ticks / _TICKS


STARTED = _started()
marks: list[tuple[str, float, float]] = []


def mark(name: str, at: float | None = None, cpu: float | None = None) -> None:
    marks.append((name, (time.time() if at is None else at) - STARTED, time.process_time() if cpu is None else cpu))


def after(owner, name: str, label: str) -> None:
    """Mark ``label`` when ``owner.name`` returns."""
    function = getattr(owner, name)

    def marked(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        finally:
            mark(label)

    setattr(owner, name, marked)


def main() -> None:
    sys.path.insert(0, str(REPO))
    os.chdir(REPO)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    mark("Python started")
    import django

    django.setup()
    mark("Django set up")
    from runs.management.commands import run_blueprint as command

    mark("command imported")
    from django.core.management import call_command

    from runs import work
    from runs.engine.providers import transport

    sent = transport.PooledTransport.post
    last = {}

    async def post(self, *args, **kwargs):
        if not last:
            mark("first call sent")
            last["at"] = None
        answer = await sent(self, *args, **kwargs)
        last["at"], last["cpu"] = time.time(), time.process_time()
        return answer

    transport.PooledTransport.post = post
    after(command.Command, "_blueprint", "blueprint stored")
    after(command, "start_prepared", "run and items written")
    after(work, "maybe_finish", "run finished (last look)")
    try:
        call_command("run_blueprint", sys.argv[1])
        mark("command returned")
    finally:
        if last.get("at") is not None:
            mark("last answer read", last["at"], last["cpu"])
        for name, at, cpu in sorted(marks, key=lambda m: m[1]):
            print(f"timeline: {at:7.3f} s  CPU {cpu:6.3f} s  {name}", file=sys.stderr)


if __name__ == "__main__":
    main()
