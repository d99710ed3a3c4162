"""python manage.py validate_blueprint: the output other tools and people rely on."""

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "weval-configs"

GOOD = """\
title: Good
models: [openai:gpt-4o-mini, anthropic:claude-3-5-haiku]
---
- id: p1
  prompt: What is the capital of France?
  should:
    - mentions Paris
    - $icontains: paris
- id: p2
  prompt: Say hi
  should_not:
    - $contains: goodbye
"""

BAD = """\
title: Bad
models: [openai:gpt-4o-mini]
---
- id: p1
  prompt: Hi
  should:
    - $contians: hello
    - $word_count_between: 5
"""


def run(*args):
    out, err = StringIO(), StringIO()
    try:
        call_command("validate_blueprint", *args, stdout=out, stderr=err)
        code = 0
    except SystemExit as exc:
        code = exc.code
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def files(tmp_path):
    (tmp_path / "good.yml").write_text(GOOD)
    (tmp_path / "bad.yaml").write_text(BAD)
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "CORE.json").write_text('["openai:gpt-4o"]')
    return tmp_path


def test_a_valid_file_prints_ok_with_counts_and_its_warnings(files):
    code, out, _ = run(str(files / "good.yml"))
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"{files / 'good.yml'}: OK (2 prompts, 3 points, 2 models)"
    assert f"{files / 'good.yml'}:11:3: warning: `should_not` is deprecated" in out


def test_errors_print_as_file_line_column_and_exit_1(files):
    code, out, _ = run(str(files / "bad.yaml"))
    assert code == 1
    assert f"{files / 'bad.yaml'}:7:7: error: Unknown point function: 'contians'" in out
    assert f"{files / 'bad.yaml'}:8:28: error: `$word_count_between` takes [min, max]" in out
    assert "OK (" not in out


def test_folders_are_searched_recursively_and_models_folders_skipped(files):
    code, out, _ = run(str(files))
    assert code == 1
    assert "CORE.json" not in out
    assert out.splitlines()[-1] == "2 files: 1 OK, 1 with errors, 1 warning; 2 prompts in the valid files"


def test_json_output_has_one_object_per_file(files):
    code, out, _ = run(str(files), "--json")
    assert code == 1
    reports = {Path(r["path"]).name: r for r in json.loads(out)}
    good, bad = reports["good.yml"], reports["bad.yaml"]
    assert good["ok"] is True and good["errors"] == []
    assert good["blueprint"]["prompts"][0]["points"][1] == {"fn": "icontains", "fnArgs": "paris", "multiplier": 1.0}
    assert good["warnings"][0]["line"] == 11 and good["warnings"][0]["path"] == "prompts[1].should_not"
    assert bad["ok"] is False and bad["blueprint"] is None
    error = bad["errors"][0]
    assert {k: error[k] for k in ("message", "line", "column", "path")} == {
        "message": "Unknown point function: 'contians'", "line": 7, "column": 7,
        "path": "prompts[0].should[0].$contians"}
    assert "did you mean `$contains`" in error["hint"]


def test_warnings_alone_still_exit_0(files):
    code, _, _ = run(str(files / "good.yml"))
    assert code == 0


def test_a_missing_file_is_an_error_not_a_crash(tmp_path):
    code, out, _ = run(str(tmp_path / "nope.yml"))
    assert code == 1 and "file not found" in out


def test_the_whole_corpus_reports_its_one_invalid_file():
    code, out, _ = run(str(CORPUS / "blueprints"), str(CORPUS / "history-json"))
    assert code == 1
    assert "eu-ai-act-202401689.yml:3:52: error: Failed to parse YAML blueprint" in out
    assert out.splitlines()[-1].startswith("173 files: 172 OK, 1 with errors")


SEEDS = Path(__file__).resolve().parents[1] / "fixtures" / "seeds"


def test_other_dialects_say_how_they_were_read():
    code, out, _ = run(str(SEEDS / "001" / "input-string.yaml"), "--json")
    (report,) = json.loads(out)
    assert report["dialect"] == "agentv" and report["ok"] is True
    code, out, _ = run(str(SEEDS / "001" / "input-string.yaml"))
    assert "read as AgentV suite" in out.splitlines()[0]


def test_a_weval_file_says_weval_in_json(files):
    _, out, _ = run(str(files / "good.yml"), "--json")
    assert json.loads(out)[0]["dialect"] == "weval"
