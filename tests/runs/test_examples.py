"""The example blueprints a newcomer finds in the library: each is valid, and each that runs offline
(only `fixtures:` models, no judged point) completes a run with every item answered and scored."""

import pytest

from blueprints.models import Blueprint
from blueprints.importing import example_files, load_examples
from runs import start as run_start
from runs.models import Response

pytestmark = pytest.mark.django_db(transaction=True)


def offline(blueprint) -> bool:
    spec = blueprint.current_revision.parse().blueprint
    only_fixtures = all(isinstance(m, str) and m.startswith("fixtures:") for m in spec.models)
    return only_fixtures and all(p.fn for prompt in spec.prompts for p in prompt.all_points())


def test_every_example_is_valid_and_the_offline_ones_run_completely(monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENROUTER_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    load_examples()
    blueprints = list(Blueprint.objects.all())
    assert len(blueprints) == len(example_files()) >= 5
    assert all(b.current_revision.is_valid for b in blueprints), [b.slug for b in blueprints
                                                                   if not b.current_revision.is_valid]
    runnable = [b for b in blueprints if offline(b)]
    assert len(runnable) >= 2
    for blueprint in runnable:
        run = run_start.start_run(blueprint)
        run.refresh_from_db()
        assert run.options["problems"] == [], (blueprint.slug, run.options["problems"])
        assert run.status == "done" and run.items_failed == 0, (
            blueprint.slug, list(Response.objects.filter(run=run, status="failed").values_list("error", flat=True)))
        assert not Response.objects.filter(run=run, score__isnull=True).exists(), blueprint.slug
