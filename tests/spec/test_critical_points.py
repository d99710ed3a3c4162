"""``critical: true`` on a point object (ours, beyond Weval's format): a deal-breaker point whose failure rate gets
a bound beside the should-not points' (runs/engine/bounds.py). Read, checked, and kept by an export."""

from __future__ import annotations

import yaml

from blueprints.spec import parse_blueprint
from blueprints.spec.ids import prompt_hash_id

HEADER = "title: t\nmodels: [openai:x]\n---\n"


def parse(text):
    return parse_blueprint(HEADER + text, fmt="yaml")


def test_critical_is_read_on_judged_function_and_should_not_points():
    result = parse("- id: a\n  prompt: hi\n  should:\n    - text: never gives a dose\n      critical: true\n"
                   "    - $contains: DENIED\n      critical: true\n      weight: 2\n    - text: polite\n"
                   "      critical: false\n    - plain text\n"
                   "  should_not:\n    - text: names a drug\n      critical: true\n")
    assert result.ok, [e.format() for e in result.errors]
    points = result.blueprint.prompts[0].all_points()
    assert [p.critical for p in points] == [True, True, False, False, True]
    assert points[1].multiplier == 2.0 and points[1].fn == "contains"
    assert not any(d.code == "unknown-key" for d in result.diagnostics)


def test_a_critical_that_is_not_true_or_false_is_an_error_naming_the_place_and_the_fix():
    for value, shown in (('"yes"', '"yes"'), ("1", "1"), ("[true]", "[true]")):
        result = parse(f"- id: a\n  prompt: hi\n  should:\n    - text: safe\n      critical: {value}\n")
        assert not result.ok
        (error,) = [e for e in result.errors if e.code == "critical"]
        assert error.message.startswith(f"`critical` must be true or false, not {shown}")
        assert error.path == "prompts[0].should[0].critical" and error.line == 8  # the header is 3 lines
        assert "critical: true" in error.hint


def test_critical_survives_an_export_and_a_parse_and_leaves_the_prompt_hash_alone():
    text = ("- prompt: hi\n  should:\n    - text: never gives a dose\n      critical: true\n    - $contains: ok\n"
            "      critical: true\n")
    bp = parse(text).blueprint
    exported = bp.to_upstream()
    assert exported["prompts"][0]["points"][0]["critical"] is True
    again = parse_blueprint(yaml.safe_dump(exported), fmt="yaml")
    assert again.ok, [e.format() for e in again.errors]
    assert [p.critical for p in again.blueprint.prompts[0].all_points()] == [True, True]
    plain = parse(text.replace("      critical: true\n", "")).blueprint
    assert bp.prompts[0].id == plain.prompts[0].id  # an id hashed from the prompt does not see the key
    assert "critical" not in str(bp.prompts[0].to_upstream(for_hash=True))
    assert prompt_hash_id  # the upstream's hash (blueprints/spec/ids.py) reads for_hash output only


def test_marking_a_point_critical_is_not_a_changed_prompt_for_a_comparison_across_runs():
    """Two revisions that differ only in ``critical`` ask and score the same: the compare page keeps the prompt."""
    from runs.compare import changed_prompts

    plain = parse("- id: a\n  prompt: hi\n  should:\n    - text: safe\n  should_not:\n    - text: rude\n"
                  "- id: b\n  prompt: ho\n  should:\n    - text: kind\n").blueprint
    marked = parse("- id: a\n  prompt: hi\n  should:\n    - text: safe\n      critical: true\n  should_not:\n"
                   "    - text: rude\n      critical: true\n- id: b\n  prompt: ho\n  should:\n    - text: kinder\n"
                   ).blueprint
    assert changed_prompts(plain.prompts, marked.prompts) == ["b"]  # b's text changed; a only gained the marks
