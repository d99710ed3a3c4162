"""python manage.py import_blueprints DIR"""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from blueprints.importing import import_folder


class Command(BaseCommand):
    help = ("Import a folder of blueprints (a clone of a blueprint repository, say). Ids come from the paths "
            "relative to the folder (sub/name.yml -> sub__name, a leading blueprints/ dropped); models/*.json "
            "become model collections. A changed file makes a new revision; an unchanged one does not, whichever "
            "door (this command, the import page) imported it first. A file whose id belongs to other text "
            "imported from another file is refused with the fix. Files with errors are kept as drafts. Exits 1 "
            "when a file was refused.")

    def add_arguments(self, parser):
        parser.add_argument("folder", help="the folder to import, searched recursively (models/ folders skipped)")
        parser.add_argument("--quiet", action="store_true", help="print only the summary and the refusals")

    def handle(self, *args, folder, quiet=False, **options):
        root = Path(folder)
        if not root.is_dir():
            raise CommandError(f"{folder} is not a folder")
        outcome = import_folder(root)
        for name, state in outcome.collections:
            if not quiet:
                self.stdout.write(f"collection {name}: {state}")
        for item in outcome.items:
            if item.status == "refused":
                self.stderr.write(f"{item.name}: refused: {item.message}")
            elif not quiet:
                line = f"{item.name} -> {item.slug}: {item.status}"
                if item.revision is not None:
                    line += f" (revision {item.revision.number})"
                if item.message:
                    line += f"; {item.message}"
                self.stdout.write(line)
        for item in outcome.drafts:
            for diag in item.revision.parse().errors:
                self.stdout.write(diag.format(item.name))
        self.stdout.write(outcome.summary)
        if outcome.refused:
            raise SystemExit(1)
