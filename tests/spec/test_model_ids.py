"""Table tests for blueprints.spec.model_ids beyond the conformance vectors."""

from __future__ import annotations

import sys

import pytest

from blueprints.spec.model_ids import (
    IDEAL_MODEL_ID,
    concurrency_env_name,
    display_label,
    effective_id,
    extract_maker,
    format_js_number,
    is_collection_name,
    normalize_model_entry,
    parse_for_api_call,
    parse_for_display,
    provider_of,
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, "0"),
        (0.0, "0"),
        (-0.0, "0"),
        (0.7, "0.7"),
        (1.0, "1"),
        (1, "1"),
        (2, "2"),
        (-0.5, "-0.5"),
        (0.72, "0.72"),
        (1.5, "1.5"),
        (100.0, "100"),
        (123456.0, "123456"),
        (0.1 + 0.2, "0.30000000000000004"),
        (1e-6, "0.000001"),
        (1.5e-6, "0.0000015"),
        (1e-7, "1e-7"),
        (1.5e-7, "1.5e-7"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (1.25e21, "1.25e+21"),
        (-1e21, "-1e+21"),
        (2**53, "9007199254740992"),
        (sys.float_info.max, "1.7976931348623157e+308"),
        (5e-324, "5e-324"),
        (float("inf"), "Infinity"),
        (float("-inf"), "-Infinity"),
        (float("nan"), "NaN"),
    ],
)
def test_format_js_number(value, expected):
    assert format_js_number(value) == expected


@pytest.mark.parametrize("bad", [True, "0.7", None, [1]])
def test_format_js_number_rejects_non_numbers(bad):
    with pytest.raises(TypeError):
        format_js_number(bad)


@pytest.mark.parametrize(
    ("entry", "value", "warns"),
    [
        ("openai:gpt-4o", "openai:gpt-4o", False),
        ("  openai:gpt-4o\n", "openai:gpt-4o", False),
        ("openai : gpt-4o", "openai:gpt-4o", True),
        ("openai: gpt-4o", "openai:gpt-4o", True),
        ("openai :gpt-4o", "openai:gpt-4o", True),
        # only the first colon: later ones belong to the model name
        ("openrouter : deepseek/deepseek-r1:free", "openrouter:deepseek/deepseek-r1:free", True),
        ("CORE", "CORE", False),
        ({"openai": "gpt-4o"}, "openai:gpt-4o", True),
        ({"anthropic": " claude-3-5-haiku "}, "anthropic:claude-3-5-haiku", True),
        ("", None, True),
        ("   ", None, True),
        ({}, None, True),
        ({"openai": "gpt-4o", "anthropic": "claude"}, None, True),
        ({"openai": ["gpt-4o"]}, None, True),
        ({"openai": None}, None, True),
        (42, None, True),
        (None, None, True),
        (["openai:gpt-4o"], None, True),
    ],
)
def test_normalize_model_entry(entry, value, warns):
    got, warning = normalize_model_entry(entry)
    assert got == value
    assert (warning is not None) == warns
    if warning is not None:
        assert isinstance(warning, str) and warning


def test_normalize_model_entry_custom_model_passes_through_unchanged():
    custom = {"id": "my-model", "url": "http://localhost:8000/v1", "modelName": "m", "inherit": "openai"}
    got, warning = normalize_model_entry(custom)
    assert got is custom
    assert warning is None
    # a one-key mapping that is only ``id`` is still a custom model, not provider:model
    only_id = {"id": "x"}
    assert normalize_model_entry(only_id) == (only_id, None)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("CORE", True),
        ("OPEN_SOURCE_CORE", True),
        ("FRONTIER-2025", True),
        ("CORE2", True),
        ("core", False),
        ("Core", False),
        ("openai:gpt-4o", False),
        ("OPENAI:GPT-4O", False),
        ("", False),
        ("123", False),
        ("_", False),
        ("../CORE", False),
        ("MY CORE", False),
        ("CORE.JSON", False),
        (None, False),
        (["CORE"], False),
    ],
)
def test_is_collection_name(value, expected):
    assert is_collection_name(value) is expected


@pytest.mark.parametrize(
    ("model_id", "expected"),
    [
        ("google:gemini-2.5-pro", "EVALSITE_CONCURRENCY_GOOGLE"),
        ("openai:gpt-4o-mini[temp:0.7]", "EVALSITE_CONCURRENCY_OPENAI"),
        ("OpenRouter:google/gemini-pro", "EVALSITE_CONCURRENCY_OPENROUTER"),
        ("x-ai:grok-beta", "EVALSITE_CONCURRENCY_X_AI"),
        ("anthropic:claude-3-5-haiku", "EVALSITE_CONCURRENCY_ANTHROPIC"),
        ("gpt-4o[temp:0.7]", None),
        ("my-custom-model", None),
        (":gpt-4o", None),
    ],
)
def test_concurrency_env_name(model_id, expected):
    assert concurrency_env_name(model_id) == expected


@pytest.mark.parametrize(
    ("model_id", "expected"),
    [
        ("google:gemini-2.5-pro", "google"),
        ("OPENAI:gpt-4o", "openai"),
        ("openrouter:deepseek/deepseek-r1:free", "openrouter"),
        ("gpt-4o", None),
        ("gpt-4o[temp:0.7][sp_idx:1]", None),
        ("", None),
    ],
)
def test_provider_of(model_id, expected):
    assert provider_of(model_id) == expected


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"temperature": 0}, "openai:gpt-4o-mini[temp:0]"),
        ({"temperature": 0.0}, "openai:gpt-4o-mini[temp:0]"),
        ({"temperature": 1.0}, "openai:gpt-4o-mini[temp:1]"),
        ({"temperature": 0.7}, "openai:gpt-4o-mini[temp:0.7]"),
        ({"temperature": 0.7, "system_index": 0, "system_count": 1}, "openai:gpt-4o-mini[temp:0.7]"),
        ({"temperature": 0.7, "system_index": 1, "system_count": 2}, "openai:gpt-4o-mini[temp:0.7][sp_idx:1]"),
        ({"temperature": 0, "system_index": 0, "system_count": 3}, "openai:gpt-4o-mini[temp:0][sp_idx:0]"),
    ],
)
def test_effective_id(kwargs, expected):
    assert effective_id("openai:gpt-4o-mini", **kwargs) == expected


@pytest.mark.parametrize(
    "kwargs",
    [
        {"temperature": None},
        {"temperature": 0.5, "system_count": 2},
        {"temperature": 0.5, "system_index": 2, "system_count": 2},
    ],
)
def test_effective_id_rejects_unresolved_variants(kwargs):
    with pytest.raises(ValueError):
        effective_id("openai:gpt-4o-mini", **kwargs)


@pytest.mark.parametrize("temperature", [0, 0.3, 0.7, 1, 1.5, 1e21, 1e-7])
@pytest.mark.parametrize("model_id", ["openai:gpt-4o-mini", "openrouter:google/gemini-pro", "custom-model"])
def test_effective_id_round_trips_through_api_parse(model_id, temperature):
    key = effective_id(model_id, temperature=temperature, system_index=1, system_count=2)
    api = parse_for_api_call(key)
    assert api.original_model_id == model_id
    assert api.temperature == temperature
    assert api.system_prompt_index == 1
    assert api.effective_model_id == key


@pytest.mark.parametrize(
    ("model_id", "base_id", "maker"),
    [
        ("openai:gpt-4[temp:0]", "openai:gpt-4", "OPENAI"),
        ("deepseek-r1-distill-qwen-32b", "deepseek:deepseek-r1-distill-qwen-32b", "DEEPSEEK"),
        ("openrouter:qwen/qwen3-30b-a3b-instruct-2507", "qwen:qwen3-30b-a3b-instruct-2507", "QWEN"),
        ("openrouter:gemini-pro", "google:gemini-pro", "GOOGLE"),
        ("Gemini-2.5-Flash-Preview", "google:gemini-2.5-flash", "GOOGLE"),
        ("CLAUDE-3-5-HAIKU-20241022", "anthropic:claude-3-5-haiku", "ANTHROPIC"),
        ("mistral:mistral-large", "mistralai:mistral-large", "MISTRAL"),
        # unknown prefixes are custom endpoints: left alone
        ("consumer:chatgpt-gpt-4o", "consumer:chatgpt-gpt-4o", "UNKNOWN"),
        ("custom:group:model-x[sys:abc]", "custom:group:model-x", "UNKNOWN"),
        ("openrouter:test-model", "openrouter:test-model", "UNKNOWN"),
    ],
)
def test_parse_for_display_extra(model_id, base_id, maker):
    parsed = parse_for_display(model_id)
    assert parsed.base_id == base_id
    assert parsed.maker == maker
    assert parsed.full_id == model_id


def test_parse_for_display_ideal_and_empty():
    assert parse_for_display("IDEAL_BENCHMARK").base_id == IDEAL_MODEL_ID
    assert parse_for_display("IDEAL_MODEL_ID").temperature is None
    assert parse_for_display("").base_id == "Unknown"
    assert extract_maker("") == "UNKNOWN"


def test_repeated_suffix_kind_is_not_silently_dropped():
    api = parse_for_api_call("m[temp:0.1][temp:0.2]")
    assert api.temperature == 0.2
    assert api.original_model_id == "m[temp:0.1]"


@pytest.mark.parametrize(
    ("model_id", "options", "expected"),
    [
        ("custom:group:model-x[sys:abc]", {"hide_provider": True}, "group:model-x ([sys:abc])"),
        ("openrouter:gemini-pro", {"hide_model_maker": True}, "google:gemini-pro"),
        ("together:moonshotai/Kimi-K2-Instruct[temp:0.5]", {"hide_model_maker": True}, "together:Kimi-K2-Instruct (T:0.5)"),
        ("together:moonshotai/Kimi-K2-Instruct", {"hide_provider": True}, "moonshotai/Kimi-K2-Instruct"),
        ("openai:gpt-4o[temp:1.0][sp_idx:1]", {}, "openai:gpt-4o (T:1)"),
        ("openai:gpt-4o[temp:1.0][sp_idx:1]", {"show_system_index": True}, "openai:gpt-4o (S:1, T:1)"),
    ],
)
def test_display_label_extra(model_id, options, expected):
    assert display_label(model_id, **options) == expected
