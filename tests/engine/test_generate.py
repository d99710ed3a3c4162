"""Generation: variants and their ids, system prompts, temperatures, multi-turn, caching flags.

Rules under test are the reference's (sections 1.12, 5.2-5.4) and DESIGN
deviation 14; conformance records of model_ids.json (effective_id) and
prompt_validation.json are loaded from ../shared, not copied.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from blueprints.spec.parse import parse_blueprint
from blueprints.spec.schema import Blueprint, CustomModel, Message, Prompt
from runs.engine.generate import expand_variants, generate, resolve_temperature
from runs.engine.providers import Router, load_fixtures, settings_from_env
from runs.engine.types import ChatRequest, ChatResult, Turn, Usage

CONFORMANCE = Path(__file__).resolve().parents[3] / "shared" / "conformance"


class Recorder:
    """A CompleteFn that answers ``answer <n>`` (or a scripted ChatResult) and keeps every request."""

    def __init__(self, results: list[ChatResult] | None = None):
        self.requests: list[ChatRequest] = []
        self.results = results

    async def __call__(self, request: ChatRequest) -> ChatResult:
        self.requests.append(request)
        if self.results is not None:
            return self.results[len(self.requests) - 1]
        return ChatResult(text=f"answer {len(self.requests)}", usage=Usage(10, 2), latency_ms=5.0, cost_usd=0.5)


def prompt(*messages, **fields) -> Prompt:
    built = [Message(role=role, content=content) for role, content in messages]
    return Prompt(id=fields.pop("id", "p1"), messages=built, **fields)


def gen(p: Prompt, variant, complete, **kwargs):
    return asyncio.run(generate(p, variant, complete, **kwargs))


def only_variant(**blueprint_fields):
    variant, = expand_variants(Blueprint(**blueprint_fields), ["openai:gpt-4o-mini"])
    return variant


# -- temperatures (reference 5.3) -------------------------------------------------------


@pytest.mark.parametrize("list_value, prompt_t, global_t, expected", [
    (0.7, 0.2, 0.9, 0.7),  # the temperatures entry first
    (None, 0.2, None, 0.2),  # the prompt's, when the blueprint sets none
    (None, None, 0.9, 0.9),
    (None, None, None, 0.0),  # then 0
    (0.0, 0.5, None, 0.0),  # 0 is a value, not "unset"
])
def test_the_first_temperature_set_wins(list_value, prompt_t, global_t, expected):
    assert resolve_temperature(list_value, prompt_t, global_t) == expected


def test_quirk_a_prompt_temperature_only_counts_when_the_blueprint_sets_none():
    with_global = only_variant(temperature=0.9)
    without = only_variant()
    warm = prompt(("user", "hi"), temperature=0.2)
    assert with_global.temperature_for(warm) == 0.9  # the global stands for the list [0.9]
    assert without.temperature_for(warm) == 0.2
    assert without.id_for(warm) == "openai:gpt-4o-mini[temp:0.2]"  # and it enters this prompt's key
    assert without.variant_id == "openai:gpt-4o-mini[temp:0]"
    recorder = Recorder()
    response = gen(warm, without, recorder)
    assert recorder.requests[0].temperature == 0.2 and response.temperature == 0.2
    assert response.model_variant_id == "openai:gpt-4o-mini[temp:0.2]"


# -- variants and ids (reference 1.12) --------------------------------------------------


def test_models_times_temperatures_times_systems_in_order():
    custom = CustomModel(id="local:llama", url="http://127.0.0.1:1/v1/chat/completions", modelName="l",
                         inherit="openai")
    blueprint = Blueprint(temperatures=[0, 0.7, 0.7], systems=["Be brief.", None])
    variants = expand_variants(blueprint, ["openai:gpt-4o-mini", custom, "openai:gpt-4o-mini"])
    assert [v.variant_id for v in variants] == [
        "openai:gpt-4o-mini[temp:0][sp_idx:0]", "openai:gpt-4o-mini[temp:0][sp_idx:1]",
        "openai:gpt-4o-mini[temp:0.7][sp_idx:0]", "openai:gpt-4o-mini[temp:0.7][sp_idx:1]",
        "local:llama[temp:0][sp_idx:0]", "local:llama[temp:0][sp_idx:1]",
        "local:llama[temp:0.7][sp_idx:0]", "local:llama[temp:0.7][sp_idx:1]",
    ]
    assert [(v.system_prompt, v.sp_idx) for v in variants[:2]] == [("Be brief.", 0), (None, 1)]


def test_one_system_variant_adds_no_sp_idx_and_the_temperature_is_always_there():
    assert [v.variant_id for v in expand_variants(Blueprint(system="S", temperature=1.0), ["x:y"])] == ["x:y[temp:1]"]
    assert [v.variant_id for v in expand_variants(Blueprint(systems=["only"]), ["x:y"])] == ["x:y[temp:0]"]


def test_expand_variants_defaults_to_the_blueprints_models():
    blueprint = Blueprint(models=["a:b", "c:d"], temperatures=[0.5])
    assert [v.variant_id for v in expand_variants(blueprint)] == ["a:b[temp:0.5]", "c:d[temp:0.5]"]


def _effective_id_records():
    records = json.loads((CONFORMANCE / "model_ids.json").read_text(encoding="utf-8"))
    return [r for r in records if r["fn"] == "effective_id"]


@pytest.mark.parametrize("record", _effective_id_records(), ids=lambda r: r["id"])
def test_generation_keys_responses_as_the_effective_id_records_say(record):
    spec = record["input"]
    blueprint = Blueprint(temperatures=spec["temperatures"], temperature=spec["config_temperature"],
                          systems=spec["systems"])
    variants = expand_variants(blueprint, [spec["modelId"]], default_temperature=spec["default_temperature"])
    response = gen(prompt(("user", "hi"), temperature=spec["prompt_temperature"]), variants[0], Recorder())
    assert response.model_variant_id == record["expect"]


# -- system prompts (reference 5.2) --------------------------------------------------------


@pytest.mark.parametrize("blueprint_fields, prompt_fields, expected", [
    ({"systems": ["From the list."], "system": "Global."}, {}, "From the list."),
    ({"system": "Global."}, {"system": "The prompt's.", "system_set": True}, "The prompt's."),
    ({"system": "Global."}, {"system": None, "system_set": True}, None),  # system: null means none
    ({"system": "Global."}, {}, "Global."),
    ({}, {}, None),
])
def test_the_system_prompt_used_follows_the_reference_precedence(blueprint_fields, prompt_fields, expected):
    variant = expand_variants(Blueprint(**blueprint_fields), ["m:x"])[0]
    recorder = Recorder()
    response = gen(prompt(("user", "hi"), **prompt_fields), variant, recorder)
    sent = recorder.requests[0].messages
    if expected is None:
        assert [m["role"] for m in sent] == ["user"]
    else:
        assert sent[0] == {"role": "system", "content": expected}
    assert response.system_prompt == expected


def test_inline_system_messages_pass_through_beside_the_system_prompt():
    recorder = Recorder()
    gen(prompt(("system", "Inline."), ("user", "hi")), only_variant(system="Global."), recorder)
    assert [m["content"] for m in recorder.requests[0].messages] == ["Global.", "Inline.", "hi"]


# -- multi-turn (reference 5.4, deviation 14) ---------------------------------------------------


def test_each_null_turn_is_generated_in_order_and_a_final_user_message_gets_one_more():
    recorder = Recorder()
    conversation = prompt(("user", "I need help with my taxes."), ("assistant", None),
                          ("user", "I moved states."), ("assistant", None), ("user", "Anything else?"))
    response = gen(conversation, only_variant(system="Be kind."), recorder, trial=2)
    histories = [[m["content"] for m in r.messages] for r in recorder.requests]
    assert histories == [
        ["Be kind.", "I need help with my taxes."],
        ["Be kind.", "I need help with my taxes.", "answer 1", "I moved states."],
        ["Be kind.", "I need help with my taxes.", "answer 1", "I moved states.", "answer 2", "Anything else?"],
    ]
    assert [(r.prompt_id, r.turn, r.trial) for r in recorder.requests] == [("p1", 0, 2), ("p1", 1, 2), ("p1", 2, 2)]
    assert response.text == "answer 1\n\nanswer 2\n\nanswer 3"
    assert response.final_text == "answer 3"
    assert response.conversation == (
        Turn("system", "Be kind."), Turn("user", "I need help with my taxes."), Turn("assistant", "answer 1", True),
        Turn("user", "I moved states."), Turn("assistant", "answer 2", True), Turn("user", "Anything else?"),
        Turn("assistant", "answer 3", True),
    )
    assert response.usage == Usage(30, 6) and response.cost_usd == 1.5 and response.latency_ms == 15.0
    assert response.trial == 2 and response.error is None


def test_a_conversation_ending_with_a_null_turn_generates_no_extra_turn():
    recorder = Recorder()
    response = gen(prompt(("user", "a"), ("assistant", None)), only_variant(), recorder)
    assert len(recorder.requests) == 1 and response.text == "answer 1"


def test_deviation_14_an_authored_final_answer_is_the_response_and_nothing_is_generated():
    recorder = Recorder()
    response = gen(prompt(("user", "Hello"), ("assistant", "Hi there")), only_variant(), recorder)
    assert recorder.requests == []
    assert (response.text, response.final_text, response.error) == ("Hi there", "Hi there", None)
    assert response.conversation == (Turn("user", "Hello"), Turn("assistant", "Hi there"))
    assert response.cost_usd == 0.0 and response.usage == Usage() and not response.cached


def test_authored_assistant_turns_in_the_middle_are_history_not_output():
    recorder = Recorder()
    response = gen(prompt(("user", "a"), ("assistant", "fixed"), ("user", "b")), only_variant(), recorder)
    assert [m["content"] for m in recorder.requests[0].messages] == ["a", "fixed", "b"]
    assert response.text == "answer 1"


def test_a_failed_turn_stops_the_conversation_and_says_which_turn():
    failing = Recorder([ChatResult(text="first", usage=Usage(1, 1), cost_usd=None),
                        ChatResult(error="429 from openai: slow down (gave up after 3 attempts)", retryable=True,
                                   attempts=3)])
    conversation = prompt(("user", "a"), ("assistant", None), ("user", "b"), ("assistant", None), ("user", "c"))
    response = gen(conversation, only_variant(), failing)
    assert response.error == "turn 2 of 3: 429 from openai: slow down (gave up after 3 attempts)"
    assert response.retryable and response.text is None and response.final_text is None
    assert response.conversation == (Turn("user", "a"), Turn("assistant", "first", True), Turn("user", "b"),
                                     Turn("assistant", None), Turn("user", "c"))
    assert response.cost_usd is None and response.attempts == 4  # an unknown cost stays unknown


def test_a_single_turn_failure_has_no_turn_prefix_and_an_empty_answer_is_a_failure():
    failed = gen(prompt(("user", "a")), only_variant(), Recorder([ChatResult(error="500 from openai: boom")]))
    assert failed.error == "500 from openai: boom"
    assert failed.conversation == (Turn("user", "a"), Turn("assistant", None))
    blank = gen(prompt(("user", "a")), only_variant(), Recorder([ChatResult(text="  \n")]))
    assert blank.error == "the model returned an empty answer"


def test_tool_calls_are_parsed_from_every_generated_turn():
    answers = [ChatResult(text='TOOL_CALL {"name": "search", "arguments": {"q": "x"}}'),
               ChatResult(text='Done.\nTOOL_CALL {"name": "calc", "arguments": {"e": "1+1"}}\nTOOL_CALL {bad')]
    response = gen(prompt(("user", "a"), ("assistant", None), ("user", "b")), only_variant(), Recorder(answers))
    assert response.tool_calls == ({"name": "search", "arguments": {"q": "x"}},
                                   {"name": "calc", "arguments": {"e": "1+1"}})
    assert response.tool_call_problems == ("Line 5: the text after TOOL_CALL is not valid JSON.",)


@pytest.mark.parametrize("prompt_no_cache, blueprint_no_cache, use_cache, expected", [
    (None, None, True, True),
    (True, None, True, False),
    (None, True, True, False),
    (False, True, True, True),  # the prompt's value beats the blueprint's
    (None, None, False, False),  # a run without cache
])
def test_no_cache_comes_from_the_prompt_then_the_blueprint(prompt_no_cache, blueprint_no_cache, use_cache, expected):
    recorder = Recorder()
    gen(prompt(("user", "a"), no_cache=prompt_no_cache), only_variant(no_cache=blueprint_no_cache), recorder,
        use_cache=use_cache)
    assert recorder.requests[0].use_cache is expected


def test_all_turns_from_the_cache_mark_the_response_cached():
    cached = [ChatResult(text="x", cached=True, cost_usd=0.0), ChatResult(text="y", cached=True, cost_usd=0.0)]
    response = gen(prompt(("user", "a"), ("assistant", None), ("user", "b")), only_variant(), Recorder(cached))
    assert response.cached and response.cost_usd == 0.0
    half = [ChatResult(text="x", cached=True), ChatResult(text="y")]
    assert not gen(prompt(("user", "a"), ("assistant", None), ("user", "b")), only_variant(), Recorder(half)).cached


# -- through the real router -------------------------------------------------------------


def test_a_fixtures_model_fills_a_multi_turn_prompt_turn_by_turn():
    fixtures, problems = load_fixtures("responses:\n  p1:\n    turns: ['First.', 'Second.']\n")
    assert problems == []
    variant = expand_variants(Blueprint(), ["fixtures:demo"])[0]

    async def main():
        async with Router(settings_from_env({}), fixtures=fixtures) as router:
            return await generate(prompt(("user", "a"), ("assistant", None), ("user", "b")), variant, router.complete)

    response = asyncio.run(main())
    assert response.text == "First.\n\nSecond." and response.model_variant_id == "fixtures:demo[temp:0]"


def test_every_item_is_generated_exactly_once_through_http(fake_llm):
    parsed = parse_blueprint(
        "models: [openai:gpt-a, openai:gpt-b]\ntemperatures: [0, 0.5]\n---\n"
        "- id: one\n  prompt: Say one.\n  should: [says one]\n"
        "- id: two\n  messages:\n    - user: Start.\n    - assistant: null\n    - user: Go on.\n  should: [goes on]\n"
    )
    assert parsed.ok, [e.message for e in parsed.errors]
    blueprint = parsed.blueprint
    settings = settings_from_env({"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake_llm.base_url + "/v1"})

    async def main():
        async with Router(settings) as router:
            jobs = [generate(p, v, router.complete) for p in blueprint.prompts for v in expand_variants(blueprint)]
            return await asyncio.gather(*jobs)

    responses = asyncio.run(main())
    assert [(r.prompt_id, r.model_variant_id, r.error) for r in responses] == [
        (p, f"openai:{m}[temp:{t}]", None) for p in ("one", "two") for m in ("gpt-a", "gpt-b") for t in ("0", "0.5")
    ]
    assert responses[4].text == "Echo: Start.\n\nEcho: Go on."
    sent = [(r["model"], r["body"]["temperature"], r["messages"][-1]["content"]) for r in fake_llm.requests()]
    assert len(sent) == 4 + 8 and len(set(sent)) == len(sent)  # 4 single-turn + 4 two-turn items, no repeats


# -- prompt_validation.json: what generation does with each record ------------------------------

# Generated calls for each record the parser accepts; a record that expects
# an error is rejected by the parser, so nothing reaches generation.
GENERATION_CALLS = {
    "roles-alternating-ok": 1,
    "roles-system-ignored": 1,
    "prompts-promptText-converted": 1,
    "prompts-messages-ok": 1,
    "prompts-last-not-user": 0,  # deviation 14: the authored "Hi there" is the response
    "prompts-assistant-null-placeholder": 2,
    "roles-two-user": 1,  # consecutive turns are a warning: both user turns go out in one call
    "roles-two-assistant": 0,  # ends with an authored assistant turn: that is the response (deviation 14)
}
ENDS_WITH_ASSISTANT = {"prompts-last-not-user": "Hi there", "roles-two-assistant": "How are you?"}


def _validation_records():
    return json.loads((CONFORMANCE / "prompt_validation.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("record", _validation_records(), ids=lambda r: r["id"])
def test_prompt_validation_records_as_generation_sees_them(record):
    data = record["input"]
    source = {"prompts": [{"id": data["promptId"], "messages": data["messages"]}]} \
        if record["fn"] == "validate_role_alternation" else {"prompts": data["prompts"]}
    parsed = parse_blueprint(json.dumps(source), fmt="json")
    if "$throws" in record["expect"] and record["id"] not in GENERATION_CALLS:
        assert not parsed.ok
        assert record["id"] not in GENERATION_CALLS
        return
    assert parsed.ok, [e.message for e in parsed.errors]
    recorder = Recorder()
    response = gen(parsed.blueprint.prompts[0], only_variant(), recorder)
    assert len(recorder.requests) == GENERATION_CALLS[record["id"]]
    assert response.error is None
    authored = [m for m in parsed.blueprint.prompts[0].messages]
    if record["id"] in ENDS_WITH_ASSISTANT:
        assert response.text == ENDS_WITH_ASSISTANT[record["id"]]
    else:
        # The last call saw every authored message, in order, with generated turns in place.
        last = [m["content"] for m in recorder.requests[-1].messages]
        assert [m.content for m in authored if m.content is not None] == [c for c in last
                                                                           if not c.startswith("answer ")]
        assert response.text == "\n\n".join(f"answer {i + 1}" for i in range(len(recorder.requests)))
