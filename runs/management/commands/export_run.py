"""python manage.py export_run RUN_ID --format json|csv [--out FILE]"""

import json
from pathlib import Path

from django.core.management.base import BaseCommand

from runs.exports import run_to_csv, run_to_json
from runs.models import Run


class Command(BaseCommand):
    help = "Write a run's results: JSON in the upstream's result-file layout, or CSV with one row per point."
    # The site's system checks (URLs, templates, every view imported) are `manage.py check`'s and the
    # server's business; here they cost about 0.3 s of every invocation (tests/bench/bench_cli_run.py).
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int)
        parser.add_argument("--format", choices=["json", "csv"], default="json")
        parser.add_argument("--out", metavar="FILE", help="write here instead of standard output")

    def handle(self, *args, **options):
        run = Run.objects.select_related("revision", "blueprint").filter(pk=options["run_id"]).first()
        if run is None:
            self.stderr.write(f"no run {options['run_id']}")
            raise SystemExit(1)
        if options["format"] == "csv":
            text = run_to_csv(run)
        else:
            text = json.dumps(run_to_json(run), ensure_ascii=False, indent=2) + "\n"
        if options["out"]:
            Path(options["out"]).write_text(text, encoding="utf-8")
        else:
            self.stdout.write(text, ending="")
