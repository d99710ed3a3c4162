"""Figures in words: run time never reads "0 s" for a run that took longer, alpha over a handful
of points says "too few points", a weight prints as x0.67, and the cost line with no model says so."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from runs.models import Run
from runs.templatetags.results import times, too_few_for_alpha, took
from tests.web.test_editor import validate

pytestmark = pytest.mark.django_db


def test_a_run_that_took_minutes_never_reads_zero_seconds():
    now = timezone.now()
    # No start stamp and no measured stretch (as an old run or a cut-short stretch has): the span says.
    run = Run(status="done", created_at=now - timedelta(seconds=95), finished_at=now, worked_s=0.0)
    assert took(run) == "1 min 35 s"
    run = Run(status="done", created_at=now, started_at=now, finished_at=now + timedelta(milliseconds=300))
    assert took(run) == "under 1 s"
    # 59.7 s rounds to a minute, never to "0 min 60 s".
    run = Run(status="done", created_at=now, started_at=now, finished_at=now + timedelta(seconds=119.7))
    assert took(run) == "2 min 0 s"


def test_alpha_over_a_handful_of_points_is_too_few_to_read():
    assert too_few_for_alpha({"points": 3, "krippendorffsAlphaInterval": 0.0})
    assert not too_few_for_alpha({"points": 10, "krippendorffsAlphaInterval": 0.5})
    assert too_few_for_alpha(None)


def test_weights_print_as_people_write_them():
    assert [times(v) for v in (2 / 3, 2.0, 1.5, 0.125, None)] == ["0.67", "2", "1.5", "0.12", "–"]


def test_the_cost_line_with_no_model_says_there_is_nothing_to_estimate(client):
    response = validate(client, "title: No models yet\n---\n- prompt: Hi?\n  should: [Greets back.]\n")
    assert "nothing yet" in response.text and "no model to ask" in response.text
    assert "canned responses, no calls" not in response.text and "Estimate: ~" not in response.text
