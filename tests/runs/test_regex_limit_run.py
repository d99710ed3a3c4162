"""A run whose blueprint has a catastrophic regex ends `done`; that point is not evaluated with the reason
(issue 12, item 1). Worker path with inline tasks and the fake LLM server."""

import pytest

from blueprints.importing import import_files
from blueprints.spec.limits import Limits
from runs import start as run_start
from runs.models import PointAssessment, Response

pytestmark = pytest.mark.django_db(transaction=True)

BLUEPRINT = """\
title: Catastrophic regex
models: [openai:cand-a]
---
- id: letters
  prompt: Write forty a's and a b.
  should:
    - $match: "^(a|a)+$"
    - $contains: "b"
"""


def test_a_run_with_a_catastrophic_regex_finishes_and_the_point_is_not_evaluated(fake_provider, settings):
    settings.EVALSITE_LIMITS = Limits(regex_timeout_s=0.2)
    fake_provider.script([{"model": "cand-a", "match": ".", "reply": "a" * 40 + "b"}])
    blueprint = import_files([("regex.yml", BLUEPRINT, {})], via="test").items[0].blueprint

    run = run_start.start_run(blueprint, models=["openai:cand-a"], judges=["openai:judge-a"])

    run.refresh_from_db()
    assert run.status == "done", run.error
    assert (run.items_total, run.items_done, run.items_failed) == (1, 1, 0)
    response = Response.objects.get(run=run)
    match, contains = PointAssessment.objects.filter(response=response).order_by("position")
    assert match.fn == "matches" and match.score is None
    assert "took longer than 0.2 s on this response; simplify it or raise EVALSITE_REGEX_TIMEOUT_S" in match.error
    assert contains.score == 1.0
    assert response.score == 1.0  # scored on the point that could be evaluated, never a pass or fail for the regex
