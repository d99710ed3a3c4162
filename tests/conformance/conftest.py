import pytest

from .matchers import CONFORMANCE_DIR, load_records


@pytest.fixture(scope="session")
def conformance():
    """Load one shared conformance file by name: conformance("tool_trace.json")."""
    if not CONFORMANCE_DIR.is_dir():
        pytest.fail(f"expected the conformance records at {CONFORMANCE_DIR}")
    return load_records
