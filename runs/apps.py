import sys
import threading

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Runs"

    def ready(self):
        post_migrate.connect(_ensure_recovery_schedule, sender=self)
        from blueprints.models import deleting

        deleting.connect(_delete_runs_of_blueprint, dispatch_uid="runs: delete the runs of a deleted blueprint")
        if sys.argv[1:2] == ["qcluster"]:
            # A worker that starts (again) first gives back what dead workers held,
            # so a killed run continues without anyone pressing resume.
            threading.Timer(2.0, _recover_now).start()


def _delete_runs_of_blueprint(sender, blueprint, **kwargs):
    """A blueprint's runs go with it (the blueprints app knows nothing of runs); running ones are cancelled first."""
    from runs.models import Run
    from runs.services import delete_run

    for run in Run.objects.filter(blueprint=blueprint):
        delete_run(run)


def _recover_now():
    from django.db import connections

    from runs.services import recover_stale_items

    try:
        recover_stale_items()
    finally:
        connections.close_all()


def _ensure_recovery_schedule(**kwargs):
    """Every minute, hand out again what workers on other machines left behind (their lease ran out)."""
    from django_q.models import Schedule

    Schedule.objects.update_or_create(
        name="evalsite: recover stale run items",
        defaults={"func": "runs.tasks.recover_runs", "schedule_type": Schedule.MINUTES, "minutes": 1,
                  "repeats": -1},
    )
