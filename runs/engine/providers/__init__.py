"""Model providers: one async httpx client per API format, custom endpoints, fixtures, cache.

Pure Python (never imports Django). What the run pipeline uses::

    from runs.engine.providers import Router, settings_from_env, check_models

    settings = settings_from_env(os.environ)          # frozen ProviderSettings
    problems = check_models(blueprint.models, os.environ, fixtures=fixtures)  # before a run
    async with Router(settings, custom_models={m.id: m for m in customs}, fixtures=fixtures,
                      cache=SqliteCache(data_dir / "responses.sqlite3"),
                      blueprint_concurrency=blueprint.concurrency, on_wait=show_wait) as router:
        result = await router.complete(ChatRequest(...))   # never raises for expected failures

Modules: ``settings`` (environment -> ProviderSettings), ``formats`` (the four
API formats as pure functions), ``endpoints`` (model id -> URL, headers,
body; custom models and ``${NAME}`` headers), ``router`` (limits, retries,
circuit breaker, cache use), ``cache`` (protocol, memory and SQLite stores),
``fixtures`` (canned answers), ``prices`` (cost from prices.json), ``checks``
(``check_models``), ``redaction`` (secrets and their encodings out of every text). docs/providers.md describes them for users.
"""

from .cache import MemoryCache, ResponseCache, SqliteCache, cache_key
from .checks import check_models, run_problems
from .endpoints import Endpoint, Problem, resolve_endpoint
from .fixtures import Fixtures, fixtures_from_blueprint, load_fixtures, parse_fixtures
from .prices import cost_usd, price_of
from .redaction import Redactor, redactor_for
from .router import Router, describe_wait, redact
from .settings import PROVIDERS, ProviderSettings, settings_from_env

__all__ = [
    "PROVIDERS",
    "Endpoint",
    "Fixtures",
    "MemoryCache",
    "Problem",
    "ProviderSettings",
    "Redactor",
    "ResponseCache",
    "Router",
    "SqliteCache",
    "cache_key",
    "check_models",
    "run_problems",
    "cost_usd",
    "describe_wait",
    "fixtures_from_blueprint",
    "load_fixtures",
    "parse_fixtures",
    "price_of",
    "redact",
    "redactor_for",
    "resolve_endpoint",
    "settings_from_env",
]
