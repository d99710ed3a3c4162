"""Script graders: off unless the operator allows them; JSON in, JSON out, a timeout, no shell, no secrets."""

from __future__ import annotations

import os
import sys

import pytest

from runs.engine.points.codejudge import OFF_REASON, child_env_from, run_code_judge
from runs.engine.config import EngineConfig
from runs.engine.points import ResponseMetrics, evaluate_point

GRADER = """\
import json, os, sys
data = json.load(sys.stdin)
print(json.dumps({
    "score": 1 if "DENIED" in data["answer"] else 0.25,
    "reasoning": "saw " + data["question"] + " / " + str(data["config"]) + " / " + str(data["duration_ms"]),
    "hits": [k for k in sorted(os.environ) if k.endswith("_API_KEY")],
}))
"""


def grade(files, command, response="DENIED.", **kwargs):
    args = {"command": command, "config": {"strict": True}, **kwargs}
    return run_code_judge(args, response, files=files, allowed=True, child_env=child_env_from(os.environ),
                          messages=[{"role": "user", "content": "Screen Huawei"}],
                          metrics=ResponseMetrics(latency_ms=12.0))


def test_off_unless_the_operator_says_so():
    command = {"command": [sys.executable, "-c", "print('{\"score\": 1}')"]}
    result = evaluate_point("code_judge", command, "x")  # the engine's default: off
    assert result.score is None and result.error == OFF_REASON
    allowed = evaluate_point("code_judge", command, "x", config=EngineConfig(code_judges=True,
                                                                           child_env=child_env_from(os.environ)))
    assert allowed.score == 1.0, allowed.error


@pytest.mark.parametrize(("value", "on"), [("", False), ("0", False), ("no", False), ("false", False), ("1", True),
                                           ("yes", True)])
def test_the_setting_reads_the_environment_and_reaches_the_engine(value, on, monkeypatch):
    from evalsite.env import env_bool

    monkeypatch.setenv("EVALSITE_ALLOW_CODE_JUDGES", value)
    assert env_bool("EVALSITE_ALLOW_CODE_JUDGES", False) is on


def test_the_engine_config_carries_the_settings_flag(settings):
    from evalsite.engine import engine_config

    settings.EVALSITE_ALLOW_CODE_JUDGES = True
    assert engine_config().code_judges is True
    settings.EVALSITE_ALLOW_CODE_JUDGES = False
    assert engine_config().code_judges is False


def test_a_script_from_the_suite_gets_json_and_scores(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    result = grade({"judges/grade.py": GRADER}, [sys.executable, "judges/grade.py"])
    assert result.score == 1.0
    assert "saw Screen Huawei / {'strict': True} / 12.0" in result.explain
    assert "OPENAI_API_KEY" not in result.explain  # the script's environment carries no key of ours
    assert grade({"judges/grade.py": GRADER}, [sys.executable, "judges/grade.py"], response="ok").score == 0.25


def test_a_relative_folder_and_parent_paths_stay_inside_the_copy():
    files = {"../shared/grade.py": GRADER}
    result = grade(files, [sys.executable, "../../shared/grade.py"], cwd="sub")
    assert result.score == 1.0, result.error
    assert grade(files, [sys.executable, "x.py"], cwd="../../..").error.endswith("is outside the suite")


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        ("import sys; sys.stderr.write('boom'); sys.exit(3)", "exited with status 3: boom"),
        ("print('not json')", "did not print a JSON object"),
        ("print('{\"verdict\": \"pass\"}')", "no numeric `score`"),
        ("import time; time.sleep(5)", "did not finish within 0.5 s"),
    ],
)
def test_a_failing_grader_is_not_evaluated_never_a_fail(script, reason):
    result = grade({"g.py": script}, [sys.executable, "g.py"], timeout_s=0.5)
    assert result.score is None and reason in result.error


def test_a_missing_program_and_no_shell():
    assert "was not found" in grade({}, ["no-such-program-xyz"]).error
    # A shell would expand `$HOME` and run `echo`; an argv list passes it literally.
    result = grade({}, [sys.executable, "-c", "import sys, json; print(json.dumps({'score': 0.5, 'reasoning': "
                                              "sys.argv[1]}))", "$HOME; echo 1"])
    assert result.score == 0.5 and result.explain == "$HOME; echo 1"


def test_scores_are_clamped():
    result = grade({}, [sys.executable, "-c", "print('{\"score\": 7}')"])
    assert result.score == 1.0
