"""python manage.py replay RUN [--json OUT] [--csv OUT] [--manifest OUT] [--check]"""

import json
import os

from django.core.management.base import BaseCommand

from runs.exports import run_to_csv, run_to_json
from runs.models import Run
from runs.outfiles import OutputRefused, checked_output, write_text
from runs.replay import ReplayRefused, missing_answers, replay_run, run_manifest

OUTPUTS = ("json", "csv", "manifest")


class Command(BaseCommand):
    help = ("Rebuild a finished run as a new run from its own stored answers (its call log), with no provider "
            "call, and print the new run's id. Exit 0 when the replay completed, 1 when it stopped (it asked "
            "something the original did not) or a file could not be written, 2 when it cannot start (every "
            "missing answer is named, or an output path is refused; nothing is made).")
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
        # Every output path is checked before anything is read or made: a refused path costs no run.
        refused = []
        for name in OUTPUTS:
            if options[name] is not None:
                try:
                    checked_output(options[name])
                except OutputRefused as why:
                    refused.append(f"--{name} {why}")
        paths = [os.path.abspath(options[name]) for name in OUTPUTS if options[name]]
        if len(set(paths)) != len(paths):
            refused.append("two outputs name the same file; give each its own")
        if refused:
            for line in refused:
                self.stderr.write(f"cannot replay: {line}")
            raise SystemExit(2)
        run = Run.objects.filter(pk=options["run"]).first()
        if run is None:
            self.stderr.write(f"cannot replay: there is no run {options['run']}")
            raise SystemExit(2)
        manifest = run_manifest(run) if options["manifest"] else None
        if manifest is not None and not self._write("manifest", options["manifest"],
                                                    json.dumps(manifest, ensure_ascii=False, indent=2)):
            raise SystemExit(1)
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
        self.stdout.write(str(new.pk))
        written = True
        if options["json"]:
            written &= self._write("json", options["json"], json.dumps(run_to_json(new), ensure_ascii=False, indent=2),
                                   made=new)
        if options["csv"]:
            written &= self._write("csv", options["csv"], run_to_csv(new), made=new)
        if new.status != "done":
            self.stderr.write(f"replay {new.pk} {new.status}: {new.stopped_detail or new.error}")
            raise SystemExit(1)
        if not written:
            raise SystemExit(1)
        self.stderr.write(f"replay of run {run.pk}: run {new.pk}, {new.items_done} items, no provider called")

    def _write(self, option: str, path: str, text: str, *, made: Run | None = None) -> bool:
        """Write one output (``runs.outfiles``: never through a link, never half a file); a failure (a full disk,
        the path changed since the check) is said, with what was made and how to get the file again, instead of
        a traceback."""
        try:
            write_text(path, text)
        except OutputRefused as why:
            self.stderr.write(f"cannot write --{option} {why}")
            if made is not None:
                fmt = "json" if option == "json" else "csv"
                self.stderr.write(f"  the replay was made all the same: run {made.pk} ({made.status}); write its "
                                  f"file again with `manage.py export_run {made.pk} --format {fmt} --out FILE`")
            else:
                self.stderr.write("  nothing was replayed")
            return False
        self.stderr.write(f"wrote {path}")
        return True
