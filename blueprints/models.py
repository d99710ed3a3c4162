# Over 500 lines: the three models and the one id rule every door checks; splitting would scatter the rule.
"""What an evaluation says: blueprints, their revisions, and named model collections.

A ``Blueprint`` is the thing a person names and finds in the library; its text
lives in ``BlueprintRevision`` rows, which are never edited: every save (and
every import of changed text, and every restore) makes a new one, so a run can
always show the exact text it was produced from. The blueprint keeps a copy of
the few fields the library lists and sorts by, taken from its current revision.
"""

from __future__ import annotations

import hashlib
import re

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models, transaction
from django.db.models.functions import Lower
from django.dispatch import Signal
from django.utils import timezone
from django.utils.http import urlencode
from django.utils.text import slugify

from blueprints.parsing import parse_text
from blueprints.spec.collections import lookup_for_files
from blueprints.spec.model_ids import is_collection_name

# --- ids -------------------------------------------------------------------------------
# One rule for a blueprint's id, applied at every door that makes or renames one: the browser's
# forms, the API, the commands, and ids derived from paths on import (``validate_blueprint_id``);
# ``Blueprint.save`` refuses any other new id as a last guard. The longest id in the Weval
# corpus is 85 characters (users__<name>__<long title>), so 150 leaves room.
BLUEPRINT_ID_MAX_LENGTH = 150
BLUEPRINT_ID_CHARS = r"[A-Za-z0-9][A-Za-z0-9_.-]*"
BLUEPRINT_ID_RULE = (f"Use letters, digits, '-', '_' and '.', starting with a letter or digit, at most "
                     f"{BLUEPRINT_ID_MAX_LENGTH} characters (a path such as subdir/name becomes subdir__name).")
_ID_CHARS = re.compile(rf"{BLUEPRINT_ID_CHARS}\Z")
# What the addresses' id segment (the `bpid` converter) accepts: any stored id that fits in one path
# segment, not only the ids the rule allows today, so a blueprint stored before the rule (`<script>`,
# 5,000 characters) still has pages, where it can be renamed or deleted, and never breaks a page linking
# to it. An id with a '/' has no pages: see ``Blueprint.has_pages`` and the library's rename and delete.
BLUEPRINT_ID_RE = r"[^/]+"

# The id field's validator as the first migration recorded it (changing it would only make a migration
# that changes nothing in the database); the rule itself is ``validate_blueprint_id``.
_ID_FIELD_VALIDATOR = RegexValidator(
    rf"^{BLUEPRINT_ID_CHARS}\Z",
    "Use letters, digits, '-', '_' and '.', starting with a letter or digit "
    "(a path such as subdir/name becomes subdir__name).",
)


def shown_id(value, limit: int = 60) -> str:
    """An id as messages quote it: at most ``limit`` characters (a stored one may be 5,000)."""
    value = str(value)
    return value if len(value) <= limit else value[: limit - 1] + "…"


def blueprint_id_problem(value) -> str | None:
    """Why ``value`` cannot be a blueprint's id, naming the rule; None when it can."""
    if not isinstance(value, str) or not value:
        return f"A blueprint needs an id. {BLUEPRINT_ID_RULE}"
    if len(value) > BLUEPRINT_ID_MAX_LENGTH:
        return (f"The id is {len(value):,} characters long; an id is at most {BLUEPRINT_ID_MAX_LENGTH}. "
                f"{BLUEPRINT_ID_RULE}")
    if not _ID_CHARS.match(value):
        return f"'{shown_id(value)}' is not a usable id. {BLUEPRINT_ID_RULE}"
    return None


def is_blueprint_id(value) -> bool:
    return blueprint_id_problem(value) is None


_NOT_ID_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")


def suggest_blueprint_id(value, *, free: bool = True, exclude_pk=None) -> str:
    """A usable id close to ``value`` (a path's '/' becomes '__', other characters '-'); with ``free``, one no
    other blueprint has (``-2``, ``-3``... added, still within the length)."""
    parts = [part for part in re.split(r"[/\\]+", str(value or "")) if part.strip(".")]
    base = "__".join(_NOT_ID_CHARS.sub("-", part).strip("-") for part in parts)
    base = re.sub(r"-{2,}", "-", base)
    base = re.sub(r"^[^A-Za-z0-9]+", "", base)[:BLUEPRINT_ID_MAX_LENGTH].rstrip("-_.") or "blueprint"
    if not free:
        return base
    taken = Blueprint.objects.exclude(pk=exclude_pk) if exclude_pk is not None else Blueprint.objects.all()
    slug, n = base, 2
    while taken.filter(slug=slug).exists():
        suffix = f"-{n}"
        slug = base[: BLUEPRINT_ID_MAX_LENGTH - len(suffix)].rstrip("-_.") + suffix
        n += 1
    return slug


class BlueprintIdError(ValidationError):
    """An id the rule refuses: the message names the rule and ends with ``suggestion``, a usable id to try."""

    def __init__(self, message: str, suggestion: str):
        super().__init__(message, code="invalid_id")
        self.suggestion = suggestion


def validate_blueprint_id(value):
    """The rule, for every door (forms, API, commands, import): BlueprintIdError naming it, with an id to try."""
    problem = blueprint_id_problem(value)
    if problem is not None:
        suggestion = suggest_blueprint_id(value)
        raise BlueprintIdError(f"{problem} Try '{suggestion}'.", suggestion)


# Sent with ``blueprint=`` just before a blueprint is deleted, inside the deleting transaction. The runs
# app (which this app must not import) deletes the blueprint's runs, which pin its revisions.
deleting = Signal()

COLLECTION_NAME_MAX_LENGTH = 100  # the column's length
validate_collection_name = RegexValidator(
    r"^[A-Z0-9_-]*[A-Z][A-Z0-9_-]*\Z",
    "A collection name is upper case: letters A-Z, digits, '_' and '-' (for example CORE).",
)
COLLECTION_NAME_RULE = (f"A collection name is upper case: letters A-Z, digits, '_' and '-' (for example CORE), "
                        f"at most {COLLECTION_NAME_MAX_LENGTH} characters.")


def collection_name_problem(name) -> str | None:
    """Why ``name`` cannot name a model collection, naming the rule; None when it can (every door asks this)."""
    if not isinstance(name, str) or not name:
        return f"A collection needs a name. {COLLECTION_NAME_RULE}"
    if len(name) > COLLECTION_NAME_MAX_LENGTH:
        return f"The name is {len(name):,} characters long. {COLLECTION_NAME_RULE}"
    if not is_collection_name(name):
        return f"'{shown_id(name)}' is not a usable collection name. {COLLECTION_NAME_RULE}"
    return None


def check_collection_name(name) -> None:
    problem = collection_name_problem(name)
    if problem is not None:
        raise ValidationError(problem, code="invalid_name")

DIALECT_WEVAL = "weval"
COLLECTIONS_NAMED = "collectionsNamed"  # import_report key: the collection names a revision's text asks about
_TITLE_LINE = re.compile(r"^(?:title|configTitle)\s*:\s*(.+?)\s*$", re.M)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class BlueprintQuerySet(models.QuerySet):
    def for_library(self):
        """Rows for the library: the current revision's counts, never its (large) text, and the id of the
        newest run (one correlated subquery, not a query per row; ``Blueprint.with_last_runs`` reads them)."""
        rows = self.select_related("current_revision").defer(
            "current_revision__text", "current_revision__files", "current_revision__import_report",
            "current_revision__extras", "description",
        )
        relation = _runs_relation(self.model)
        if relation is None:
            return rows
        runs = relation.related_model._default_manager.filter(**{relation.field.name: models.OuterRef("pk")})
        return rows.annotate(last_run_pk=models.Subquery(runs.order_by("-pk").values("pk")[:1]))


class Blueprint(models.Model):
    slug = models.CharField(
        "id", max_length=200, unique=True, validators=[_ID_FIELD_VALIDATOR],
        help_text="Used in addresses and results. From the file path on import, from the title otherwise.",
    )
    title = models.CharField(max_length=500)
    description = models.TextField(blank=True)
    tags = models.JSONField(default=list, blank=True)
    # "|a|b|": lets the library filter by one tag with a plain LIKE, on every database.
    tags_key = models.CharField(max_length=2000, blank=True, default="")
    current_revision = models.ForeignKey(
        "BlueprintRevision", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now, db_index=True)

    objects = BlueprintQuerySet.as_manager()

    class Meta:
        ordering = [Lower("title")]
        indexes = [
            models.Index(Lower("title"), name="blueprint_title_lower"),
            models.Index(fields=["tags_key"], name="blueprint_tags_key"),
        ]

    def __str__(self):
        return self.slug

    @classmethod
    def from_db(cls, db, field_names, values):
        instance = super().from_db(db, field_names, values)
        instance._stored_slug = instance.__dict__.get("slug", _UNREAD)
        return instance

    def save(self, *args, **kwargs):
        """Refuses a new id (a new blueprint's, or a changed one) that the rule does not allow; an id stored
        before the rule stays usable (its blueprint can still be edited) until it is renamed."""
        if self._state.adding:
            validate_blueprint_id(self.slug)
        elif "slug" not in self.get_deferred_fields():
            stored = getattr(self, "_stored_slug", _UNREAD)
            if stored is _UNREAD:
                stored = Blueprint.objects.filter(pk=self.pk).values_list("slug", flat=True).first()
            if self.slug != stored:
                validate_blueprint_id(self.slug)
        super().save(*args, **kwargs)
        if "slug" not in self.get_deferred_fields():
            self._stored_slug = self.slug

    @property
    def id_problem(self) -> str | None:
        """Why this blueprint's id would not be allowed today (one stored before the rule), else None."""
        return blueprint_id_problem(self.slug)

    @property
    def has_pages(self) -> bool:
        """False for a stored id no address can hold (one with a '/', or only dots): the library still lists it,
        with rename and delete."""
        return bool(self.slug) and "/" not in self.slug and bool(self.slug.strip("."))

    @property
    def suggested_id(self) -> str:
        return suggest_blueprint_id(self.slug, exclude_pk=self.pk)

    @property
    def library_url(self) -> str:
        """The library, searching for this blueprint's id (where one stored before the rule can be fixed)."""
        from django.urls import reverse

        return f"{reverse('blueprints:home')}?{urlencode({'q': self.slug[:BLUEPRINT_ID_MAX_LENGTH]})}"

    def get_absolute_url(self):
        from django.urls import reverse

        if not self.has_pages:
            return self.library_url
        return reverse("blueprints:detail", args=[self.slug])

    # --- revisions ------------------------------------------------------------------

    def save_revision(self, text: str, *, files: dict | None = None, summary: str = "",
                      import_report: dict | None = None, extras: dict | None = None,
                      collections=None) -> tuple["BlueprintRevision", bool]:
        """Make ``text`` the current revision; returns ``(revision, created)``.

        Text (and companion files) identical to the current revision's makes no new
        revision. The blueprint must be saved first. ``collections`` is a lookup for
        the parser (``ModelCollection.lookup()`` when not given), asked after the collection
        files among ``files`` (``BlueprintRevision.collections``). ``files`` None keeps
        the current revision's companion files (an edit in the browser changes only
        the text). Any dialect is read (``parse_any``); the revision records which,
        with the import report and the fields kept aside.
        """
        if files is None:
            files = dict(self.current_revision.files) if self.current_revision is not None else {}
        digest = sha256_text(text)
        current = self.current_revision
        if current is not None and current.sha256 == digest and current.files == files:
            return current, False
        lookup = lookup_for_files(files, collections if collections is not None else ModelCollection.lookup())
        asked: list[str] = []

        def recording(name):
            asked.append(name)
            return lookup(name)

        result = parse_text(text, blueprint_id=self.slug, collections=recording, files=files)
        bp = result.blueprint
        report = dict(import_report or {})
        if result.import_report is not None:
            report.update(result.import_report)
        # The collections this text names (its models:, or CORE): an import of the same text reads them from
        # here rather than parse it once more to find which collection files came with it.
        report[COLLECTIONS_NAMED] = list(dict.fromkeys(asked))
        with transaction.atomic():
            last = self.revisions.order_by("-number").values_list("number", flat=True).first() or 0
            revision = BlueprintRevision.objects.create(
                blueprint=self, number=last + 1, text=text, files=files, sha256=digest,
                dialect=result.dialect, summary=summary[:300], import_report=report,
                extras=result.extras or extras or {}, is_valid=result.ok, error_count=len(result.errors),
                warning_count=len(result.warnings),
                prompt_count=len(bp.prompts) if bp else None,
                point_count=bp.point_count if bp else None,
            )
            self.current_revision = revision
            if bp is not None:
                self.title = (bp.title or self.title or self.slug)[:500]
                self.description = bp.description or ""
                self.set_tags(bp.tags)
            elif not self.title:
                self.title = title_from_text(text) or self.slug
            self.updated_at = revision.created_at
            self.save()
        revision.parsed = result  # what the parser said, for the caller (not stored; parse() reads it again)
        return revision, True

    def restore(self, revision: "BlueprintRevision") -> tuple["BlueprintRevision", bool]:
        """Make an old revision's text current again, as a new revision."""
        if revision.blueprint_id != self.pk:
            raise ValueError("that revision belongs to another blueprint")
        return self.save_revision(revision.text, files=revision.files, extras=revision.extras,
                                  summary=f"Restored revision {revision.number}")

    def set_tags(self, tags: list[str]):
        self.tags = list(tags)
        self.tags_key = "".join(f"|{t}" for t in self.tags) + "|" if self.tags else ""

    def rename(self, new_slug: str):
        """Change the id; refuses one that is taken or malformed (ValidationError)."""
        validate_blueprint_id(new_slug)
        if Blueprint.objects.filter(slug=new_slug).exclude(pk=self.pk).exists():
            raise ValidationError(f"The id '{new_slug}' is already used by another blueprint; try "
                                  f"'{suggest_blueprint_id(new_slug, exclude_pk=self.pk)}'.")
        self.slug = new_slug
        self.updated_at = timezone.now()
        self.save(update_fields=["slug", "updated_at"])

    def delete(self, *args, **kwargs):
        """Delete the blueprint and its revisions; apps holding rows that pin them (runs) remove theirs first."""
        with transaction.atomic():
            deleting.send(sender=Blueprint, blueprint=self)
            return super().delete(*args, **kwargs)

    def deletion_summary(self) -> dict:
        """What deleting this blueprint takes with it: revisions, runs (and how many are going), responses."""
        out = {"revisions": self.revisions.count(), "runs": 0, "running": 0, "responses": 0}
        relation = _runs_relation(Blueprint)
        if relation is not None:
            runs = getattr(self, relation.get_accessor_name())
            out["runs"] = runs.count()
            out["running"] = runs.filter(finished_at__isnull=True).count()
            out["responses"] = runs.aggregate(n=models.Count("responses"))["n"] or 0
        return out

    # --- runs -----------------------------------------------------------------------

    @staticmethod
    def with_last_runs(blueprints) -> list:
        """``blueprints`` (rows of ``for_library``) with ``latest_run`` set: their newest runs in one query."""
        blueprints = list(blueprints)
        relation = _runs_relation(Blueprint)
        wanted = [b.last_run_pk for b in blueprints if getattr(b, "last_run_pk", None)]
        runs = relation.related_model._default_manager.in_bulk(wanted) if relation is not None and wanted else {}
        for b in blueprints:
            b.latest_run = runs.get(getattr(b, "last_run_pk", None))
        return blueprints

    def last_run(self):
        """The newest run of this blueprint (any revision), or None.

        The `runs` app owns runs and this app must not import it, so the run model
        is reached through the reverse relation named ``runs`` that it adds to
        Blueprint (or, failing that, to BlueprintRevision). Until it exists,
        every blueprint is "never run".
        """
        relation = _runs_relation(Blueprint)
        if relation is not None:
            return getattr(self, relation.get_accessor_name()).order_by("-pk").first()
        relation = _runs_relation(BlueprintRevision)
        if relation is not None:
            lookup = f"{relation.field.name}__blueprint"
            return relation.related_model._default_manager.filter(**{lookup: self}).order_by("-pk").first()
        return None

    @classmethod
    def unique_slug_for(cls, title: str) -> str:
        """An unused id made from a title: "My Test!" -> "my-test", then "my-test-2"..."""
        return suggest_blueprint_id(slugify(title).strip("-_.") or "blueprint")


_UNREAD = object()  # a blueprint's stored id, when it was not read with the row


def _runs_relation(model):
    for relation in model._meta.related_objects:
        if relation.get_accessor_name() == "runs":
            return relation
    return None


def title_from_text(text: str) -> str | None:
    """A title for text that does not parse: the `title:` line, if there is one."""
    match = _TITLE_LINE.search(text)
    if not match:
        return None
    return match.group(1).strip().strip("'\"")[:500] or None


class BlueprintRevision(models.Model):
    """One saved text of a blueprint. Never edited: a change is a new revision."""

    blueprint = models.ForeignKey(Blueprint, on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    text = models.TextField()
    files = models.JSONField(default=dict, blank=True)  # companion files: {relative path: text}
    sha256 = models.CharField(max_length=64)
    dialect = models.CharField(max_length=20, default=DIALECT_WEVAL)
    summary = models.CharField(max_length=300, blank=True)  # "Imported from x.yml", "Restored revision 2"
    import_report = models.JSONField(default=dict, blank=True)
    extras = models.JSONField(default=dict, blank=True)  # fields kept aside on import
    is_valid = models.BooleanField(default=False)
    error_count = models.PositiveIntegerField(default=0)
    warning_count = models.PositiveIntegerField(default=0)
    prompt_count = models.PositiveIntegerField(null=True, blank=True)
    point_count = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["blueprint", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["blueprint", "number"], name="revision_number_unique"),
        ]
        # An import looks a text up by its sha256 (importing.identify, same_text: the same text finds its blueprint).
        indexes = [models.Index(fields=["sha256"], name="revision_sha256")]

    def __str__(self):
        return f"{self.blueprint_id} r{self.number}"

    def save(self, *args, **kwargs):
        if self.pk is not None and not self._state.adding:
            raise ValueError("A blueprint revision is never edited; save the blueprint's new text as a new revision.")
        super().save(*args, **kwargs)

    def get_absolute_url(self):
        """The revision's page; for a blueprint whose id no address may hold (stored before the id rule, with
        a '/'), the library showing the blueprint, where it can be renamed or deleted."""
        from django.urls import reverse

        blueprint = self.blueprint
        if not blueprint.has_pages:
            return blueprint.get_absolute_url()
        return reverse("blueprints:revision", args=[blueprint.slug, self.number])

    @property
    def short_sha(self) -> str:
        return self.sha256[:10]

    def collections(self, stored=None):
        """The collection lookup for this revision, by the one rule (blueprints.spec.collections): the
        ``models/<NAME>.json`` files kept with it (its file came with them) first, then ``stored`` (the stored
        collections, ``ModelCollection.lookup()``, when not given)."""
        return lookup_for_files(self.files, stored if stored is not None else ModelCollection.lookup())

    def parse(self, collections=None):
        """The revision parsed; ``collections`` (the stored ones when not given) answer after its own."""
        return parse_text(self.text, blueprint_id=self.blueprint.slug, collections=self.collections(collections),
                          files=self.files or {})


MODEL_ID_MAX_LENGTH = 200  # as a blueprint's `models:` (blueprints.spec.header_reader.MAX_MODEL_ID_CHARS)
_PROVIDER_CHARS = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
_MODEL_ID_EXAMPLE = "openai:gpt-4o-mini"


def model_id_problem(value) -> str | None:
    """Why ``value`` can never run as an entry of a model collection (what is wrong and the fix), else None.

    Read with the blueprint's own model-id parser (``blueprints.spec.model_ids``): ``provider:model``, variant
    suffixes such as ``[temp:0.7]`` allowed. The provider is checked by ``collection_entry_problem`` (here a
    judge's pairs form may still name any provider: its job says why it cannot be called)."""
    from blueprints.spec.model_ids import normalize_model_entry, provider_of, split_variant_suffixes

    if not isinstance(value, str) or not value.strip():
        return "the entry is empty; write a model id such as " + _MODEL_ID_EXAMPLE
    text, _ = normalize_model_entry(value)
    text = text if isinstance(text, str) else value.strip()
    if len(text) > MODEL_ID_MAX_LENGTH:
        return (f"the id is {len(text):,} characters long; a model id has at most {MODEL_ID_MAX_LENGTH}: write it as "
                f"provider:model, e.g. {_MODEL_ID_EXAMPLE}")
    if is_collection_name(text):
        return (f"'{text}' names a collection; a collection lists model ids, not other collections: list its models "
                f"here instead")
    if any(ch.isspace() for ch in text) or any(ord(ch) < 32 for ch in text):
        joined = "-".join(text.split())
        return (f"'{shown_id(text)}' has a space in it, and a model id has none: write it as provider:model, e.g. "
                f"'{shown_id(joined)}'")
    base = split_variant_suffixes(text)[0]
    provider = provider_of(text)
    if provider is None:
        return (f"'{shown_id(text)}' has no provider: write it as provider:model, e.g. {_MODEL_ID_EXAMPLE} "
                f"(a blueprint's custom model cannot go in a collection)")
    head, _, name = base.partition(":")
    if not _PROVIDER_CHARS.match(head.strip()):
        return (f"'{shown_id(text)}' has an unusable provider '{shown_id(head, 30)}': a provider is letters, digits, "
                f"'-', '_' and '.', e.g. {_MODEL_ID_EXAMPLE}")
    if not name.strip():
        return f"'{shown_id(text)}' has no model name after '{head}:': write e.g. {head}:model-name"
    return None


def collection_entry_problem(value) -> str | None:
    """Why ``value`` cannot be an entry of a model collection, else None: ``model_id_problem``, then the rule a
    run routes by (``runs.engine.providers.endpoints.provider_problem``: a built-in provider or ``fixtures``).
    A collection has no blueprint around it, so no custom model can answer for an unknown provider: a
    blueprint's custom model belongs in that blueprint's ``models:``."""
    from blueprints.spec.model_ids import normalize_model_entry, split_variant_suffixes
    from runs.engine.providers.endpoints import provider_problem  # pure Python: no Django, no runs app

    problem = model_id_problem(value)
    if problem is not None:
        return problem
    text, _ = normalize_model_entry(value)
    text = text if isinstance(text, str) else value.strip()
    return provider_problem(split_variant_suffixes(text)[0].strip())


def model_ids_problems(model_ids, *, where=lambda n: f"entry {n}") -> list[str]:
    """A located message for each id in ``model_ids`` that can never run: ``"entry 2: 'x' has no provider: ..."``
    (``where(n)`` names the n-th entry, counting from 1)."""
    problems = []
    for n, model_id in enumerate(model_ids, start=1):
        problem = collection_entry_problem(model_id)
        if problem is not None:
            problems.append(f"{where(n)}: {problem}{'' if problem.endswith(('.', '?')) else '.'}")
    return problems


class ModelCollection(models.Model):
    """A named list of model ids (``CORE``) that a blueprint's ``models:`` may name."""

    name = models.CharField(max_length=100, unique=True, validators=[validate_collection_name])
    source = models.CharField(max_length=500, blank=True)  # where it came from: a file path, "edited in evalsite"
    updated_at = models.DateTimeField(default=timezone.now)
    # Last: from here on, `models` in this class body is the field, not django.db.models.
    models = models.JSONField(default=list, blank=True)  # may be empty, as FRONTIER.json is in Weval's repository

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    def clean(self):
        if not is_collection_name(self.name):
            raise ValidationError({"name": "A collection name is upper case, e.g. CORE."})
        if not isinstance(self.models, list) or not all(isinstance(m, str) and m.strip() for m in self.models):
            raise ValidationError({"models": "A collection is a list of model ids such as openai:gpt-4o-mini."})
        problems = model_ids_problems(self.models)
        if problems:
            raise ValidationError({"models": [f"{self.name}, {problem}" for problem in problems]})

    @classmethod
    def lookup(cls):
        """A function for the parser's ``collections=``: name -> model ids, or None if unknown.

        Reads the table once, so one parse costs one query however many names it asks about.
        """
        stored = {name: list(models) for name, models in cls.objects.values_list("name", "models")}
        return stored.get

    def rename(self, new_name: str) -> None:
        """Change the name (upper case, as blueprints write it); refuses one that is taken or malformed."""
        new_name = new_name.strip().upper()
        check_collection_name(new_name)
        if ModelCollection.objects.filter(name=new_name).exclude(pk=self.pk).exists():
            raise ValidationError(f"There is already a collection named {new_name}.")
        self.name = new_name
        self.updated_at = timezone.now()
        self.save(update_fields=["name", "updated_at"])

    @classmethod
    def store(cls, name: str, model_ids: list[str], source: str = "") -> tuple["ModelCollection", bool]:
        """Create or replace a collection; returns ``(collection, changed)``."""
        model_ids = [m.strip() for m in model_ids if m.strip()]
        check_collection_name(name)
        existing = cls.objects.filter(name=name).first()
        if existing is not None and existing.models == model_ids:
            return existing, False
        collection = existing or cls(name=name)
        collection.models = model_ids
        collection.source = source[:500]
        collection.updated_at = timezone.now()
        collection.full_clean()
        collection.save()
        return collection, True
