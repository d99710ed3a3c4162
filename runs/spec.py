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


def remember(revision: BlueprintRevision, blueprint: SpecBlueprint) -> None:
    """Keep a revision's parse (start_run has just made it) so the run's work does not parse it again."""
    key = (revision.pk, revision.sha256)
    with _LOCK:
        _PARSED[key] = blueprint
        _PARSED.move_to_end(key)
        while len(_PARSED) > _KEEP:
            _PARSED.popitem(last=False)


def parsed_blueprint(revision: BlueprintRevision) -> SpecBlueprint:
    """The revision's blueprint, parsed once per process (a revision never changes: its sha256 is its key)."""
    hit = _PARSED.get((revision.pk, revision.sha256))
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
