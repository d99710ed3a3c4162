"""The engine's configuration, built from the settings (which read the environment).

``engine_config()`` is what every door passes to the engine: runs (workers and
``run_blueprint``), "try a response" and the run form. It is built on each call:
a few dozen variables, microseconds, and tests that change the environment or
the settings see their change.
"""

from __future__ import annotations

import os

from django.conf import settings

from runs.engine.points.codejudge import child_env_from
from runs.engine.config import EngineConfig
from runs.engine.providers import settings_from_env
from runs.engine.providers.own import OwnAddresses
from runs.engine.providers.settings import model_hosts_from


def own_addresses() -> OwnAddresses:
    """Where this site is served (PORT, EVALSITE_HOST): nothing a run sends may go there."""
    host = settings.EVALSITE_HOST.strip().lower().strip("[]")
    return OwnAddresses(ports=frozenset({settings.EVALSITE_PORT}), hosts=frozenset({host} if host else ()))


def engine_config() -> EngineConfig:
    allowed = frozenset(name.strip() for name in settings.EVALSITE_BLUEPRINT_ENV if name.strip())
    providers = settings_from_env(os.environ, blueprint_env_names=allowed,
                                  blueprint_env={name: os.environ[name] for name in allowed if name in os.environ},
                                  model_hosts=model_hosts_from(settings.EVALSITE_MODEL_HOSTS),
                                  own_addresses=own_addresses())
    return EngineConfig(
        limits=settings.EVALSITE_LIMITS,
        call_hosts=frozenset(h.strip().lower() for h in settings.EVALSITE_CALL_HOSTS if h.strip()),
        providers=providers,
        code_judges=settings.EVALSITE_ALLOW_CODE_JUDGES,
        child_env=child_env_from(os.environ),
        default_judges=tuple(settings.EVALSITE_DEFAULT_JUDGES),
        backup_judge=settings.EVALSITE_BACKUP_JUDGE or None,
        items_in_flight=settings.EVALSITE_ITEMS_IN_FLIGHT,
    )
