"""What the operator configured for the engine, as one value.

``evalsite/settings.py`` reads the environment and ``evalsite.engine.engine_config()``
builds this once from the settings; the engine takes it as an argument and reads
no environment itself (nothing under ``runs/engine/`` or ``blueprints/spec/``
touches ``os.environ``). Tests build one directly. The defaults are what a
fresh machine gets: the upstream's judges, no ``$call`` hosts, no blueprint
environment, script graders off.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from blueprints.spec.limits import DEFAULT_LIMITS, Limits

from .judge import UPSTREAM_BACKUP_JUDGE, UPSTREAM_DEFAULT_JUDGES
from .providers.redaction import Redactor, redactor_for
from .providers.settings import ProviderSettings

@dataclass(frozen=True)
class EngineConfig:
    limits: Limits = DEFAULT_LIMITS
    # `$call` may reach only these hosts (`host` or `host:port`, lower case): EVALSITE_CALL_HOSTS.
    call_hosts: frozenset[str] = frozenset()
    # Providers: keys, endpoints, concurrency, retries, and the blueprint environment (the names the operator
    # allowed in EVALSITE_BLUEPRINT_ENV and their values, for custom headers and `$call`).
    providers: ProviderSettings = field(default_factory=ProviderSettings)
    # Script graders (`$code_judge`) run code that came with a suite: EVALSITE_ALLOW_CODE_JUDGES.
    code_judges: bool = False
    # What a script grader's process inherits: PATH, HOME and version managers' variables.
    child_env: Mapping[str, str] = field(default_factory=dict, repr=False)
    default_judges: tuple[str, ...] = UPSTREAM_DEFAULT_JUDGES
    backup_judge: str | None = UPSTREAM_BACKUP_JUDGE
    items_in_flight: int = 256  # items one worker processes at once: EVALSITE_ITEMS_IN_FLIGHT

    @property
    def redactor(self) -> Redactor:
        """Hides every value a blueprint may use as a secret (provider keys, allowed ``${NAME}`` values) and
        its encodings in a text or a whole result (``.text``, ``.message``, ``.scrub``); built once per set of
        secrets. The router applies it to everything it returns; any other text that came from outside (a
        `$call` service's answer) goes through it before it is stored."""
        return redactor_for(self.providers.secrets())


DEFAULT_CONFIG = EngineConfig()
