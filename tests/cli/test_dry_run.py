"""`run_blueprint FILE --dry-run [--json OUT]`: the estimate, the same as the API's dry run; nothing sent or kept."""

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
    assert data["calls"] == {"total": 162, "generation": 54, "judge": 108, "embedding": 0, "cached": 0, "canned": 0,
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
