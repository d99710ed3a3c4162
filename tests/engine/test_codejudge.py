"""Script graders: off unless the operator allows them; JSON in, JSON out, a timeout, no shell, no secrets."""

from __future__ import annotations

import sys

import pytest

from runs.engine.codejudge import OFF_REASON, code_judges_allowed, run_code_judge
from runs.engine.points import ResponseMetrics, evaluate_point

ALLOW = {"EVALSITE_ALLOW_CODE_JUDGES": "1"}

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
    return run_code_judge(args, response, files=files, environ=ALLOW,
                          messages=[{"role": "user", "content": "Screen Huawei"}],
                          metrics=ResponseMetrics(latency_ms=12.0))


@pytest.mark.parametrize("value", ["", "0", "no", "false"])
def test_off_unless_the_operator_says_so(value, monkeypatch):
    monkeypatch.setenv("EVALSITE_ALLOW_CODE_JUDGES", value)
    result = evaluate_point("code_judge", {"command": [sys.executable, "-c", "print(1)"]}, "x")
    assert result.score is None and result.error == OFF_REASON
    assert not code_judges_allowed()


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
