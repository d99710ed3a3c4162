"""python manage.py validate_blueprint PATH... [--json]"""

import json

from django.conf import settings
from django.core.management.base import BaseCommand

from blueprints.spec.dialects import LABELS, WEVAL
from blueprints.spec.files import iter_blueprint_files, validate_file


class Command(BaseCommand):
    help = ("Validate blueprint files (YAML or JSON) and folders of them. Prints OK with counts, or each problem "
            "as file:line:col. Exits 1 when any file has an error. Model collections (`models: [CORE]`) are "
            "looked up in a models/ folder beside the file or above it, then among the collections evalsite has "
            "stored.")

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", help="files or folders (searched recursively, models/ skipped)")
        parser.add_argument("--json", action="store_true", help="print a JSON array, one object per file")

    def handle(self, *paths, **options):
        call_hosts = getattr(settings, "EVALSITE_CALL_HOSTS", ())
        stored = _stored_collections()
        reports = [validate_file(path, stored_collections=stored, call_hosts=call_hosts,
                                 limits=settings.EVALSITE_LIMITS)
                   for path in iter_blueprint_files(options["paths"])]
        if options["json"]:
            self.stdout.write(json.dumps([_as_json(r) for r in reports], ensure_ascii=False, indent=2))
        else:
            for report in reports:
                self._print(report)
            self._summary(reports)
        if not reports or any(not r.ok for r in reports):
            raise SystemExit(1)

    def _print(self, report):
        result = report.result
        if result.ok:
            bp = result.blueprint
            dialect = "" if result.dialect == WEVAL else f"; read as {LABELS.get(result.dialect, result.dialect)}"
            self.stdout.write(f"{report.path}: OK ({_plural(len(bp.prompts), 'prompt')}, "
                              f"{_plural(bp.point_count, 'point')}, {_plural(report.model_count, 'model')}{dialect})")
        for diag in result.diagnostics:
            self.stdout.write(diag.format(report.path))

    def _summary(self, reports):
        if not reports:
            self.stderr.write("no blueprint files found (looked for .yml, .yaml and .json)")
            return
        bad = [r for r in reports if not r.ok]
        warnings = sum(len(r.result.warnings) for r in reports)
        prompts = sum(len(r.result.blueprint.prompts) for r in reports if r.ok)
        self.stdout.write(
            f"{_plural(len(reports), 'file')}: {len(reports) - len(bad)} OK, {len(bad)} with errors, "
            f"{_plural(warnings, 'warning')}; {_plural(prompts, 'prompt')} in the valid files")


def _stored_collections() -> dict[str, list[str]]:
    """The model collections evalsite has stored (the Collections page, imports), by name; none when the database
    is not set up yet (a checkout where ``migrate`` has not run): files are validated all the same."""
    from django.db import DatabaseError

    from blueprints.models import ModelCollection

    try:
        return {name: list(models) for name, models in ModelCollection.objects.values_list("name", "models")}
    except (DatabaseError, RuntimeError):  # RuntimeError: a test runner that keeps the database closed
        return {}


def _plural(n, word):
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _as_json(report):
    result = report.result
    return {
        "path": report.path,
        "ok": result.ok,
        "dialect": result.dialect,
        "errors": [d.as_dict() for d in result.errors],
        "warnings": [d.as_dict() for d in result.warnings],
        "blueprint": result.blueprint.to_upstream() if result.ok else None,
    }
