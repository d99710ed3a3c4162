"""A run's revision is parsed once per process, also when several threads want it at the same moment (a web
process's view threads meeting a cold revision): the others wait for that parse instead of each making a copy.
The kept parses (blueprints/parsing.py's and runs/spec.py's) are bounded by their estimated size, and the estimate
is held to what tracemalloc measures."""

from __future__ import annotations

import gc
import threading
import time
import tracemalloc

import pytest

from blueprints import parsing
from blueprints.models import Blueprint, BlueprintRevision
from runs import spec as run_spec
from runs.spec import forget_parses, kept_parses, parsed_blueprint

TEXT = "title: Once\nmodels: [openai:a]\n---\n" + "".join(
    f"- id: q{n}\n  prompt: Question {n}?\n  should:\n    - $contains: fine\n" for n in range(20))


@pytest.mark.django_db(transaction=True)
def test_threads_wanting_a_cold_revision_share_one_parse(monkeypatch):
    revision, _ = Blueprint.objects.create(slug="once", title="Once").save_revision(TEXT)
    revision = BlueprintRevision.objects.select_related("blueprint").get(pk=revision.pk)
    forget_parses()
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
    forget_parses()
    with pytest.raises(run_spec.RunRefused, match="the revision has errors"):
        parsed_blueprint(revision)
    assert run_spec._PARSING == {}


def big_text(prompts: int, tag: str = "") -> str:
    """Prompts shaped like tests/bench/bench_results.py's: a prompt, an ideal, functions and judged points."""
    return "title: Big\nmodels: [openai:a, openai:b]\n---\n" + "".join(
        f"- id: q{n}{tag}\n  prompt: \"Question {n}: explain how a heat pump moves heat, briefly.\"\n"
        f"  ideal: A heat pump uses work to move heat against its natural direction.\n  should:\n"
        f"    - $icontains: heat\n    - $word_count_between: [10, 300]\n"
        f"    - Explains that the pump uses work (electricity) to move heat.\n"
        f"    - point: Says that heat flows from cold to warm only because of the work done.\n      weight: 2\n"
        f"    - - Gives a coefficient of performance above 1.\n    - - Says that it moves more heat.\n"
        f"  should_not:\n    - Claims that a heat pump creates heat from nothing.\n" for n in range(prompts))


@pytest.mark.django_db
def test_the_size_estimate_is_what_a_kept_parse_holds():
    revision, _ = Blueprint.objects.create(slug="big", title="Big").save_revision(big_text(200))
    revision = BlueprintRevision.objects.select_related("blueprint").get(pk=revision.pk)
    forget_parses()
    parsing.forget_parses()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        blueprint = parsed_blueprint(revision)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    estimate = kept_parses()[1]
    assert len(blueprint.prompts) == 200 and estimate == parsing.parse_bytes(revision.text)
    assert 0.7 * estimate <= held <= 1.2 * estimate, (held, estimate)  # honest, on the safe side


@pytest.mark.django_db
def test_kept_parses_stay_within_the_bound_the_latest_always_kept(monkeypatch):
    blueprint = Blueprint.objects.create(slug="many", title="Many")
    revisions = [blueprint.save_revision(big_text(30, tag=f"r{k}"))[0] for k in range(4)]
    one = parsing.parse_bytes(revisions[0].text)
    monkeypatch.setattr(parsing, "KEEP_PARSED_BYTES", int(2.5 * one))  # room for two, not three
    forget_parses()
    parsing.forget_parses()
    parsed = [parsed_blueprint(r) for r in revisions]
    count, size = kept_parses()
    assert count == 2 and size <= parsing.KEEP_PARSED_BYTES
    assert len(parsing._KEPT) == 2  # the parses behind them too, not only runs/spec.py's
    assert parsed_blueprint(revisions[3]) is parsed[3] and parsed_blueprint(revisions[2]) is parsed[2]
    assert parsed_blueprint(revisions[0]) is not parsed[0]  # dropped: parsed again, the same prompts
    assert [p.id for p in parsed_blueprint(revisions[0]).prompts] == [p.id for p in parsed[0].prompts]
    monkeypatch.setattr(parsing, "KEEP_PARSED_BYTES", one // 2)  # smaller than any: the latest is still kept
    assert parsed_blueprint(revisions[1]) is parsed_blueprint(revisions[1]) and kept_parses()[0] == 1
