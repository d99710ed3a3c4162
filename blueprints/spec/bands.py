"""Analytic rubric bands (``score_ranges``): a judge scores a criterion 0-10, each band says what a range means.

Two spellings, as AgentV writes them (reference 2.2):

* a list of ``{score_range: [low, high], outcome: text}`` with whole numbers 0-10;
* a map ``{0: text, 5: text, 10: text}`` whose keys are lower bounds: it must start
  at 0, each band ends one below the next key, and the last ends at 10.

``read_score_ranges`` returns the bands and the problems, each problem as
``(message, key or index inside the value or None, hint)`` so that a caller can
place it.
"""

from __future__ import annotations

from .schema import ScoreBand

Problem = tuple[str, object, str | None]


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) or (
        isinstance(value, float) and value.is_integer())


def _key_number(key: object) -> int | None:
    if isinstance(key, bool):
        return None
    if isinstance(key, int):
        return key
    if isinstance(key, str) and key.strip().isdigit():
        return int(key.strip())
    return None


def read_score_ranges(value: object) -> tuple[list[ScoreBand], list[Problem]]:
    problems: list[Problem] = []
    bands: list[ScoreBand] = []
    if isinstance(value, dict):
        keyed = []
        for key, text in value.items():
            low = _key_number(key)
            if low is None or not 0 <= low <= 10:
                problems.append((f"a `score_ranges` key must be a whole number from 0 to 10, not {key!r}", key,
                                 "write lower bounds such as `0:`, `5:`, `10:`"))
                continue
            if not isinstance(text, str) or not text.strip():
                problems.append(("each band of `score_ranges` needs a description", key, None))
                continue
            keyed.append((low, text))
        keyed.sort()
        if keyed and keyed[0][0] != 0:
            problems.append(("`score_ranges` written as a map must start at 0", None,
                             "add a `0:` band saying what a score of 0 means"))
        for i, (low, text) in enumerate(keyed):
            high = keyed[i + 1][0] - 1 if i + 1 < len(keyed) else 10
            bands.append(ScoreBand(low=low, high=high, text=text.strip()))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            band_range = item.get("score_range") if isinstance(item, dict) else None
            text = item.get("outcome", item.get("description")) if isinstance(item, dict) else None
            if not (isinstance(band_range, list) and len(band_range) == 2 and all(_whole(x) for x in band_range)
                    and 0 <= band_range[0] <= band_range[1] <= 10):
                problems.append(("each band needs `score_range: [low, high]` with whole numbers, 0 <= low <= high <= 10",
                                 index, "for example `- score_range: [0, 3]` with `outcome: ...`"))
                continue
            if not isinstance(text, str) or not text.strip():
                problems.append(("each band of `score_ranges` needs an `outcome` saying what the range means", index,
                                 None))
                continue
            bands.append(ScoreBand(low=int(band_range[0]), high=int(band_range[1]), text=text.strip()))
        bands.sort(key=lambda b: b.low)
        for before, after in zip(bands, bands[1:]):
            if after.low <= before.high:
                problems.append((f"score bands {before.low}-{before.high} and {after.low}-{after.high} overlap", None,
                                 "make each score belong to one band"))
    else:
        problems.append(("`score_ranges` must be a list of `{score_range: [low, high], outcome}` or a map of lower "
                         "bounds to descriptions", None, None))
    if not bands and not problems:
        problems.append(("`score_ranges` is empty", None, "add at least one band, or remove `score_ranges`"))
    return bands, problems


def uncovered(bands: list[ScoreBand]) -> list[int]:
    """Scores 0-10 that no band describes."""
    return [n for n in range(11) if not any(b.low <= n <= b.high for b in bands)]
