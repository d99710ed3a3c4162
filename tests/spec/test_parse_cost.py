"""What keeps a parse cheap changes nothing else: ``schema.construct`` makes what ``model_construct`` makes, and
``Blueprint.point_count`` counts what the lists hold."""

import pytest

from blueprints.spec import schema
from blueprints.spec.parse import parse_blueprint



# --- schema.construct: model_construct's object, made faster -------------------------------------------------------

ORIGIN = schema.Origin(path="prompts[0]", line=2, column=3)
CONSTRUCTED = [
    (schema.Origin, {"path": "prompts[1]", "line": 3, "column": 4}),
    (schema.Origin, {}),
    (schema.Message, {"role": "user", "content": "hi"}),
    (schema.Message, {"role": "assistant"}),  # a required field left out stays out, as model_construct leaves it
    (schema.Point, {"fn": "contains", "fn_args": "x", "has_args": True, "multiplier": 1.0, "citation": None,
                    "inverted": False, "origin": ORIGIN, "fn_as_written": None}),
    (schema.Point, {"text": "x", "inverted": True, "origin": ORIGIN}),
    (schema.Point, {}),
    (schema.Prompt, {"id": "p", "id_was_generated": False, "messages": [], "points": [], "origin": ORIGIN,
                     "checks": []}),
    (schema.Prompt, {"id": "p", "messages": []}),
    (schema.Blueprint, {"title": "T"}),
    (schema.SimulatedUser, {"model": "m", "goal": "g"}),
    (schema.Verdicts, {"pass_at": 0.5}),
    (schema.Verdicts, {"pass_at": 0.5, "not_a_field": 1}),  # ignored, as model_construct ignores it
]


@pytest.mark.parametrize("cls, values", CONSTRUCTED, ids=[f"{c.__name__}-{len(v)}" for c, v in CONSTRUCTED])
def test_construct_makes_the_object_model_construct_makes(cls, values):
    made, expected = schema.construct(cls, **values), cls.model_construct(**values)
    assert type(made) is cls
    assert list(made.__dict__.items()) == list(expected.__dict__.items())  # the fields' order too (dumps follow it)
    assert made.model_fields_set == expected.model_fields_set and type(made.model_fields_set) is set
    assert (made.__pydantic_extra__, made.__pydantic_private__) == (expected.__pydantic_extra__,
                                                                    expected.__pydantic_private__)
    unset = next((name for name in cls.model_fields if name not in values), None)
    if unset is not None:
        setattr(made, unset, getattr(expected, unset, None))  # a field set later is marked set, as on any model
        assert unset in made.model_fields_set


def test_construct_refuses_a_model_it_cannot_make_the_same():
    with pytest.raises(TypeError, match="aliases"):
        schema.construct(schema.CustomModel, id="x")


def test_point_count_counts_every_point_of_every_prompt():
    text = ("title: T\n---\n- prompt: a\n  should:\n    - x\n    - [y, z]\n    - [[u], [v, w]]\n  should_not: [n]\n"
            "- prompt: b\n- prompt: c\n  should: [$contains: q]\n")
    bp = parse_blueprint(text).blueprint
    assert bp.point_count == sum(len(p.all_points()) for p in bp.prompts) == 8
