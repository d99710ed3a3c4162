"""Importing: files and folders (Weval blueprints, AgentV and AI Eval suites, model collections) into
the library, with the companion files a suite names, and the example blueprints."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Iterable, Mapping

from django.conf import settings
from django.db import transaction

from blueprints.models import (
    Blueprint,
    BlueprintRevision,
    ModelCollection,
    blueprint_id_problem,
    collection_name_problem,
    suggest_blueprint_id,
)
from blueprints.spec.collections import CollectionError, read_collection_file, resolve_models
from blueprints.spec.files import iter_blueprint_files, read_text
from blueprints.spec.ids import blueprint_id_from_path
from blueprints.spec.model_ids import is_collection_name

EXAMPLES_DIR = Path(__file__).resolve().parent / "examples"

# --------------------------------------------------------------------------------------
# Importing


@dataclass
class Conflict:
    """An id that already belongs to another suite: what the browser asks the person to decide."""

    existing: Blueprint
    runs: int  # the existing blueprint's runs (they stay with their revisions either way)
    imported_from: str  # the file the existing blueprint came from
    suggested_id: str  # a free id to import under instead
    text: str  # the refused file's text, to post again with the choice


@dataclass
class ImportItem:
    name: str  # the file's path as given (relative to the imported folder), or "pasted text"
    slug: str | None
    status: str  # "created", "updated", "unchanged", "refused"
    message: str = ""
    blueprint: Blueprint | None = None
    revision: BlueprintRevision | None = None
    conflict: Conflict | None = None  # refused because its id belongs to another suite: what to ask

    @property
    def is_valid(self) -> bool:
        return bool(self.revision and self.revision.is_valid)


@dataclass
class ImportOutcome:
    items: list[ImportItem] = field(default_factory=list)
    collections: list[tuple[str, str]] = field(default_factory=list)  # (name, "created"/"updated"/"unchanged"/error)

    def count(self, status: str) -> int:
        return sum(1 for item in self.items if item.status == status)

    @property
    def refused(self) -> list[ImportItem]:
        return [item for item in self.items if item.status == "refused"]

    @property
    def drafts(self) -> list[ImportItem]:
        return [item for item in self.items if item.revision is not None and not item.revision.is_valid]

    @property
    def summary(self) -> str:
        """"3 files: 2 new, 1 updated, 0 unchanged, 0 refused (1 saved as a draft with errors)"."""
        n = len(self.items)
        text = (f"{n} file{'s' if n != 1 else ''}: {self.count('created')} new, {self.count('updated')} updated, "
                f"{self.count('unchanged')} unchanged, {self.count('refused')} refused")
        if self.drafts:
            text += f" ({len(self.drafts)} {'is a draft' if len(self.drafts) == 1 else 'are drafts'} with errors)"
        if self.collections:
            text += f"; {len(self.collections)} model collection{'s' if len(self.collections) != 1 else ''}"
        return text + "."


def import_files(files: Iterable[tuple[str, str, dict]], *, via: str, folder_name: str = "",
                 choices: Mapping[str, str] | None = None) -> ImportOutcome:
    """Import ``(path, text, companion files)`` triples; each path gives its blueprint's id.

    The id is the path's, as upstream (``sub/name.yml`` -> ``sub__name``, a leading
    ``blueprints/`` dropped). Two files that would get the same id are both refused.
    A file whose blueprint exists makes a new revision when its text changed; one whose id
    belongs to a suite imported from another file is refused (with a ``Conflict`` to ask
    about), unless ``choices`` (by path, what the person chose in the browser) says
    ``"revision"`` (a new revision of that blueprint) or ``"id:<new id>"`` (import under it).
    """
    outcome = ImportOutcome()
    files = _store_collection_files(list(files), outcome)
    files = _attach_companions(files, outcome)
    slugs = {path: _import_id(path, text, folder_name) for path, text, _files in files}
    by_slug: dict[str, list[str]] = {}
    for path, slug in slugs.items():
        by_slug.setdefault(slug, []).append(path)
    lookup = ModelCollection.lookup()
    for path, text, companions in files:
        slug = slugs[path]
        choice = (choices or {}).get(path, "")
        clash = by_slug[slug]
        if choice.startswith("id:"):
            slug, clash = choice[3:].strip(), [path]
            problem = blueprint_id_problem(slug)
            if problem is not None:
                outcome.items.append(ImportItem(path, slug, "refused",
                                                f"{problem} Try '{suggest_blueprint_id(slug)}'."))
                continue
            if Blueprint.objects.filter(slug=slug).exists():
                outcome.items.append(ImportItem(path, slug, "refused", f"the id '{slug}' is taken too; choose a free "
                                                f"one (for example '{free_id(slug)}')"))
                continue
        if len(clash) > 1:
            others = " and ".join(f"'{p}'" for p in clash)
            outcome.items.append(ImportItem(path, slug, "refused",
                                            f"{others} would both get the id '{slug}'; rename one of them"))
            continue
        problem = blueprint_id_problem(slug)
        if problem is not None:  # the id comes from the path: say which file, and what to rename it to
            outcome.items.append(ImportItem(path, slug, "refused",
                                            f"'{path}' would get an id that is not usable, so it was not imported. "
                                            f"{problem} Rename the file so that its id is, for example, "
                                            f"'{suggest_blueprint_id(slug)}'."))
            continue
        taken = "" if choice == "revision" else _taken_by_another_suite(slug, path)
        if taken:
            outcome.items.append(ImportItem(path, slug, "refused", taken, conflict=_conflict(slug, text)))
            continue
        outcome.items.append(_import_one(path, slug, text, companions, via=via, lookup=lookup))
    return outcome


# A suite file of these names says nothing about which suite it is (AgentV's EVAL.yaml):
# its id comes from the suite's `name`, else its folder.
GENERIC_SUITE_NAMES = frozenset({"eval", "evals", "suite", "tests", "dataset", "promptfooconfig"})


def _import_id(path: str, text: str, folder_name: str = "") -> str:
    """The id a file is imported under: from its path, as upstream; a generically named suite file
    (AgentV's ``EVAL.yaml``) by the suite's ``name``, else its folder (``folder_name``: the imported
    folder's own name, for a suite at its top)."""
    from blueprints.spec.dialects import WEVAL, detect_dialect_of
    from blueprints.spec.parse import detect_format
    from blueprints.spec.source import SourceError, load

    slug = blueprint_id_from_path(path)
    if PurePosixPath(path).stem.lower() not in GENERIC_SUITE_NAMES:
        return slug
    try:
        documents = load(text, detect_format(text, path), settings.EVALSITE_LIMITS).documents
    except SourceError:
        return slug  # the reader explains the text
    if detect_dialect_of(documents) == WEVAL:
        return slug
    first = documents[0] if documents else None
    name = first.get("name") if isinstance(first, dict) else None
    if isinstance(name, str) and slugify_id(name):
        return slugify_id(name)
    folder = PurePosixPath(path).parent
    if folder.parts:
        return blueprint_id_from_path(folder.as_posix())
    return slugify_id(folder_name) or slug


def slugify_id(text: str) -> str:
    from django.utils.text import slugify

    return slugify(text)[:100]


def _taken_by_another_suite(slug: str, path: str) -> str:
    """Why ``path`` may not become a new revision of the blueprint ``slug``: it was imported from another file."""
    existing = Blueprint.objects.filter(slug=slug).select_related("current_revision").first()
    if existing is None or existing.current_revision is None:
        return ""
    before = (existing.current_revision.import_report or {}).get("path")
    if not before or before == path:
        return ""
    return (f"the id '{slug}' belongs to the suite imported from '{before}', and '{path}' is another file: "
            f"give this suite its own `name:`, or rename or delete '{slug}' first (its page, Settings)")


def free_id(slug: str) -> str:
    """``slug`` (a taken id) with the first free ``-2``, ``-3``... after it, within the id's length."""
    return suggest_blueprint_id(slug)


def _conflict(slug: str, text: str) -> Conflict:
    existing = Blueprint.objects.select_related("current_revision").get(slug=slug)
    return Conflict(existing=existing, runs=existing.runs.count(),
                    imported_from=(existing.current_revision.import_report or {}).get("path", ""),
                    suggested_id=free_id(slug), text=text)


def _store_collection_files(files: list[tuple[str, str, dict]], outcome: ImportOutcome) -> list:
    """Model collection files among the imported ones (``models/CORE.json``: a JSON list of model ids) are stored
    as collections, before the blueprints that name them; the other files are returned."""
    rest = []
    for path, text, extra in files:
        pure = PurePosixPath(path)
        if pure.suffix.lower() != ".json" or not (pure.parent.name == "models" or is_collection_name(pure.stem)):
            rest.append((path, text, extra))
            continue
        try:
            data = json.loads(text)
        except ValueError:
            rest.append((path, text, extra))
            continue
        if not isinstance(data, list) or not all(isinstance(m, str) for m in data):
            rest.append((path, text, extra))  # not a collection: let the blueprint reader explain it
            continue
        name = pure.stem
        problem = collection_name_problem(name)
        if problem is not None:
            outcome.collections.append((name, f"skipped: '{pure.name}' does not name a collection: {problem}"))
            continue
        _, changed = ModelCollection.store(name, [m for m in data if m.strip()], source=path)
        outcome.collections.append((name, "stored" if changed else "unchanged"))
    return rest


def _attach_companions(files: list[tuple[str, str, dict]], outcome: ImportOutcome) -> list[tuple[str, str, dict]]:
    """Files imported together: AI Eval prompt files and AgentV test-row files go with the suites, not alone.

    Each such file is offered to every suite of the same import, keyed by its path relative to the suite's folder
    (the suites' importers find what they name); it is listed as "attached" in the outcome.
    """
    from blueprints.spec.dialects import companion_kind

    suites, companions = [], []
    for path, text, extra in files:
        (companions if companion_kind(text, path) else suites).append((path, text, extra))
    if not companions:
        return files
    out = []
    for path, text, extra in suites:
        folder = PurePosixPath(path).parent
        attached = dict(extra)
        for cpath, ctext, _ in companions:
            relative = PurePosixPath(_relpath(cpath, str(folder)))
            attached.setdefault(relative.as_posix(), ctext)
        out.append((path, text, attached))
    for cpath, _, _ in companions:
        outcome.items.append(ImportItem(cpath, None, "attached", "a companion file (a prompt file or test rows); "
                                                                 "kept with the suites imported beside it"))
    return out


def _relpath(path: str, start: str) -> str:
    import posixpath

    return posixpath.relpath(posixpath.normpath(path), posixpath.normpath(start or "."))


def _import_one(path, slug, text, companions, *, via, lookup) -> ImportItem:
    with transaction.atomic():
        blueprint, created = Blueprint.objects.get_or_create(slug=slug, defaults={"title": ""})
        revision, changed = blueprint.save_revision(
            text, files=companions, collections=lookup, summary=f"Imported from {path}",
            import_report={"via": via, "path": path},
        )
    if created:
        status = "created"
    else:
        status = "updated" if changed else "unchanged"
    message = ""
    if not revision.is_valid:
        message = f"saved as a draft: {revision.error_count} error{'s' if revision.error_count != 1 else ''}"
    else:
        missing = _missing_collections(revision, lookup)
        if missing:
            names = ", ".join(missing)
            message = (f"names the model collection{'s' if len(missing) > 1 else ''} {names}, which evalsite does not "
                       f"have: import {' and '.join(f'models/{n}.json' for n in missing)} with it, or add "
                       f"{'them' if len(missing) > 1 else 'it'} on the Collections page; until then it cannot run")
    return ImportItem(path, slug, status, message, blueprint, revision)


def _missing_collections(revision, lookup) -> list[str]:
    result = getattr(revision, "parsed", None) or revision.parse(collections=lookup)
    if result.blueprint is None or not result.blueprint.models_given:
        return []
    _, missing = resolve_models(result.blueprint.models, lookup)
    return list(missing)


def import_folder(folder: Path, *, via: str = "import_blueprints") -> ImportOutcome:
    """A blueprint repository: its `models/*.json` as collections, then every blueprint file below it."""
    folder = folder.resolve()
    outcome = ImportOutcome()
    models_dir = folder / "models"
    linked = [p for p in sorted(models_dir.glob("*.json")) if _outside(p, folder)] if models_dir.is_dir() else []
    for path in linked:  # refused as a linked blueprint is: its content is not the folder's to give
        outcome.items.append(ImportItem(f"models/{path.name}", None, "refused", f"'models/{path.name}' is a link "
                                        "to a file outside the folder being imported; copy the file in instead"))
    outcome.collections = import_collections(models_dir, skip=frozenset(linked))
    files = []
    for path in iter_blueprint_files([folder]):
        relative = path.relative_to(folder).as_posix()
        if not path.resolve().is_relative_to(folder):
            outcome.items.append(ImportItem(relative, None, "refused", f"'{relative}' is a link to a file outside "
                                            f"the folder being imported; copy the file in instead"))
            continue
        try:
            text = read_text(path)
        except (OSError, UnicodeDecodeError) as exc:
            outcome.items.append(ImportItem(relative, None, "refused", f"cannot read '{relative}': {exc}"))
            continue
        files.append((relative, text, companion_files(path, text, folder)))
    outcome.items.extend(import_files(files, via=via, folder_name=folder.name).items)
    return outcome


def _outside(path: Path, folder: Path) -> bool:
    """True when ``path`` is a link (or sits below one) leading outside ``folder``, or to a link loop."""
    try:
        return not path.resolve().is_relative_to(folder)
    except (OSError, RuntimeError):  # a loop of links
        return True


def import_collections(models_dir: Path, *, skip: frozenset = frozenset()) -> list[tuple[str, str]]:
    """Store each `models/<NAME>.json` as a collection, except the paths in ``skip``."""
    results = []
    if not models_dir.is_dir():
        return results
    for path in sorted(models_dir.glob("*.json")):
        name = path.stem
        if path in skip:
            continue
        problem = collection_name_problem(name)
        if problem is not None:
            results.append((name, f"skipped: '{path.name}' does not name a collection: {problem}"))
            continue
        try:
            model_ids = read_collection_file(path)
        except CollectionError as exc:
            results.append((name, f"skipped: {exc}"))
            continue
        _, changed = ModelCollection.store(name, model_ids, source=str(path))
        results.append((name, "stored" if changed else "unchanged"))
    return results


def companion_files(path: Path, text: str, root: Path | None = None) -> dict:
    """The files a blueprint or suite names, kept with its revision: a blueprint's fixtures file, an AgentV
    suite's tests files, judge prompts and scripts, an AI Eval suite's prompt file (blueprints.spec.companions).

    Only files inside ``root`` (the imported folder; by default the file's own folder, or for an AI Eval suite
    in ``tests/`` the project folder above it) are read.
    """
    from blueprints.spec.companions import collect_companions

    return collect_companions(path, text, root)


# --------------------------------------------------------------------------------------
# Example blueprints: the library's first contents


def example_files() -> list[Path]:
    return sorted(p for p in EXAMPLES_DIR.iterdir() if p.suffix in (".yml", ".yaml", ".json"))


def load_examples() -> list[Blueprint]:
    """Add each example blueprint whose id is free. Safe to call again: existing ones are left alone."""
    lookup = ModelCollection.lookup()
    added = []
    for path in example_files():
        slug = blueprint_id_from_path(path.name)
        if Blueprint.objects.filter(slug=slug).exists():
            continue
        with transaction.atomic():
            blueprint = Blueprint.objects.create(slug=slug, title="")
            blueprint.save_revision(read_text(path), collections=lookup, summary="Example blueprint",
                                    import_report={"via": "examples", "path": path.name})
        added.append(blueprint)
    return added
