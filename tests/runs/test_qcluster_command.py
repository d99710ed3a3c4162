"""`manage.py qcluster` is django-q2's cluster, started without Django's system checks."""

from django.core.management import get_commands, load_command_class
from django_q.management.commands.qcluster import Command as QCluster


def test_qcluster_is_ours_and_runs_no_system_checks():
    assert get_commands()["qcluster"] == "runs"  # runs is listed before django_q in INSTALLED_APPS
    command = load_command_class("runs", "qcluster")
    assert isinstance(command, QCluster)
    assert command.requires_system_checks == []
