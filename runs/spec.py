"""The blueprint a run pinned, parsed once per revision, and the refusal a run that cannot start gets."""

from __future__ import annotations

from functools import lru_cache

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


@lru_cache(maxsize=32)
def _parsed(revision_id: int, sha256: str) -> SpecBlueprint:
    revision = BlueprintRevision.objects.select_related("blueprint").get(pk=revision_id)
    result = revision.parse(collections=lambda name: None)
    if result.blueprint is None:
        raise RunRefused("the revision has errors", [e.format(revision.blueprint.slug) for e in result.errors])
    return result.blueprint


def parsed_blueprint(revision: BlueprintRevision) -> SpecBlueprint:
    return _parsed(revision.pk, revision.sha256)


def custom_models(bp: SpecBlueprint) -> dict[str, CustomModel]:
    return {m.id: m for m in bp.models if isinstance(m, CustomModel)}
