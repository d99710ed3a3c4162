"""The engine takes its configuration as a value: nothing under runs/engine or blueprints/spec reads the
environment or imports Django, and what the settings say reaches the engine through engine_config()."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PURE = sorted([*(ROOT / "runs" / "engine").rglob("*.py"), *(ROOT / "blueprints" / "spec").rglob("*.py")])


@pytest.mark.parametrize("path", PURE, ids=[str(p.relative_to(ROOT)) for p in PURE])
def test_no_environment_and_no_django_in_the_engine_and_the_format(path):
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os":
            assert node.attr not in ("environ", "getenv", "putenv"), f"{path.name}:{node.lineno} reads os.{node.attr}"
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            assert not any(n == "django" or n.startswith("django.") for n in names), f"{path.name}:{node.lineno}"


def test_the_settings_reach_the_engine(settings, monkeypatch):
    from evalsite.engine import engine_config

    settings.EVALSITE_CALL_HOSTS = ["Scores.Example.org", " 127.0.0.1:8123 "]
    settings.EVALSITE_DEFAULT_JUDGES = ["openai:judge-x"]
    settings.EVALSITE_BACKUP_JUDGE = ""
    settings.EVALSITE_ITEMS_IN_FLIGHT = 7
    settings.EVALSITE_BLUEPRINT_ENV = ["SCORE_KEY"]
    monkeypatch.setenv("SCORE_KEY", "k-1")
    monkeypatch.setenv("OTHER_SECRET", "never")
    config = engine_config()
    assert config.call_hosts == {"scores.example.org", "127.0.0.1:8123"}
    assert config.default_judges == ("openai:judge-x",) and config.backup_judge is None
    assert config.items_in_flight == 7 and config.limits is settings.EVALSITE_LIMITS
    assert config.providers.blueprint_env == {"SCORE_KEY": "k-1"}  # only what the operator allowed
    assert "k-1" not in repr(config)  # values of the blueprint environment never show in a log
