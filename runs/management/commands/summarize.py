"""python manage.py summarize RUN --json OUT [--check CLAIMS.json] [--model PROVIDER:MODEL]

Asks the summary writer (``EVALSITE_SUMMARY_MODEL``, or ``--model``) for the run's executive summary and checks
every claim against the run's figures before keeping it (docs/results.md, "The summary"). With ``--check``, no
call is made: the claims in CLAIMS.json (``{"claims": [...]}``, the writer's shape, with the run's own ids) are
checked by the same rules.

OUT gets ``{"claims": [{..., "ok": true | false, "reason": null or text}], "summary": markdown}``. Exit status: 0
(refused claims are listed, not an error); 2 when the run cannot be summarised, the claims file cannot be read, or
OUT cannot be written.
"""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from runs import insight
from runs.engine.claims import Refused
from runs.models import Run
from runs.outfiles import OutputRefused, checked_output, write_text

MAX_CLAIMS_BYTES = 2_000_000


class Command(BaseCommand):
    help = "A run's executive summary, each claim checked against its figures."
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("run", type=int)
        parser.add_argument("--json", metavar="OUT", required=True, help="where to write the checked claims ('-')")
        parser.add_argument("--check", metavar="CLAIMS.json", help="check these claims instead of asking a writer")
        parser.add_argument("--model", help="the writer (default: EVALSITE_SUMMARY_MODEL)")

    def handle(self, *args, **options):
        out = options["json"]
        try:
            target = checked_output(out) if out != "-" else None
        except OutputRefused as refused:
            raise CommandError(str(refused), returncode=2) from None
        raw = self._claims(options["check"]) if options["check"] else None
        run = Run.objects.select_related("revision", "blueprint").filter(pk=options["run"]).first()
        if run is None:
            raise CommandError(f"no run {options['run']}: `manage.py library` lists them", returncode=2)
        try:
            if raw is not None:
                data = insight.check_claims(run, raw)
            else:
                data = insight.write_summary(run, model=options["model"])
        except (insight.NoInsight, Refused) as why:
            raise CommandError(str(why), returncode=2) from None
        if "error" in data:
            raise CommandError(f"no summary: {data['error']}", returncode=2)
        data = {"claims": data["claims"], "summary": data["summary"],
                **{k: data[k] for k in ("model", "conflicts") if k in data}}
        text = json.dumps(data, ensure_ascii=False, indent=2)
        if target is None:
            self.stdout.write(text)
        else:
            try:
                write_text(target, text)
            except OutputRefused as refused:
                raise CommandError(str(refused), returncode=2) from None
            accepted = sum(1 for c in data["claims"] if c["ok"])
            self.stdout.write(f"{accepted} of {len(data['claims'])} claims accepted; written to {out}")

    def _claims(self, path: str):
        file = Path(path)
        try:
            if file.stat().st_size > MAX_CLAIMS_BYTES:
                raise CommandError(f"{path}: over {MAX_CLAIMS_BYTES:,} bytes; a claims file is small", returncode=2)
            return json.loads(file.read_text(encoding="utf-8"))
        except OSError as error:
            raise CommandError(f"{path}: cannot be read ({error.strerror})", returncode=2) from None
        except (UnicodeDecodeError, ValueError) as error:
            raise CommandError(f"{path}: not JSON ({error})", returncode=2) from None
