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


# --- the walls as import contracts (.importlinter): imports inside functions count too ---------------------------

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint_imports(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def test_the_import_contracts_hold():
    """The pure packages import no Django, the blueprints app reads runs only through runs/engine, the runs app's
    phases import downwards only, and no package has an import cycle (.importlinter says each in words)."""
    out = _lint_imports(REPO)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "BROKEN" not in out.stdout


def test_the_contracts_see_an_import_inside_a_function(tmp_path):
    """A wall a late import could slip through is no wall: the contracts' tool reads function bodies too."""
    package = tmp_path / "walled"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text("def f():\n    from walled import high\n    return high\n")
    (package / "high.py").write_text("X = 1\n")
    (tmp_path / ".importlinter").write_text(
        "[importlinter]\nroot_package = walled\n\n[importlinter:contract:one]\nname = low never imports high\n"
        "type = forbidden\nsource_modules = walled.low\nforbidden_modules = walled.high\n")
    out = _lint_imports(tmp_path)
    assert out.returncode == 1 and "walled.low -> walled.high" in out.stdout, out.stdout


def _project_modules() -> dict[str, Path]:
    found = {}
    for top in ("blueprints", "runs", "evalsite"):
        for path in (REPO / top).rglob("*.py"):
            if "migrations" in path.parts or path.name.count(".") > 1:
                continue
            name = ".".join(path.relative_to(REPO).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def _absolute(module: str, level: int, here: str, is_package: bool) -> str:
    if not level:
        return module
    base = here.split(".")
    base = base if is_package else base[:-1]
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def test_no_module_imports_another_modules_private_names():
    """A name with a leading underscore belongs to its module; what two modules share gets a public name."""
    import ast

    modules = _project_modules()
    offenders = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        is_package = path.name == "__init__.py"
        imported_modules = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = _absolute(node.module or "", node.level, name, is_package)
                if source not in modules:
                    continue
                for alias in node.names:
                    target = f"{source}.{alias.name}"
                    if target in modules:
                        imported_modules[alias.asname or alias.name] = target
                    elif alias.name.startswith("_") and not alias.name.startswith("__"):
                        offenders.append(f"{path.relative_to(REPO)}:{node.lineno} imports {source}.{alias.name}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in modules and alias.asname:
                        imported_modules[alias.asname] = alias.name
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in imported_modules and node.attr.startswith("_")
                    and not node.attr.startswith("__")):
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno} uses "
                                 f"{imported_modules[node.value.id]}.{node.attr}")
    assert offenders == [], "\n".join(offenders)
