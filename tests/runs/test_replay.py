"""Replay: a finished run rebuilt as a new run from the stored answers, with no provider call, gives the same
JSON and CSV exports (run ids and timestamps aside); a missing answer is named and nothing is sent; trials are
distinct cache entries, each replayed to its own answer."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.management import call_command

from blueprints.importing import import_files
from runs import start as run_start
from runs.cache import response_cache
from runs.exports import run_to_csv, run_to_json
from runs.models import Response, Run
from runs.replay import ReplayRefused, missing_answers, replay_run, run_manifest

from .conftest import judge_rules

pytestmark = pytest.mark.django_db(transaction=True)

JUDGED = """title: Replayed
models: [openai:cand-a, openai:cand-b]
---
- id: capital
  prompt: What is the capital of France?
  should:
    - $contains: Paris
    - Names the city clearly
  should_not:
    - Selects a wrong city
- id: sum
  system: Answer with a number.
  prompt: What is 2 + 2?
  should:
    - $contains: "4"
    - Gives the sum
"""

RULES = ("mean", "best", "pass_at_k")
TRIALS = "title: Trials\nmodels: [openai:cand-once, openai:cand-always]\n---\n" + "".join(
    f"- id: {rule.replace('_', '-')}-q\n  prompt: Question for {rule}?\n  trials: 3\n  trial_aggregation: {rule}\n"
    f"  should:\n    - $contains: GOOD\n" for rule in RULES)


def normalised_json(run: Run) -> str:
    """The JSON export with what differs between two runs by nature taken out: the run id and the timestamp."""
    data = run_to_json(Run.objects.get(pk=run.pk))
    data["timestamp"] = "T"
    data["evalsite"]["runId"] = 0
    return json.dumps(data, ensure_ascii=False, indent=2)


def normalised_csv(run: Run) -> str:
    rows = list(csv.reader(io.StringIO(run_to_csv(Run.objects.get(pk=run.pk)))))
    assert rows[0][0] == "run_id" and all(r[0] == str(run.pk) for r in rows[1:])
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([["run_id", *rows[0][1:]], *(["0", *r[1:]] for r in rows[1:])])
    return out.getvalue()


def _run(text: str, name: str, **kwargs) -> Run:
    blueprint = import_files([(f"{name}.yml", text, {})], via="test").items[0].blueprint
    run = run_start.start_run(blueprint, **kwargs)
    run.refresh_from_db()
    assert run.status == "done", (run.status, run.error)
    return run


@pytest.fixture
def judged_run(fake_provider):
    fake_provider.script([{"model": "cand-a", "match": "capital", "reply": "Paris, of course."},
                          {"model": "cand-a", "match": "2 \\+ 2", "reply": "4"},
                          {"model": "cand-b", "match": ".", "reply": "No idea."},
                          *judge_rules(unmet_text="No idea")])
    return _run(JUDGED, "replayed", judges=["openai:judge-a", "openai:judge-b"])


def test_a_replay_rebuilds_the_run_from_the_cache_with_no_call_and_the_same_exports(judged_run, fake_provider):
    original = judged_run
    calls_before = len(fake_provider.requests())
    assert calls_before == 4 + 2 * 3 * 2  # 4 candidates; 2 models x 3 judged points x 2 judges
    manifest = run_manifest(original)
    assert manifest["revision"] == {"number": original.revision.number, "sha256": original.revision.sha256,
                                    "label": original.label}
    assert manifest["models"] == ["openai:cand-a", "openai:cand-b"] and manifest["scale"]
    assert [j["model"] for j in manifest["judges"]["judges"]] == ["openai:judge-a", "openai:judge-b"]
    assert all(j["approach"] and len(j["systemPromptSha256"]) == 64 for j in manifest["judges"]["judges"])
    keys = [c["key"] for c in manifest["calls"]]
    assert len(keys) == calls_before and all(k and len(k) == 64 for k in keys)
    assert {c["purpose"] for c in manifest["calls"]} == {"candidate", "judge"}

    shown = normalised_json(original)
    assert '"cached": false' in shown and '"latencyMs": 0' not in shown  # what the comparison covers
    replay = replay_run(original)
    assert len(fake_provider.requests()) == calls_before  # not one call to a provider
    assert replay.pk != original.pk and replay.status == "done"
    assert replay.manifest["replayOf"] == original.pk
    assert normalised_json(replay) == normalised_json(original)
    assert normalised_csv(replay) == normalised_csv(original)
    # A replay's calls carry the same keys, so it can be replayed in turn.
    assert [c["key"] for c in run_manifest(replay)["calls"]] == keys


def test_a_missing_answer_is_named_and_nothing_is_sent_or_made(judged_run, fake_provider):
    original = judged_run
    calls_before, runs_before = len(fake_provider.requests()), Run.objects.count()
    judge_call = next(c for c in run_manifest(original)["calls"] if c["purpose"] == "judge")
    cache = response_cache()
    cache.flush()
    with cache._connection() as conn:
        conn.execute("DELETE FROM responses WHERE key = ?", (judge_call["key"],))
    with pytest.raises(ReplayRefused) as refused:
        replay_run(original)
    assert len(refused.value.missing) == 1
    assert judge_call["key"] in refused.value.missing[0] and judge_call["prompt"] in refused.value.missing[0]
    assert "not in the response cache" in refused.value.missing[0]
    assert len(fake_provider.requests()) == calls_before and Run.objects.count() == runs_before
    with pytest.raises(SystemExit) as exit_code:
        call_command("replay", original.pk, "--check")
    assert exit_code.value.code == 2


def test_a_replay_that_finds_an_answer_gone_while_it_runs_stops_without_calling(judged_run, fake_provider,
                                                                               monkeypatch):
    original = judged_run
    calls_before = len(fake_provider.requests())
    doomed = next(c for c in run_manifest(original)["calls"] if c["purpose"] == "candidate")
    monkeypatch.setattr("runs.replay.missing_answers", lambda run, calls=None: [])  # gone after the check
    cache = response_cache()
    cache.flush()
    with cache._connection() as conn:
        conn.execute("DELETE FROM responses WHERE key = ?", (doomed["key"],))
    replay = replay_run(original)
    assert len(fake_provider.requests()) == calls_before
    assert (replay.status, replay.stopped_reason) == ("cancelled", "replay")
    assert "missing from the response cache" in replay.stopped_detail and doomed["prompt"] in replay.stopped_detail


def test_trials_are_distinct_cache_entries_and_a_replay_gives_each_trial_its_answer(fake_provider, tmp_path):
    rules = []
    for rule in RULES:
        rules.append({"model": "cand-once", "match": f"for {rule}", "reply": "GOOD answer", "times": 1})
        rules.append({"model": "cand-once", "match": f"for {rule}", "reply": "BAD answer"})
    rules.append({"model": "cand-always", "match": ".", "reply": "GOOD always"})
    fake_provider.script(rules)
    original = _run(TRIALS, "trials", fresh=True)
    cells: dict[tuple, dict[int, str]] = {}
    for call in run_manifest(original)["calls"]:
        assert call["purpose"] == "candidate"
        cells.setdefault((call["prompt"], call["variant"]), {})[call["trial"]] = call["key"]
    assert len(cells) == 3 * 2
    has = response_cache()
    for cell, by_trial in cells.items():
        assert sorted(by_trial) == [0, 1, 2], cell
        assert len(set(by_trial.values())) == 3, cell  # three distinct cache entries per cell
        assert all(has.get(k)["text"] for k in by_trial.values())
    texts = {(r.prompt_id, r.variant_id, r.trial): r.text for r in Response.objects.filter(run=original)}
    assert sorted(t for (p, v, _), t in texts.items() if p == "mean-q" and "once" in v) == \
        ["BAD answer", "BAD answer", "GOOD answer"]

    calls_before = len(fake_provider.requests())
    out = tmp_path / "replay.json"
    call_command("replay", original.pk, "--json", str(out), "--csv", str(tmp_path / "replay.csv"))
    replay = Run.objects.exclude(pk=original.pk).get()
    assert len(fake_provider.requests()) == calls_before
    assert {(r.prompt_id, r.variant_id, r.trial): r.text for r in Response.objects.filter(run=replay)} == texts
    assert normalised_json(replay) == normalised_json(original)
    assert normalised_csv(replay) == normalised_csv(original)
    written = json.loads(out.read_text())
    assert written["evalsite"]["runId"] == replay.pk and written["runLabel"] == original.label
    assert missing_answers(replay) == []


def test_the_run_pages_replay_button_starts_a_replay(client, judged_run, fake_provider):
    before = len(fake_provider.requests())
    page = client.get(f"/runs/{judged_run.pk}/").content.decode()
    assert f"/runs/{judged_run.pk}/replay" in page
    response = client.post(f"/runs/{judged_run.pk}/replay")
    assert response.status_code == 302 and response["Location"] != f"/runs/{judged_run.pk}/"
    assert len(fake_provider.requests()) == before  # every answer from the cache
