"""Read settings from the environment, strictly.

An unset or empty variable means the default. A value that cannot be read
raises ImproperlyConfigured naming the variable, so a typo stops the start
instead of quietly turning a feature off. Messages never repeat a secret.
"""

import os
import secrets
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off"})


def _value(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


def env_str(name: str, default: str = "") -> str:
    value = _value(name)
    return default if value is None else value


def env_bool(name: str, default: bool = False) -> bool:
    value = _value(name)
    if value is None:
        return default
    word = value.lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ImproperlyConfigured(
        f"{name} must be one of 1/0, true/false, yes/no, on/off; got {value!r}."
    )


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    value = _value(name)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number; got {value!r}.") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}; got {number}.")
    return number


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    value = _value(name)
    if value is None:
        return default
    try:
        number = float(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number; got {value!r}.") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise ImproperlyConfigured(f"{name} must be a finite number; got {value!r}.")
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}; got {number}.")
    return number


def env_list(name: str, default: list[str] | tuple[str, ...] = ()) -> list[str]:
    """A comma-separated list; blanks around items and empty items are dropped."""
    value = _value(name)
    if value is None:
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]


def env_secret(name: str, default: str = "") -> str:
    """A secret from NAME, or from the file that NAME_FILE points at."""
    file_name = f"{name}_FILE"
    value = os.environ.get(name, "")
    path = _value(file_name)
    if value and path:
        raise ImproperlyConfigured(f"Set {name} or {file_name}, not both.")
    if path:
        try:
            value = Path(path).read_text(encoding="utf-8").rstrip("\r\n")
        except OSError as error:
            raise ImproperlyConfigured(
                f"{file_name} points at {path}, which cannot be read ({error.strerror})."
            ) from None
        if not value:
            raise ImproperlyConfigured(f"{file_name} points at {path}, which is empty.")
    return value or default


def sqlite_config(path: Path | str) -> dict:
    # WAL lets the web server read while a worker writes; IMMEDIATE takes the
    # write lock at BEGIN, so a busy database waits (timeout, in seconds)
    # instead of failing halfway through a transaction.
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(path),
        # Tests use a file too (test_db.sqlite3 beside it; pytest-xdist adds _gw0, _gw1...), not Django's shared
        # in-memory database: its table locks fail at once instead of waiting, which a run's threads meet under load.
        "TEST": {"NAME": str(Path(path).with_name("test_" + Path(path).name))},
        "OPTIONS": {
            "init_command": "PRAGMA journal_mode=WAL;PRAGMA synchronous=NORMAL",
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
        },
    }


def parse_database_url(url: str, *, base_dir: Path, name: str = "DATABASE_URL") -> dict:
    """Turn postgres://user:pass@host:port/db or sqlite:///file into DATABASES["default"].

    A relative SQLite path is taken from base_dir. Query parameters of a
    PostgreSQL URL (sslmode=require, say) become connection OPTIONS.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme in ("postgres", "postgresql"):
        try:
            port = parts.port
        except ValueError:
            raise ImproperlyConfigured(f"{name} has a port that is not a number.") from None
        database = unquote(parts.path.lstrip("/"))
        if not database:
            raise ImproperlyConfigured(
                f"{name} names no database: end it with /NAME, "
                "as in postgres://user:password@localhost:5432/evalsite."
            )
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": database,
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": unquote(parts.hostname or ""),
            "PORT": str(port or ""),
            "OPTIONS": dict(parse_qsl(parts.query)),
            "CONN_MAX_AGE": 60,
            "CONN_HEALTH_CHECKS": True,
        }
    if scheme == "sqlite":
        # sqlite:///relative.db and sqlite:////absolute/path.db, as elsewhere.
        path = unquote(parts.path)[1:]
        if parts.netloc or not path:
            raise ImproperlyConfigured(
                f"{name} names no SQLite file: write sqlite:///relative/path.db "
                "or sqlite:////absolute/path.db."
            )
        return sqlite_config(base_dir / path)
    if not scheme:
        raise ImproperlyConfigured(
            f"{name} is not a URL: write postgres://user:password@host:port/name "
            "or sqlite:///path."
        )
    raise ImproperlyConfigured(
        f"{name} has the scheme {scheme!r}; evalsite supports postgres:// "
        "(or postgresql://) and sqlite://."
    )


def persisted_secret_key(path: Path) -> str:
    """Read the key at path, or create it there, readable by the owner only."""
    if not path.exists():
        draft = path.with_name(f".{path.name}.{os.getpid()}")
        descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(secrets.token_urlsafe(50) + "\n")
        # runserver and qcluster start together: link() is atomic, so the
        # first one wins and both read the same key.
        try:
            os.link(draft, path)
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    key = path.read_text(encoding="utf-8").strip()
    if not key:
        raise ImproperlyConfigured(
            f"{path} is empty: delete it to have a new secret key made, "
            "or set EVALSITE_SECRET_KEY."
        )
    return key
