"""The two walls: blueprints/spec and runs/engine never import Django."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PURE_PACKAGES = ["blueprints/spec", "runs/engine"]


@pytest.mark.parametrize("package", PURE_PACKAGES)
def test_no_source_file_mentions_django_imports(package):
    offenders = [
        str(path.relative_to(REPO))
        for path in (REPO / package).rglob("*.py")
        if any(line.lstrip().startswith(("import django", "from django")) for line in path.read_text().splitlines())
    ]
    assert offenders == []


def test_importing_the_pure_packages_loads_no_django():
    modules = [str(p.relative_to(REPO).with_suffix("")).replace("/", ".")
               for package in PURE_PACKAGES for p in (REPO / package).rglob("*.py") if p.name != "__init__.py"]
    code = "import sys\n" + "".join(f"import {m}\n" for m in modules) + \
        "print(sorted(m for m in sys.modules if m == 'django' or m.startswith('django.')))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_blueprints_app_imports_nothing_of_runs_but_its_engine():
    """Imports point one way (docs/architecture.md): the blueprints app may use ``runs.engine``, never the runs app,
    not even inside a function; the run form lives in the runs app and the blueprint page embeds it by address."""
    import ast

    offenders = []
    for path in (REPO / "blueprints").rglob("*.py"):
        if "spec" in path.relative_to(REPO / "blueprints").parts[:1]:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            if isinstance(node, ast.ImportFrom) and node.module == "runs":
                names = [f"runs.{a.name}" for a in node.names]
            offenders += [f"{path.relative_to(REPO)}:{node.lineno} {name}" for name in names
                          if (name == "runs" or name.startswith("runs.")) and not name.startswith("runs.engine")]
    assert offenders == []
