"""Session fixtures for tests that need a real PostgreSQL or Redis (see docs/testing.md).

Registered from tests/conftest.py. Each server starts the first time a test
asks for it and stops when the session ends, whatever the tests did. Missing
binaries fail the test with the command that installs them: a silent skip
would let CI pass without ever running these tests.
"""

from __future__ import annotations

import uuid

import pytest

from tests.services import ServiceError, start_postgres, start_redis


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "services: needs a real PostgreSQL and/or Redis (started by the postgres_url and "
        "redis_url fixtures; scripts/ensure-services.sh installs them)",
    )


def _serve(start):
    try:
        service = start()
    except ServiceError as error:
        pytest.fail(str(error), pytrace=False)
    try:
        yield service.url
    finally:
        service.stop()


@pytest.fixture(scope="session")
def postgres_url():
    """postgres://evalsite:PASSWORD@127.0.0.1:PORT/evalsite, a superuser on a throwaway cluster."""
    yield from _serve(start_postgres)


@pytest.fixture(scope="session")
def redis_url():
    """redis://127.0.0.1:PORT/0 on a throwaway redis-server with no persistence."""
    yield from _serve(start_redis)


@pytest.fixture
def database_url(postgres_url):
    """A new, empty database on the session's PostgreSQL, dropped afterwards."""
    import psycopg

    name = f"evalsite_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield postgres_url.rsplit("/", 1)[0] + "/" + name
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
