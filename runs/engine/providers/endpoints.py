"""Where a model id is sent and how: built-in providers and the blueprint's custom models.

:func:`resolve_endpoint` turns a routing id (``openai:gpt-4o-mini``, a custom
model's ``id``) into an :class:`Endpoint`, or into a :class:`Problem` that
says why the call cannot be made (no key, unknown provider, a header variable
the operator has not allowed). :func:`build_request` then gives the URL,
headers and JSON body of one call.

Safety rule: a blueprint chooses a custom model's URL, so a custom model never
receives a provider key from the environment. Its URL must go to a host the
operator lists in ``EVALSITE_MODEL_HOSTS`` (by default this machine only), and
its headers may use ``${NAME}`` only for names the operator lists in
``EVALSITE_BLUEPRINT_ENV``; anything else fails the item before a request is
made, with the reason.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import httpx

from blueprints.spec.model_ids import provider_of, split_variant_suffixes
from blueprints.spec.schema import CustomModel

from .cache import key_head, key_rest, key_with_rest
from .own import with_engine_header
from .prices import DEFAULT_MAX_TOKENS
from .formats import (
    anthropic_body,
    completions_prompt,
    gemini_body,
    gemini_model_path,
    openai_chat_body,
    openai_completions_body,
    split_system,
)
from .settings import PROVIDERS, ProviderSettings, key_variable_names

ANTHROPIC_VERSION = "2023-06-01"
FIXTURES_PREFIX = "fixtures"

_VARIABLE_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# Reasoning effort -> thinking budget, for formats that take a budget (the guide's
# custom-model reasoning options).
_EFFORT_BUDGETS = {"low": 1024, "medium": 4096, "high": 8192}
_OPENAI_LIKE = ("openai", "mistral", "together", "xai", "openrouter")


@dataclass(frozen=True, slots=True)
class Problem:
    """Why a model cannot be called, in words an operator can act on.

    ``variable`` names the environment variable involved, if any, so a page
    can point at it; it never holds a value.
    """

    model_id: str
    message: str
    variable: str | None = None


NATIVE_TOOL_FORMATS = ("openai_chat", "anthropic", "gemini")


@dataclass(frozen=True, slots=True)
class Endpoint:
    model_id: str  # the routing id: no variant suffixes
    provider: str  # "openai", or "custom" for a blueprint's own endpoint
    api_format: str
    url: str
    model_name: str
    limit_key: str  # requests sharing a key share one concurrency limit
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    default_max_tokens: int | None = DEFAULT_MAX_TOKENS
    custom: CustomModel | None = None
    secrets: tuple[str, ...] = field(default=(), repr=False)  # values to hide in messages

    @property
    def native_tools(self) -> bool:
        """Whether evalsite sends this endpoint tool definitions (runs/engine/tools.py): the three chat formats of
        the built-in providers. Custom models and text completions are traced (TOOL_CALL lines) instead."""
        return self.custom is None and self.api_format in NATIVE_TOOL_FORMATS

    @property
    def label(self) -> str:
        """How messages name the endpoint: ``openai``, ``custom model 'local:llama'``."""
        return f"custom model '{self.model_id}'" if self.custom else self.provider

    def cache_identity(self) -> dict[str, Any]:
        """What decides an answer, for the cache key: never header values (they hold keys)."""
        if self.custom is not None:
            c = self.custom
            return {
                "custom": c.id, "url": c.url, "model": c.model_name, "inherit": c.inherit, "format": c.format,
                "promptFormat": c.prompt_format, "parameters": c.parameters, "parameterMapping": c.parameter_mapping,
                "extra": c.extra, "headers": sorted(c.headers or {}),
            }
        return {"provider": self.provider, "model": self.model_name, "url": self.url}

    def answer_key(self, messages, *, temperature: float | None, max_tokens: int | None, trial: int = 0,
                   repeat: int = 0) -> str:
        """The response cache's key for these messages sent here (the router's, the estimate's and a replay's:
        one recipe). No ``max_tokens``: the endpoint's default, which is what is sent."""
        return self.answer_key_from(self.answer_head(messages, max_tokens=max_tokens), temperature=temperature,
                                    trial=trial, repeat=repeat)

    def answer_head(self, messages, *, max_tokens: int | None):
        """The first half of :meth:`answer_key` (the messages hashed), for a caller that keys many requests with
        the same messages (the estimate's cache probe)."""
        return key_head(messages, max_tokens=max_tokens if max_tokens is not None else self.default_max_tokens)

    def answer_key_from(self, head, *, temperature: float | None, trial: int = 0, repeat: int = 0) -> str:
        """:meth:`answer_key` from :meth:`answer_head`'s hash (its own or another endpoint's with the same
        default token limit)."""
        memo = (id(self), temperature, trial, repeat)
        held = _KEY_RESTS.get(memo)
        if held is None or held[0] is not self:  # each entry holds its endpoint: an id is never another's
            held = (self, key_rest(self.cache_identity(), temperature=temperature, trial=trial, repeat=repeat))
            if len(_KEY_RESTS) >= 4096:
                _KEY_RESTS.clear()
            _KEY_RESTS[memo] = held
        return key_with_rest(head, held[1])


# The end of each endpoint's cache keys, by temperature, trial and repeat: written once, not for every call (an
# endpoint's identity and the key's other parts as sorted JSON were 3% of a judged run's worker CPU).
_KEY_RESTS: dict[tuple, tuple[Endpoint, bytes]] = {}


def provider_problem(model_id: str) -> str | None:
    """Why a run could never send ``model_id`` (a routing id that is no custom model's) anywhere: no provider
    prefix, a provider that is neither built in nor ``fixtures``, no model name after the prefix; None when it
    names a known provider. The rule ``resolve_endpoint`` applies before it looks for a key, and the one model
    collections are checked by (blueprints.models.model_id_problem). Says the fix, with the nearest known
    provider when the prefix looks like a misspelling of one."""
    provider = provider_of(model_id)
    if provider is None:
        return (f"'{model_id}' has no provider prefix; write it as provider:model, e.g. openai:gpt-4o-mini, or "
                f"define it as a custom model with a url")
    known = [*PROVIDERS, FIXTURES_PREFIX]
    name = split_variant_suffixes(model_id.strip())[0].partition(":")[2].strip()
    if provider not in known:
        near = difflib.get_close_matches(provider, known, n=1, cutoff=0.6)
        fix = (f"did you mean '{near[0]}:{name}'?" if near and name else
               f"reach it through a router (e.g. 'openrouter:{provider}/{name or 'model'}') or, for your own "
               f"endpoint, define a custom model with a url")
        return f"'{model_id}' names an unknown provider '{provider}' (known providers: {', '.join(known)}); {fix}"
    if not name:
        return f"'{model_id}' has no model name after '{provider}:'"
    return None


def resolve_endpoint(model_id: str, settings: ProviderSettings,
                     custom_models: Mapping[str, CustomModel]) -> Endpoint | Problem:
    """The endpoint for a routing id, or the problem that stops the call."""
    if model_id in custom_models:
        return _custom_endpoint(custom_models[model_id], settings)
    problem = provider_problem(model_id)
    provider = provider_of(model_id)
    if problem is None and provider not in PROVIDERS:  # fixtures: every caller answers those before this
        problem = f"'{model_id}' answers from a blueprint's fixtures, not from an endpoint"
    if problem is not None:
        return Problem(model_id, f"model {problem}")
    info = PROVIDERS[provider]
    model_name = model_id.split(":", 1)[1].strip()
    key = settings.api_key(provider)
    if not key:
        variable = key_variable_names(provider)
        return Problem(model_id, f"no API key for {provider}: set {variable} in the environment to run "
                                 f"'{model_id}'", info.key_envs[0])
    base = settings.base_url(provider)
    if info.api_format == "anthropic":
        url = _join(base, "/messages" if _has_version(base) else "/v1/messages")
        headers = {"x-api-key": key, "anthropic-version": ANTHROPIC_VERSION}
    elif info.api_format == "gemini":
        # The key goes in a header, not in ?key=, so it never shows in a logged URL.
        prefix = base if _has_version(base) else base + "/v1beta"
        url = f"{prefix}/{gemini_model_path(model_name)}:generateContent"
        headers = {"x-goog-api-key": key}
    else:
        if provider == "mistral" and not _has_version(base):
            base += "/v1"  # the Mistral SDK's server URL has no version; accept both spellings
        url = base + "/chat/completions"
        headers = {"authorization": f"Bearer {key}"}
    return Endpoint(
        model_id=model_id, provider=provider, api_format=info.api_format, url=url, model_name=model_name,
        limit_key=provider, headers=with_engine_header(headers), default_max_tokens=info.default_max_tokens,
        secrets=(key,),
    )


def host_refusal(model: CustomModel, settings: ProviderSettings) -> Problem | None:
    """Why a custom model's URL may not be called (a host the operator has not listed), or None."""
    try:
        url = httpx.URL(model.url)
        host, port = url.host, url.port
    except (httpx.InvalidURL, TypeError, ValueError):
        return Problem(model.id, f"custom model '{model.id}' is not run: its url {model.url!r} is not a valid URL")
    if url.scheme not in ("http", "https") or not host:
        return Problem(model.id, f"custom model '{model.id}' is not run: its url {model.url!r} is not an http or "
                                 f"https URL")
    if settings.model_host_allowed(host, port):
        return None
    shown = f"[{host}]" if ":" in host else host
    if not settings.model_hosts:
        why = "no host is allowed (EVALSITE_MODEL_HOSTS is empty)"
    else:
        why = (f"{shown} is not in EVALSITE_MODEL_HOSTS, the hosts custom models may reach "
               f"(now: {', '.join(sorted(settings.model_hosts))})")
    return Problem(
        model.id,
        f"custom model '{model.id}' is not run: its url goes to {shown}, and {why}; to allow it, add {shown} "
        f"to EVALSITE_MODEL_HOSTS (a comma-separated list of hosts) and restart. No request was sent.",
        "EVALSITE_MODEL_HOSTS",
    )


def _custom_endpoint(model: CustomModel, settings: ProviderSettings) -> Endpoint | Problem:
    refusal = host_refusal(model, settings)
    if refusal is not None:
        return refusal
    headers: dict[str, str] = {}
    if model.inherit == "anthropic" and (model.format or "chat") == "chat":
        headers["anthropic-version"] = ANTHROPIC_VERSION
    used_values: list[str] = []
    for name, raw in (model.headers or {}).items():
        value, problem = substitute_variables(raw, settings, model_id=model.id, header=name)
        if problem is not None:
            return problem
        used_values.extend(settings.blueprint_env[n] for n in _VARIABLE_RE.findall(raw))
        # A blueprint header replaces a default of the same name, whatever its case.
        for existing in [k for k in headers if k.lower() == name.lower()]:
            del headers[existing]
        headers[name] = value
    if (model.format or "chat") == "completions":
        api_format = "openai_completions"
    else:
        api_format = {"anthropic": "anthropic", "google": "gemini"}.get(model.inherit, "openai_chat")
    return Endpoint(
        model_id=model.id, provider="custom", api_format=api_format, url=model.url, model_name=model.model_name,
        # The engine's mark goes last: a blueprint's header of the same name cannot remove it (own.py).
        limit_key=f"custom:{model.id}", headers=with_engine_header(headers), default_max_tokens=DEFAULT_MAX_TOKENS,
        custom=model,
        secrets=tuple(v for v in used_values if v),
    )


def substitute_variables(text: str, settings: ProviderSettings, *, model_id: str,
                         header: str) -> tuple[str, Problem | None]:
    """Fill ``${NAME}`` from the allowed variables; a name not allowed or not set is a problem."""
    for name in _VARIABLE_RE.findall(text):
        if name not in settings.blueprint_env_names:
            return text, Problem(
                model_id,
                f"custom model '{model_id}': header '{header}' uses ${{{name}}}, which the operator has not "
                f"allowed blueprints to use; to allow it, add {name} to EVALSITE_BLUEPRINT_ENV "
                f"(a comma-separated list of variable names) and restart",
                name,
            )
        if name not in settings.blueprint_env:
            return text, Problem(
                model_id,
                f"custom model '{model_id}': header '{header}' uses ${{{name}}}, which is allowed but not set "
                f"in the environment; set {name}",
                name,
            )
    return _VARIABLE_RE.sub(lambda m: settings.blueprint_env[m.group(1)], text), None


# --------------------------------------------------------------------------
# One request


@dataclass(frozen=True, slots=True)
class Quirks:
    """What a built-in OpenAI model told us it will not take (reference 5.8).

    Newer OpenAI models reject ``max_tokens`` (they want
    ``max_completion_tokens``) and some reject any ``temperature``; the router
    learns this from the 400 and asks again the accepted way.
    """

    max_tokens_key: str = "max_tokens"
    omit_temperature: bool = False


def build_request(endpoint: Endpoint, messages: Iterable[dict], *, temperature: float | None,
                  max_tokens: int | None, quirks: Quirks = Quirks(),
                  tools: Iterable[dict] = ()) -> tuple[str, dict[str, str], dict]:
    """URL, headers and JSON body of one call. ``max_tokens`` None uses the endpoint's default. ``tools`` are
    sent only where ``endpoint.native_tools`` (the router refuses a request with tools elsewhere)."""
    tools = tuple(tools) if endpoint.native_tools else ()
    messages = list(messages)
    limit = max_tokens if max_tokens is not None else endpoint.default_max_tokens
    if endpoint.custom is not None:
        return endpoint.url, dict(endpoint.headers), custom_body(endpoint.custom, messages, temperature, limit)
    if quirks.omit_temperature:
        temperature = None
    fmt = endpoint.api_format
    if fmt == "openai_chat":
        body = openai_chat_body(endpoint.model_name, messages, temperature=temperature, max_tokens=limit,
                                max_tokens_key=quirks.max_tokens_key, tools=tools)
    elif fmt == "anthropic":
        body = anthropic_body(endpoint.model_name, messages, temperature=temperature,
                              max_tokens=limit if limit is not None else DEFAULT_MAX_TOKENS, tools=tools)
    elif fmt == "gemini":
        body = gemini_body(messages, temperature=temperature, max_tokens=limit, tools=tools)
    else:
        body = openai_completions_body(endpoint.model_name, messages, temperature=temperature, max_tokens=limit)
    return endpoint.url, dict(endpoint.headers), body


def custom_body(model: CustomModel, messages: list[dict], temperature: float | None, max_tokens: int | None) -> dict:
    """The body for a blueprint's custom model, following the format guide.

    Order matters: the format's own body, then ``parameterMapping`` renames,
    then the reasoning options, then ``parameters`` (which win over
    everything; a ``null`` removes the key). ``stream: false`` is sent
    because the guide's examples remove it with ``stream: null``.
    """
    mapping = model.parameter_mapping or {}

    def wire(standard: str, default: str) -> str:
        # Accept the guide's camelCase names and the wire name itself as keys.
        return mapping.get(standard) or mapping.get(default) or default

    fmt = model.format or "chat"
    inherit = model.inherit
    if fmt == "completions":
        body: dict[str, Any] = {"model": model.model_name, "stream": False,
                                "prompt": completions_prompt(messages, model.prompt_format)}
    elif inherit == "google":
        # Gemini takes the model in the URL and rejects unknown top-level fields.
        body = gemini_body(messages, temperature=None, max_tokens=None)
    elif inherit == "anthropic":
        system, turns = split_system(messages)
        body = {"model": model.model_name, "stream": False, "messages": turns}
        if system is not None:
            body["system"] = system
    else:
        body = openai_chat_body(model.model_name, messages, temperature=None, max_tokens=None)
        body["stream"] = False

    if inherit == "google" and fmt == "chat":
        config: dict[str, Any] = {}
        if temperature is not None:
            config[wire("temperature", "temperature")] = temperature
        if max_tokens is not None:
            config[wire("maxTokens", "maxOutputTokens")] = max_tokens
        if config:
            body["generationConfig"] = config
    else:
        if temperature is not None:
            body[wire("temperature", "temperature")] = temperature
        if max_tokens is not None:
            body[wire("maxTokens", "max_tokens")] = max_tokens

    _apply_reasoning(body, model, wire, fmt)

    for key, value in (model.parameters or {}).items():
        if value is None:
            body.pop(key, None)
        else:
            body[key] = value
    return body


def _apply_reasoning(body: dict, model: CustomModel, wire, fmt: str) -> None:
    effort = model.extra.get("reasoningEffort")
    budget = model.extra.get("thinkingBudget")
    if effort is None and budget is None:
        return
    if model.inherit in _OPENAI_LIKE or fmt == "completions":
        if effort is not None:
            body[wire("reasoningEffort", "reasoning_effort")] = effort
        return
    if budget is None:
        budget = _EFFORT_BUDGETS.get(str(effort).lower())
    if not budget:
        return
    if model.inherit == "anthropic":
        body[wire("thinkingBudget", "thinking")] = {"type": "enabled", "budget_tokens": budget}
    elif model.inherit == "google":
        # Gemini reads the budget from generationConfig.thinkingConfig.
        body.setdefault("generationConfig", {})[wire("thinkingBudget", "thinkingConfig")] = {"thinkingBudget": budget}


def _has_version(base: str) -> bool:
    return re.search(r"/v\d+(?:alpha|beta)?\d*$", base) is not None


def _join(base: str, path: str) -> str:
    return base.rstrip("/") + path
