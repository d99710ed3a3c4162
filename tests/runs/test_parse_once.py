"""A run's revision is parsed once per process, also when several threads want it at the same moment (a web
process's view threads meeting a cold revision): the others wait for that parse instead of each making a copy."""

from __future__ import annotations

import threading
import time

import pytest

from blueprints.models import Blueprint, BlueprintRevision
from runs import spec as run_spec
from runs.spec import parsed_blueprint

TEXT = "title: Once\nmodels: [openai:a]\n---\n" + "".join(
    f"- id: q{n}\n  prompt: Question {n}?\n  should:\n    - $contains: fine\n" for n in range(20))


@pytest.mark.django_db(transaction=True)
def test_threads_wanting_a_cold_revision_share_one_parse(monkeypatch):
    revision, _ = Blueprint.objects.create(slug="once", title="Once").save_revision(TEXT)
    revision = BlueprintRevision.objects.select_related("blueprint").get(pk=revision.pk)
    run_spec._PARSED.clear()
    parses = []
    real_parse = BlueprintRevision.parse

    def slow_parse(self, collections=None):
        parses.append(threading.get_ident())
        time.sleep(0.3)  # the others arrive while this parse runs
        return real_parse(self, collections=collections)

    monkeypatch.setattr(BlueprintRevision, "parse", slow_parse)
    got: list = []
    threads = [threading.Thread(target=lambda: got.append(parsed_blueprint(revision))) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(got) == 6 and len(parses) == 1
    assert all(bp is got[0] for bp in got) and len(got[0].prompts) == 20
    assert run_spec._PARSING == {}  # no lock left behind for a revision nobody is parsing
    assert parsed_blueprint(revision) is got[0] and len(parses) == 1


@pytest.mark.django_db
def test_a_revision_with_errors_is_refused_and_leaves_no_lock():
    revision, _ = Blueprint.objects.create(slug="broken", title="Broken").save_revision(
        "title: Broken\nmodels: [openai:a]\n---\n- id: q0\n  prompt: Hi\n  should: 3\n")
    run_spec._PARSED.clear()
    with pytest.raises(run_spec.RunRefused, match="the revision has errors"):
        parsed_blueprint(revision)
    assert run_spec._PARSING == {}
