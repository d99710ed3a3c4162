"""Files a command writes (``--json OUT``): the path is checked before any work is done, and written so that a
link at OUT is replaced, never followed, and a failed write leaves no half file."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


class OutputRefused(ValueError):
    """OUT cannot be written: the message says why and what to do."""


def checked_output(path: str) -> Path:
    """``path`` as a file this command may write, or ``OutputRefused`` (before any run is made or any call sent)."""
    target = Path(path)
    if not path or path.endswith(os.sep):
        raise OutputRefused(f"{path!r}: give a file name to write, not a folder")
    if "\x00" in path:  # every check below would read it as "nothing there", and the write would then fail
        raise OutputRefused(f"{path!r}: a path cannot hold a NUL character; give another file name")
    if target.is_symlink():
        raise OutputRefused(f"{path}: is a symbolic link; give the path of a regular file (links are not followed)")
    if target.is_dir():
        raise OutputRefused(f"{path}: is a folder; give a file name inside it, e.g. {target / 'out.json'}")
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise OutputRefused(f"{path}: the folder {parent} does not exist; create it first")
    if not os.access(parent, os.W_OK):
        raise OutputRefused(f"{path}: the folder {parent} cannot be written")
    if target.exists() and not target.is_file():
        raise OutputRefused(f"{path}: is not a regular file")
    return target


def write_text(target: Path, text: str) -> None:
    """Write ``text`` to ``target`` through a temporary file beside it, then rename it into place."""
    target = checked_output(str(target))
    fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent if str(target.parent) else ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
            file.write("\n")
        os.replace(temporary, target)
    except OSError as error:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise OutputRefused(f"{target}: could not be written ({error.strerror or error})") from None
