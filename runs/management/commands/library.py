"""python manage.py library {list,delete,rename} {blueprint,run,collection} ...

    library list blueprints|runs|collections
    library delete blueprint ID [--yes]     (its revisions and runs go too; running runs are cancelled first)
    library delete run ID [--yes]
    library delete collection NAME [--yes]
    library rename blueprint ID NEW_ID
    library rename run ID "NEW NAME"        (an empty name gives the run back its number)
    library rename collection NAME NEW_NAME
"""

import sys

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from blueprints.models import Blueprint, ModelCollection, shown_id
from runs.models import Run
from runs.work import delete_run

KINDS = {"blueprint": "blueprint", "blueprints": "blueprint", "run": "run", "runs": "run",
         "collection": "collection", "collections": "collection"}


class Command(BaseCommand):
    help = "List, delete or rename blueprints, runs and model collections. Deleting asks first unless --yes."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["list", "delete", "rename"])
        parser.add_argument("kind", help="blueprint, run or collection")
        parser.add_argument("target", nargs="?", help="the blueprint's id, the run's number or the collection's name")
        parser.add_argument("new", nargs="?", help="for rename: the new id, name or collection name")
        parser.add_argument("--yes", action="store_true", help="delete without asking")

    def handle(self, *args, **options):
        kind = KINDS.get(options["kind"].lower())
        if kind is None:
            raise CommandError(f"unknown kind '{options['kind']}': use blueprint, run or collection")
        action, target = options["action"], options["target"]
        if action == "list":
            return self._list(kind)
        if target is None:
            raise CommandError(f"say which {kind}: library {action} {kind} <{'number' if kind == 'run' else 'id'}>")
        obj = self._find(kind, target)
        if action == "rename":
            if options["new"] is None:
                raise CommandError(f"give the new {'name' if kind != 'blueprint' else 'id'}: "
                                   f"library rename {kind} {target} <new>")
            try:  # the rule and its message are the browser's and the API's (blueprints.models)
                obj.rename(options["new"].strip() if kind == "blueprint" else options["new"])
            except ValidationError as exc:
                raise CommandError(" ".join(exc.messages))
            self.stdout.write(f"renamed {kind} {shown_id(target)} to {self._name(kind, obj)}")
            return
        self._delete(kind, obj, target, options["yes"])

    def _find(self, kind, target):
        if kind == "blueprint":
            found = Blueprint.objects.filter(slug=target).first()
        elif kind == "run":
            found = Run.objects.select_related("blueprint").filter(pk=int(target)).first() if target.isdigit() else None
        else:
            found = ModelCollection.objects.filter(name=target.upper()).first()
        if found is None:
            hint = {"blueprint": "library list blueprints", "run": "library list runs",
                    "collection": "library list collections"}[kind]
            raise CommandError(f"no {kind} '{shown_id(target)}' (see: manage.py {hint})")
        return found

    @staticmethod
    def _name(kind, obj) -> str:
        return {"blueprint": lambda: obj.slug, "run": lambda: obj.display_name, "collection": lambda: obj.name}[kind]()

    def _delete(self, kind, obj, target, yes: bool):
        if kind == "blueprint":
            s = obj.deletion_summary()
            what = (f"blueprint '{obj.slug}' with {s['revisions']} revision(s), {s['runs']} run(s) and "
                    f"{s['responses']} response(s)" + (f"; {s['running']} run(s) still going are cancelled first"
                                                      if s["running"] else ""))
        elif kind == "run":
            what = (f"{obj.display_name} of '{obj.blueprint.slug}' with {obj.responses.count()} response(s)"
                    + ("; it is still going and is cancelled first" if not obj.is_finished else ""))
        else:
            what = f"collection {obj.name} ({len(obj.models)} model(s))"
        if not yes:
            if not sys.stdin.isatty():
                raise CommandError(f"this deletes the {what}. Add --yes to delete without asking.")
            answer = input(f"This deletes the {what}, for good. Type '{target}' to go on: ")
            if answer.strip() != target:
                raise CommandError("nothing was deleted")
        if kind == "run":
            delete_run(obj)
        else:
            obj.delete()
        self.stdout.write(f"deleted the {what}")

    def _list(self, kind):
        if kind == "blueprint":
            for b in Blueprint.objects.order_by("slug"):
                flag = f"\t(id not usable: rename it, e.g. to {b.suggested_id})" if b.id_problem else ""
                self.stdout.write(f"{b.slug}\t{b.title}{flag}")
        elif kind == "run":
            for r in Run.objects.select_related("blueprint").order_by("-pk"):
                self.stdout.write(f"{r.pk}\t{r.status}\t{r.blueprint.slug}\t{r.name}")
        else:
            for c in ModelCollection.objects.order_by("name"):
                self.stdout.write(f"{c.name}\t{len(c.models)} model(s)")
