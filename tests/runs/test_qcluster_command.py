"""`manage.py qcluster` is django-q2's cluster, started without Django's system checks."""

from django.core.management import get_commands, load_command_class
from django_q.management.commands.qcluster import Command as QCluster


def test_qcluster_is_ours_and_runs_no_system_checks():
    assert get_commands()["qcluster"] == "runs"  # runs is listed before django_q in INSTALLED_APPS
    command = load_command_class("runs", "qcluster")
    assert isinstance(command, QCluster)
    assert command.requires_system_checks == []


def test_what_a_run_needs_is_imported_before_the_cluster_forks_its_workers(tmp_path):
    """The worker processes are forked from the cluster (django-q2 uses fork where there is one), so what the
    command imports before the cluster starts, every worker has without importing it at its first task or its
    first run's finish. In a process of its own: the cluster's start is replaced by a look at what is imported."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = """
import sys, django
django.setup()
from django.core.management import call_command
from django_q.management.commands.qcluster import Command as QCluster
from runs.management.commands.qcluster import PRELOADED
print("before:", *[name for name in PRELOADED if name in sys.modules])
QCluster.handle = lambda self, *a, **k: print("at start:", *[name for name in PRELOADED if name in sys.modules])
call_command("qcluster")
"""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "evalsite.settings", "EVALSITE_DATA_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=Path(__file__).resolve().parents[2],
                         capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["before:", "at start: runs.tasks runs.summaries scipy.special"]
