from pathlib import Path

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from evalsite.env import (
    env_bool,
    env_int,
    env_list,
    env_secret,
    env_str,
    parse_database_url,
    persisted_secret_key,
)

BASE = Path("/srv/evalsite")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1", True),
        ("true", True),
        ("True", True),
        ("yes", True),
        ("ON", True),
        (" on ", True),
        ("0", False),
        ("false", False),
        ("no", False),
        ("Off", False),
    ],
)
def test_env_bool_reads_the_usual_words(monkeypatch, value, expected):
    monkeypatch.setenv("EVALSITE_FLAG", value)

    assert env_bool("EVALSITE_FLAG") is expected


@pytest.mark.parametrize("value", ["2", "y", "enabled", "truee", "-1"])
def test_env_bool_rejects_anything_else_naming_the_variable(monkeypatch, value):
    monkeypatch.setenv("EVALSITE_FLAG", value)

    with pytest.raises(ImproperlyConfigured, match="EVALSITE_FLAG"):
        env_bool("EVALSITE_FLAG")


@pytest.mark.parametrize("value", [None, "", "   "])
def test_an_unset_or_empty_variable_means_the_default(monkeypatch, value):
    if value is None:
        monkeypatch.delenv("EVALSITE_X", raising=False)
    else:
        monkeypatch.setenv("EVALSITE_X", value)

    assert env_bool("EVALSITE_X", True) is True
    assert env_int("EVALSITE_X", 7) == 7
    assert env_str("EVALSITE_X", "d") == "d"
    assert env_list("EVALSITE_X", ["a"]) == ["a"]


def test_env_int_rejects_a_word_naming_the_variable(monkeypatch):
    monkeypatch.setenv("EVALSITE_WORKERS", "two")

    with pytest.raises(ImproperlyConfigured, match="EVALSITE_WORKERS must be a whole number"):
        env_int("EVALSITE_WORKERS", 2)


def test_env_int_enforces_its_minimum(monkeypatch):
    monkeypatch.setenv("EVALSITE_WORKERS", "0")

    with pytest.raises(ImproperlyConfigured, match="EVALSITE_WORKERS must be at least 1"):
        env_int("EVALSITE_WORKERS", 2, minimum=1)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("a", ["a"]),
        ("a,b", ["a", "b"]),
        (" a , b ,, ", ["a", "b"]),
        ("openrouter:openai/gpt-4.1-mini", ["openrouter:openai/gpt-4.1-mini"]),
    ],
)
def test_env_list_splits_on_commas_and_drops_blanks(monkeypatch, value, expected):
    monkeypatch.setenv("EVALSITE_LIST", value)

    assert env_list("EVALSITE_LIST") == expected


def test_a_secret_can_come_from_a_file(monkeypatch, tmp_path):
    secret = tmp_path / "token"
    secret.write_text("s3cret\n")
    monkeypatch.delenv("EVALSITE_API_TOKEN", raising=False)
    monkeypatch.setenv("EVALSITE_API_TOKEN_FILE", str(secret))

    assert env_secret("EVALSITE_API_TOKEN") == "s3cret"


def test_a_secret_set_both_ways_is_refused(monkeypatch, tmp_path):
    secret = tmp_path / "token"
    secret.write_text("s3cret")
    monkeypatch.setenv("EVALSITE_API_TOKEN", "other")
    monkeypatch.setenv("EVALSITE_API_TOKEN_FILE", str(secret))

    with pytest.raises(ImproperlyConfigured, match="EVALSITE_API_TOKEN or EVALSITE_API_TOKEN_FILE"):
        env_secret("EVALSITE_API_TOKEN")


def test_a_missing_secret_file_is_named_in_the_error(monkeypatch, tmp_path):
    monkeypatch.delenv("EVALSITE_API_TOKEN", raising=False)
    monkeypatch.setenv("EVALSITE_API_TOKEN_FILE", str(tmp_path / "absent"))

    with pytest.raises(ImproperlyConfigured, match="EVALSITE_API_TOKEN_FILE points at .*absent"):
        env_secret("EVALSITE_API_TOKEN")


def test_a_postgres_url_becomes_a_postgres_database():
    config = parse_database_url(
        "postgres://eval%40user:p%3Ass@db.example:5433/evalsite?sslmode=require", base_dir=BASE
    )

    assert config["ENGINE"] == "django.db.backends.postgresql"
    assert (config["NAME"], config["USER"], config["PASSWORD"]) == ("evalsite", "eval@user", "p:ss")
    assert (config["HOST"], config["PORT"]) == ("db.example", "5433")
    assert config["OPTIONS"] == {"sslmode": "require"}


def test_a_postgresql_url_without_port_or_password_leaves_them_empty():
    config = parse_database_url("postgresql://localhost/evalsite", base_dir=BASE)

    assert (config["HOST"], config["PORT"], config["USER"], config["PASSWORD"]) == (
        "localhost",
        "",
        "",
        "",
    )


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite:///data/db.sqlite3", "/srv/evalsite/data/db.sqlite3"),
        ("sqlite:////var/lib/evalsite/db.sqlite3", "/var/lib/evalsite/db.sqlite3"),
    ],
)
def test_a_sqlite_url_becomes_a_sqlite_database_in_wal_mode(url, expected):
    config = parse_database_url(url, base_dir=BASE)

    assert config["ENGINE"] == "django.db.backends.sqlite3"
    assert config["NAME"] == expected
    assert "journal_mode=WAL" in config["OPTIONS"]["init_command"]


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://user:hunter2@host/db", "DATABASE_URL has the scheme 'mysql'"),
        ("user:hunter2@host/db", "DATABASE_URL"),
        ("just-a-name", "DATABASE_URL is not a URL"),
        ("postgres://user:hunter2@host:5432/", "DATABASE_URL names no database"),
        ("postgres://user:hunter2@host:port/db", "DATABASE_URL has a port"),
        ("sqlite://", "DATABASE_URL names no SQLite file"),
    ],
)
def test_a_database_url_that_cannot_be_used_is_explained_without_its_password(url, message):
    with pytest.raises(ImproperlyConfigured, match=message) as raised:
        parse_database_url(url, base_dir=BASE)

    assert "hunter2" not in str(raised.value)


def test_the_secret_key_is_made_once_and_then_kept(tmp_path):
    path = tmp_path / "secret_key"

    first = persisted_secret_key(path)

    assert len(first) >= 50
    assert persisted_secret_key(path) == first
    assert path.stat().st_mode & 0o777 == 0o600
    assert list(tmp_path.iterdir()) == [path]


def test_the_default_database_is_sqlite_in_wal_mode_with_a_busy_timeout():
    database = settings.DATABASES["default"]

    if database["ENGINE"] != "django.db.backends.sqlite3":
        pytest.skip("DATABASE_URL points at another database")
    assert database["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
    assert database["OPTIONS"]["timeout"] > 0
    assert "journal_mode=WAL" in database["OPTIONS"]["init_command"]


def test_tasks_stop_before_they_are_handed_out_again():
    assert settings.Q_CLUSTER["timeout"] < settings.Q_CLUSTER["retry"]
    assert settings.Q_CLUSTER["max_attempts"] > 0


def test_every_process_collects_garbage_at_the_configured_threshold(tmp_path):
    """``EVALSITE_GC_THRESHOLD`` is the collector's first threshold in any process that loads the settings (web,
    worker, command); the others stay Python's. A value that is not a whole number stops the start, naming it."""
    import gc
    import os
    import subprocess
    import sys

    assert gc.get_threshold()[0] == settings.EVALSITE_GC_THRESHOLD == 20_000  # this process: the default
    code = ("import django, gc; django.setup(); from django.conf import settings; "
            "print(*gc.get_threshold(), settings.EVALSITE_GC_THRESHOLD)")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "evalsite.settings", "EVALSITE_DATA_DIR": str(tmp_path),
           "EVALSITE_GC_THRESHOLD": "5000"}
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["5000", *map(str, gc.get_threshold()[1:]), "5000"]
    env["EVALSITE_GC_THRESHOLD"] = "lots"
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True)
    assert out.returncode != 0 and "EVALSITE_GC_THRESHOLD must be a whole number" in out.stderr


def test_a_process_freezes_its_heap_at_exit_so_its_last_collection_walks_nothing(tmp_path):
    """Python's last collection at exit walked a finished command's whole heap (0.3-0.4 s after a run of 2,000
    items). Any process that loads the settings freezes the heap at exit instead (``gc.freeze``); an exit handler
    registered before the settings runs after theirs and sees it frozen, and nothing is frozen before the exit."""
    import os
    import subprocess
    import sys

    code = ("import atexit, gc\n"
            "atexit.register(lambda: print('at exit:', gc.get_freeze_count() > 0))\n"
            "import django\n"
            "django.setup()\n"
            "print('before exit:', gc.get_freeze_count() > 0)\n")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "evalsite.settings", "EVALSITE_DATA_DIR": str(tmp_path)}
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["before exit: False", "at exit: True"]
