"""Two runs of one blueprint, cell by cell (scores read off each run's matrix), and a word diff of two responses."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from runs.engine.scoring import round2

from .models import Run
from .records import run_matrix
from .spec import parsed_blueprint

COMPARE_PAGE_SIZE = 100


@dataclass
class Change:
    prompt_id: str
    prompt_index: int
    variant_id: str
    before: float | None
    after: float | None
    before_id: int | None
    after_id: int | None

    @property
    def delta(self) -> float | None:
        if self.before is None or self.after is None:
            return None
        return round2(self.after - self.before)


def _cells(run: Run) -> dict[tuple[str, str], tuple[float | None, int, int | None]]:
    """(prompt id, model variant) -> (the matrix's cell score, prompt position, the response it stands for)."""
    matrix = run_matrix(run, parsed_blueprint(run.revision).prompts)
    return {(c.prompt_id, c.variant_id): (c.shown, c.prompt_index, c.response_id) for c in matrix.cells.values()}


def cell_response(run: Run, prompt_id: str, variant_id: str) -> int | None:
    """The response a run's cell stands for (``matrix.representative_trial``), or None."""
    prompts = parsed_blueprint(run.revision).prompts
    index = next((i for i, p in enumerate(prompts) if p.id == prompt_id), None)
    if index is None:
        return None
    cell = run_matrix(run, prompts, indices=[index]).cell(index, variant_id)
    return cell.response_id if cell else None


def compare_runs(base: Run, run: Run) -> list[Change]:
    """Per prompt and model variant, ``base`` -> ``run``, largest regression first; unmatched cells last."""
    before, after = _cells(base), _cells(run)
    changes = []
    for key in {**before, **after}:
        b, a = before.get(key), after.get(key)
        changes.append(Change(prompt_id=key[0], prompt_index=(a or b)[1], variant_id=key[1],
                              before=b[0] if b else None, after=a[0] if a else None,
                              before_id=b[2] if b else None, after_id=a[2] if a else None))
    changes.sort(key=lambda c: (c.delta is None, c.delta if c.delta is not None else 0, c.prompt_index,
                                c.variant_id))
    return changes


# --- a word diff of two responses -----------------------------------------------------------

DIFF_MAX_TOKENS = 20_000


@dataclass
class DiffPiece:
    op: str  # equal, insert, delete
    text: str


def text_diff(before: str, after: str) -> list[DiffPiece]:
    """Words and whitespace that stay, go and come; lines when the texts are too long for a word diff."""
    split = re.compile(r"\s+|[^\s\w]|\w+")
    a, b = split.findall(before or ""), split.findall(after or "")
    if len(a) + len(b) > DIFF_MAX_TOKENS:
        a, b = (before or "").splitlines(keepends=True), (after or "").splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    pieces: list[DiffPiece] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            pieces.append(DiffPiece("equal", "".join(a[i1:i2])))
            continue
        if i2 > i1:
            pieces.append(DiffPiece("delete", "".join(a[i1:i2])))
        if j2 > j1:
            pieces.append(DiffPiece("insert", "".join(b[j1:j2])))
    return pieces
