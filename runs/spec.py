"""The blueprint a run pinned, parsed once per revision, and the refusal a run that cannot start gets."""

from __future__ import annotations

import threading
from collections import OrderedDict

from blueprints.models import BlueprintRevision
from blueprints.spec.schema import Blueprint as SpecBlueprint
from blueprints.spec.schema import CustomModel


class RunRefused(Exception):
    """The blueprint cannot run as it stands; ``problems`` say why, with lines where there are any."""

    def __init__(self, message: str, problems: list[str] | None = None):
        super().__init__(message)
        self.message = message
        self.problems = problems or []

    def __str__(self):
        return "\n".join([self.message, *self.problems])


_PARSED: OrderedDict[tuple[int, str], SpecBlueprint] = OrderedDict()
_KEEP = 32  # revisions kept parsed per process
_LOCK = threading.Lock()
_PARSING: dict[tuple[int, str], threading.Lock] = {}  # one lock per revision being parsed


def remember(revision: BlueprintRevision, blueprint: SpecBlueprint) -> None:
    """Keep a revision's parse (start_run has just made it) so the run's work does not parse it again."""
    key = (revision.pk, revision.sha256)
    with _LOCK:
        _PARSED[key] = blueprint
        _PARSED.move_to_end(key)
        while len(_PARSED) > _KEEP:
            _PARSED.popitem(last=False)


def parsed_blueprint(revision: BlueprintRevision) -> SpecBlueprint:
    """The revision's blueprint, parsed once per process (a revision never changes: its sha256 is its key).

    One parse per revision at a time: the other threads that want it wait for that parse. A web process's
    threads meeting a cold revision together (a server just started, 20 viewers) each parsed their own copy, and
    a 1,000-prompt revision's parse holds some 40 MB while it runs: eight at once took a process past 400 MB,
    which it kept (the freed memory is scattered between what stays)."""
    key = (revision.pk, revision.sha256)
    hit = _PARSED.get(key)
    if hit is not None:
        return hit
    with _LOCK:
        parsing = _PARSING.setdefault(key, threading.Lock())
    try:
        with parsing:
            hit = _PARSED.get(key)
            if hit is not None:
                return hit
            result = revision.parse(collections=lambda name: None)
            if result.blueprint is None:
                slug = BlueprintRevision.objects.select_related("blueprint").get(pk=revision.pk).blueprint.slug
                raise RunRefused("the revision has errors", [e.format(slug) for e in result.errors])
            remember(revision, result.blueprint)
            return result.blueprint
    finally:
        with _LOCK:
            if not parsing.locked():  # the last one out; a thread that still waits keeps it
                _PARSING.pop(key, None)


def custom_models(bp: SpecBlueprint) -> dict[str, CustomModel]:
    return bp.custom_models
