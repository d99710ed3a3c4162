from pathlib import Path

import pytest

pytest_plugins = ["tests.conftest_services"]

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The shared folder beside the repository (reference, conformance data, corpus)."""
    path = REPO_ROOT.parent / "shared"
    if not path.is_dir():
        pytest.fail(f"expected the shared folder at {path}; clone or link it there")
    return path
