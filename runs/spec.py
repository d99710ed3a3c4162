"""The blueprint a run pinned, parsed once per revision (the most recently used kept, bounded by their estimated
size), and the refusal a run that cannot start gets."""

from __future__ import annotations

import threading
from collections import OrderedDict

from blueprints import parsing as blueprint_parsing
from blueprints.models import BlueprintRevision
from blueprints.spec.schema import Blueprint as SpecBlueprint
from blueprints.spec.schema import CustomModel
from evalsite.once import OnePerKey


class RunRefused(Exception):
    """The blueprint cannot run as it stands; ``problems`` say why, with lines where there are any."""

    def __init__(self, message: str, problems: list[str] | None = None):
        super().__init__(message)
        self.message = message
        self.problems = problems or []

    def __str__(self):
        return "\n".join([self.message, *self.problems])


_PARSED: OrderedDict[tuple[int, str], tuple[SpecBlueprint, int]] = OrderedDict()  # key -> (parse, bytes)
_KEEP = 32  # revisions kept parsed per process, and at most KEEP_PARSED_BYTES of them (blueprints/parsing.py)
_LOCK = threading.Lock()
_PARSING: dict[tuple[int, str], list] = {}  # the revisions being parsed (``_one_parse``)
_one_parse = OnePerKey(_PARSING)


def remember(revision: BlueprintRevision, blueprint: SpecBlueprint) -> None:
    """Keep a revision's parse (start_run has just made it) so the run's work does not parse it again."""
    key = (revision.pk, revision.sha256)
    with _LOCK:
        _PARSED[key] = (blueprint, blueprint_parsing.parse_bytes(revision.text))
        _PARSED.move_to_end(key)
        total = sum(size for _, size in _PARSED.values())
        while len(_PARSED) > 1 and (len(_PARSED) > _KEEP or total > blueprint_parsing.KEEP_PARSED_BYTES):
            total -= _PARSED.popitem(last=False)[1][1]


def kept_parses() -> tuple[int, int]:
    """How many revisions this process keeps parsed for runs, and their estimated bytes."""
    with _LOCK:
        return len(_PARSED), sum(size for _, size in _PARSED.values())


def forget_parses() -> None:
    """Drop every parse kept for runs (tests, benchmarks)."""
    with _LOCK:
        _PARSED.clear()


def _kept(key: tuple[int, str]) -> SpecBlueprint | None:
    with _LOCK:
        hit = _PARSED.get(key)
        if hit is None:
            return None
        _PARSED.move_to_end(key)
        return hit[0]


def parsed_blueprint(revision: BlueprintRevision) -> SpecBlueprint:
    """The revision's blueprint, parsed once per process (a revision never changes: its sha256 is its key).

    One parse per revision at a time: the other threads that want it wait for that parse. A web process's
    threads meeting a cold revision together (a server just started, 20 viewers) each parsed their own copy, and
    a 1,000-prompt revision's parse holds some 30 MB while it runs: eight at once took a process past 400 MB,
    which it kept (the freed memory is scattered between what stays)."""
    key = (revision.pk, revision.sha256)
    hit = _kept(key)
    if hit is not None:
        return hit
    with _one_parse(key):
        hit = _kept(key)
        if hit is not None:
            return hit
        result = revision.parse(collections=lambda name: None)
        if result.blueprint is None:
            slug = BlueprintRevision.objects.select_related("blueprint").get(pk=revision.pk).blueprint.slug
            raise RunRefused("the revision has errors", [e.format(slug) for e in result.errors])
        remember(revision, result.blueprint)
        return result.blueprint


def custom_models(bp: SpecBlueprint) -> dict[str, CustomModel]:
    return bp.custom_models
