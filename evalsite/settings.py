"""Settings for evalsite, read from the environment.

Every variable is listed in the README's "Configuration" table. The defaults
are safe for one person on one machine: SQLite in the data directory,
django-q2's ORM broker, DEBUG off, only loopback hosts allowed.
"""

import atexit
import gc
import importlib.util
import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from evalsite.env import (
    env_bool,
    env_float,
    env_int,
    env_list,
    env_secret,
    env_str,
    parse_database_url,
    persisted_secret_key,
    sqlite_config,
)

BASE_DIR = Path(__file__).resolve().parent.parent

# A relative EVALSITE_DATA_DIR is taken from the project root, wherever
# manage.py is started from.
EVALSITE_DATA_DIR = BASE_DIR / Path(env_str("EVALSITE_DATA_DIR", "data")).expanduser()
EVALSITE_DATA_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("EVALSITE_DEBUG", False)
SECRET_KEY = env_secret("EVALSITE_SECRET_KEY") or persisted_secret_key(
    EVALSITE_DATA_DIR / "secret_key"
)
ALLOWED_HOSTS = env_list("EVALSITE_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "django_ace",  # ships the Ace editor's static files (the blueprint editor)
    "template_partials",
    "blueprints",
    "runs",  # before django_q: its qcluster command (runs/management/commands/qcluster.py) is the one found
    "django_q",
]

MIDDLEWARE = [
    "evalsite.serving.StreamFromThread",  # outermost: under ASGI, streamed responses are read chunk by chunk
    "evalsite.security.EngineRequestMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "evalsite.security.SecurityHeadersMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "evalsite.security.AccessMiddleware",
    "evalsite.deadline.DeadlineMiddleware",  # every page's time limit (EVALSITE_PAGE_TIMEOUT_S)
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "evalsite.urls"
WSGI_APPLICATION = "evalsite.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,  # template_partials swaps this for its own loader
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
            "builtins": ["template_partials.templatetags.partials"],
        },
    },
]

# Databases --------------------------------------------------------------------

_database_url = env_secret("DATABASE_URL")
DATABASES = {
    "default": (
        parse_database_url(_database_url, base_dir=BASE_DIR)
        if _database_url
        else sqlite_config(EVALSITE_DATA_DIR / "db.sqlite3")
    )
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Tasks (django-q2) ------------------------------------------------------------
# django-q2 reads Q_CLUSTER once, at import, so sync mode for tests is chosen
# here from the environment rather than by overriding settings in a test.

REDIS_URL = env_secret("REDIS_URL")
if REDIS_URL and importlib.util.find_spec("redis") is None:
    raise ImproperlyConfigured(
        "REDIS_URL is set but the redis package is not installed: "
        "run .venv/bin/pip install redis, or unset REDIS_URL to use the database as the broker."
    )

Q_CLUSTER = {
    "name": "evalsite",
    "workers": env_int("EVALSITE_WORKERS", 2, minimum=1),
    # A task is stopped after `timeout` seconds and handed out again after
    # `retry`; retry must be longer, or a slow task runs twice at once. Both
    # follow the item budget (EVALSITE_ITEM_BUDGET_S), set below.
    "timeout": 1020,
    "retry": 1140,
    "max_attempts": 3,
    "sync": env_bool("EVALSITE_TASKS_SYNC", False),
    "label": "Tasks",
    **({"redis": REDIS_URL} if REDIS_URL else {"orm": "default"}),
}

# What runs may do (read by the engine and the run pages) ----------------------

EVALSITE_CONCURRENCY = env_int("EVALSITE_CONCURRENCY", 20, minimum=1)
# EVALSITE_CONCURRENCY_OPENAI=5 -> {"OPENAI": 5}: the provider is the model id's
# prefix upper-cased.
_CONCURRENCY_PREFIX = "EVALSITE_CONCURRENCY_"
EVALSITE_CONCURRENCY_PER_PROVIDER = {
    name.removeprefix(_CONCURRENCY_PREFIX): env_int(name, EVALSITE_CONCURRENCY, minimum=1)
    for name in sorted(os.environ)
    if name.startswith(_CONCURRENCY_PREFIX) and len(name) > len(_CONCURRENCY_PREFIX)
}
# The upstream's judges by default (runs/engine/judge.py; reference section 3.6).
from runs.engine.judge import UPSTREAM_BACKUP_JUDGE, UPSTREAM_DEFAULT_JUDGES  # noqa: E402

EVALSITE_DEFAULT_JUDGES = env_list("EVALSITE_DEFAULT_JUDGES", list(UPSTREAM_DEFAULT_JUDGES))
EVALSITE_BACKUP_JUDGE = env_str("EVALSITE_BACKUP_JUDGE", UPSTREAM_BACKUP_JUDGE)
# Work per worker: items per task, items in flight at once, seconds before another machine's claim lapses.
EVALSITE_CHUNK_SIZE = env_int("EVALSITE_CHUNK_SIZE", 200, minimum=1)
EVALSITE_ITEMS_IN_FLIGHT = env_int("EVALSITE_ITEMS_IN_FLIGHT", 256, minimum=1)
EVALSITE_CLAIM_LEASE_S = env_float("EVALSITE_CLAIM_LEASE_S", 120.0, minimum=1)
# Re-runs of single responses one run accepts in any 60 s, counted in the database (every web process).
EVALSITE_RERUNS_PER_MINUTE = env_int("EVALSITE_RERUNS_PER_MINUTE", 30, minimum=1)
EVALSITE_EMBEDDINGS_MODEL = env_str("EVALSITE_EMBEDDINGS_MODEL")
# Threads per web process of `make run` that run views (evalsite/serving.py); a request takes one only once it
# has arrived whole, so slow clients hold none.
EVALSITE_WEB_THREADS = env_int("EVALSITE_WEB_THREADS", 8, minimum=1)
# Results matrices each web process keeps (runs/records.py, least recently used out), by their estimated size in
# MB: a run of 100,000 responses is about 40 MB in 20,000 cells (5 trials), 95 MB in 100,000; one of 10,000, 10 MB.
EVALSITE_MATRIX_CACHE_MB = env_float("EVALSITE_MATRIX_CACHE_MB", 100.0, minimum=0)
# How many new objects Python's garbage collector lets pass before it looks for cycles (its first threshold;
# Python's own is 700). At 700 a judged run of 22,000 calls collected 1,800 times, 160 of them the older
# objects too and 14 the whole heap Django and a parsed blueprint fill: 2.4 s of its 14 s of CPU; at 20,000,
# 0.5-1 s (docs/architecture.md, "Where a run's time goes"). Every process: web, worker, command.
EVALSITE_GC_THRESHOLD = env_int("EVALSITE_GC_THRESHOLD", 20_000, minimum=1)
gc.set_threshold(EVALSITE_GC_THRESHOLD, *gc.get_threshold()[1:])
# At exit Python's last collection walks the whole heap for cycles: 0.3-0.4 s of CPU after a `run_blueprint` of
# 2,000 items is done (tests/bench/bench_cli_run.py --timeline). A process that is ending gets its memory back
# whole, so the heap is frozen at exit and that walk skipped; objects are still freed as their last references go.
atexit.register(gc.freeze)
# The writer of a run's executive summary (provider:model); unset: no summary. Its claims are checked before
# anyone sees them (docs/results.md "The summary").
EVALSITE_SUMMARY_MODEL = env_str("EVALSITE_SUMMARY_MODEL")
# The run form asks "I expect about $X for N calls" before starting a run whose estimate reaches either.
EVALSITE_CONFIRM_USD = env_float("EVALSITE_CONFIRM_USD", 5.0, minimum=0)
EVALSITE_CONFIRM_CALLS = env_int("EVALSITE_CONFIRM_CALLS", 2000, minimum=1)
# ... or whose items (prompts x model variants x trials) reach this; more than the most is refused at every door.
EVALSITE_CONFIRM_ITEMS = env_int("EVALSITE_CONFIRM_ITEMS", 20_000, minimum=1)
EVALSITE_MAX_ITEMS_PER_RUN = env_int("EVALSITE_MAX_ITEMS_PER_RUN", 200_000, minimum=1)
# Every page's time limit (evalsite/deadline.py), and the part of it the estimate may spend looking up the
# response cache (past it, the estimate says "at least" so many answers are cached).
EVALSITE_PAGE_TIMEOUT_S = env_float("EVALSITE_PAGE_TIMEOUT_S", 30.0, minimum=0.1)
EVALSITE_ESTIMATE_LOOKUP_S = env_float("EVALSITE_ESTIMATE_LOOKUP_S", 3.0, minimum=0)
# On SQLite, deleting a run of more responses than this gives the space back to the disk (VACUUM, in a task).
EVALSITE_VACUUM_AFTER_ROWS = env_int("EVALSITE_VACUUM_AFTER_ROWS", 50_000, minimum=1)
EVALSITE_BLUEPRINT_ENV = env_list("EVALSITE_BLUEPRINT_ENV")
EVALSITE_CALL_HOSTS = env_list("EVALSITE_CALL_HOSTS")
# Hosts a blueprint's custom models may reach (`host` or `host:port`, `*` for any); set but empty: none.
EVALSITE_MODEL_HOSTS = env_list("EVALSITE_MODEL_HOSTS", ["127.0.0.1", "localhost", "::1"])
EVALSITE_ALLOW_CODE_JUDGES = env_bool("EVALSITE_ALLOW_CODE_JUDGES", False)
EVALSITE_API_TOKEN = env_secret("EVALSITE_API_TOKEN")
# Where this site is served (`make run`: scripts/serve.py passes both to the web server and the worker): no
# request a run sends may go there (runs/engine/providers/own.py).
EVALSITE_HOST = env_str("EVALSITE_HOST", "127.0.0.1")
EVALSITE_PORT = env_int("PORT", 8000, minimum=1)

# Bounds on what a blueprint or a response can make us do (blueprints/spec/limits.py).
from blueprints.spec.limits import DEFAULT_LIMITS as _L, Limits  # noqa: E402

_BLUEPRINT_CHARS = env_int("EVALSITE_MAX_BLUEPRINT_CHARS", _L.max_text_chars, minimum=1000)
EVALSITE_LIMITS = Limits(
    regex_timeout_s=env_float("EVALSITE_REGEX_TIMEOUT_S", _L.regex_timeout_s, minimum=0.001),
    js_timeout_ms=env_int("EVALSITE_JS_TIMEOUT_MS", _L.js_timeout_ms, minimum=1),
    js_memory_bytes=env_int("EVALSITE_JS_MEMORY_MB", _L.js_memory_bytes >> 20, minimum=8) << 20,
    item_budget_s=env_float("EVALSITE_ITEM_BUDGET_S", _L.item_budget_s, minimum=1),
    max_text_chars=_BLUEPRINT_CHARS,
    # What the text may expand to through YAML aliases; by default as much as it may hold written out.
    max_expanded_chars=env_int("EVALSITE_MAX_EXPANDED_CHARS", _BLUEPRINT_CHARS, minimum=1000),
    max_nodes=env_int("EVALSITE_MAX_NODES", _L.max_nodes, minimum=100),
    max_depth=env_int("EVALSITE_MAX_DEPTH", _L.max_depth, minimum=10),
    max_variants=env_int("EVALSITE_MAX_VARIANTS", _L.max_variants, minimum=1),
)
# A form post must be able to carry a blueprint up to the text limit (URL-encoded, so up to three
# bytes a character), so the parser's located "too long" error is what the author sees.
DATA_UPLOAD_MAX_MEMORY_SIZE = EVALSITE_LIMITS.max_text_chars * 3 + (1 << 20)
# A chunk's items run at once, each within the item budget, so a task ends within the budget
# plus saving; django-q stops it two minutes after that, and hands it out again only later.
Q_CLUSTER["timeout"] = int(EVALSITE_LIMITS.item_budget_s) + 120
Q_CLUSTER["retry"] = Q_CLUSTER["timeout"] + 120

# Static files -----------------------------------------------------------------

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# Serve straight from the apps' and project's static folders too, so pages
# work before the first collectstatic (and in tests); an existing STATIC_ROOT
# keeps whitenoise from warning that it is missing.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG
STATIC_ROOT.mkdir(exist_ok=True)

# Internationalisation ---------------------------------------------------------

LANGUAGE_CODE = "en"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

# Logging ----------------------------------------------------------------------
# Everything goes to stderr. Secrets live in settings and the environment,
# never in log messages; the debug page hides them too.

DEFAULT_EXCEPTION_REPORTER_FILTER = "evalsite.reporting.SecretsHiddenFilter"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
    },
    "handlers": {
        "stderr": {"class": "logging.StreamHandler", "formatter": "plain"},
    },
    "root": {"handlers": ["stderr"], "level": "INFO"},
    "loggers": {
        "django": {"handlers": ["stderr"], "level": "INFO", "propagate": False},
        # One line per HTTP request to a model would drown what matters (and cost CPU);
        # failures are recorded on the items and shown on the run page instead.
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
    },
}
