"""python manage.py replay RUN [--json OUT] [--csv OUT] [--manifest OUT] [--check]"""

import json
from pathlib import Path

from django.core.management.base import BaseCommand

from runs.exports import run_to_csv, run_to_json
from runs.models import Run
from runs.replay import ReplayRefused, missing_answers, replay_run, run_manifest


class Command(BaseCommand):
    help = ("Rebuild a finished run as a new run from its own stored answers (its call log), with no provider "
            "call, and print the new run's id. Exit 0 when the replay completed, 1 when it stopped (it asked "
            "something the original did not), 2 when it cannot start: every missing answer is named.")
    # The site's system checks (URLs, templates, every view imported) are `manage.py check`'s and the
    # server's business; here they cost about 0.3 s of every invocation (tests/bench/bench_cli_run.py).
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("run", type=int, metavar="RUN", help="the id of the run to replay")
        parser.add_argument("--json", metavar="OUT", help="write the replay's result file (as export_run --format json)")
        parser.add_argument("--csv", metavar="OUT", help="write the replay's CSV (as export_run --format csv)")
        parser.add_argument("--manifest", metavar="OUT",
                            help="write the original run's manifest (what it pinned, and every call's cache key)")
        parser.add_argument("--check", action="store_true",
                            help="only say whether the run can be replayed (what is missing); make nothing")

    def handle(self, *args, **options):
        run = Run.objects.filter(pk=options["run"]).first()
        if run is None:
            self.stderr.write(f"cannot replay: there is no run {options['run']}")
            raise SystemExit(2)
        manifest = run_manifest(run) if options["manifest"] else None
        if manifest is not None:
            self._write(options["manifest"], json.dumps(manifest, ensure_ascii=False, indent=2))
        if options["check"]:
            missing = missing_answers(run, manifest["calls"] if manifest is not None else None)
            for line in missing:
                self.stderr.write(f"  missing: {line}")
            self.stdout.write(f"run {run.pk}: " + (f"{len(missing)} answer(s) missing; not replayable" if missing
                                                  else "every answer is in its call log; replayable"))
            raise SystemExit(2 if missing else 0)
        try:
            new = replay_run(run)
        except ReplayRefused as refused:
            self.stderr.write(f"cannot replay: {refused.message}; nothing was sent to a provider and no run was made")
            for line in refused.missing:
                self.stderr.write(f"  missing: {line}")
            raise SystemExit(2)
        if options["json"]:
            self._write(options["json"], json.dumps(run_to_json(new), ensure_ascii=False, indent=2))
        if options["csv"]:
            self._write(options["csv"], run_to_csv(new))
        self.stdout.write(str(new.pk))
        if new.status != "done":
            self.stderr.write(f"replay {new.pk} {new.status}: {new.stopped_detail or new.error}")
            raise SystemExit(1)
        self.stderr.write(f"replay of run {run.pk}: run {new.pk}, {new.items_done} items, no provider called")

    def _write(self, path: str, text: str) -> None:
        Path(path).write_text(text, encoding="utf-8")
        self.stderr.write(f"wrote {path}")
