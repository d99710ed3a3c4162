"""Canned answers for deterministic, offline runs (the upstream's fixtures format, reference 5.10).

A model named ``fixtures:<label>`` answers from the fixtures that came with
the blueprint: a ``fixtures`` mapping in its header, or a
``<name>.fixtures.yml`` file imported beside it. The format::

    version: 1
    strategy: seeded        # or "first": how a list of answers is picked
    seed: 42                # folded into the seeded pick
    responses:
      <prompt id>:
        default: <value>
        byModel:
          fixtures:good: <value>   # the model's full id ...
          good: <value>            # ... or its label
          open*: <value>           # or a prefix ending in *; the longest match wins
      <prompt id>: <value>         # shorthand for {default: <value>}

A value is a text, a list of texts (one is picked: always the first with
``strategy: first``, otherwise by a hash of seed, prompt, model, trial and
turn, so reruns agree), or ``{turns: [...]}``, whose items fill a multi-turn
prompt's generated turns in order. A plain text answers every turn. A
mapping without ``responses`` is read as the ``responses`` mapping itself.

:func:`load_fixtures` reads a file's text and :func:`parse_fixtures` a
mapping; both return ``(fixtures or None, problems)``, never raise.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Mapping

import yaml

STRATEGIES = ("seeded", "first")
_TOP_KEYS = {"version", "strategy", "seed", "responses"}


@dataclass(frozen=True)
class Fixtures:
    responses: Mapping[str, Mapping[str, Any]]  # prompt id -> {"default": value, "byModel": {key: value}}
    strategy: str = "seeded"
    seed: Any = 0
    source: str = "fixtures"

    def answer(self, prompt_id: str | None, model_id: str, *, turn: int = 0, trial: int = 0) -> tuple[str | None, str | None]:
        """``(text, None)`` or ``(None, reason)`` for one generated turn of one prompt."""
        if prompt_id is None:
            return None, "fixtures answer by prompt id, and this call did not name one"
        entry = self.responses.get(prompt_id)
        if entry is None:
            return None, f"no fixture for prompt '{prompt_id}' in {self.source}"
        value = self._value_for_model(entry, model_id)
        if value is None:
            return None, f"no fixture for prompt '{prompt_id}' and model '{model_id}' in {self.source} (no default)"
        return self._resolve(value, prompt_id, model_id, turn, trial)

    def _value_for_model(self, entry: Mapping[str, Any], model_id: str) -> Any:
        names = [model_id]
        if model_id.startswith("fixtures:"):
            names.append(model_id.split(":", 1)[1])
        by_model = entry.get("byModel") or {}
        for name in names:
            if name in by_model:
                return by_model[name]
        best: tuple[int, Any] | None = None
        for key, value in by_model.items():
            if key.endswith("*") and any(n.startswith(key[:-1]) for n in names):
                if best is None or len(key) > best[0]:
                    best = (len(key), value)
        if best is not None:
            return best[1]
        return entry.get("default")

    def _resolve(self, value: Any, prompt_id: str, model_id: str, turn: int, trial: int) -> tuple[str | None, str | None]:
        if isinstance(value, dict):
            turns = value["turns"]
            if turn >= len(turns):
                return None, (f"the fixture for prompt '{prompt_id}' has {len(turns)} turn(s), "
                              f"and turn {turn + 1} was asked for")
            value = turns[turn]
        if isinstance(value, list):
            value = value[self._pick(len(value), prompt_id, model_id, turn, trial)]
        return str(value), None

    def _pick(self, count: int, prompt_id: str, model_id: str, turn: int, trial: int) -> int:
        if self.strategy == "first" or count == 1:
            return 0
        text = "\x1f".join(str(x) for x in (self.seed, prompt_id, model_id, trial, turn))
        return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big") % count


def load_fixtures(text: str, *, source: str = "fixtures file") -> tuple[Fixtures | None, list[str]]:
    """Read a ``.fixtures.yml`` (or JSON) file's text."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        return None, [f"{source}: not valid YAML{where}: {getattr(exc, 'problem', None) or exc}"]
    return parse_fixtures(data, source=source)


def parse_fixtures(data: Any, *, source: str = "fixtures") -> tuple[Fixtures | None, list[str]]:
    """Check and normalise a fixtures mapping; every problem names its place."""
    problems: list[str] = []
    if not isinstance(data, dict):
        return None, [f"{source}: expected a mapping with `responses`, got {_kind(data)}"]
    if "responses" in data or set(data) <= _TOP_KEYS:
        header, responses = data, data.get("responses")
        unknown = sorted(set(data) - _TOP_KEYS)
        if unknown:
            problems.append(f"{source}: unknown key(s) {', '.join(unknown)}; expected {', '.join(sorted(_TOP_KEYS))}")
    else:
        header, responses = {}, data
    strategy = header.get("strategy", "seeded")
    if strategy not in STRATEGIES:
        problems.append(f"{source}: `strategy` must be seeded or first, not {strategy!r}")
    if not isinstance(responses, dict):
        problems.append(f"{source}: `responses` must map prompt ids to answers, got {_kind(responses)}")
        return None, problems
    normalised: dict[str, dict[str, Any]] = {}
    for prompt_id, entry in responses.items():
        where = f"{source}: responses.{prompt_id}"
        if isinstance(entry, dict) and not ("turns" in entry and set(entry) == {"turns"}):
            if "turns" in entry and "default" not in entry:
                # `{turns: [...], byModel: {...}}`: the turns are the default answer.
                entry = {**entry, "default": {"turns": entry["turns"]}}
                del entry["turns"]
            unknown = sorted(set(entry) - {"default", "byModel"})
            if unknown:
                problems.append(f"{where}: unknown key(s) {', '.join(unknown)}; an entry is an answer, "
                                "{turns: [...]}, or a mapping of `default` and `byModel`")
            by_model = entry.get("byModel") or {}
            if not isinstance(by_model, dict):
                problems.append(f"{where}.byModel: expected a mapping of model ids to answers, got {_kind(by_model)}")
                by_model = {}
            for key, value in by_model.items():
                _check_value(value, f"{where}.byModel.{key}", problems)
            if "default" in entry:
                _check_value(entry["default"], f"{where}.default", problems)
            normalised[str(prompt_id)] = {"default": entry.get("default"),
                                          "byModel": {str(k): v for k, v in by_model.items()}}
        else:
            _check_value(entry, where, problems)
            normalised[str(prompt_id)] = {"default": entry, "byModel": {}}
    if problems:
        return None, problems
    return Fixtures(normalised, strategy=strategy, seed=header.get("seed", 0), source=source), []


def fixtures_from_blueprint(value: Any, files: Mapping[str, str] | None = None) -> tuple[Fixtures | None, list[str]]:
    """The blueprint's ``fixtures``: a mapping, or the name of a file that came with it.

    ``files`` maps file names (as imported beside the blueprint) to their text;
    ``name`` finds ``name``, ``name.fixtures.yml`` and ``name.fixtures.yaml``.
    """
    if value is None:
        return None, []
    if isinstance(value, str):
        files = files or {}
        for candidate in (value, f"{value}.fixtures.yml", f"{value}.fixtures.yaml"):
            if candidate in files:
                return load_fixtures(files[candidate], source=candidate)
        return None, [f"fixtures file '{value}' was not found beside the blueprint; import it with the blueprint"]
    return parse_fixtures(value, source="the blueprint's fixtures")


def _check_value(value: Any, where: str, problems: list[str], *, in_turns: bool = False) -> None:
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return
    if isinstance(value, list) and value and all(isinstance(v, (str, int, float)) and not isinstance(v, bool)
                                                 for v in value):
        return
    if not in_turns and isinstance(value, dict) and set(value) == {"turns"} and isinstance(value["turns"], list) \
            and value["turns"]:
        for index, item in enumerate(value["turns"]):
            _check_value(item, f"{where}.turns[{index}]", problems, in_turns=True)
        return
    expected = "a text or a non-empty list of texts" if in_turns else \
        "a text, a non-empty list of texts, or {turns: [...]}"
    problems.append(f"{where}: expected {expected}, got {_kind(value)}")


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    return {dict: "a mapping", list: "a list", str: "a text", bool: "true/false"}.get(type(value), type(value).__name__)
