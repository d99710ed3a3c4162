"""What a judge is shown: the conversation with generated turns marked, one criterion, the active scale."""

from __future__ import annotations

import pytest

from blueprints.spec.parse import parse_blueprint
from blueprints.spec.schema import CoverageConfig, Judge
from runs.engine.judge import (
    FIVE_POINT,
    NINE_POINT,
    JudgePlan,
    JudgeSpec,
    JudgeTask,
    build_judge_messages,
    criteria_list,
    plan_judges,
    render_transcript,
    repair_messages,
    scale_for,
)
from runs.engine.types import Turn

CONVERSATION = (
    Turn("system", "You are a pharmacist."),
    Turn("user", "Can I take ibuprofen with paracetamol?"),
    Turn("assistant", "Let me check.", generated=False),
    Turn("user", "Please answer."),
    Turn("assistant", "Yes, they can be taken together at normal doses.", generated=True),
)
TASK = JudgeTask(
    criterion="Says the two can be combined",
    conversation=CONVERSATION,
    subject_text="Yes, they can be taken together at normal doses.",
    all_criteria=("[should] Says the two can be combined", "[should not] Recommends exceeding the dose"),
)


def messages_for(judge=JudgeSpec("openai:gpt-4o-mini"), **plan):
    system, user = build_judge_messages(TASK, judge, JudgePlan(judges=(judge,), **plan))
    assert system["role"] == "system" and user["role"] == "user"
    return system["content"], user["content"]


def test_the_transcript_marks_which_assistant_turns_were_generated():
    text = render_transcript(CONVERSATION)
    assert text.splitlines()[0] == "system: You are a pharmacist."
    assert "assistant (fixed): Let me check." in text
    assert "assistant (generated): Yes, they can be taken together" in text
    assert text.count("\n----------\n") == 4


def test_a_turn_still_to_be_generated_is_shown_as_such():
    text = render_transcript([Turn("user", "Hi"), Turn("assistant", None)])
    assert text == "user: Hi\n----------\nassistant (generated): <TO_BE_GENERATED>"


def test_the_judge_sees_the_transcript_the_text_and_only_its_own_criterion():
    _, user = messages_for()
    assert "<TRANSCRIPT>\nsystem: You are a pharmacist." in user
    assert "<TEXT>\nYes, they can be taken together at normal doses.\n</TEXT>" in user
    assert "<CRITERION>\nSays the two can be combined\n</CRITERION>" in user
    assert "Recommends exceeding the dose" not in user  # the other criteria stay out of the prompt
    assert "Only content marked `assistant (generated)` can earn credit" in user
    assert user.rstrip().endswith("</classification>")


@pytest.mark.parametrize("approach, wording", [
    ("holistic", "THIS SPECIFIC criterion"),
    ("prompt-aware", "THIS SPECIFIC criterion"),
    ("standard", "the following criterion"),
])
def test_the_approach_changes_the_criterion_wording(approach, wording):
    _, user = messages_for(JudgeSpec("openai:gpt-4o-mini", approach=approach))
    assert wording in user


def test_only_holistic_judges_get_the_description_and_never_an_undefined_one():
    holistic, _ = messages_for(description="Checks drug interaction advice.")
    standard, _ = messages_for(JudgeSpec("x:y", approach="standard"), description="Checks drug interaction advice.")
    absent, _ = messages_for(description=None)
    blank, _ = messages_for(description="  ")
    assert "<BROAD_EVALUATION_DESCRIPTION>\nChecks drug interaction advice.\n" in holistic
    assert "BROAD_EVALUATION_DESCRIPTION" not in standard
    for system in (absent, blank):
        assert "BROAD_EVALUATION_DESCRIPTION" not in system and "undefined" not in system


@pytest.mark.parametrize("scale, present, absent", [
    (FIVE_POINT, ["CLASS_UNMET", "CLASS_MAJORLY_MET", "CLASS_EXACTLY_MET"], ["CLASS_EXACT<", "CLASS_MAJOR<"]),
    (NINE_POINT, ["CLASS_UTTERLY_UNMET", "CLASS_MAJOR", "CLASS_EXACT"], ["CLASS_MAJORLY_MET", "CLASS_EXACTLY_MET"]),
])
def test_the_examples_and_the_guideline_use_the_active_scale(scale, present, absent):
    system, user = messages_for(scale=scale)
    for label in present:
        assert f"<classification>{label}</classification>" in system
    for label in absent:
        assert label not in system
    for cls in scale.classes:
        assert f"- {cls.label}: {cls.description}" in user
    assert system.count("<CRITERION>") == 3  # three worked examples
    assert system.count("\n- ") >= 6  # six paraphrases of one criterion


def test_a_repair_request_differs_from_the_first_and_says_what_went_wrong():
    first = build_judge_messages(TASK, JudgeSpec("x:y"), JudgePlan(judges=(JudgeSpec("x:y"),)))
    again = repair_messages(first, "Invalid classification value: 'CLASS_FULLY_MET'", FIVE_POINT)
    assert again[0] == first[0] and len(again) == 2
    assert again[1]["content"].startswith(first[1]["content"])
    assert "could not be read (Invalid classification value: 'CLASS_FULLY_MET')" in again[1]["content"]
    assert "CLASS_EXACTLY_MET" in again[1]["content"][len(first[1]["content"]):]


def test_the_criteria_list_tags_should_and_should_not_text_points():
    result = parse_blueprint(
        "- id: p\n  prompt: q\n  should:\n    - be polite\n    - $contains: hi\n    - [[a, b], [c]]\n"
        "  should_not:\n    - be rude\n", fmt="yaml")
    assert not result.errors, result.errors
    assert criteria_list(result.blueprint.prompts[0]) == (
        "[should] be polite", "[should] a", "[should] b", "[should] c", "[should not] be rude")


def test_scale_follows_use_experimental_scale():
    assert scale_for(None) is FIVE_POINT
    assert scale_for(CoverageConfig()) is FIVE_POINT
    assert scale_for(CoverageConfig(use_experimental_scale=True)) is NINE_POINT


def test_blueprint_judges_replace_the_defaults_and_have_no_backup():
    coverage = CoverageConfig(judges=[Judge(id="primary", model="anthropic:claude-3-5-sonnet"),
                                      Judge(model="local-llama", approach="standard")],
                              use_experimental_scale=True)
    plan = plan_judges(coverage, default_judges=["openrouter:openai/gpt-4.1-mini"],
                       backup_judge="openrouter:anthropic/claude-haiku-4.5")
    assert [j.judge_id for j in plan.judges] == ["primary(anthropic:claude-3-5-sonnet)", "standard(local-llama)"]
    assert plan.configured and plan.backup is None and plan.scale is NINE_POINT


def test_default_judges_are_holistic_with_the_upstreams_ids_and_a_backup():
    plan = plan_judges(CoverageConfig(), default_judges=[
        "openrouter:google/gemini-2.5-flash", "openrouter:openai/gpt-4.1-mini",
        "openrouter:anthropic/claude-haiku-4.5"], backup_judge="openrouter:anthropic/claude-haiku-4.5",
        description="d")
    assert [j.judge_id for j in plan.judges] == [
        "holistic-gemini-2-5-flash(openrouter:google/gemini-2.5-flash)",
        "holistic-gpt-4-1-mini(openrouter:openai/gpt-4.1-mini)",
        "holistic-claude-haiku-4-5(openrouter:anthropic/claude-haiku-4.5)",
    ]
    assert all(j.approach == "holistic" for j in plan.judges)
    assert plan.backup.judge_id == "backup-claude-4-5-haiku(openrouter:anthropic/claude-haiku-4.5)"
    assert not plan.configured and plan.description == "d" and plan.scale is FIVE_POINT
    other = plan_judges(None, default_judges=["openai:gpt-4o-mini"], backup_judge="openai:gpt-4o")
    assert other.backup.judge_id == "backup-gpt-4o(openai:gpt-4o)"


def test_with_no_judges_at_all_the_plan_says_why():
    plan = plan_judges(None, default_judges=[], backup_judge=None)
    assert plan.judges == () and "EVALSITE_DEFAULT_JUDGES" in plan.unavailable_reason
