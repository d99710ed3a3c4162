"""How far to trust each judge: the reviewed points of some responses, read through ``runs.records`` and
counted by the engine (``runs.engine.trust``: only points a reviewer overrode or confirmed count)."""

from __future__ import annotations

from django.db.models import QuerySet

from runs.engine.trust import SHOWN_WRONG, TOLERANCE, JudgeTrust, TrustReport, WrongPoint  # noqa: F401
from runs.engine.trust import judge_trust as _judge_trust

from .records import reviewed_points


def judge_trust(responses: QuerySet) -> TrustReport:
    """The trust report over ``responses`` (a Response queryset: one run's, a blueprint's, every run's)."""
    return _judge_trust(reviewed_points(responses))
