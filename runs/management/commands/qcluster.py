"""django-q2's ``qcluster``, without Django's system checks at start, and with what a run needs imported before
the cluster forks its processes.

The checks import every view to check the URLs: about a second of CPU at each worker's start (a fifth of a small
run's worker time), for nothing a worker uses. ``make run`` checks the project when it migrates; so does the
web server's process. Django finds this command before django-q2's because ``runs`` is listed first in
INSTALLED_APPS.
"""

import importlib

from django_q.management.commands.qcluster import Command as QCluster

# What a worker imports for its first task and its first run's finish (the task, the pipeline, the run's
# statistics and summary): 0.13 s and 0.5 s of CPU on a 2-core machine, the second between a run's last answer
# and its end (tests/bench/bench_run.py prints that finish). Imported once here, every worker django-q2 forks
# starts with them, including the ones it forks again after 500 tasks or a timed-out task.
PRELOADED = ("runs.tasks", "runs.summaries", "scipy.special")


class Command(QCluster):
    requires_system_checks = []

    def handle(self, *args, **options):
        for name in PRELOADED:
            importlib.import_module(name)
        super().handle(*args, **options)
