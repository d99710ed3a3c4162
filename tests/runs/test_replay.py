"""Replay: a finished run rebuilt as a new run from its own stored answers (its call log), with no provider call,
gives the same JSON and CSV exports (run ids and timestamps aside), whatever the shared response cache holds since
(a Fresh re-run stores other answers under the same keys); a missing answer is named and nothing is sent or made;
trials are distinct calls, each replayed to its own answer; the command's output paths are checked first."""

from __future__ import annotations

import csv
import io
import json
import os

import pytest
from django.core.management import call_command

from blueprints.importing import import_files
from runs import outfiles
from runs import start as run_start
from runs.cache import response_cache
from runs.engine import calls as call_log
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


def _forget_answer(run: Run, purpose: str) -> dict:
    """Take the answer text out of one of ``run``'s logged calls (as a run made before replays kept answers has
    it): the manifest's entry for that call comes back."""
    call = next(c for c in run_manifest(run)["calls"] if c["purpose"] == purpose)
    row = Response.objects.get(run=run, prompt_id=call["prompt"], variant_id=call["variant"], trial=call["trial"])
    field = "candidate_calls" if purpose == "candidate" else "judge_calls"
    entries = call_log.unpack(Response.objects.filter(pk=row.pk).values_list(field, flat=True).get())
    entry = next(e for e in entries if e.get("cacheKey") == call["key"] and e.get("label") == call["label"])
    assert isinstance(entry.pop("text"), str)
    Response.objects.filter(pk=row.pk).update(**{field: call_log.pack(entries)})
    return call


def _command(*args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("replay", *[str(a) for a in args], stdout=out, stderr=err)
        code = 0
    except SystemExit as stop:
        code = stop.code
    return code, out.getvalue(), err.getvalue()


def test_a_missing_answer_is_named_and_nothing_is_sent_or_made(judged_run, fake_provider):
    original = judged_run
    calls_before, runs_before = len(fake_provider.requests()), Run.objects.count()
    judge_call = _forget_answer(original, "judge")
    with pytest.raises(ReplayRefused) as refused:
        replay_run(original)
    assert len(refused.value.missing) == 1
    named = refused.value.missing[0]
    assert judge_call["key"] in named and judge_call["label"] in named
    assert f"{judge_call['prompt']} × {judge_call['variant']}, trial 1" in named
    assert "was not kept in the call log" in named
    code, out, err = _command(original.pk, "--check")
    assert code == 2 and "1 answer(s) missing; not replayable" in out and named in err
    code, out, err = _command(original.pk)
    assert code == 2 and "no run was made" in err and named in err and out == ""
    assert len(fake_provider.requests()) == calls_before and Run.objects.count() == runs_before


def test_a_replay_that_asks_for_an_answer_the_original_did_not_keep_stops_without_calling(
        judged_run, fake_provider, monkeypatch):
    original = judged_run
    calls_before = len(fake_provider.requests())
    doomed = _forget_answer(original, "candidate")
    monkeypatch.setattr("runs.replay.missing_answers", lambda run, calls=None: [])  # past the check
    replay = replay_run(original)
    assert len(fake_provider.requests()) == calls_before
    assert (replay.status, replay.stopped_reason) == ("cancelled", "replay")
    assert "an answer of the original run is missing" in replay.stopped_detail
    assert f"prompt '{doomed['prompt']}'" in replay.stopped_detail and "was not kept" in replay.stopped_detail


FRESH_ANSWERS = [{"model": "cand-a", "match": ".", "reply": "No idea."},
                 {"model": "cand-b", "match": "capital", "reply": "Paris, naturally."},
                 {"model": "cand-b", "match": "2 \\+ 2", "reply": "4, I think"},
                 {"model": "judge-a", "match": "(?s)<CRITERION>\nGives the sum",
                  "reply": "<reflection>Partly.</reflection><classification>CLASS_PARTIALLY_MET</classification>"},
                 *judge_rules(unmet_text="No idea")]


def test_a_replay_rebuilds_the_run_it_names_after_a_fresh_rerun_stored_other_answers(judged_run, fake_provider):
    """Issue: run A, a Fresh re-run B with other answers, then `replay A` gave B's answers (cells reversed)."""
    original = judged_run
    fake_provider.script(FRESH_ANSWERS)
    fresh = run_start.start_run(original.blueprint, revision=original.revision,
                                judges=["openai:judge-a", "openai:judge-b"], fresh=True)
    fresh.refresh_from_db()
    assert fresh.status == "done"
    texts = {(r.prompt_id, r.variant_id): r.text for r in Response.objects.filter(run=original)}
    assert {(r.prompt_id, r.variant_id): r.text for r in Response.objects.filter(run=fresh)} != texts
    assert normalised_json(fresh) != normalised_json(original)  # the shared cache now holds B's answers
    calls_before = len(fake_provider.requests())

    code, out, err = _command(original.pk, "--check")
    assert code == 0 and out.strip().endswith("; replayable") and err == ""
    replay = replay_run(original)
    assert len(fake_provider.requests()) == calls_before and replay.status == "done"
    assert {(r.prompt_id, r.variant_id): r.text for r in Response.objects.filter(run=replay)} == texts
    assert normalised_json(replay) == normalised_json(original)
    assert normalised_csv(replay) == normalised_csv(original)
    # B is a run of its own: its replay gives B, and a replay of a replay gives A again.
    assert normalised_json(replay_run(fresh)) == normalised_json(fresh)
    assert normalised_json(replay_run(replay)) == normalised_json(original)
    assert len(fake_provider.requests()) == calls_before


def test_with_trials_a_replay_gives_each_trial_its_own_answer_after_a_fresh_rerun(fake_provider, tmp_path):
    """Issue: with trials, each trial of the replay got another trial's answer (the Fresh re-run's)."""
    def script(good: str, bad: str) -> None:
        rules = []
        for rule in RULES:
            rules.append({"model": "cand-once", "match": f"for {rule}", "reply": good, "times": 1})
            rules.append({"model": "cand-once", "match": f"for {rule}", "reply": bad})
        rules.append({"model": "cand-always", "match": ".", "reply": f"{good} always"})
        fake_provider.script(rules)

    script("GOOD answer", "BAD answer")
    original = _run(TRIALS, "trials")
    script("BAD again", "GOOD again, twice")
    fresh = run_start.start_run(original.blueprint, revision=original.revision, fresh=True)
    fresh.refresh_from_db()
    texts = {(r.prompt_id, r.variant_id, r.trial): r.text for r in Response.objects.filter(run=original)}
    assert len(texts) == 3 * 2 * 3
    again = {(r.prompt_id, r.variant_id, r.trial): r.text for r in Response.objects.filter(run=fresh)}
    assert all(again[k] != texts[k] for k in texts)  # every trial's answer in the cache is now B's
    calls_before = len(fake_provider.requests())

    out = tmp_path / "replay.json"
    code, printed, err = _command(original.pk, "--json", out, "--csv", tmp_path / "replay.csv")
    assert code == 0, err
    replay = Run.objects.get(pk=int(printed))
    assert len(fake_provider.requests()) == calls_before
    assert {(r.prompt_id, r.variant_id, r.trial): r.text for r in Response.objects.filter(run=replay)} == texts
    assert normalised_json(replay) == normalised_json(original)
    assert normalised_csv(replay) == normalised_csv(original)
    written = json.loads(out.read_text())
    written["timestamp"], written["evalsite"]["runId"] = "T", 0
    assert json.dumps(written, ensure_ascii=False, indent=2) == normalised_json(original)


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


@pytest.mark.parametrize("case", ["missing folder", "a folder", "a link", "a link to nowhere", "same file twice",
                                  "a NUL byte", "a fifo"])
def test_an_output_path_is_refused_before_any_run_is_made(judged_run, fake_provider, tmp_path, case):
    """Hostile round, case 10: `--json OUT` to a missing folder or a folder ended in a traceback after the replay
    run was made, and a link at OUT was followed and overwritten."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me", encoding="utf-8")
    args: list = ["--json", tmp_path / "out.json"]
    if case == "missing folder":
        args = ["--json", tmp_path / "no-such-folder" / "out.json"]
        expected = "does not exist"
    elif case == "a folder":
        (tmp_path / "out.json").mkdir()
        expected = "is a folder"
    elif case == "a link":
        os.symlink(victim, tmp_path / "out.json")
        expected = "is a symbolic link"
    elif case == "a link to nowhere":
        os.symlink(tmp_path / "made-through-the-link.json", tmp_path / "out.json")
        expected = "is a symbolic link"
    elif case == "a NUL byte":
        args = ["--json", f"{tmp_path}/out\x00.json"]
        expected = "NUL character"
    elif case == "a fifo":
        os.mkfifo(tmp_path / "out.json")  # a write would block until someone read it
        expected = "not a regular file"
    else:
        args += ["--csv", tmp_path / "out.json"]
        expected = "the same file"
    runs_before, calls_before = Run.objects.count(), len(fake_provider.requests())
    code, out, err = _command(judged_run.pk, *args)
    assert code == 2 and out == "" and expected in err and "Traceback" not in err
    assert Run.objects.count() == runs_before and len(fake_provider.requests()) == calls_before
    assert victim.read_text(encoding="utf-8") == "keep me"
    assert not (tmp_path / "made-through-the-link.json").exists()


def test_a_failed_write_after_the_replay_says_what_was_made_without_a_traceback(judged_run, fake_provider, tmp_path,
                                                                                monkeypatch):
    (tmp_path / "out").mkdir()  # tmp_path is the data folder too
    out = tmp_path / "out" / "out.json"
    out.write_text("the previous file", encoding="utf-8")
    real_mkstemp = outfiles.tempfile.mkstemp

    def full_disk(**kwargs):  # the temporary file is made, and every write to it finds the disk full
        fd, name = real_mkstemp(**kwargs)
        full = os.open("/dev/full", os.O_WRONLY)
        os.dup2(full, fd)
        os.close(full)
        return fd, name

    monkeypatch.setattr(outfiles.tempfile, "mkstemp", full_disk)
    runs_before = Run.objects.count()
    code, printed, err = _command(judged_run.pk, "--json", out)
    assert code == 1 and "Traceback" not in err
    made = Run.objects.exclude(pk=judged_run.pk).get()
    assert Run.objects.count() == runs_before + 1 and printed.strip() == str(made.pk) and made.status == "done"
    assert f"cannot write --json {out}: could not be written (No space left on device)" in err
    assert f"the replay was made all the same: run {made.pk} (done)" in err
    assert f"export_run {made.pk} --format json" in err
    assert out.read_text(encoding="utf-8") == "the previous file"  # the old file stays whole
    assert sorted(p.name for p in out.parent.iterdir()) == ["out.json"]  # no temporary file left behind


def test_a_link_put_at_the_output_after_the_check_is_not_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me", encoding="utf-8")
    out = tmp_path / "out.json"
    assert outfiles.checked_output(str(out)) == out
    os.symlink(victim, out)  # between the check and the write
    with pytest.raises(outfiles.OutputRefused, match="symbolic link"):
        outfiles.write_text(out, "{}")
    assert out.is_symlink() and victim.read_text(encoding="utf-8") == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json", "victim.txt"]


def test_an_item_that_failed_before_any_call_was_logged_is_named(fake_provider):
    """A model it could not reach (no key) fails its items with no call in their logs: nothing there to replay."""
    fake_provider.script([{"model": "cand-a", "match": ".", "reply": "Paris"}])
    original = _run("title: Unreachable\nmodels: [openai:cand-a, anthropic:claude-x]\n---\n"
                    "- id: capital\n  prompt: What is the capital of France?\n  should:\n    - $contains: Paris\n",
                    "unreachable")
    failed = Response.objects.get(run=original, variant_id__startswith="anthropic")
    assert failed.status == "failed" and failed.error
    runs_before, calls_before = Run.objects.count(), len(fake_provider.requests())
    code, out, err = _command(original.pk, "--check")
    assert code == 2 and "1 answer(s) missing" in out
    assert f"capital × {failed.variant_id}, trial 1: the item failed with no failed call in its log" in err
    code, out, err = _command(original.pk)
    assert code == 2 and "no run was made" in err
    assert Run.objects.count() == runs_before and len(fake_provider.requests()) == calls_before


def test_a_run_of_fixture_answers_with_trials_and_turns_replays_to_the_same_exports(fake_provider):
    text = ("title: Canned\nmodels: [fixtures:x]\nfixtures:\n  strategy: seeded\n  seed: 7\n  responses:\n"
            "    chat:\n      turns: [\"First answer\", [\"Second, one\", \"Second, two\", \"Second, three\"]]\n---\n"
            "- id: chat\n  trials: 3\n  messages:\n    - user: Hello\n    - assistant: null\n    - user: And then?\n"
            "  should:\n    - $contains: Second\n")
    original = _run(text, "canned")
    rows = Response.objects.filter(run=original)
    assert len(rows) == 3 and all(sum(t.get("generated", False) for t in r.conversation) == 2 for r in rows)
    assert missing_answers(original) == []
    replay = replay_run(original)
    assert replay.status == "done" and len(fake_provider.requests()) == 0
    assert normalised_json(replay) == normalised_json(original)
    assert normalised_csv(replay) == normalised_csv(original)


def test_an_answer_longer_than_a_call_log_keeps_is_named_and_refused(fake_provider, monkeypatch):
    monkeypatch.setattr(call_log, "MAX_ANSWER_CHARS", 12)
    fake_provider.script([{"model": "cand-a", "match": ".", "reply": "Paris is the capital, and that is that."},
                          {"model": "cand-b", "match": ".", "reply": "Paris."}])
    original = _run("title: Long\nmodels: [openai:cand-a, openai:cand-b]\n---\n"
                    "- id: capital\n  prompt: What is the capital of France?\n  should:\n    - $contains: Paris\n",
                    "long")
    missing = missing_answers(original)
    assert len(missing) == 1 and "capital × openai:cand-a[temp:0], trial 1: candidate (turn 1)" in missing[0]
    assert "its answer (39 characters) was longer than a call log keeps (12)" in missing[0]
    runs_before = Run.objects.count()
    with pytest.raises(ReplayRefused):
        replay_run(original)
    assert Run.objects.count() == runs_before
