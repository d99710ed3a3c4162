"""Blueprint files on disk: finding them and validating each one."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Mapping

from .collections import lookup_for_file, resolve_models
from .companions import collect_companions
from .dialects import companion_kind, parse_any
from .diagnostics import Diagnostic
from .limits import DEFAULT_LIMITS, Limits
from .parse import ParseResult, detect_format
from .source import SourceError, load

BLUEPRINT_SUFFIXES = (".yml", ".yaml", ".json")


@dataclass
class FileReport:
    path: str
    result: ParseResult
    model_count: int

    @property
    def ok(self) -> bool:
        return self.result.ok


def iter_blueprint_files(paths: Iterable[str | Path]) -> Iterator[Path]:
    """Files as given, and folders searched recursively, skipping `models/` collection folders and the
    companion files of other suites (AI Eval prompt files, AgentV test rows), which come with their suites."""
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for child in sorted(path.rglob("*")):
                if (child.is_file() and child.suffix.lower() in BLUEPRINT_SUFFIXES
                        and "models" not in child.relative_to(path).parts[:-1]
                        and not any(part.startswith(".") for part in child.relative_to(path).parts)
                        and not _is_companion(child)):
                    yield child
        else:
            yield path


def _is_companion(path: Path) -> bool:
    try:
        return companion_kind(read_text(path), str(path)) is not None
    except (OSError, UnicodeDecodeError):
        return False


def read_text(path: Path) -> str:
    data = path.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    return data.decode("utf-8")


def validate_file(path: Path, *, stored_collections: Mapping[str, list[str]] | None = None,
                  call_hosts: Iterable[str] = (), root: Path | None = None,
                  limits: Limits = DEFAULT_LIMITS) -> FileReport:
    """Validate one file in any dialect; the files a suite names are read from beside it (inside ``root``:
    the current folder when the file is below it, else the file's own folder)."""
    try:
        text = read_text(path)
    except FileNotFoundError:
        return _failed(path, "file not found", "check the path")
    except UnicodeDecodeError as exc:
        return _failed(path, f"the file is not UTF-8 text (byte {exc.start})", "save it as UTF-8")
    except OSError as exc:
        return _failed(path, f"cannot read the file: {exc.strerror}", None)
    lookup = lookup_for_file(path, stored_collections)
    if root is None:
        here = Path.cwd().resolve()
        root = here if here in Path(path).resolve().parents else None
    try:
        loaded = load(text, detect_format(text, str(path)), limits)
    except SourceError:
        loaded = None  # parse_any reports the syntax error where it is
    files = collect_companions(path, text, root, loaded=loaded) if loaded is not None else {}
    result = parse_any(text, path=str(path), files=files, collections=lookup, call_hosts=call_hosts,
                       loaded=loaded, limits=limits)
    models = 0
    if result.blueprint is not None:
        resolved, _ = resolve_models(result.blueprint.models if result.blueprint.models_given else [], lookup)
        models = len(resolved)
    return FileReport(str(path), result, models)


def _failed(path: Path, message: str, hint: str | None) -> FileReport:
    diag = Diagnostic("error", message, 1, 1, "", hint, "file")
    return FileReport(str(path), ParseResult(None, [diag], []), 0)
