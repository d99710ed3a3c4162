"""The extension keys evalsite adds to Weval blueprints: verdicts, gates, per-check minimums, trials, bands.

None of them exists upstream; each is optional and, when absent, changes nothing.
docs/blueprints.md ("Extension keys") documents them:

* header or prompt: ``threshold: 0.8`` (pass or fail), or ``verdicts: {pass: 0.8,
  borderline: 0.6}``; ``trials: 3``, ``trial_aggregation: mean | best | pass_at_k``,
  ``trial_threshold: 0.8`` (pass_at_k only). A prompt's value wins over the header's. ``pass_at_k`` with no
  pass mark (no ``threshold``, ``verdicts``, gate or minimum) is a warning: its trials have no verdict to count.
* point objects: ``required: true`` (a gate at the pass mark, 0.8 unless the verdicts
  say otherwise) or ``required: 0.7``, which makes the point a check of its own;
  ``min_score: 0.5`` (the point below it fails the verdict); on judged points
  ``score_ranges`` (0-10 bands, see ``bands.py``).

``Extensions`` is one of the parser's readers (see parse.py); it reports through the shared ``Notes``
and keeps the checks and verdicts of the prompt being read.
"""

from __future__ import annotations

import json
from typing import Any

from .bands import read_score_ranges, uncovered
from .functions import is_finite_number
from .notes import Notes, choice_hint
from .notes import short, type_name
from .schema import TRIAL_AGGREGATIONS, Check, Point, SimulatedUser, Verdicts

PASS_FAIL_KEYS = ("threshold", "verdicts", "trials", "trial_aggregation", "trial_threshold")
POINT_EXTENSION_KEYS = ("required", "min_score", "score_ranges")
MAX_TRIALS = 100
SIMULATED_USER_KEYS = ("model", "persona", "goal", "first_message", "stop", "max_turns")
MAX_SIMULATED_TURNS = 50
MAX_SIMULATOR_TEXT = 20_000  # characters of a persona, goal, first message or stop phrase
# Stop points are checked between turns, inside generation: only local, deterministic functions (no script, no
# outside call, no metric of the whole response, no tool trace).
STOP_POINT_REFUSED = frozenset({"js", "call", "code_judge", "latency_under", "cost_under", "tokens_under",
                                "efficiency", "llm_calls_under", "tool_called", "tool_args_match", "tool_call_count_between",
                                "tool_call_order", "required_tools", "prohibited_tools", "max_calls",
                                "tool_trajectory", "tool_calls_match"})
DEFAULT_PASS = 0.8


def _fraction(value: Any) -> bool:
    return is_finite_number(value) and 0 <= value <= 1


class Extensions:
    """Reads the pass/fail and trial keys (header and prompts) and the point extension keys."""

    def __init__(self, notes: Notes):
        self.notes = notes
        self.error, self.warn = notes.error, notes.warn
        self.checks: list[Check] = []  # the prompt being read: its gates and minimums
        self.verdicts: Verdicts | None = None  # the prompt being read: its pass mark
        self.warned_header_pass_at_k = False

    def start_prompt(self, verdicts: Verdicts | None) -> None:
        self.verdicts, self.checks = verdicts, []

    def read_pass_fail(self, raw: dict, path: tuple, defaults: dict | None = None) -> dict:
        """``{verdicts, trials, trial_aggregation, trial_threshold}`` from ``raw``, falling back to ``defaults``."""
        out = dict(defaults or {"verdicts": None, "trials": None, "trial_aggregation": None,
                                "trial_threshold": None})
        if raw.get("threshold") is not None and raw.get("verdicts") is not None:
            self.error("`threshold` and `verdicts` both given; use one of them", raw, "verdicts", (*path, "verdicts"),
                       "`threshold: 0.8` means pass or fail at 0.8; `verdicts:` also gives a borderline band",
                       "verdicts", at_key=True)
        elif raw.get("threshold") is not None:
            value = raw["threshold"]
            if _fraction(value):
                out["verdicts"] = Verdicts(pass_at=float(value), borderline_at=None)
            else:
                self.error(f"`threshold` must be a number from 0 to 1, not {value!r}", raw, "threshold",
                           (*path, "threshold"), "for example `threshold: 0.8`", "verdicts")
        elif raw.get("verdicts") is not None:
            verdicts = self._read_verdicts(raw["verdicts"], raw, (*path, "verdicts"))
            if verdicts is not None:
                out["verdicts"] = verdicts
        if raw.get("trials") is not None:
            value = raw["trials"]
            if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_TRIALS:
                out["trials"] = value
            else:
                self.error(f"`trials` must be a whole number from 1 to {MAX_TRIALS}, not {value!r}", raw, "trials",
                           (*path, "trials"), "`trials: 3` runs every model on the prompt three times", "trials")
        if raw.get("trial_aggregation") is not None:
            value = raw["trial_aggregation"]
            if value in TRIAL_AGGREGATIONS:
                out["trial_aggregation"] = value
            else:
                self.error(f"`trial_aggregation` must be one of {', '.join(TRIAL_AGGREGATIONS)}, not {value!r}", raw,
                           "trial_aggregation", (*path, "trial_aggregation"),
                           choice_hint(value, TRIAL_AGGREGATIONS), "trials")
        if raw.get("trial_threshold") is not None:
            value = raw["trial_threshold"]
            if _fraction(value):
                out["trial_threshold"] = float(value)
            else:
                self.error(f"`trial_threshold` must be a number from 0 to 1, not {value!r}", raw, "trial_threshold",
                           (*path, "trial_threshold"), code="trials")
        return out

    def check_pass_at_k(self, prompt, label: str, raw: dict, path: tuple, header: dict | None) -> None:
        """Warn when a prompt's trials are combined by ``pass_at_k`` but nothing gives its trials a verdict:
        pass@k counts the trials that passed, so without a pass mark its cells never pass nor fail (and every
        page says "no threshold set"). Located at the prompt's ``trial_aggregation``, or once at the header's."""
        if prompt.trial_aggregation != "pass_at_k" or prompt.has_verdicts:
            return
        fix = ("add `threshold: 0.8` (a trial passes at or above it) to the prompt or the header, or use "
               "`trial_aggregation: mean` to average the trials without a verdict")
        if raw.get("trial_aggregation") is not None:
            self.warn(f"prompt '{label}' combines its trials by `pass_at_k` but sets no threshold to pass, so no "
                      "trial and no cell can pass", raw, "trial_aggregation", (*path, "trial_aggregation"), fix,
                      "trials", at_key=True)
        elif isinstance(header, dict) and header.get("trial_aggregation") is not None \
                and not self.warned_header_pass_at_k:
            self.warned_header_pass_at_k = True
            self.warn(f"the header combines trials by `pass_at_k` but sets no threshold to pass (prompt '{label}' "
                      "has none either), so no trial and no cell can pass", header, "trial_aggregation",
                      ("trial_aggregation",), fix, "trials", at_key=True)

    def _read_verdicts(self, value, holder, path) -> Verdicts | None:
        if not isinstance(value, dict):
            self.error("`verdicts` must be a mapping such as `{pass: 0.8, borderline: 0.6}`", holder, "verdicts", path,
                       code="verdicts")
            return None
        self.notes.unknown_keys(value, ("pass", "borderline"), path, "`verdicts`")
        pass_at = value.get("pass", DEFAULT_PASS)
        borderline = value.get("borderline")
        ok = True
        for key, number in (("pass", pass_at), ("borderline", borderline)):
            if number is not None and not _fraction(number):
                self.error(f"`verdicts.{key}` must be a number from 0 to 1, not {number!r}", value, key, (*path, key),
                           code="verdicts")
                ok = False
        if ok and borderline is not None and borderline > pass_at:
            self.error(f"the borderline mark ({borderline}) is above the pass mark ({pass_at})", value, "borderline",
                       (*path, "borderline"), "borderline scores lie below the pass mark, e.g. pass 0.8, borderline 0.6",
                       "verdicts")
            ok = False
        if not ok:
            return None
        return Verdicts(pass_at=float(pass_at), borderline_at=None if borderline is None else float(borderline))

    # --- points ---------------------------------------------------------------------------------

    def point_extensions(self, item: dict, path: tuple, point: Point | None) -> Point | None:
        """Apply ``required``, ``min_score`` and ``score_ranges`` of a point object to its point."""
        if point is None or not any(k in item for k in POINT_EXTENSION_KEYS):
            return point
        ok = True
        gate = None
        if "required" in item and item["required"] is not None and item["required"] is not False:
            value = item["required"]
            if value is True:
                verdicts = self.verdicts
                gate = verdicts.pass_at if verdicts is not None else DEFAULT_PASS
            elif is_finite_number(value) and 0 < value <= 1:
                gate = float(value)
            else:
                self.error(f"`required` must be true or a minimum score above 0 and at most 1, not {value!r}", item,
                           "required", (*path, "required"),
                           "`required: true` gates at the pass mark; `required: 0.7` at 0.7", "gate")
                ok = False
        min_score = None
        if item.get("min_score") is not None:
            value = item["min_score"]
            if _fraction(value):
                min_score = float(value)
            else:
                self.error(f"`min_score` must be a number from 0 to 1, not {value!r}", item, "min_score",
                           (*path, "min_score"), code="min-score")
                ok = False
        if item.get("score_ranges") is not None:
            if point.fn:
                self.error("`score_ranges` applies to judged points only; a function point has its own score", item,
                           "score_ranges", (*path, "score_ranges"), "remove `score_ranges` here", "score-ranges",
                           at_key=True)
                ok = False
            else:
                bands = self.located_score_ranges(item["score_ranges"], item, "score_ranges", (*path, "score_ranges"))
                if bands is None:
                    ok = False
                else:
                    point.score_ranges = bands
        if not ok:
            return None
        point.min_score = min_score
        if gate is not None:
            label = point.text or (f"${point.fn}" + (f": {json.dumps(point.fn_args, ensure_ascii=False)}"
                                                     if point.has_args else ""))
            point.check_id = self.add_check(label=label[:80], kind="point", gate=gate, min_score=None)
        return point

    def located_score_ranges(self, value, holder, key, path):
        bands, problems = read_score_ranges(value)
        for message, where, hint in problems:
            if where is not None and isinstance(value, (dict, list)):
                self.error(message, value, where, (*path, where), hint, "score-ranges",
                           at_key=isinstance(value, dict))
            else:
                self.error(message, holder, key, path, hint, "score-ranges")
        if problems:
            return None
        gaps = uncovered(bands)
        if gaps:
            self.warn(f"no band describes the score{'s' if len(gaps) > 1 else ''} {', '.join(map(str, gaps))}; the "
                      "judge is shown only the bands you wrote", holder, key, path,
                      "cover 0 to 10 so every score the judge may give has a meaning", "score-ranges")
        return bands

    def add_check(self, *, label: str, kind: str, gate: float | None, min_score: float | None,
                  check_id: str | None = None) -> str:
        checks = self.checks
        check_id = check_id or f"check_{len(checks)}"
        checks.append(Check(id=check_id, label=label, kind=kind, gate=gate, min_score=min_score))
        return check_id


def read_simulated_user(notes: Notes, raw: dict, path: tuple, label: str, read_point) -> SimulatedUser | None:
    """A prompt's ``simulated_user`` (docs/blueprints.md "Simulated users"); ``read_point`` is the point reader's
    ``read_point``, for a ``stop: {point: ...}``. Every problem is located at its key, with the fix."""
    value = raw["simulated_user"]
    spath = (*path, "simulated_user")
    example = ("for example `simulated_user: {model: openai:gpt-4.1-mini, goal: get a refund, "
               "first_message: Hi, stop: {phrase: DONE}, max_turns: 6}`")
    if not isinstance(value, dict):
        notes.error(f"prompt '{label}': `simulated_user` must be a mapping, not {type_name(value)}", raw,
                    "simulated_user", spath, example, "simulated-user")
        return None
    notes.unknown_keys(value, SIMULATED_USER_KEYS, spath, "`simulated_user`")
    before = notes.error_count()
    texts: dict[str, str | None] = {}
    for key in ("model", "persona", "goal", "first_message"):
        item = value.get(key)
        if item is None:
            texts[key] = None
            if key in ("model", "goal"):
                hint = ("the user model's id, e.g. `model: openai:gpt-4.1-mini`" if key == "model"
                        else "what the simulated user wants, e.g. `goal: get a refund for order 1234`")
                notes.error(f"prompt '{label}': `simulated_user` needs `{key}`", value, None, spath, hint,
                            "simulated-user")
            continue
        if not isinstance(item, str) or not item.strip():
            notes.error(f"prompt '{label}': `simulated_user.{key}` must be non-empty text, not {short(item)}", value,
                        key, (*spath, key), "quote the text", "simulated-user")
        elif len(item) > MAX_SIMULATOR_TEXT:
            notes.error(f"prompt '{label}': `simulated_user.{key}` is {len(item):,} characters, more than the "
                        f"{MAX_SIMULATOR_TEXT:,} allowed", value, key, (*spath, key), "shorten it", "simulated-user")
        else:
            texts[key] = item
    if texts.get("model") is not None and ":" not in texts["model"].strip(":"):
        notes.error(f"prompt '{label}': `simulated_user.model` must be a `provider:model` id, not "
                    f"{short(texts['model'])}", value, "model", (*spath, "model"),
                    "for example `openai:gpt-4.1-mini`", "simulated-user")
    max_turns = value.get("max_turns", 6)
    if not (isinstance(max_turns, int) and not isinstance(max_turns, bool) and 1 <= max_turns <= MAX_SIMULATED_TURNS):
        notes.error(f"prompt '{label}': `simulated_user.max_turns` must be a whole number from 1 to "
                    f"{MAX_SIMULATED_TURNS}, not {short(max_turns)}", value, "max_turns", (*spath, "max_turns"),
                    "the most assistant turns the conversation may have, e.g. `max_turns: 6`", "simulated-user")
        max_turns = 6
    stop_phrase, stop_point = None, None
    stop = value.get("stop")
    stop_path = (*spath, "stop")
    stop_hint = "write `stop: {phrase: DONE}` or `stop: {point: {$contains: refund}}`"
    if stop is None:
        notes.error(f"prompt '{label}': `simulated_user` needs a `stop` rule", value, None, spath, stop_hint,
                    "simulated-user")
    elif not isinstance(stop, dict) or len([k for k in ("phrase", "point") if k in stop]) != 1:
        notes.error(f"prompt '{label}': `simulated_user.stop` must give exactly one of `phrase` or `point`", value,
                    "stop", stop_path, stop_hint, "simulated-user")
    else:
        notes.unknown_keys(stop, ("phrase", "point"), stop_path, "`simulated_user.stop`")
        if "phrase" in stop:
            phrase = stop["phrase"]
            if not isinstance(phrase, str) or not phrase.strip() or len(phrase) > 200:
                notes.error(f"prompt '{label}': `simulated_user.stop.phrase` must be non-empty text of at most 200 "
                            f"characters, not {short(phrase)}", stop, "phrase", (*stop_path, "phrase"),
                            "for example `phrase: DONE`", "simulated-user")
            else:
                stop_phrase = phrase.strip()
        else:
            point = read_point(stop["point"], stop, "point", (*stop_path, "point"), label, False)
            if point is not None:
                if point.fn is None:
                    notes.error(f"prompt '{label}': `simulated_user.stop.point` must be a function point; a judged "
                                "point would need a judge call after every turn", stop, "point",
                                (*stop_path, "point"), "use a function such as `{$contains: refund}`, or "
                                "`stop: {phrase: DONE}`", "simulated-user")
                elif point.fn in STOP_POINT_REFUSED:
                    notes.error(f"prompt '{label}': `${point.fn}` cannot be a stop rule: it is checked between "
                                "turns, where only text functions run", stop, "point", (*stop_path, "point"),
                                "use a text function such as `$contains`, `$matches` or `$is_json`", "simulated-user")
                else:
                    stop_point = point
    has_opening = raw.get("messages") is not None or raw.get("prompt") is not None or \
        raw.get("promptText") is not None
    if texts.get("first_message") is not None and has_opening:
        notes.error(f"prompt '{label}': `simulated_user.first_message` and authored opening turns both given", value,
                    "first_message", (*spath, "first_message"),
                    "remove `first_message`, or remove the prompt's `messages`/`prompt`", "simulated-user", at_key=True)
    elif texts.get("first_message") is None and not has_opening and "first_message" not in value:
        notes.error(f"prompt '{label}': a simulated conversation needs its opening: `simulated_user.first_message` "
                    "or the prompt's `messages`", value, None, spath, "add `first_message: <the user's first words>`",
                    "simulated-user")
    if notes.error_count() > before:
        return None
    return SimulatedUser(model=texts["model"].strip(), persona=texts["persona"], goal=texts["goal"],
                         first_message=texts["first_message"], stop_phrase=stop_phrase, stop_point=stop_point,
                         max_turns=max_turns)
