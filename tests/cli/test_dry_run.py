"""`run_blueprint FILE --dry-run [--json OUT]`: the estimate, the same as the API's dry run; nothing sent or kept."""

import io
import json

import pytest
from django.core.management import call_command

from blueprints.models import Blueprint
from runs.models import Run
from tests.web.test_estimate import TRIALS

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_dry_run_writes_the_estimate_and_stores_nothing(tmp_path, client, capsys):
    path = tmp_path / "bill.yml"
    path.write_text(TRIALS)
    out = tmp_path / "estimate.json"

    call_command("run_blueprint", str(path), "--dry-run", "--trials", "3", "--fresh", "--json", str(out))

    data = json.loads(out.read_text())
    assert data["calls"] == {"total": 162, "generation": 54, "judge": 108, "user": 0, "embedding": 0, "cached": 0, "canned": 0,
                             "possibleExtra": {"backupJudge": 0, "judgeRepairs": 108}}
    assert {"tokens", "costUsd", "unknown"} <= set(data)
    printed = capsys.readouterr().out
    assert "162 calls: 54 generations, 108 judge calls" in printed
    assert Blueprint.objects.count() == 0 and Run.objects.count() == 0

    api = client.post("/api/runs", json.dumps({"blueprint": TRIALS, "dryRun": True, "trials": 3, "fresh": True}),
                      content_type="application/json").json()
    assert {k: api[k] for k in ("calls", "tokens", "costUsd", "unknown")} == \
        {k: data[k] for k in ("calls", "tokens", "costUsd", "unknown")}


def test_a_dry_run_of_a_blueprint_that_cannot_run_exits_2(tmp_path):
    path = tmp_path / "bill.yml"
    path.write_text(TRIALS.replace("models: [openai:cand-a, openai:cand-b, openai:cand-c]", "models: [NOSUCH]"))

    with pytest.raises(SystemExit) as exit:
        call_command("run_blueprint", str(path), "--dry-run")

    assert exit.value.code == 2 and Run.objects.count() == 0


@pytest.mark.parametrize("option", ["--models", "--judges"])
def test_an_empty_list_of_models_or_judges_exits_2_and_nothing_starts(tmp_path, option):
    path = tmp_path / "bill.yml"
    path.write_text(TRIALS)
    err = io.StringIO()

    with pytest.raises(SystemExit) as exit:
        call_command("run_blueprint", str(path), option, " , ", stderr=err)

    assert exit.value.code == 2 and f"cannot run: {option}: no " in err.getvalue()
    assert "chosen: give at least one" in err.getvalue()
    assert Run.objects.count() == 0 and Blueprint.objects.count() == 0


def test_a_dry_run_gives_the_expected_cost_and_the_most(tmp_path, settings, capsys):
    settings.EVALSITE_DEFAULT_JUDGES = ["openai:gpt-4.1-mini"]
    path = tmp_path / "capitals.yml"
    path.write_text("title: Capitals\nmodels: [openai:gpt-4.1-mini]\n---\n- prompt: Capital of France?\n"
                    "  should: [Names Paris.]\n")
    out = tmp_path / "estimate.json"

    call_command("run_blueprint", str(path), "--dry-run", "--fresh", "--json", str(out))

    data = json.loads(out.read_text())
    printed = capsys.readouterr().out
    cost = data["cost"]
    assert data["calls"]["total"] == 2 and cost["mostUsd"] == data["costUsd"]
    assert 0 < cost["expectedUsd"] < cost["mostUsd"] / 3  # 300- and 150-token answers, not 1500 and 500
    assert (f"cost: expected about ${cost['expectedUsd']:,.4f}, at most ${cost['mostUsd']:,.4f} (every answer at its "
            "max tokens: what a budget reserves)") in printed
    assert "expected: 'openai:gpt-4.1-mini': 300 tokens an answer (an assumption" in printed
