# Over 500 lines: both doors (folders from the CLI, uploads from the browser) read through the same folder code here.
"""Importing: files and folders (Weval blueprints, AgentV and AI Eval suites, model collections) into
the library, with the companion files a suite names, and the example blueprints."""

from __future__ import annotations

import json
import posixpath
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Iterable, Mapping

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction

from blueprints.models import (
    COLLECTIONS_NAMED,
    Blueprint,
    BlueprintRevision,
    ModelCollection,
    blueprint_id_problem,
    collection_name_problem,
    shown_id,
    sha256_text,
    suggest_blueprint_id,
)
from blueprints.spec.collections import (
    CollectionError,
    collection_file_name,
    collection_files_near,
    has_collection_folder,
    lookup_for_files,
    lookup_in_files,
    own_then_stored,
    read_collection_file,
    resolve_models,
)
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
    files: dict = field(default_factory=dict)  # its companion files, posted again with it
    folder_name: str = ""  # the imported folder's name (a suite at its top is known by it)
    title: str = ""  # the refused file's own title, shown beside the existing blueprint's

    @property
    def files_json(self) -> str:
        return json.dumps(dict(self.files), ensure_ascii=False) if self.files else ""


@dataclass
class ImportItem:
    name: str  # the file's path as given (relative to the imported folder), or "pasted text"
    slug: str | None
    status: str  # "created", "updated", "unchanged", "refused"; "attached" (a companion), "note" (left out)
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
    def notes(self) -> list[ImportItem]:
        return [item for item in self.items if item.status == "note"]

    @property
    def summary(self) -> str:
        """"3 files: 2 new, 1 updated, 0 unchanged, 0 refused (1 saved as a draft with errors)"; companion files
        and files left out are counted after it."""
        n = len(self.items) - len(self.notes) - self.count("attached")
        text = (f"{n} file{'s' if n != 1 else ''}: {self.count('created')} new, {self.count('updated')} updated, "
                f"{self.count('unchanged')} unchanged, {self.count('refused')} refused")
        if self.drafts:
            text += f" ({len(self.drafts)} {'is a draft' if len(self.drafts) == 1 else 'are drafts'} with errors)"
        if self.collections:
            text += f"; {len(self.collections)} model collection{'s' if len(self.collections) != 1 else ''}"
        if self.count("attached"):
            k = self.count("attached")
            text += f"; {k} companion file{'s' if k != 1 else ''} attached"
        if self.notes:
            k = len(self.notes)
            text += f"; {k} other file{'s' if k != 1 else ''} left out"
        return text + "."


def import_files(files: Iterable[tuple[str, str, dict]], *, via: str, folder_name: str = "",
                 choices: Mapping[str, str] | None = None, on_disk: Mapping[str, Path] | None = None,
                 root: Path | None = None) -> ImportOutcome:
    """Import ``(path, text, companion files)`` triples; each path gives its blueprint's id.

    The id is the path's, as upstream (``sub/name.yml`` -> ``sub__name``, a leading
    ``blueprints/`` dropped). Two files that would get the same id are both refused.
    A file whose blueprint exists is unchanged when its text and companion files are the
    current revision's (whichever door imported it first); it makes a new revision when it
    comes from the same file (``source_path``); one whose id belongs to a suite imported from
    another file (or made in evalsite) is refused, with a ``Conflict`` to ask about, unless
    ``choices`` (by path, what the person chose in the browser) says ``"revision"`` (a new
    revision of that blueprint) or ``"id:<new id>"`` (import under it).

    ``on_disk`` (by path): where a file read from a folder (``root``) is; the collection files it came with are
    added to its companion files as it is imported (``with_collections``: one parse, the revision's).
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
        source = source_path(path, folder_name)
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
        if on_disk and path in on_disk:
            companions = with_collections(on_disk[path], text, companions, root, blueprint_id=slug)
        if choice.startswith("id:"):  # the person named a free id: a blueprint of its own, whatever holds this text
            outcome.items.append(_import_one(path, slug, text, companions, via=via, lookup=lookup, source=source))
            continue
        found = identify(path, text, companions, slug=slug, folder_name=folder_name, choice=choice,
                         others=frozenset(slugs.values()) - {slug})
        if found.refusal:
            outcome.items.append(ImportItem(path, found.slug, "refused", found.refusal, conflict=found.conflict))
            continue
        outcome.items.append(_import_one(path, found.slug, text, found.files, via=via, lookup=lookup, source=source,
                                         note=found.note))
    return outcome


@dataclass
class Identity:
    """Which blueprint a file is (``identify``): its id, the files to store with it, what to say about it; or
    why it is asked about instead (``refusal``, with the ``conflict`` the browser asks)."""

    slug: str
    files: Mapping = field(default_factory=dict)
    note: str = ""
    refusal: str = ""
    conflict: Conflict | None = None


def identify(path: str, text: str, companions: Mapping | None = None, *, slug: str | None = None,
             folder_name: str = "", choice: str = "", others: frozenset = frozenset()) -> Identity:
    """The one identity rule, for every door that brings a file (the import page, ``import_blueprints``,
    ``run_blueprint FILE``): which blueprint ``path`` with ``text`` is.

    1. The blueprint of its id (from its path, ``slug``) holds the same text: that one.
    2. That blueprint came from this same file (``same_source``): a new revision of it.
    3. The same text is the current revision of exactly one other blueprint: that one, said so ("the same text
       as 'sub__a'"): a folder imported, then one of its files chosen alone (whose id is its name alone), is
       the folder's blueprint, not a second one. Several hold it: asked, naming them. Blueprints of the other
       files of the same import (``others``) are theirs, not candidates.
    4. Else its id: a new blueprint, or asked when the id belongs to another suite (``_taken_by_another_suite``).

    The same text is unchanged when it brings no file its blueprint's revision lacks or holds otherwise (a file
    chosen alone comes without the folder's companion and collection files); else it makes a new revision with
    the files it came with. ``choice`` (the browser's answer): ``"revision"`` a new revision of its id's
    blueprint, ``"revision:<id>"`` of that blueprint.
    """
    slug = slug if slug is not None else _import_id(path, text, folder_name)
    companions = companions if companions is not None else {}
    source = source_path(path, folder_name)
    if choice == "revision":
        return Identity(slug, companions)
    if choice.startswith("revision:"):
        target = Blueprint.objects.filter(slug=choice[len("revision:"):]).first()
        if target is None:
            return Identity(slug, refusal=f"the blueprint '{shown_id(choice[len('revision:'):])}' is gone; import "
                                          f"the file again")
        return Identity(target.slug, companions)
    digest = sha256_text(text)
    existing = (Blueprint.objects.filter(slug=slug).select_related("current_revision")
                .only("pk", "slug", "current_revision__sha256", "current_revision__files").first())
    current = existing.current_revision if existing is not None else None
    if current is not None and current.sha256 == digest:
        return Identity(slug, _kept_files(current.files, companions))
    if current is not None and any(same_source(before, source) for before, _ in _recorded_sources(existing)):
        return Identity(slug, companions)  # the same file, changed
    same = same_text(text, exclude={slug, *others})
    if len(same) == 1:
        other, files = same[0]
        recorded = _recorded_sources(Blueprint.objects.get(slug=other))
        where = f" (imported from '{recorded[0][1]}')" if recorded else ""
        return Identity(other, _kept_files(files, companions),
                        note=f"the same text as '{other}'{where}, so it is that blueprint, not a second one")
    if same:
        names = ", ".join(f"'{other}'" for other, _ in same[:5]) + (" and more" if len(same) > 5 else "")
        free = slug if existing is None else free_id(slug)
        conflict = _conflict(same[0][0], path, text, companions, folder_name)
        conflict.suggested_id = free
        return Identity(same[0][0], refusal=f"the same text is already stored as {names}, so which blueprint it "
                                            f"is cannot be told: on the import page, choose (a new revision of "
                                            f"'{same[0][0]}', or a new blueprint with its own id, '{free}'); on "
                                            f"the command line, run one of them by its id or delete the copies "
                                            f"you do not need (library delete blueprint ID)", conflict=conflict)
    if existing is None:
        return Identity(slug, companions)
    taken = _taken_by_another_suite(slug, path, source, text, companions)
    if taken:
        return Identity(slug, refusal=taken, conflict=_conflict(slug, path, text, companions, folder_name))
    return Identity(slug, companions)


def same_text(text: str, *, exclude=()) -> list[tuple[str, dict]]:
    """``(id, companion files)`` of the blueprints (at most 6, by id) whose current revision has this very text
    (its sha256), but those in ``exclude``."""
    return list(Blueprint.objects.filter(current_revision__sha256=sha256_text(text)).exclude(slug__in=set(exclude))
                .order_by("slug").values_list("slug", "current_revision__files")[:6])


def import_pasted(text: str) -> ImportItem:
    """Text pasted on the import page: a new blueprint (its id from its title), unless a blueprint holds this very
    text already (then it is that one, said so), or several do (then it is refused, naming them)."""
    from blueprints.editing import create_from_text

    same = same_text(text)
    if len(same) == 1:
        blueprint = Blueprint.objects.select_related("current_revision").get(slug=same[0][0])
        return ImportItem("pasted text", blueprint.slug, "unchanged", f"the same text as '{blueprint.slug}', so it "
                          "is that blueprint, not a second one", blueprint, blueprint.current_revision)
    if same:
        names = ", ".join(f"'{slug}'" for slug, _ in same[:5]) + (" and more" if len(same) > 5 else "")
        return ImportItem("pasted text", None, "refused", f"the same text is already stored as {names}: open the "
                          "one you mean, or make a copy on purpose with New blueprint (an id of its own)")
    blueprint, revision = create_from_text(text, summary="Pasted into evalsite")
    return ImportItem("pasted text", blueprint.slug, "created", blueprint=blueprint, revision=revision)


def _kept_files(current: Mapping | None, incoming: Mapping) -> Mapping:
    """The files a revision of the same text keeps: its own when ``incoming`` brings nothing they lack or hold
    otherwise (then nothing changes), else ``incoming``. A collection file the revision lacks brings nothing when
    the revision resolves that collection to the same models already (a revision stored before collection files
    were kept, whose collection is on the Collections page as in the file)."""
    current = dict(current or {})
    resolves = None
    for key, value in dict(incoming).items():
        if current.get(key) == value:
            continue
        name = collection_file_name(key)
        if name is not None and key not in current:
            resolves = resolves or lookup_for_files(current, ModelCollection.lookup())
            if resolves(name) == lookup_in_files({key: value})(name):
                continue
        return incoming
    return current


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


# --- upload identity: which file a blueprint's revisions came from ---------------------------------------------


def source_path(path: str, folder_name: str = "") -> str:
    """Where an imported file came from, as its revisions record it (``import_report["source"]``): its path relative
    to the imported folder, the same from the command line and a folder chosen in the browser; a generically named
    suite at the folder's top (``EVAL.yaml``) with the folder's name first, as its id takes it. A file uploaded by
    itself is known by its name alone."""
    pure = PurePosixPath(posixpath.normpath(path.replace("\\", "/")))
    if folder_name and len(pure.parts) == 1 and pure.stem.lower() in GENERIC_SUITE_NAMES:
        return f"{folder_name}/{pure.as_posix()}"
    return pure.as_posix()


def same_source(recorded: str, source: str) -> bool:
    """True when two recorded paths can be one file: one ends with the other (a folder imported from its parent,
    or a file uploaded by its name). A generic name alone (``EVAL.yaml``, ``eval.yml``) says nothing of where the
    file came from, so it never matches by itself."""
    a = PurePosixPath(recorded or "").parts
    b = PurePosixPath(source or "").parts
    shorter, longer = sorted((a, b), key=len)
    if not shorter:
        return False
    if len(shorter) == 1 and PurePosixPath(shorter[0]).stem.lower() in GENERIC_SUITE_NAMES:
        return False
    return longer[len(longer) - len(shorter):] == shorter


def _recorded_sources(blueprint: Blueprint) -> list[tuple[str, str]]:
    """``(source, path as shown)`` of each revision imported from a file, newest first (a revision imported before
    sources were recorded is known by its path)."""
    rows = blueprint.revisions.order_by("-number").values_list("import_report__source", "import_report__path")
    return [(source or path, path or source) for source, path in rows
            if isinstance(source or path, str) and (source or path)]


def _taken_by_another_suite(slug: str, path: str, source: str, text: str, companions: Mapping) -> str:
    """Why ``path`` may not silently become a new revision of the blueprint ``slug``: that blueprint holds other
    text and came from another file (or was made in evalsite). Empty when the text and companion files are its
    current revision's (then nothing changes), or when it came from this file."""
    existing = Blueprint.objects.filter(slug=slug).select_related("current_revision").first()
    if existing is None or existing.current_revision is None:
        return ""
    current = existing.current_revision
    if current.sha256 == sha256_text(text):
        return ""  # the same text, whichever door imported it first (identify: unchanged, or its files changed)
    recorded = _recorded_sources(existing)
    if any(same_source(before, source) for before, _ in recorded):
        return ""
    fix = _fix_for(path, text)
    if not recorded:
        return (f"the id '{slug}' belongs to a blueprint made in evalsite, not imported from a file, and '{path}' "
                f"has other text: {fix}, or rename or delete '{slug}' first (its page, Settings)")
    shown, this = _shown_sources(recorded[0], path, source)
    if shown == this:  # a generic name uploaded by itself: the name alone does not say it is the same file
        return (f"the id '{slug}' belongs to the suite imported from '{shown}', and this '{path}' has other text: "
                f"a file's name alone does not say it is the same suite. Import its folder (the path then tells "
                f"suites apart), {fix}, or rename or delete '{slug}' first (its page, Settings)")
    return (f"the id '{slug}' belongs to the suite imported from '{shown}', and '{this}' is another file: "
            f"{fix}, or rename or delete '{slug}' first (its page, Settings)")


def _shown_sources(recorded: tuple[str, str], path: str, source: str) -> tuple[str, str]:
    """How a conflict names the two files: by their paths, or, when those are the same (``EVAL.yaml`` at the top
    of two folders), by their sources (``team-a/EVAL.yaml``, ``team-b/EVAL.yaml``)."""
    before_source, before_path = recorded
    if before_path == path and before_source != source:
        return before_source, source
    return before_path, path


def _fix_for(path: str, text: str) -> str:
    """How to give a file its own id: an AgentV or AI Eval suite by its ``name:``; a Weval blueprint by its path."""
    from blueprints.spec.dialects import WEVAL, detect_dialect

    try:
        weval = detect_dialect(text, path=path) == WEVAL
    except Exception:  # noqa: BLE001 - the reader explains a text it cannot read
        weval = True
    if weval or PurePosixPath(path).stem.lower() not in GENERIC_SUITE_NAMES:
        return "rename the file (its path gives its id)"
    return "give this suite its own `name:`"


def free_id(slug: str) -> str:
    """``slug`` (a taken id) with the first free ``-2``, ``-3``... after it, within the id's length."""
    return suggest_blueprint_id(slug)


def _conflict(slug: str, path: str, text: str, companions: Mapping, folder_name: str) -> Conflict:
    existing = Blueprint.objects.select_related("current_revision").get(slug=slug)
    recorded = _recorded_sources(existing)
    return Conflict(existing=existing, runs=existing.runs.count() if hasattr(existing, "runs") else 0,
                    imported_from=_shown_sources(recorded[0], path, source_path(path, folder_name))[0] if recorded
                    else "",
                    suggested_id=free_id(slug), text=text, files=dict(companions or {}), folder_name=folder_name,
                    title=_title_of(slug, text, companions))


def _title_of(slug: str, text: str, companions: Mapping) -> str:
    """The title a file would give its blueprint (its parsed title, else its ``title:`` line)."""
    from blueprints.models import title_from_text
    from blueprints.parsing import parse_text

    try:
        result = parse_text(text, blueprint_id=slug, collections=ModelCollection.lookup(), files=dict(companions))
    except Exception:  # noqa: BLE001 - a title is only shown; the import says what is wrong with the text
        result = None
    title = result.blueprint.title if result is not None and result.blueprint is not None else None
    return (title or title_from_text(text) or "")[:500]


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
        try:
            _, changed = ModelCollection.store(name, [m for m in data if m.strip()], source=path)
        except ValidationError as exc:
            outcome.collections.append((name, f"skipped: {path}: {' '.join(exc.messages)}"))
            continue
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


def _import_one(path, slug, text, companions, *, via, lookup, source="", note="") -> ImportItem:
    with transaction.atomic():
        blueprint, created = Blueprint.objects.get_or_create(slug=slug, defaults={"title": ""})
        revision, changed = blueprint.save_revision(
            text, files=companions, collections=lookup, summary=f"Imported from {path}",
            import_report={"via": via, "path": path, "source": source or path},
        )
    if created:
        status = "created"
    else:
        status = "updated" if changed else "unchanged"
    messages = [note] if note else []
    if not revision.is_valid:
        messages.append(f"saved as a draft: {revision.error_count} error{'s' if revision.error_count != 1 else ''}")
    else:
        missing = _missing_collections(revision, lookup)
        if missing:
            names = ", ".join(missing)
            messages.append(f"names the model collection{'s' if len(missing) > 1 else ''} {names}, which evalsite "
                            f"does not have: import {' and '.join(f'models/{n}.json' for n in missing)} with it, or "
                            f"add {'them' if len(missing) > 1 else 'it'} on the Collections page; until then it "
                            f"cannot run")
    return ImportItem(path, slug, status, "; ".join(messages), blueprint, revision)


def _missing_collections(revision, lookup) -> list[str]:
    result = getattr(revision, "parsed", None) or revision.parse(collections=lookup)
    if result.blueprint is None or not result.blueprint.models_given:
        return []
    _, missing = resolve_models(result.blueprint.models, revision.collections(lookup))
    return list(missing)


def import_folder(folder: Path, *, via: str = "import_blueprints") -> ImportOutcome:
    """A blueprint repository: its `models/*.json` as collections, then every blueprint file below it."""
    folder = folder.resolve()
    outcome = ImportOutcome()
    on_disk: dict = {}
    files = _read_folder(folder, outcome, on_disk=on_disk)
    outcome.items.extend(import_files(files, via=via, folder_name=folder.name, on_disk=on_disk, root=folder).items)
    return outcome


def _read_folder(folder: Path, outcome: ImportOutcome, *, shown=None,
                 on_disk: dict | None = None) -> list[tuple[str, str, dict]]:
    """``(relative path, text, companion files)`` of each suite below ``folder`` (resolved), as the command line and
    the browser's folder upload both read it: `models/*.json` at its top are stored as collections first (in
    ``outcome``), links to files outside it and files that are not UTF-8 text are refused there.
    ``shown(path)``: how a collection's source is recorded (its path, by default); ``on_disk`` (filled): where each
    suite is, for ``import_files`` to find the collection files it came with when it imports it."""
    models_dir = folder / "models"
    linked = [p for p in sorted(models_dir.glob("*.json")) if _outside(p, folder)] if models_dir.is_dir() else []
    for path in linked:  # refused as a linked blueprint is: its content is not the folder's to give
        outcome.items.append(ImportItem(f"models/{path.name}", None, "refused", f"'models/{path.name}' is a link "
                                        "to a file outside the folder being imported; copy the file in instead"))
    outcome.collections = import_collections(models_dir, skip=frozenset(linked), shown=shown)
    files = []
    for path in iter_blueprint_files([folder]):
        relative = path.relative_to(folder).as_posix()
        if not path.resolve().is_relative_to(folder):
            outcome.items.append(ImportItem(relative, None, "refused", f"'{relative}' is a link to a file outside "
                                            f"the folder being imported; copy the file in instead"))
            continue
        try:
            text = read_text(path)
        except UnicodeDecodeError as exc:
            outcome.items.append(ImportItem(relative, None, "refused", f"'{relative}' is not UTF-8 text; save it as "
                                            f"UTF-8 and try again (byte {exc.start} is not UTF-8)"))
            continue
        except OSError as exc:
            outcome.items.append(ImportItem(relative, None, "refused", f"cannot read '{relative}': {exc}"))
            continue
        files.append((relative, text, companion_files(path, text, folder, collections=False)))
        if on_disk is not None:
            on_disk[relative] = path
    return files


# --------------------------------------------------------------------------------------
# Uploads: files and folders from the browser, read as the command line reads a folder


def import_uploads(uploads: Iterable[tuple[str, bytes | None]], *, folder_name: str = "",
                   via: str = "upload") -> ImportOutcome:
    """Files from the import page: ``(path, content)``, the path relative to the folder the person chose (its name
    ``folder_name``), or a file's name when files were chosen one by one (``folder_name`` empty); content None
    when the file was too large to take.

    They are laid out in a temporary folder and read exactly as ``import_blueprints`` reads a folder, so a suite
    gets the same id, the same companion files and the same revision from either door. Files chosen one by one
    have no folder: a file a suite names (``judges/safety.md``) is found by its name among them. A file that is
    neither a suite, a collection, nor named by a suite is listed as left out (a note, not a refusal); files and
    folders whose names start with '.' are skipped, as the command skips them.
    """
    outcome = ImportOutcome()
    kept: dict[str, bytes] = {}
    for raw, data in uploads:
        relative = _upload_path(raw)
        if relative is None:
            outcome.items.append(ImportItem(str(raw)[:300], None, "note", "not a usable file path"))
            continue
        if any(part.startswith(".") for part in PurePosixPath(relative).parts):
            continue  # .git and other hidden files: the command line skips them too
        if data is None:
            outcome.items.append(ImportItem(relative, None, "note", f"larger than {MAX_UPLOAD_MB} MB"))
            continue
        kept[relative] = data
    with tempfile.TemporaryDirectory(prefix="evalsite-upload-") as tmp:
        root = (Path(tmp) / "folder").resolve()
        for relative, data in list(kept.items()):
            target = root / relative
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            except OSError as exc:
                outcome.items.append(ImportItem(relative, None, "note", f"could not be laid out with the other "
                                                f"files ({exc.strerror or exc})"))
                kept.pop(relative)
        found = ImportOutcome()
        on_disk: dict = {}
        files = _read_folder(root, found, shown=lambda path: path.relative_to(root).as_posix(), on_disk=on_disk)
        order = {relative: n for n, relative in enumerate(kept)}  # as chosen: messages name files in that order
        files.sort(key=lambda f: order.get(f[0], len(order)))
        if not folder_name:
            files = _attach_by_name(files, kept)
        imported = import_files(files, via=via, folder_name=folder_name, on_disk=on_disk, root=root)
    outcome.collections = found.collections + imported.collections
    outcome.items.extend(found.items)
    outcome.items.extend(imported.items)
    _note_unused(outcome, files, kept)
    return outcome


MAX_UPLOAD_MB = 5


def _upload_path(raw) -> str | None:
    """A posted path made relative and clean (``a/./b.yml``); None for one that leaves its folder or has none."""
    text = str(raw or "").replace("\\", "/").lstrip("/")
    if not text or "\x00" in text or len(text) > 1000:
        return None
    clean = posixpath.normpath(text)
    if clean in (".", "..") or clean.startswith("../"):
        return None
    return clean


def _named_paths(path: str, text: str) -> list[str]:
    """The companion files a suite names, as it writes them (AgentV's tests files, judge prompts, scripts and
    file blocks; a Weval blueprint's fixtures file)."""
    from blueprints.spec.companions import agentv_paths, as_path
    from blueprints.spec.dialects import AGENTV, AGENTV_TESTS, WEVAL, detect_dialect_of
    from blueprints.spec.parse import detect_format
    from blueprints.spec.source import SourceError, load

    try:
        documents = load(text, detect_format(text, path), settings.EVALSITE_LIMITS).documents
    except SourceError:
        return []
    dialect = detect_dialect_of(documents)
    first = documents[0] if documents else None
    if dialect in (AGENTV, AGENTV_TESTS):
        named = [as_path(value) for value, _ in agentv_paths(first)]
    elif dialect == WEVAL and isinstance(first, dict):
        named = [as_path(first.get("fixtures"))]
    else:
        named = []
    return [key for key in dict.fromkeys(named) if key and not any(ch in key for ch in "*?[")]


def _attach_by_name(files: list[tuple[str, str, dict]], kept: Mapping[str, bytes]) -> list[tuple[str, str, dict]]:
    """Files chosen one by one have no folder: a file a suite names (``judges/safety.md``) that was not found beside
    it is the uploaded file of that name, when exactly one has it; a tests file found so is read for the files it
    names in turn. AI Eval prompt files and AgentV test rows go to the suites as ``import_files`` offers them."""
    from blueprints.spec.dialects import companion_kind

    by_name: dict[str, list[str]] = {}
    for relative in kept:
        by_name.setdefault(PurePosixPath(relative).name, []).append(relative)
    suites = {path for path, _, _ in files}
    out = []
    for path, text, companions in files:
        attached = companions
        queue, seen = [(path, text)], 0
        while queue and seen < 50:
            named_in, named_text = queue.pop(0)
            seen += 1
            for key in _named_paths(named_in, named_text):
                if key in attached:
                    continue
                matches = [r for r in by_name.get(PurePosixPath(key).name, []) if r != path]
                if len(matches) != 1:
                    continue
                try:
                    found = kept[matches[0]].removeprefix(b"\xef\xbb\xbf").decode("utf-8")
                except UnicodeDecodeError:
                    continue
                if attached is companions:
                    attached = type(companions)(companions)
                    attached.problems = dict(getattr(companions, "problems", {}))
                attached[key] = found
                getattr(attached, "problems", {}).pop(key, None)
                if PurePosixPath(key).suffix.lower() in (".yaml", ".yml", ".jsonl", ".json"):
                    queue.append((matches[0], found))
        out.append((path, text, attached))
    for relative, data in kept.items():  # prompt files and test rows the folder reading skipped: offered as before
        if relative in suites or PurePosixPath(relative).suffix.lower() not in (".yaml", ".yml", ".json"):
            continue
        try:
            ctext = data.removeprefix(b"\xef\xbb\xbf").decode("utf-8")
        except UnicodeDecodeError:
            continue
        if companion_kind(ctext, relative) and not any(relative == p for p, _, _ in out):
            out.append((relative, ctext, {}))
    return out


def _note_unused(outcome: ImportOutcome, files: list[tuple[str, str, dict]], kept: Mapping[str, bytes]) -> None:
    """Each uploaded file that is neither a suite, a collection, a companion of a suite, nor already reported: a
    note saying it was left out and why. Companion files found for suites are listed as attached."""
    listed = {item.name for item in outcome.items} | {path for path, _, _ in files}
    collections = {f"models/{name}.json" for name, _ in outcome.collections}
    owners: dict[str, str] = {}
    for path, _, companions in files:
        for key in companions:
            tail = PurePosixPath(*[p for p in PurePosixPath(key).parts if p not in ("..", ".")] or ["."]).as_posix()
            suite_dir = PurePosixPath(path).parent
            for relative in kept:
                by_name = "/" not in relative and PurePosixPath(key).name == relative  # files chosen one by one
                if relative != path and (relative == tail or relative.endswith("/" + tail) or by_name
                                         or (suite_dir / key).as_posix() == relative):
                    owners.setdefault(relative, path)
    for relative in kept:
        if relative in listed or relative in collections:
            continue
        if relative in owners:
            outcome.items.append(ImportItem(relative, None, "attached", f"a companion file of '{owners[relative]}', "
                                            "kept with its revision"))
            continue
        suffix = PurePosixPath(relative).suffix.lower()
        if suffix in (".yml", ".yaml", ".json"):
            why = "is not a suite (a prompt file, test rows or data), and no suite imported with it names it"
        else:
            why = "is not a .yml, .yaml or .json file, and no suite imported with it names it"
        outcome.items.append(ImportItem(relative, None, "note", f"'{relative}' {why}"))


def _outside(path: Path, folder: Path) -> bool:
    """True when ``path`` is a link (or sits below one) leading outside ``folder``, or to a link loop."""
    try:
        return not path.resolve().is_relative_to(folder)
    except (OSError, RuntimeError):  # a loop of links
        return True


def import_collections(models_dir: Path, *, skip: frozenset = frozenset(), shown=None) -> list[tuple[str, str]]:
    """Store each `models/<NAME>.json` as a collection, except the paths in ``skip``; ``shown(path)`` is the source
    recorded with it (its path by default)."""
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
        try:
            _, changed = ModelCollection.store(name, model_ids, source=shown(path) if shown else str(path))
        except ValidationError as exc:
            results.append((name, f"skipped: models/{path.name}: {' '.join(exc.messages)}"))
            continue
        results.append((name, "stored" if changed else "unchanged"))
    return results


def companion_files(path: Path, text: str, root: Path | None = None, *, blueprint_id: str | None = None,
                    collections: bool = True) -> dict:
    """The files a blueprint or suite names, kept with its revision: a blueprint's fixtures file, an AgentV
    suite's tests files, judge prompts and scripts, an AI Eval suite's prompt file (blueprints.spec.companions),
    and the ``models/<NAME>.json`` of each collection it names (``collections.collection_files_near``: the file
    a run of it from disk would read), so the stored blueprint resolves its collections as its file does.

    Only files inside ``root`` (the imported folder; by default the file's own folder, or for an AI Eval suite
    in ``tests/`` the project folder above it) are read; collection files are looked for up to ``root`` (every
    parent folder when None, as ``run_blueprint FILE`` and ``validate_blueprint`` look). ``blueprint_id``: the id
    it will be imported under, when known (the parse that finds its collections is then the revision's).
    """
    from blueprints.spec.companions import collect_companions

    files = collect_companions(path, text, root)
    return with_collections(path, text, files, root, blueprint_id=blueprint_id) if collections else files


def with_collections(path: Path, text: str, files: dict, root: Path | None = None, *,
                     blueprint_id: str | None = None) -> dict:
    """``files`` (a suite's companion files) with the ``models/<NAME>.json`` of each collection the text names,
    found near ``path`` up to ``root`` (``collections.collection_files_near``)."""
    if not has_collection_folder(path, root):
        return files
    found = collection_files_near(path, _collections_named(path, text, files, root, blueprint_id), root)
    if not found:
        return files
    out = type(files)(files) if isinstance(files, dict) else dict(files)
    if hasattr(files, "problems"):
        out.problems = dict(files.problems)
    out.update(found)
    return out


def _collections_named(path: Path, text: str, files: Mapping, root, blueprint_id) -> list[str]:
    """The collection names a blueprint asks about (its ``models:``, or CORE when it lists none), as its parse
    asks them: as a revision of this very text recorded them (``COLLECTIONS_NAMED``), else parsed here, with the
    answers its revision's parse will get (the collection files near it, then the stored collections), so that
    parse is this one (blueprints/parsing.py keeps it)."""
    from blueprints.parsing import parse_text

    known = (BlueprintRevision.objects.filter(sha256=sha256_text(text), import_report__has_key=COLLECTIONS_NAMED)
             .values_list(f"import_report__{COLLECTIONS_NAMED}", flat=True).first())
    if isinstance(known, list) and all(isinstance(name, str) for name in known):
        return known
    asked: list[str] = []
    lookup = own_then_stored(lambda name: lookup_in_files(collection_files_near(path, [name], root))(name),
                             ModelCollection.lookup())

    def record(name):
        asked.append(name)
        return lookup(name)

    try:
        parse_text(text, blueprint_id=blueprint_id, collections=record, files=dict(files))
    except Exception:  # noqa: BLE001 - the import's own parse says what is wrong with the text
        return []
    return list(dict.fromkeys(asked))


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
