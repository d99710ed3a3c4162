"""runs/engine/jsonfast.py: orjson where it gives what the standard library gives, the standard library where not."""

import hashlib
import json

import pytest
from hypothesis import given, settings, strategies as st

from runs.engine import jsonfast
from runs.engine.providers.cache import cache_key


def stdlib_sorted(value) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.fixed_dictionaries({"role": st.text(max_size=12),
                                       "content": st.none() | st.text(max_size=200)}), max_size=4))
def test_sorted_messages_are_the_standard_librarys_bytes(messages):
    encoded = jsonfast.sorted_messages(messages)
    try:
        expected = stdlib_sorted(messages)
    except UnicodeEncodeError:  # a lone surrogate: left to the standard library, which raises as before
        assert encoded is None
        return
    assert encoded == expected


def test_every_character_is_spelled_as_the_standard_library_spells_it():
    text = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    messages = [{"role": "user", "content": text}]
    assert jsonfast.sorted_messages(messages) == stdlib_sorted(messages)


@pytest.mark.parametrize("messages", [
    [{"role": "user", "content": [{"type": "text", "text": "hi", "z": 1.5e-7}]}],  # parts: numbers may differ
    [{"role": "user", "content": "\ud800 lone"}],
    [{"role": None, "content": "x"}],
])
def test_messages_orjson_might_spell_otherwise_are_left_to_the_standard_library(messages):
    assert jsonfast.sorted_messages(messages) is None


def test_a_cache_key_is_the_same_as_before():
    """The key the response cache has used since KEY_VERSION 1: a SHA-256 over the standard library's text."""
    messages = [{"role": "system", "content": "Judge <this> \"well\"\n\ttab \x00 \u2028 é 𝄞"},
                {"role": "user", "content": None}]
    identity = {"provider": "openai", "model": "gpt-4o-mini", "url": "https://api.openai.com/v1"}
    text = json.dumps({"max_tokens": 300, "messages": messages, "target": identity, "temperature": 0.0,
                       "trial": 2, "v": 1}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert cache_key(identity, messages, temperature=0, max_tokens=300, trial=2) == \
        hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_dumps_falls_back_for_what_orjson_refuses():
    assert json.loads(jsonfast.dumps({"n": 2 ** 70, 1: "one"})) == {"n": 2 ** 70, "1": "one"}
    assert json.loads(jsonfast.dumps({"a": "é", 1: [True, None]})) == {"a": "é", "1": [True, None]}
    assert jsonfast.dumps_text({"when": object}) == json.dumps({"when": str(object)}, separators=(",", ":"))


def test_loads_reads_what_the_standard_library_reads_and_refuses_what_it_refuses():
    assert jsonfast.loads(b'{"a": [1, 2.5, "\\u00e9"]}') == {"a": [1, 2.5, "é"]}
    assert jsonfast.loads("[NaN, 123456789012345678901234567890]")[1] == 123456789012345678901234567890
    with pytest.raises(json.JSONDecodeError):
        jsonfast.loads(b"{not json")


def test_an_endpoints_keys_are_cache_key_s_however_often_asked():
    """Endpoint.answer_key keeps each key's end (identity, temperature, trial, repeat); the keys stay the recipe's."""
    from runs.engine.providers import settings_from_env
    from runs.engine.providers.endpoints import resolve_endpoint

    endpoint = resolve_endpoint("openai:gpt-4o-mini", settings_from_env({"OPENAI_API_KEY": "sk-test"}), {})
    messages = [{"role": "user", "content": "hello"}]
    for _ in range(2):
        for temperature, trial, repeat in [(None, 0, 0), (0, 0, 0), (0.0, 1, 0), (0.7, 2, 1), (1, 0, 3)]:
            assert endpoint.answer_key(messages, temperature=temperature, max_tokens=100, trial=trial,
                                       repeat=repeat) == \
                cache_key(endpoint.cache_identity(), messages, temperature=temperature, max_tokens=100, trial=trial,
                          repeat=repeat)
