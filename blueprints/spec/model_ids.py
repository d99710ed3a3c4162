# Over 500 lines: every upstream rule about model ids in one place.
"""Model identifiers: parsing, display normalisation, effective ids, blueprint entries.

A model id in a blueprint is ``provider:model`` (``openai:gpt-4o-mini``,
``openrouter:google/gemini-2.5-pro``), a custom model's own ``id``, or an
upper-case collection placeholder such as ``CORE``.  A *run* never stores the
bare id: every response is keyed by an *effective id* that carries the
variant it was generated with, e.g. ``openai:gpt-4o-mini[temp:0]`` or
``openai:gpt-4o-mini[temp:0.7][sp_idx:1]`` (Weval reference section 1.12).

Two different parses exist on purpose (reference section 1.11):

* :func:`parse_for_api_call` strips the variant suffixes and nothing else.
  The result is safe to route a request with (``openrouter:google/x`` must
  stay an OpenRouter call).
* :func:`parse_for_display` additionally canonicalises the name so the same
  model reached through different routers groups together on leaderboards
  (``openrouter:google/gemini-pro`` -> ``google:gemini-pro``).  Never call a
  provider with its output.

This module is pure Python and must stay importable without Django: the
blueprint parser, the CLI and the tests use it outside a configured project.
"""

from __future__ import annotations

import math
import re
import reprlib
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

__all__ = [
    "IDEAL_MODEL_ID",
    "LEGACY_IDEAL_MODEL_ID",
    "ROUTING_PROVIDERS",
    "ApiModelId",
    "ParsedModelId",
    "concurrency_env_name",
    "display_label",
    "effective_id",
    "extract_maker",
    "format_js_number",
    "is_collection_name",
    "normalize_model_entry",
    "parse_for_api_call",
    "parse_for_display",
    "provider_of",
    "split_variant_suffixes",
]

#: Pseudo model whose "response" is the prompt's ``ideal`` text.
IDEAL_MODEL_ID = "IDEAL_MODEL_ID"
#: Older result files used this name for the same pseudo model.
LEGACY_IDEAL_MODEL_ID = "IDEAL_BENCHMARK"
_IDEAL_IDS = frozenset({IDEAL_MODEL_ID, LEGACY_IDEAL_MODEL_ID})

#: Providers that resell other makers' models as ``provider:maker/model``.
ROUTING_PROVIDERS = frozenset({"openrouter", "together", "fireworks", "replicate"})

# Lower-case provider or organisation name -> maker label.  Several spellings
# exist for one maker (OpenRouter says ``x-ai``, the direct client ``xai``),
# and leaderboards must not split a maker in two because of that.
_KNOWN_MAKERS: dict[str, str] = {
    "openai": "OPENAI",
    "anthropic": "ANTHROPIC",
    "google": "GOOGLE",
    "xai": "XAI",
    "x-ai": "XAI",
    "meta": "META",
    "meta-llama": "META",
    "mistral": "MISTRAL",
    "mistralai": "MISTRAL",
    "deepseek": "DEEPSEEK",
    "deepseek-ai": "DEEPSEEK",
    "qwen": "QWEN",
    "cohere": "COHERE",
    "moonshot": "MOONSHOT",
    "moonshotai": "MOONSHOT",
}

# Name substring -> canonical display prefix, in priority order (reference
# 1.11 "Display normalization").  Order matters for names that mention two
# families, e.g. ``deepseek-r1-distill-llama-70b``.
_CANONICAL_PREFIXES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("grok",), "xai"),
    (("gpt-", "o1-", "o4-"), "openai"),
    (("claude",), "anthropic"),
    (("qwen",), "qwen"),
    (("gemini", "palm", "gemma"), "google"),
    (("deepseek",), "deepseek"),
    (("llama",), "meta"),
    (("mistral", "mixtral"), "mistralai"),
    (("command",), "cohere"),
)

# Per-family rewrites of dated / preview / beta names to the base name.  They
# are scoped per family on purpose: a generic "strip -NNNN" would merge
# genuinely different releases such as ``qwen3-...-2507``.
_NAME_REWRITES: dict[str, tuple[re.Pattern[str], ...]] = {
    "xai": (re.compile(r"-\d{4}$"), re.compile(r"-beta$")),  # grok-4-0709, grok-3-mini-beta
    "anthropic": (re.compile(r"-\d{8}$"),),  # claude-3-5-haiku-20241022
    "google": (re.compile(r"-preview(?:-\d{2}-\d{2})?$"),),  # gemini-2.5-flash-preview-05-20
}

# One trailing variant suffix.  Temperatures accept what format_js_number can
# print (``1e+21``, ``-0.5``) so effective ids round-trip.
_SUFFIX_RE = re.compile(
    r"\[(?:"
    r"temp:(?P<temp>[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)"
    r"|sp_idx:(?P<sp>\d+)"
    r"|sys:(?P<sys>[A-Za-z0-9_-]+)"
    r")\]$"
)


@dataclass(frozen=True, slots=True)
class ParsedModelId:
    """A model id parsed for display and grouping (never for routing).

    ``base_id`` is the canonical ``maker:model`` form; ``full_id`` is the
    untouched input; ``system_prompt_hash`` keeps its brackets (``[sys:ab12]``)
    because that is how labels show it.
    """

    base_id: str
    full_id: str
    temperature: float | None = None
    system_prompt_index: int | None = None
    system_prompt_hash: str | None = None
    maker: str = "UNKNOWN"


@dataclass(frozen=True, slots=True)
class ApiModelId:
    """A model id parsed for an API call: suffixes removed, routing kept."""

    original_model_id: str
    effective_model_id: str
    temperature: float | None = None
    system_prompt_index: int | None = None
    system_prompt_hash: str | None = None


# --------------------------------------------------------------------------
# Numbers


def format_js_number(x: float | int) -> str:
    """Return ``x`` printed the way JavaScript's ``String(number)`` prints it.

    Effective ids and labels embed temperatures exactly as the reference
    (TypeScript) printed them, so ``0.0`` must become ``"0"`` and ``1.0``
    ``"1"`` -- Python's ``str`` would give ``"0.0"`` and break the keys that
    results are compared by.  Follows ECMAScript Number::toString: shortest
    round-trip digits, plain notation for exponents in [-6, 21), exponent
    notation (``1e+21``, ``1.5e-7``) outside.

    >>> [format_js_number(v) for v in (0, 0.7, 1.0, -0.0, 1e21, 1.5e-7, 123456.0)]
    ['0', '0.7', '1', '0', '1e+21', '1.5e-7', '123456']
    """
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise TypeError(f"format_js_number expects a number, got {type(x).__name__}")
    if type(x) is int and -(2**53) < x < 2**53:
        return str(x)  # exact as a double, and below 1e21: JS prints the digits (fast path for big data)
    value = float(x)  # JS numbers are doubles; big ints lose precision as in JS
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "0"  # JS prints -0 as "0" too
    sign = "-" if value < 0 else ""
    # repr() gives the shortest digit string that round-trips, which is the
    # same digit string ECMAScript requires; Decimal splits it into parts.
    _, digit_tuple, exponent = Decimal(repr(abs(value))).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0")
    exponent += len(digit_tuple) - len(digits)  # compensate for stripped zeros
    digits = digits.lstrip("0") or "0"
    k = len(digits)
    n = exponent + k  # value = 0.digits * 10**n
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = f"{digits[:n]}.{digits[n:]}"
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        mantissa = digits if k == 1 else f"{digits[0]}.{digits[1:]}"
        body = f"{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + body


# --------------------------------------------------------------------------
# Suffixes


def split_variant_suffixes(model_id: str) -> tuple[str, float | None, int | None, str | None]:
    """Split ``model[temp:T][sp_idx:i][sys:h]`` into its parts, any order.

    Returns ``(base, temperature, system_prompt_index, system_prompt_hash)``;
    the hash keeps its brackets.  Only trailing suffixes count, and each kind
    at most once: a repeated kind stops the scan so the id stays intact rather
    than silently dropping one of two conflicting values.
    """
    base = model_id
    temperature: float | None = None
    sp_index: int | None = None
    sys_hash: str | None = None
    seen: set[str] = set()
    while True:
        m = _SUFFIX_RE.search(base)
        if m is None:
            break
        kind = "temp" if m["temp"] is not None else "sp" if m["sp"] is not None else "sys"
        if kind in seen:
            break
        seen.add(kind)
        if kind == "temp":
            temperature = float(m["temp"])
        elif kind == "sp":
            sp_index = int(m["sp"])
        else:
            sys_hash = m.group(0)
        base = base[: m.start()]
    return base, temperature, sp_index, sys_hash


# --------------------------------------------------------------------------
# Providers and makers


def provider_of(model_id: str) -> str | None:
    """Return the lower-case provider prefix (text before the first ``:``).

    Variant suffixes are removed first because ``gpt-4o[temp:0.7]`` contains
    a colon that is not a provider separator.  ``None`` when there is no
    prefix (bare or custom model ids).
    """
    if not isinstance(model_id, str):
        return None
    base = split_variant_suffixes(model_id.strip())[0]
    provider, sep, _ = base.partition(":")
    provider = provider.strip().lower()
    return provider if sep and provider else None


def concurrency_env_name(model_id: str) -> str | None:
    """Name of the per-provider concurrency variable for ``model_id``.

    ``google:gemini-2.5-pro`` -> ``EVALSITE_CONCURRENCY_GOOGLE`` (DESIGN.md,
    "Environment").  Characters that cannot appear in a portable environment
    variable name (``x-ai`` has a dash) become ``_``.  ``None`` when the id
    has no provider; callers then use ``EVALSITE_CONCURRENCY`` alone.
    """
    provider = provider_of(model_id)
    if provider is None:
        return None
    return "EVALSITE_CONCURRENCY_" + re.sub(r"[^A-Z0-9]", "_", provider.upper())


def _maker_label(name: str) -> str:
    """Maker label for an organisation name: alias table, else upper-cased."""
    lowered = name.strip().lower()
    return _KNOWN_MAKERS.get(lowered, lowered.upper())


def _infer_family(name: str) -> str | None:
    """Canonical prefix for a bare model name, from the substring table.

    A name that *starts* with a family wins over substring order, so
    ``deepseek-r1-distill-qwen-32b`` is DeepSeek's, not Qwen's.
    """
    lowered = name.lower()
    for needles, prefix in _CANONICAL_PREFIXES:
        if any(lowered.startswith(n) for n in needles):
            return prefix
    for needles, prefix in _CANONICAL_PREFIXES:
        if any(n in lowered for n in needles):
            return prefix
    return None


def extract_maker(model_id: str) -> str:
    """Return the maker label (``OPENAI``, ``XAI``, ``META``, ...) of a model id.

    * ``router:org/model`` -> the organisation (``together:some-company/m`` ->
      ``SOME-COMPANY``), through the alias table (``x-ai`` -> ``XAI``).
    * ``provider:model`` with a known provider -> that provider's maker.
    * Otherwise (bare names, routers without ``org/``) -> inferred from the
      model name's family, or ``UNKNOWN``.  Unknown direct providers give
      ``UNKNOWN`` rather than a guess: they are usually custom endpoints.
    """
    if not isinstance(model_id, str) or not model_id.strip():
        return "UNKNOWN"
    base = split_variant_suffixes(model_id.strip())[0]
    provider, sep, rest = base.partition(":")
    provider = provider.lower()
    if not sep:
        rest, provider = base, ""
    if "/" in rest and (provider in ROUTING_PROVIDERS or not provider):
        return _maker_label(rest.split("/", 1)[0])
    if provider in _KNOWN_MAKERS:
        return _KNOWN_MAKERS[provider]
    if provider and provider not in ROUTING_PROVIDERS:
        return "UNKNOWN"
    family = _infer_family(rest)
    return _maker_label(family) if family else "UNKNOWN"


# --------------------------------------------------------------------------
# Display parsing


def _canonical_base(base: str) -> str:
    """Canonical ``maker:model`` for display grouping, or ``base`` unchanged.

    Only ids whose provider is absent, a router, or a known maker are
    rewritten; an unknown prefix (``consumer:``, a custom endpoint) is kept,
    because its name matching ``gpt-`` says nothing about who serves it.
    Names are lower-cased when rewritten so ``GROK-3`` and ``grok-3`` group.
    """
    provider, sep, rest = base.partition(":")
    if not sep:
        provider, rest = "", base
    provider = provider.lower()
    if provider and provider not in ROUTING_PROVIDERS and provider not in _KNOWN_MAKERS:
        return base
    name = rest.rsplit("/", 1)[-1]  # drops ``google/``, ``meta-llama/``, ``x-ai/``
    family = _infer_family(name)
    if family is None:
        return base  # e.g. together:moonshotai/Kimi-K2-Instruct stays routed
    name = name.lower()
    for pattern in _NAME_REWRITES.get(family, ()):
        name = pattern.sub("", name)
    return f"{family}:{name}"


def parse_for_display(model_id: str) -> ParsedModelId:
    """Parse an (effective) model id for labels, grouping and leaderboards.

    Strips ``[temp:T]``, ``[sp_idx:i]`` and ``[sys:h]`` (any order), then
    canonicalises the rest: router prefixes and ``org/`` parts go, the family
    prefix is re-derived from the name (``gpt-4o`` -> ``openai:gpt-4o``) and
    dated or preview names map to their base (``grok-4-0709`` ->
    ``xai:grok-4``).  ``IDEAL_BENCHMARK`` is read as ``IDEAL_MODEL_ID``.
    The result must never be used to call a provider; see
    :func:`parse_for_api_call`.
    """
    if not isinstance(model_id, str) or not model_id.strip():
        return ParsedModelId(base_id="Unknown", full_id=model_id if isinstance(model_id, str) else "")
    text = model_id.strip()
    if text in _IDEAL_IDS:
        return ParsedModelId(base_id=IDEAL_MODEL_ID, full_id=model_id, maker="UNKNOWN")
    base, temperature, sp_index, sys_hash = split_variant_suffixes(text)
    canonical = _canonical_base(base)
    return ParsedModelId(
        base_id=canonical,
        full_id=model_id,
        temperature=temperature,
        system_prompt_index=sp_index,
        system_prompt_hash=sys_hash,
        maker=extract_maker(canonical),
    )


def display_label(
    model_id_or_parsed: str | ParsedModelId,
    *,
    hide_provider: bool = False,
    hide_model_maker: bool = False,
    show_system_index: bool = False,
) -> str:
    """Human label such as ``google:gemini-pro ([sys:ab12], T:0.7)``.

    ``hide_provider`` drops everything up to the first ``:``;
    ``hide_model_maker`` drops an ``org/`` part left in the name (ids that
    were not canonicalised, e.g. ``together:moonshotai/Kimi-K2``).  A
    temperature of 0 is not shown, matching the reference, since it is the
    default every id carries.  The reference never shows ``sp_idx``;
    ``show_system_index=True`` appends ``S:i`` for pages that compare
    system-prompt variants side by side.
    """
    parsed = (
        model_id_or_parsed
        if isinstance(model_id_or_parsed, ParsedModelId)
        else parse_for_display(model_id_or_parsed)
    )
    name = parsed.base_id
    if name == IDEAL_MODEL_ID:
        return IDEAL_MODEL_ID
    if hide_model_maker:
        provider, sep, rest = name.partition(":")
        if sep and "/" in rest:
            name = f"{provider}:{rest.rsplit('/', 1)[-1]}"
        elif not sep and "/" in name:
            name = name.rsplit("/", 1)[-1]
    if hide_provider and ":" in name:
        name = name.split(":", 1)[1]
    extras: list[str] = []
    if parsed.system_prompt_hash:
        extras.append(parsed.system_prompt_hash)
    if show_system_index and parsed.system_prompt_index is not None:
        extras.append(f"S:{parsed.system_prompt_index}")
    if parsed.temperature is not None and parsed.temperature != 0:
        extras.append(f"T:{format_js_number(parsed.temperature)}")
    return f"{name} ({', '.join(extras)})" if extras else name


# --------------------------------------------------------------------------
# API parsing and effective ids


def parse_for_api_call(model_id: str) -> ApiModelId:
    """Parse an effective id back into what a provider call needs.

    Only the variant suffixes are removed; routing (``openrouter:org/model``)
    and the name's spelling are preserved exactly, because a canonicalised
    id would send the request to the wrong client (the reference's
    "repair-run" bug).  ``IDEAL_BENCHMARK`` is read as ``IDEAL_MODEL_ID``.
    """
    if not isinstance(model_id, str):
        raise TypeError(f"model id must be a string, got {type(model_id).__name__}")
    text = model_id.strip()
    if text in _IDEAL_IDS:
        return ApiModelId(original_model_id=IDEAL_MODEL_ID, effective_model_id=model_id)
    base, temperature, sp_index, sys_hash = split_variant_suffixes(text)
    return ApiModelId(
        original_model_id=base,
        effective_model_id=model_id,
        temperature=temperature,
        system_prompt_index=sp_index,
        system_prompt_hash=sys_hash,
    )


def effective_id(
    model_id: str,
    *,
    temperature: float | int,
    system_index: int | None = None,
    system_count: int = 1,
) -> str:
    """Response key for one model variant: ``model[temp:T]`` or ``model[temp:T][sp_idx:i]``.

    The temperature is always present (the reference defaults it to 0, so
    ``[temp:0]`` appears too) and printed as JavaScript prints numbers, so
    keys match exported upstream results.  ``[sp_idx:i]`` appears only when
    the blueprint has more than one system variant; with one it would create
    a different key for the same run.  The temperature must already be
    resolved (reference 5.3); ``None`` is rejected rather than guessed.
    """
    if not isinstance(model_id, str) or not model_id:
        raise ValueError("model id must be a non-empty string")
    if temperature is None:
        raise ValueError("temperature must be resolved before building an effective id")
    key = f"{model_id}[temp:{format_js_number(temperature)}]"
    if system_count > 1:
        if system_index is None or not 0 <= system_index < system_count:
            raise ValueError(
                f"system_index must be in 0..{system_count - 1} when there are "
                f"{system_count} system variants, got {system_index!r}"
            )
        key += f"[sp_idx:{system_index}]"
    return key


# --------------------------------------------------------------------------
# Blueprint ``models:`` entries

# Whitespace around the first colon only: later colons belong to the model
# name (``openrouter:deepseek/deepseek-r1:free``).
_COLON_SPACES_RE = re.compile(r"\s*:\s*")
# Collections become file names (``models/<NAME>.json``), so the accepted
# alphabet is narrower than "upper-case": no dots, slashes or spaces.
_COLLECTION_RE = re.compile(r"[A-Z0-9_-]*[A-Z][A-Z0-9_-]*")


def is_collection_name(value: Any) -> bool:
    """True for a collection placeholder such as ``CORE`` or ``OPEN_SOURCE_CORE``.

    The reference's rule is "no ``:`` and entirely upper case".  We also
    require upper-case letters, digits, ``_`` and ``-`` only, so a
    placeholder can never name a path outside the collections folder.
    """
    return isinstance(value, str) and ":" not in value and _COLLECTION_RE.fullmatch(value) is not None


_BRIEF = reprlib.Repr()
_BRIEF.maxstring = _BRIEF.maxother = 80


def _brief(value: Any) -> str:
    """repr() cut short: a few items of a list or mapping and the start of a long string, in bounded time."""
    return _BRIEF.repr(value)


def normalize_model_entry(entry: Any) -> tuple[str | dict | None, str | None]:
    """Normalise one item of a blueprint's ``models:`` list (reference 1.11).

    Returns ``(value, warning)``:

    * a string is trimmed; whitespace around its first ``:`` is removed with a
      warning (``openai : gpt-4o`` -> ``openai:gpt-4o``);
    * a mapping with ``id`` is a custom model and is returned unchanged (its
      fields are validated by the parser);
    * a one-key mapping ``{provider: model}`` becomes ``provider:model`` with a
      warning (YAML turns ``- openai: gpt-4o`` into such a mapping);
    * anything else gives ``(None, warning)`` and the caller skips it.
    """
    if isinstance(entry, str):
        text = entry.strip()
        if not text:
            return None, "Skipped an empty model entry."
        fixed = _COLON_SPACES_RE.sub(":", text, count=1)
        if fixed != text:
            return fixed, f"Model entry {_brief(text)} was read as {_brief(fixed)} (spaces around ':' removed)."
        return text, None
    if isinstance(entry, dict):
        if "id" in entry:
            return entry, None
        if len(entry) == 1:
            (provider, model), = entry.items()
            if isinstance(provider, str) and isinstance(model, str) and provider.strip() and model.strip():
                value = f"{provider.strip()}:{model.strip()}"
                return value, (
                    f"Model entry {{{provider}: {model}}} was read as {value!r}; "
                    f"write it as a string, e.g. \"{value}\"."
                )
        return None, f"Skipped model entry {_brief(entry)}: expected 'provider:model' or a custom model with 'id'."
    return None, f"Skipped model entry {_brief(entry)}: expected 'provider:model' or a custom model with 'id'."
