"""Errors and warnings about a blueprint, as data.

Every problem names the place as the author wrote it (``prompts[3].should[1]``),
the 1-based line and column in the source text, what is wrong in plain words,
and, separately, how to fix it when we know. Messages never carry the hint, so
tools that match the upstream's wording can compare ``message`` alone.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True, slots=True)
class Diagnostic:
    severity: Severity
    message: str
    line: int | None = None
    column: int | None = None
    path: str = ""
    hint: str | None = None
    code: str = ""

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def as_dict(self) -> dict:
        data = asdict(self)
        if data["hint"] is None:
            del data["hint"]
        return data

    def format(self, filename: str = "<text>") -> str:
        """``file:line:col: error: message (hint)``, the shape compilers use."""
        where = f"{filename}:{self.line or 1}:{self.column or 1}"
        text = f"{where}: {self.severity}: {self.message}"
        if self.path:
            text += f" [at {self.path}]"
        if self.hint:
            text += f" (hint: {self.hint})"
        return text


def format_path(parts: tuple) -> str:
    """Render a path tuple as the author would write it: ``prompts[3].should[1]``."""
    out: list[str] = []
    for part in parts:
        if isinstance(part, int):
            out.append(f"[{part}]")
        else:
            piece = _key_piece(str(part))
            out.append(piece if not out else "." + piece)
    return "".join(out)


@lru_cache(maxsize=1024)  # a blueprint's few keys (`prompts`, `should`...), asked for every prompt and point
def _key_piece(text: str) -> str:
    simple = text.replace("_", "").replace("-", "").removeprefix("$").isalnum()
    return text if simple else repr(text)
