"""python manage.py findings RUN [--json OUT] [--similarity]

A finished run's findings, best first, each with its figure and the cells that prove it; the scanners' counts per
model; the similarity of the models' answers when it has been made (``--similarity`` makes it now, with
``EVALSITE_EMBEDDINGS_MODEL``). Computed from the stored results with no call (but ``--similarity``).

``--json OUT`` writes ``{"findings": [{"id", "kind", "text", "value", "models", "prompts", "cells"}],
"scanners": {...}, "similarity": {"models", "matrix", "merges", ...} or null}`` (``-`` for standard output).
Exit status: 0; 2 when the run does not exist, has not finished, or OUT cannot be written.
"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from runs import insight
from runs.models import Run
from runs.outfiles import OutputRefused, checked_output, write_text


class Command(BaseCommand):
    help = "A finished run's findings, scanners and similarity."
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("run", type=int)
        parser.add_argument("--json", metavar="OUT", help="write the findings as JSON to OUT ('-': standard output)")
        parser.add_argument("--similarity", action="store_true",
                            help="embed the answers now (EVALSITE_EMBEDDINGS_MODEL) and include their similarity")

    def handle(self, *args, **options):
        out = options["json"]
        try:
            target = checked_output(out) if out and out != "-" else None
        except OutputRefused as refused:
            raise CommandError(str(refused), returncode=2) from None
        run = Run.objects.select_related("revision", "blueprint").filter(pk=options["run"]).first()
        if run is None:
            raise CommandError(f"no run {options['run']}: `manage.py library` lists them", returncode=2)
        try:
            if options["similarity"]:
                built = insight.build_similarity(run)
                if "error" in built:
                    self.stderr.write(f"similarity: {built['error']}")
            data = insight.findings_json(run)
        except insight.NoInsight as why:
            raise CommandError(str(why), returncode=2) from None
        if out == "-":
            self.stdout.write(json.dumps(data, ensure_ascii=False, indent=2))
            return
        if target is not None:
            try:
                write_text(target, json.dumps(data, ensure_ascii=False, indent=2))
            except OutputRefused as refused:
                raise CommandError(str(refused), returncode=2) from None
        for f in data["findings"]:
            self.stdout.write(f"{f['id']:>4}  {f['text']}")
        if not data["findings"]:
            self.stdout.write("No findings: nothing stands out in this run.")
