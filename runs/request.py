"""What a person asks of a run, read once at each door: the run form, ``POST /api/runs``, ``run_blueprint``.

Each door builds one :class:`RunRequest` (``from_form``, ``from_api``, ``from_cli``) and hands it to
``runs.start.prepare``; a request that cannot be read raises :class:`RunRequestError` naming the field as
that door names it, with the sentence from the one table below (``PROBLEMS``). An empty choice is a
choice: no models (or no judges) chosen is refused, never read as "the blueprint's".
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

from blueprints.spec.extensions import MAX_TRIALS
from blueprints.spec.model_ids import is_collection_name, provider_of
from runs.engine.judge import MAX_JUDGE_REPEATS

MAX_CHOSEN = 500  # models or judges one request may name
MAX_ID_LENGTH = 300  # characters of one model id (blueprints.models.MODEL_ID_MAX_LENGTH)

# How each door names a field: the form's label, the API's key, the command's option.
FIELDS = {
    "models": {"form": "Models", "api": "`models`", "cli": "--models"},
    "judges": {"form": "Judges", "api": "`judges`", "cli": "--judges"},
    "backup_judge": {"form": "Backup judge", "api": "`backupJudge`", "cli": "--backup-judge"},
    "trials": {"form": "Trials", "api": "`trials`", "cli": "--trials"},
    "judge_repeats": {"form": "Judge repeats", "api": "`judgeRepeats`", "cli": "--judge-repeats"},
    "budget_usd": {"form": "Budget", "api": "`budgetUsd`", "cli": "--budget"},
    "fresh": {"form": "Fresh", "api": "`fresh`", "cli": "--fresh"},
}
API_KEYS = {"models": "models", "judges": "judges", "backup_judge": "backupJudge", "trials": "trials",
            "judge_repeats": "judgeRepeats", "budget_usd": "budgetUsd", "fresh": "fresh"}

# The one table of what is wrong and how to fix it; {leave_out} is the door's way to ask for the blueprint's.
PROBLEMS = {
    "no_models": "{name}: no models chosen: {fix}",
    "no_judges": "{name}: no judges chosen: {fix}",
    "not_a_list": "{name} must be a list of model ids, such as [\"openai:gpt-4.1-mini\"], not {shown}",
    "too_many": f"{{name}} names at most {MAX_CHOSEN} ids, not {{count:,}}",
    "bad_id": "{name}: {problem}",
    "trials": f"{{name}} must be a whole number from 1 to {MAX_TRIALS} (responses per prompt and model), not "
              "{shown}; {leave_out} for the blueprint's",
    "judge_repeats": f"{{name}} must be a whole number from 1 to {MAX_JUDGE_REPEATS} (how many times each judge is "
                     "asked about each point), not {shown}; {leave_out} to ask each judge once",
    "budget_usd": "{name}: the budget is a number of US dollars above 0, not {shown}; {leave_out} for no budget",
    "budget_too_large": "{name}: the budget is too large ({shown}): give a number of US dollars, such as 25",
    "fresh": "{name} must be true or false, not {shown}",
    "empty_backup": "{name} names no judge: give a provider:model id; {leave_out} for the site's backup judge",
}
FIXES = {
    "no_models": {"form": "tick at least one model or add one; nothing was started",
                  "api": "send at least one model id, or leave `models` out for the blueprint's",
                  "cli": "give at least one model id, or leave --models out for the blueprint's"},
    "no_judges": {"form": "tick at least one judge or add one",
                  "api": "send at least one provider:model judge, or leave `judges` out for the blueprint's",
                  "cli": "give at least one provider:model judge, or leave --judges out for the blueprint's"},
}
LEAVE_OUT = {"form": "leave it empty", "api": "leave it out", "cli": "leave it out"}


class RunRequestError(ValueError):
    """A request a door could not read: ``field`` (the RunRequest's name, ``api_key`` the API's), ``message``
    naming the field as the door names it, what is wrong and the fix."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field, self.message = field, message

    @property
    def api_key(self) -> str:
        return API_KEYS.get(self.field, self.field)


def _shown(value) -> str:
    import json

    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _problem(door: str, field: str, key: str, **values) -> RunRequestError:
    fix = FIXES.get(key, {}).get(door, "")
    return RunRequestError(field, PROBLEMS[key].format(name=FIELDS[field][door], fix=fix, leave_out=LEAVE_OUT[door],
                                                       **values))


def id_problem(value: str, *, judge: bool) -> str | None:
    """Why ``value`` cannot name a model (or a judge) of a run, else None. Models may name a collection or a
    blueprint's custom model; a judge is always ``provider:model`` (the rule ``--judges`` is checked by)."""
    if len(value) > MAX_ID_LENGTH:
        return f"an id has at most {MAX_ID_LENGTH} characters, not {len(value):,}"
    if any(ch.isspace() or ord(ch) < 32 for ch in value):
        return f"'{value}' has a space in it, and a model id has none: write it as provider:model"
    if judge and is_collection_name(value):
        return f"'{value}' names a collection; a judge is one model: write it as provider:model"
    if judge and provider_of(value) is None:
        return f"'{value}' has no provider: write a judge as provider:model, e.g. openai:gpt-4.1-mini"
    return None


def _ids(door: str, field: str, values: list[str], *, judge: bool) -> list[str]:
    if len(values) > MAX_CHOSEN:
        raise _problem(door, field, "too_many", count=len(values))
    for value in values:
        problem = id_problem(value, judge=judge)
        if problem:
            raise _problem(door, field, "bad_id", problem=problem)
    return list(dict.fromkeys(values))


def _whole(door: str, field: str, value, low: int, high: int) -> int | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    number = value
    if isinstance(value, str) and value.strip().isdigit() and len(value.strip()) <= 4:
        number = int(value.strip())
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    if isinstance(number, bool) or not isinstance(number, int) or not low <= number <= high:
        raise _problem(door, field, field, shown=_shown(value))
    return number


def _budget(door: str, value) -> float | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        number = float(value) if not isinstance(value, bool) else float("nan")
    except OverflowError:  # a 400-digit integer
        raise _problem(door, "budget_usd", "budget_too_large", shown=_shown(value)) from None
    except (TypeError, ValueError):
        number = float("nan")
    if not (math.isfinite(number) and number > 0):
        raise _problem(door, "budget_usd", "budget_usd", shown=_shown(value))
    return number


def _split(text: str) -> list[str]:
    return [v.strip() for v in text.replace("\n", ",").split(",") if v.strip()]


class RunRequest(BaseModel):
    """The choices of one run; None everywhere is the blueprint's own evaluation, the same from every door.

    ``models`` replace the blueprint's (ids, its custom models, collections); ``judges`` replace its judges
    (``provider:model``); ``keep_judges`` (judge ids: the form's ticked boxes) narrows them and
    ``add_judges`` adds ``provider:model`` judges after them; ``backup_judge`` is the judge asked when every
    judge failed on a point (None: the site's, when the blueprint names no judges; "": none).
    ``confirm`` is the confirmation the person ticked (``start.Prepared.confirm_key``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    models: tuple[str, ...] | None = None
    judges: tuple[str, ...] | None = None
    keep_judges: tuple[str, ...] | None = None
    add_judges: tuple[str, ...] = ()
    backup_judge: str | None = None
    trials: int | None = None
    judge_repeats: int | None = None
    fresh: bool = False
    budget_usd: float | None = None
    confirm: str = ""

    # --- the doors ---------------------------------------------------------------------------------------

    @classmethod
    def from_form(cls, data) -> "RunRequest":
        """The run form as posted (a QueryDict). The boxes it offered come back as ``models_offered`` and
        ``judges_offered``: every box ticked and nothing added is the blueprint's; none ticked and nothing added
        is refused. A post without the offered boxes (a script) names its models, or asks for the blueprint's."""
        door = "form"
        ticked, offered = data.getlist("models"), data.getlist("models_offered")
        added = _split(data.get("add_models", ""))
        if not ticked and not added and ("models_offered" in data or "add_models" in data):
            raise _problem(door, "models", "no_models")
        if "models_offered" in data and set(ticked) == set(offered) and not added:
            models = None
        else:
            models = _ids(door, "models", [*ticked, *added], judge=False) if ticked or added else None
        judge_ticked, judges_offered = data.getlist("judges"), data.getlist("judges_offered")
        add_judges = _ids(door, "judges", _split(data.get("add_judges", "")), judge=True)
        keep = None if set(judge_ticked) == set(judges_offered) else judge_ticked
        backup = None
        if "backup_judge" in data:  # the form offers the site's backup judge; emptied, there is none
            backup = (data.get("backup_judge") or "").strip()
            if backup:
                _ids(door, "backup_judge", [backup], judge=True)
        return cls(models=models, keep_judges=keep, add_judges=tuple(add_judges), backup_judge=backup,
                   trials=_whole(door, "trials", data.get("trials"), 1, MAX_TRIALS),
                   judge_repeats=_whole(door, "judge_repeats", data.get("judge_repeats"), 1, MAX_JUDGE_REPEATS),
                   fresh=bool(data.get("fresh")), budget_usd=_budget(door, data.get("budget_usd")),
                   confirm=str(data.get("confirm") or "")[:100])

    @classmethod
    def from_api(cls, data: dict) -> "RunRequest":
        """``POST /api/runs``'s body: a key left out is the blueprint's; ``[]`` is refused (400, the key named)."""
        door = "api"

        def ids(key: str, *, judge: bool) -> list[str] | None:
            value = data.get(API_KEYS[key])
            if value is None:
                return None
            if isinstance(value, str):  # "a, b" as the command takes it
                value = _split(value)
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise _problem(door, key, "not_a_list", shown=_shown(value))
            value = [v.strip() for v in value if v.strip()]
            if not value:
                raise _problem(door, key, "no_models" if key == "models" else "no_judges")
            return _ids(door, key, value, judge=judge)

        models, judges = ids("models", judge=False), ids("judges", judge=True)
        backup = data.get("backupJudge")
        if backup is not None:
            if not isinstance(backup, str) or not backup.strip():
                raise _problem(door, "backup_judge", "empty_backup")
            backup = _ids(door, "backup_judge", [backup.strip()], judge=True)[0]
        trials = data.get("trials")
        if isinstance(trials, str):  # numbers are numbers in JSON
            raise _problem(door, "trials", "trials", shown=_shown(trials))
        repeats = data.get("judgeRepeats")
        if isinstance(repeats, str):
            raise _problem(door, "judge_repeats", "judge_repeats", shown=_shown(repeats))
        fresh = data.get("fresh", False)
        if fresh is None:
            fresh = False
        if not isinstance(fresh, bool):
            raise _problem(door, "fresh", "fresh", shown=_shown(fresh))
        return cls(models=models, judges=judges, backup_judge=backup,
                   trials=_whole(door, "trials", trials, 1, MAX_TRIALS),
                   judge_repeats=_whole(door, "judge_repeats", repeats, 1, MAX_JUDGE_REPEATS),
                   fresh=fresh, budget_usd=_budget(door, data.get("budgetUsd")))

    @classmethod
    def from_cli(cls, options: dict) -> "RunRequest":
        """``run_blueprint``'s options: ``--models ''`` (or only commas) is refused, as an empty list is."""
        door = "cli"

        def ids(key: str, *, judge: bool) -> list[str] | None:
            value = options.get(key)
            if value is None:
                return None
            value = _split(value)
            if not value:
                raise _problem(door, key, "no_models" if key == "models" else "no_judges")
            return _ids(door, key, value, judge=judge)

        backup = options.get("backup_judge")
        if backup is not None:
            if not backup.strip():
                raise _problem(door, "backup_judge", "empty_backup")
            backup = _ids(door, "backup_judge", [backup.strip()], judge=True)[0]
        return cls(models=ids("models", judge=False), judges=ids("judges", judge=True), backup_judge=backup,
                   trials=_whole(door, "trials", options.get("trials"), 1, MAX_TRIALS),
                   judge_repeats=_whole(door, "judge_repeats", options.get("judge_repeats"), 1, MAX_JUDGE_REPEATS),
                   fresh=bool(options.get("fresh")), budget_usd=_budget(door, options.get("budget")))
