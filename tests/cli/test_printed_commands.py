"""Every command the app prints to a person (pages, refusals, hints) works as printed: it names the
project's own Python (.venv/bin/python, as the README says) and a management command that exists."""

from __future__ import annotations

import re
from pathlib import Path

from django.core.management import get_commands

ROOT = Path(__file__).resolve().parents[2]
PRINTED = [*ROOT.glob("templates/**/*.html"), ROOT / "runs/start.py", ROOT / "runs/views.py",
           ROOT / "blueprints/views.py", ROOT / "blueprints/importing.py", *ROOT.glob("blueprints/spec/importers/*.py")]
COMMAND = re.compile(r"(\S*python\S*)\s+manage\.py\s+([a-z_]+)")


def test_every_printed_command_names_the_venv_python_and_an_existing_command():
    found = []
    for path in PRINTED:
        for python, name in COMMAND.findall(path.read_text(encoding="utf-8")):
            found.append((path.name, python, name))
            assert python.endswith(".venv/bin/python"), f"{path}: '{python} manage.py {name}' does not work as printed"
            assert name in get_commands(), f"{path}: there is no command '{name}'"
    assert len(found) >= 3  # the import page, the missing-collection refusal, the importer's hint
