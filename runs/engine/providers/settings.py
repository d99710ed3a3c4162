"""What the providers need from the environment, read once into a frozen value.

``settings_from_env(os.environ)`` is the only place that reads environment
variables; everything else takes a :class:`ProviderSettings`. The Django side
calls it with ``os.environ``; tests build settings directly with tiny backoffs.

Keys and the values of allowed ``${NAME}`` variables are kept out of
``repr()`` so that logging a settings object can never print a secret.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping

from blueprints.spec.model_ids import concurrency_env_name

from .own import OwnAddresses
from .prices import DEFAULT_MAX_TOKENS
from .transport import proxy_configured


@dataclass(frozen=True, slots=True)
class ProviderInfo:
    """A built-in provider: how to reach it and how to speak to it."""

    name: str  # the model id prefix: "openai" in "openai:gpt-4o-mini"
    api_format: str  # "openai_chat", "anthropic" or "gemini"
    key_envs: tuple[str, ...]  # first one set wins
    base_url_env: str
    default_base_url: str
    # Reference 5.8: the upstream's clients send 1500 when the caller gives no
    # limit, except OpenRouter, which sends none.
    default_max_tokens: int | None = DEFAULT_MAX_TOKENS


PROVIDERS: dict[str, ProviderInfo] = {
    p.name: p
    for p in (
        ProviderInfo("openai", "openai_chat", ("OPENAI_API_KEY",), "OPENAI_BASE_URL", "https://api.openai.com/v1"),
        ProviderInfo("anthropic", "anthropic", ("ANTHROPIC_API_KEY",), "ANTHROPIC_BASE_URL", "https://api.anthropic.com"),
        ProviderInfo(
            "google", "gemini", ("GEMINI_API_KEY", "GOOGLE_API_KEY"), "GEMINI_BASE_URL",
            "https://generativelanguage.googleapis.com/v1beta",
        ),
        ProviderInfo("mistral", "openai_chat", ("MISTRAL_API_KEY",), "MISTRAL_BASE_URL", "https://api.mistral.ai/v1"),
        ProviderInfo("together", "openai_chat", ("TOGETHER_API_KEY",), "TOGETHER_BASE_URL", "https://api.together.xyz/v1"),
        ProviderInfo("xai", "openai_chat", ("XAI_API_KEY",), "XAI_BASE_URL", "https://api.x.ai/v1"),
        ProviderInfo(
            "openrouter", "openai_chat", ("OPENROUTER_API_KEY",), "OPENROUTER_BASE_URL", "https://openrouter.ai/api/v1",
            default_max_tokens=None,
        ),
    )
}

DEFAULT_CONCURRENCY = 20
# Where custom models may send requests when the operator says nothing (EVALSITE_MODEL_HOSTS unset): this
# machine only, so Ollama, llama.cpp and vLLM on localhost work and a blueprint cannot reach another host.
DEFAULT_MODEL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
ANY_HOST = "*"
_CONCURRENCY_PREFIX = "EVALSITE_CONCURRENCY_"
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True, slots=True)
class ProviderSettings:
    """Limits, retries, keys and endpoints for one router.

    ``provider_concurrency`` is keyed by the upper-cased prefix, as the
    environment names it (``{"OPENAI": 5}`` from ``EVALSITE_CONCURRENCY_OPENAI=5``).
    ``api_keys`` and ``base_urls`` are keyed by provider name (``"google"``).
    ``blueprint_env`` holds the values of the variables the operator allowed
    in custom headers, and only those.
    """

    concurrency: int = DEFAULT_CONCURRENCY
    provider_concurrency: Mapping[str, int] = field(default_factory=dict)
    max_attempts: int = 3
    timeout_s: float = 120.0
    connect_timeout_s: float = 10.0
    backoff_base_s: float = 1.0
    backoff_max_s: float = 30.0
    # A Retry-After longer than this (a daily quota, say) fails the item now
    # rather than holding it for an hour; the reason says how long was asked.
    retry_after_max_s: float = 120.0
    breaker_threshold: int = 5
    blueprint_env_names: frozenset[str] = frozenset()
    blueprint_env: Mapping[str, str] = field(default_factory=dict, repr=False)
    api_keys: Mapping[str, str] = field(default_factory=dict, repr=False)
    base_urls: Mapping[str, str] = field(default_factory=dict)
    # The hosts a blueprint's custom models may reach (EVALSITE_MODEL_HOSTS): ``host`` (any port) or
    # ``host:port``, lower case, IPv6 without brackets; ``*`` allows any host; empty: no custom model runs.
    # None: no limit (the engine used on its own, tests); evalsite always passes the setting, whose
    # default is DEFAULT_MODEL_HOSTS. Built-in providers (and their <PROVIDER>_BASE_URL) are not limited.
    model_hosts: frozenset[str] | None = None
    proxy: bool = False  # HTTPS_PROXY and friends are set: calls go through httpx's proxy support
    # Where evalsite itself serves (own.py): no call may go there. None: nowhere (the engine used on its own).
    own_addresses: OwnAddresses | None = None

    def __post_init__(self) -> None:
        for name in ("concurrency", "max_attempts", "breaker_threshold"):
            if getattr(self, name) < 1:
                raise ValueError(f"ProviderSettings.{name} must be at least 1, got {getattr(self, name)}")
        for name in ("timeout_s", "connect_timeout_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"ProviderSettings.{name} must be positive, got {getattr(self, name)}")
        for name in ("backoff_base_s", "backoff_max_s", "retry_after_max_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"ProviderSettings.{name} cannot be negative, got {getattr(self, name)}")

    def base_url(self, provider: str) -> str:
        return (self.base_urls.get(provider) or PROVIDERS[provider].default_base_url).rstrip("/")

    def api_key(self, provider: str) -> str | None:
        return self.api_keys.get(provider) or None

    def concurrency_for(self, model_id: str) -> int:
        """The configured limit for the provider of ``model_id`` (global when unset)."""
        name = concurrency_env_name(model_id)
        if name is None:
            return self.concurrency
        return self.provider_concurrency.get(name.removeprefix(_CONCURRENCY_PREFIX), self.concurrency)

    def model_host_allowed(self, host: str, port: int | None) -> bool:
        """Whether a custom model may send a request to ``host`` (and ``port``)."""
        hosts = self.model_hosts
        if hosts is None or ANY_HOST in hosts:
            return True
        host = host.lower().strip("[]")
        return host in hosts or (port is not None and f"{host}:{port}" in hosts)

    def secrets(self) -> list[str]:
        """Every value that must never appear in a message: keys and allowed variables."""
        return [v for v in (*self.api_keys.values(), *self.blueprint_env.values()) if v]


def key_variable_names(provider: str) -> str:
    """How an error names the key variable: ``GEMINI_API_KEY (or GOOGLE_API_KEY)``."""
    names = PROVIDERS[provider].key_envs
    return names[0] if len(names) == 1 else f"{names[0]} (or {', '.join(names[1:])})"


def settings_from_env(environ: Mapping[str, str], **overrides) -> ProviderSettings:
    """Build settings from environment variables (a pure function of ``environ``).

    Reads ``EVALSITE_CONCURRENCY``, ``EVALSITE_CONCURRENCY_<PROVIDER>``,
    ``EVALSITE_MAX_ATTEMPTS``, ``EVALSITE_CALL_TIMEOUT_S``,
    ``EVALSITE_BREAKER_THRESHOLD``, ``EVALSITE_BLUEPRINT_ENV``,
    ``EVALSITE_MODEL_HOSTS`` (when it is set; unset here means no limit, while
    evalsite's settings default to this machine) and each
    provider's ``*_API_KEY`` and ``*_BASE_URL``. A malformed number raises
    ``ValueError`` naming the variable: that is a configuration mistake to fix
    before anything runs. ``overrides`` replace fields (tests, the CLI).
    """
    concurrency = _int(environ, "EVALSITE_CONCURRENCY", DEFAULT_CONCURRENCY)
    per_provider = {
        name.removeprefix(_CONCURRENCY_PREFIX): _int(environ, name, concurrency)
        for name in sorted(environ)
        if name.startswith(_CONCURRENCY_PREFIX) and len(name) > len(_CONCURRENCY_PREFIX)
    }
    allowed = frozenset(
        name.strip() for name in (environ.get("EVALSITE_BLUEPRINT_ENV") or "").split(",") if name.strip()
    )
    model_hosts = (model_hosts_from((environ.get("EVALSITE_MODEL_HOSTS") or "").split(","))
                   if "EVALSITE_MODEL_HOSTS" in environ else None)
    bad = sorted(name for name in allowed if not _NAME_RE.match(name))
    if bad:
        raise ValueError(f"EVALSITE_BLUEPRINT_ENV lists names that are not variable names: {', '.join(bad)}")
    keys: dict[str, str] = {}
    bases: dict[str, str] = {}
    for provider in PROVIDERS.values():
        for env_name in provider.key_envs:
            value = (environ.get(env_name) or "").strip()
            if value:
                keys[provider.name] = value
                break
        base = (environ.get(provider.base_url_env) or "").strip()
        if base:
            if not re.match(r"^https?://", base):
                raise ValueError(f"{provider.base_url_env} must start with http:// or https://, got {base!r}")
            bases[provider.name] = base
    values = dict(
        concurrency=concurrency,
        provider_concurrency=per_provider,
        max_attempts=_int(environ, "EVALSITE_MAX_ATTEMPTS", 3),
        timeout_s=_float(environ, "EVALSITE_CALL_TIMEOUT_S", 120.0),
        breaker_threshold=_int(environ, "EVALSITE_BREAKER_THRESHOLD", 5),
        blueprint_env_names=allowed,
        blueprint_env={name: environ[name] for name in allowed if name in environ},
        api_keys=keys,
        base_urls=bases,
        model_hosts=model_hosts,
        proxy=proxy_configured(environ),
    )
    values.update(overrides)
    return ProviderSettings(**values)


def model_hosts_from(entries) -> frozenset[str]:
    """EVALSITE_MODEL_HOSTS's entries as ``ProviderSettings.model_hosts`` holds them: lower case, blanks
    dropped, IPv6 brackets removed (``[::1]`` and ``[::1]:11434`` become ``::1`` and ``::1:11434``)."""
    hosts = set()
    for entry in entries:
        entry = str(entry).strip().lower()
        if entry.startswith("["):
            address, _, rest = entry[1:].partition("]")
            entry = address + rest
        if entry:
            hosts.add(entry)
    return frozenset(hosts)


def _int(environ: Mapping[str, str], name: str, default: int) -> int:
    raw = (environ.get(name) or "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be a whole number, got {raw!r}") from None
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")
    return value


def _float(environ: Mapping[str, str], name: str, default: float) -> float:
    raw = (environ.get(name) or "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number of seconds, got {raw!r}") from None
    if not value > 0:
        raise ValueError(f"{name} must be positive, got {value}")
    return value
