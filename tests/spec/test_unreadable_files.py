"""Issue 24, part 1: no text is a path unless its format says so, and no file-system error escapes.

An AgentV ``expected_output`` longer than 255 bytes on one line made ``validate_file`` raise
``OSError: [Errno 36] File name too long``: the companion lookup tried every text of the suite as a
file name. Now only the places AgentV reads files from are looked up, and each failure to read one
(a name too long, a NUL byte, a folder, a link loop, no permission) is a located diagnostic.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from django.core.management import call_command

from blueprints.spec import parse_any
from blueprints.spec.companions import Companions, agentv_paths, as_path, collect_companions
from blueprints.spec.files import validate_file
from blueprints.spec.source import load


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def suite_with(value: str, key: str = "expected_output") -> str:
    return ("tests:\n  - id: long\n    criteria: answers\n    input: hi\n"
            f"    {key}: {json.dumps(value, ensure_ascii=False)}\n")


LONG_TEXTS = {
    "256 ascii bytes": "x" * 256,
    "300 bytes with a dot": "y" * 296 + ".txt",
    "255 chars, 510 bytes": "é" * 255,
    "over 4096 bytes": "an answer that goes on " * 200,
    "a path-like long line": "./" + "d/" * 200 + "answer.md",
    "file:// and a long name": "file://" + "z" * 400 + ".md",
}


@pytest.mark.parametrize("text", LONG_TEXTS.values(), ids=LONG_TEXTS.keys())
@pytest.mark.parametrize("key", ["expected_output", "criteria", "input"])
def test_a_long_text_on_one_line_is_read_as_text_never_as_a_file_name(tmp_path, text, key):
    write(tmp_path, {"EVAL.yaml": suite_with(text, key)})
    report = validate_file(tmp_path / "EVAL.yaml", root=tmp_path)
    assert report.ok, report.result.errors
    assert not [d for d in report.result.diagnostics if d.code in ("internal", "unreadable-file")]
    assert collect_companions(tmp_path / "EVAL.yaml", suite_with(text, key), root=tmp_path) == {}


def test_validate_blueprint_answers_on_a_long_expected_output(tmp_path):
    write(tmp_path, {"EVAL.yaml": suite_with("w" * 300)})
    out = io.StringIO()
    try:
        call_command("validate_blueprint", str(tmp_path / "EVAL.yaml"), "--json", stdout=out, stderr=io.StringIO())
    except SystemExit as exit_:
        assert exit_.code == 1
    [report] = json.loads(out.getvalue())
    assert report["dialect"] == "agentv" and report["ok"], report["errors"]


def test_only_the_places_agentv_reads_files_from_are_paths():
    suite = load("""\
tests:
  - id: t
    criteria: judges/never.md
    input:
      - role: user
        content:
          - {type: text, value: prompts/not-a-file.md}
          - {type: file, value: ./context.md}
    expected_output: answers/not-a-file.md
    assert:
      - Mentions notes/not-a-file.md
      - {type: contains, value: data/not-a-file.json}
      - {type: llm-grader, prompt: ./judges/tone.md}
      - {type: code-grader, command: [python3, scripts/check.py, --strict]}
      - type: composite
        assert: [{type: code_judge, script: "bun run scripts/inner.ts"}]
        aggregator: {type: code-judge, path: ./scripts/aggregate.py}
  - file://more/*.yaml
metadata: {source: docs/not-a-file.md}
""", "yaml").documents[0]
    named = {as_path(text): names_tests for text, names_tests in agentv_paths(suite)}
    assert named == {"more/*.yaml": True, "context.md": False, "judges/tone.md": False, "python3": False,
                     "scripts/check.py": False, "--strict": False, "bun": False, "run": False,
                     "scripts/inner.ts": False, "scripts/aggregate.py": False}
    assert [as_path(v) for v in ("a\nb", "https://x.test/a.md", "q" * 5000, "", 7)] == [None] * 5


def test_a_tests_file_name_too_long_for_the_file_system_is_a_located_error(tmp_path):
    name = "./" + "t" * 300 + ".yaml"
    text = f"name: long-tests\ntests: {name}\n"
    write(tmp_path, {"EVAL.yaml": text})
    files = collect_companions(tmp_path / "EVAL.yaml", text, root=tmp_path)
    assert isinstance(files, Companions) and dict(files) == {}
    assert "too long" in files.problems[name[2:]]
    report = validate_file(tmp_path / "EVAL.yaml", root=tmp_path)
    [error] = [e for e in report.result.errors if e.code == "unreadable-file"]
    assert (error.line, error.column) == (2, 8) and "its name is too long for the file system" in error.message
    assert error.path == "tests" and error.hint


def test_a_file_block_with_a_nul_byte_is_a_located_warning(tmp_path):
    text = ('tests:\n  - id: t\n    criteria: c\n    input:\n      - role: user\n        content:\n'
            '          - {type: text, value: hi}\n          - {type: file, value: "a\\0b.md"}\n')
    write(tmp_path, {"EVAL.yaml": text})
    report = validate_file(tmp_path / "EVAL.yaml", root=tmp_path)
    assert report.ok, report.result.errors
    [warning] = [w for w in report.result.warnings if w.code == "unreadable-file"]
    assert warning.line == 8 and "NUL byte" in warning.message and "left out" in warning.message


def test_a_folder_where_a_file_is_named_is_a_located_warning(tmp_path):
    text = ("tests:\n  - id: t\n    criteria: c\n    input: hi\n    expected_output:\n"
            "      - {type: file, value: ./answers}\n")
    write(tmp_path, {"EVAL.yaml": text, "answers/one.md": "one"})
    report = validate_file(tmp_path / "EVAL.yaml", root=tmp_path)
    [warning] = [w for w in report.result.warnings if w.code == "unreadable-file"]
    assert warning.line == 6 and "it is a folder, not a file" in warning.message


def test_a_link_loop_is_a_located_warning(tmp_path):
    text = ("tests:\n  - id: t\n    criteria: c\n    input:\n      - role: user\n        content:\n"
            "          - {type: text, value: hi}\n          - {type: file, value: loop.md}\n")
    write(tmp_path, {"EVAL.yaml": text})
    os.symlink("other.md", tmp_path / "loop.md")
    os.symlink("loop.md", tmp_path / "other.md")
    report = validate_file(tmp_path / "EVAL.yaml", root=tmp_path)
    [warning] = [w for w in report.result.warnings if w.code == "unreadable-file"]
    assert warning.line == 8 and "link loop" in warning.message


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads every file")
def test_a_judge_prompt_that_may_not_be_read_is_a_located_error(tmp_path):
    text = ("tests:\n  - id: t\n    criteria: c\n    input: hi\n    assert:\n"
            "      - {name: tone, type: llm_judge, prompt: ./judges/tone.md}\n")
    write(tmp_path, {"EVAL.yaml": text, "judges/tone.md": "Grade {{ answer }}"})
    (tmp_path / "judges/tone.md").chmod(0)
    try:
        report = validate_file(tmp_path / "EVAL.yaml", root=tmp_path)
    finally:
        (tmp_path / "judges/tone.md").chmod(0o644)
    [error] = [e for e in report.result.errors if e.code == "unreadable-file"]
    assert (error.line, error.path) == (6, "tests[0].assert[0].prompt") and "permission denied" in error.message


def test_paths_outside_the_folder_and_devices_are_never_read(tmp_path):
    text = ("tests:\n  - id: t\n    criteria: c\n    input:\n      - role: user\n        content:\n"
            "          - {type: text, value: hi}\n          - {type: file, value: ../../etc/passwd}\n"
            "          - {type: file, value: /dev/zero}\n          - {type: file, value: file:///proc/self/environ}\n")
    write(tmp_path / "suite", {"EVAL.yaml": text})
    assert collect_companions(tmp_path / "suite/EVAL.yaml", text, root=tmp_path / "suite") == {}
    report = validate_file(tmp_path / "suite/EVAL.yaml", root=tmp_path / "suite")
    assert report.ok and len([w for w in report.result.warnings if w.code == "missing-file"]) == 3
    assert report.result.blueprint.prompts[0].messages[0].content == "hi"


def test_a_device_named_inside_the_folder_is_not_read(tmp_path):
    if not Path("/dev/null").exists():
        pytest.skip("no /dev/null")
    text = ("tests:\n  - id: t\n    criteria: c\n    input: hi\n    expected_output:\n"
            "      - {type: file, value: ./null.md}\n")
    write(tmp_path, {"EVAL.yaml": text})
    os.symlink("/dev/null", tmp_path / "null.md")
    files = collect_companions(tmp_path / "EVAL.yaml", text, root=Path("/"))
    assert dict(files) == {} and "not a regular file" in files.problems["null.md"]


def test_a_problem_no_reader_reports_is_reported_where_the_suite_names_the_file():
    files = Companions()
    files.problems["scripts/grade.py"] = "evalsite may not read it (permission denied)"
    text = ("tests:\n  - id: t\n    criteria: c\n    input: hi\n    assert:\n"
            "      - {type: code_judge, command: [python3, scripts/grade.py]}\n")
    result = parse_any(text, path="EVAL.yaml", files=files)
    [warning] = [w for w in result.warnings if "permission denied" in w.message]
    assert warning.line == 6 and "could not be read" in warning.message


def test_a_read_refused_by_the_file_system_is_a_located_error_even_for_root(tmp_path, monkeypatch):
    from blueprints.spec import companions

    text = ("tests:\n  - id: t\n    criteria: c\n    input: hi\n    assert:\n"
            "      - {name: tone, type: llm_judge, prompt: ./judges/tone.md}\n")
    write(tmp_path, {"EVAL.yaml": text, "judges/tone.md": "Grade {{ answer }}"})

    def refused(path, mode="r", *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(companions, "open", refused, raising=False)
    report = validate_file(tmp_path / "EVAL.yaml", root=tmp_path)
    [error] = [e for e in report.result.errors if e.code == "unreadable-file"]
    assert (error.line, error.path) == (6, "tests[0].assert[0].prompt") and "permission denied" in error.message
