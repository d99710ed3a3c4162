"""django-q2's ``qcluster``, without Django's system checks at start.

The checks import every view to check the URLs: about a second of CPU at each worker's start (a fifth of a small
run's worker time), for nothing a worker uses. ``make run`` checks the project when it migrates; so does the
web server's process. Django finds this command before django-q2's because ``runs`` is listed first in
INSTALLED_APPS.
"""

from django_q.management.commands.qcluster import Command as QCluster


class Command(QCluster):
    requires_system_checks = []
