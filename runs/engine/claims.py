"""The checker of an executive summary's claims: what an LLM writer says about a run is shown only when every
figure it states is the run's own.

A writer returns claims as JSON (docs/results.md, "The summary"):

    {"claims": [{"text": "...",
                 "values": [{"metric": "mean" | "cell" | "delta" | "pass_rate" | "cost_usd", "model": variant id,
                             "prompt": prompt id (cell only), "vs": variant id (delta only), "value": number}],
                 "says": [{"model": variant id, "vs": variant id, "direction": "better" | "worse"}],
                 "findings": ["F1", ...]}]}

A claim is accepted only when all of these hold (the first that fails is its reason):

* its shape is as above, within bounds (text length, counts);
* every model, prompt and finding it names exists;
* every value equals the run's figure within display rounding (``TOLERANCE`` on 0-1 scores, the cost to within
  half a cent's hundredth or 0.5%);
* every ``says`` agrees with the paired verdict of that pair (none is allowed on "can't tell");
* every number written in the text is one of its values as written: a score as 0.85 or 85%, a difference as
  0.05 or 5 points (points are not percent: a difference written "5%" is refused, and so is a mean written "85"),
  a cost as $0.0123;
* every model or prompt id written in the text is among its values or says, and a text that sets two models
  against each other ("better", "beats", "behind") does so through a ``says``.

The figures come from the caller (``Figures``: the run's matrix and paired verdicts); nothing here computes one.
Pure Python.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

METRICS = ("mean", "cell", "delta", "pass_rate", "cost_usd")
DIRECTIONS = ("better", "worse")
TOLERANCE = 0.005  # display rounding of a 0-1 score printed to 2 places
MAX_CLAIMS = 40
MAX_TEXT = 600
MAX_VALUES = 12
MAX_SAYS = 6
MAX_FINDINGS = 12
MAX_ID = 300

# A number as a person writes one, with its unit: $0.0123, 85%, 85 percent, 5 points, 0.85, -0.05, 1,234.
_NUMBER = re.compile(
    r"(?P<dollar>\$\s?)?(?P<sign>[-+−–])?(?<![\w.])(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
    r"(?![\w.]*\d)"
    r"(?:\s*(?P<unit>%|per\s?cent\b|percentage[\s-]points?\b|points?\b|pts?\b|pp\b))?", re.IGNORECASE)
_FINDING_ID = re.compile(r"(?<![\w.])F\d+\b")
_COMPARATIVE = re.compile(
    r"\b(better|worse|beats?|beating|outperform\w*|underperform\w*|ahead|behind|superior|inferior|"
    r"significant\w*|wins?|loses?|lead\w*|trails?|higher|lower|stronger|weaker|edges? out)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Figures:
    """The run's figures a claim may state (from the results matrix and the paired verdicts)."""

    variants: frozenset[str]
    prompts: frozenset[str]
    findings: frozenset[str] = frozenset()
    means: Mapping[str, float | None] = field(default_factory=dict)
    cells: Mapping[tuple[str, str], float | None] = field(default_factory=dict)  # (prompt, variant)
    deltas: Mapping[tuple[str, str], tuple[float | None, str]] = field(default_factory=dict)  # (a, b): (a-b, verdict)
    pass_rates: Mapping[str, float | None] = field(default_factory=dict)
    costs: Mapping[str, float | None] = field(default_factory=dict)

    def figure(self, value: "Value") -> float | None:
        if value.metric == "mean":
            return self.means.get(value.model)
        if value.metric == "cell":
            return self.cells.get((value.prompt, value.model))
        if value.metric == "delta":
            found = self.deltas.get((value.model, value.vs))
            if found is not None:
                return found[0]
            flipped = self.deltas.get((value.vs, value.model))
            return None if flipped is None or flipped[0] is None else -flipped[0]
        if value.metric == "pass_rate":
            return self.pass_rates.get(value.model)
        return self.costs.get(value.model)

    def verdict(self, a: str, b: str) -> str:
        found = self.deltas.get((a, b))
        if found is not None:
            return found[1]
        flipped = self.deltas.get((b, a))
        if flipped is None:
            return "cant_tell"
        return {"better": "worse", "worse": "better"}.get(flipped[1], "cant_tell")


@dataclass(frozen=True)
class Value:
    metric: str
    model: str
    value: float
    prompt: str | None = None
    vs: str | None = None


@dataclass(frozen=True)
class Says:
    model: str
    vs: str
    direction: str


@dataclass
class Claim:
    text: str
    values: list[Value]
    says: list[Says]
    findings: list[str]
    raw: Any = None


@dataclass
class Span:
    """A number in a claim's text, and the value it states (an index into ``Claim.values``)."""

    start: int
    end: int
    value: int


@dataclass
class Checked:
    claim: Claim | None
    ok: bool
    reason: str | None
    spans: list[Span] = field(default_factory=list)
    raw: Any = None

    def to_dict(self) -> dict:
        base = _claim_dict(self.claim) if self.claim is not None else {"text": _text_of(self.raw)}
        return {**base, "ok": self.ok, "reason": self.reason}


class Refused(ValueError):
    """A claim breaks a rule: the message names the rule."""


def _claim_dict(claim: Claim) -> dict:
    values = []
    for v in claim.values:
        entry = {"metric": v.metric, "model": v.model}
        if v.prompt is not None:
            entry["prompt"] = v.prompt
        if v.vs is not None:
            entry["vs"] = v.vs
        entry["value"] = v.value
        values.append(entry)
    return {"text": claim.text, "values": values,
            "says": [{"model": s.model, "vs": s.vs, "direction": s.direction} for s in claim.says],
            "findings": list(claim.findings)}


def _text_of(raw: Any) -> str:
    text = raw.get("text") if isinstance(raw, dict) else None
    return text[:MAX_TEXT] if isinstance(text, str) else ""


# --- reading a claim ---------------------------------------------------------------------------------------------


def _string(raw: Any, what: str, *, limit: int = MAX_ID) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise Refused(f"{what} must be a non-empty string")
    if len(raw) > limit:
        raise Refused(f"{what} is longer than {limit} characters")
    return raw


def _number(raw: Any, what: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise Refused(f"{what} must be a number")
    value = float(raw)
    if not math.isfinite(value) or abs(value) > 1e9:
        raise Refused(f"{what} must be a finite number")
    return value


def _list(raw: Any, what: str, limit: int) -> list:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise Refused(f"'{what}' must be a list")
    if len(raw) > limit:
        raise Refused(f"'{what}' holds more than {limit} entries")
    return raw


def read_claim(raw: Any) -> Claim:
    """A claim from its JSON value; ``Refused`` names what is wrong with its shape."""
    if not isinstance(raw, dict):
        raise Refused("a claim must be an object with 'text', 'values', 'says' and 'findings'")
    unknown = sorted(set(raw) - {"text", "values", "says", "findings"})
    if unknown:
        raise Refused(f"unknown key {unknown[0]!r} (a claim has 'text', 'values', 'says' and 'findings')")
    text = _string(raw.get("text"), "'text'", limit=MAX_TEXT)
    values = []
    for i, entry in enumerate(_list(raw.get("values"), "values", MAX_VALUES)):
        where = f"values[{i}]"
        if not isinstance(entry, dict):
            raise Refused(f"{where} must be an object")
        metric = entry.get("metric")
        if metric not in METRICS:
            raise Refused(f"{where}.metric must be one of {', '.join(METRICS)}")
        allowed = {"metric", "model", "value"} | ({"prompt"} if metric == "cell" else set()) | \
            ({"vs"} if metric == "delta" else set())
        extra = sorted(set(entry) - allowed)
        if extra:
            raise Refused(f"{where} has {extra[0]!r}, which a {metric} value does not take")
        values.append(Value(
            metric=metric, model=_string(entry.get("model"), f"{where}.model"),
            value=_number(entry.get("value"), f"{where}.value"),
            prompt=_string(entry.get("prompt"), f"{where}.prompt") if metric == "cell" else None,
            vs=_string(entry.get("vs"), f"{where}.vs") if metric == "delta" else None))
    says = []
    for i, entry in enumerate(_list(raw.get("says"), "says", MAX_SAYS)):
        where = f"says[{i}]"
        if not isinstance(entry, dict) or set(entry) - {"model", "vs", "direction"}:
            raise Refused(f"{where} must be an object with 'model', 'vs' and 'direction'")
        direction = entry.get("direction")
        if direction not in DIRECTIONS:
            raise Refused(f"{where}.direction must be 'better' or 'worse'")
        says.append(Says(_string(entry.get("model"), f"{where}.model"), _string(entry.get("vs"), f"{where}.vs"),
                         direction))
    findings = [_string(f, f"findings[{i}]") for i, f in enumerate(_list(raw.get("findings"), "findings",
                                                                          MAX_FINDINGS))]
    return Claim(text, values, says, findings, raw)


# --- checking one ----------------------------------------------------------------------------------------------


def _close(a: float, b: float, tolerance: float) -> bool:
    return abs(a - b) <= tolerance + 1e-9


def _cost_tolerance(figure: float) -> float:
    return max(0.00005, abs(figure) * 0.005)


def _figure_matches(value: Value, figure: float) -> bool:
    if value.metric == "cost_usd":
        return _close(value.value, figure, _cost_tolerance(figure))
    return _close(value.value, figure, TOLERANCE)


def _unit(match: re.Match) -> str:
    if match.group("dollar"):
        return "$"
    unit = (match.group("unit") or "").lower().replace(" ", "")
    if unit in ("%", "percent"):
        return "%"
    if unit:
        return "points"
    return ""


def _written(match: re.Match) -> float:
    number = float(match.group("num").replace(",", ""))
    return -number if match.group("sign") in ("-", "−", "–") else number


def _half_unit(match: re.Match) -> float:
    """Half a unit of the last written decimal: "0.0123" stands for anything from 0.01225 to 0.01235."""
    digits = match.group("num").split(".")
    return 0.5 * 10 ** -(len(digits[1]) if len(digits) > 1 else 0)


def _states(match: re.Match, value: Value) -> bool:
    """Does the number written at ``match`` state ``value`` in a unit that fits its metric?"""
    unit, x = _unit(match), _written(match)
    v = value.value
    if value.metric == "cost_usd":
        return unit == "$" and _close(abs(x), abs(v), max(_half_unit(match), _cost_tolerance(v)))
    if unit == "$":
        return False
    if value.metric == "delta":
        if unit == "%":
            return False  # a difference of scores is in points, never percent
        scale = 100.0 if unit == "points" else 1.0
        tolerance = max(TOLERANCE * scale, _half_unit(match))
        return _close(abs(x), abs(v) * scale, tolerance) and (x >= 0 or v <= 0 or match.group("sign") is None)
    if unit == "points":
        return False  # a level (a mean, a cell, a pass rate) is a score or a percentage, not points
    scale = 100.0 if unit == "%" else 1.0
    if unit == "" and abs(x) > 1.0:
        return False  # "85" for 0.85: a score is written on its own scale
    return _close(x, v * scale, max(TOLERANCE * scale, _half_unit(match)))


def _id_pattern(ids: Iterable[str]) -> re.Pattern | None:
    ordered = sorted((i for i in ids if i), key=len, reverse=True)
    if not ordered:
        return None
    return re.compile("|".join(rf"(?<![\w:.\-\[/]){re.escape(i)}(?![\w\-\[/]|\.\w)" for i in ordered))


@dataclass
class Checker:
    """Checks claims against one run's ``figures``; build once per run (the id patterns are compiled here)."""

    figures: Figures

    def __post_init__(self):
        self._models = _id_pattern(self.figures.variants)
        self._prompts = _id_pattern(self.figures.prompts)
        self._findings = _id_pattern(self.figures.findings)

    def check_all(self, raw: Any) -> list[Checked]:
        """Every claim of a writer's answer (``{"claims": [...]}``), each accepted or refused with its reason."""
        if not isinstance(raw, dict) or not isinstance(raw.get("claims"), list):
            raise Refused("the answer must be an object with a 'claims' list")
        claims = raw["claims"]
        out = [self.check(c) for c in claims[:MAX_CLAIMS]]
        out += [Checked(None, False, f"more than {MAX_CLAIMS} claims: not read", raw=c)
                for c in claims[MAX_CLAIMS:]]
        return out

    def check(self, raw: Any) -> Checked:
        try:
            claim = read_claim(raw)
        except Refused as refused:
            return Checked(None, False, f"shape: {refused}", raw=raw)
        try:
            spans = self._check(claim)
        except Refused as refused:
            return Checked(claim, False, str(refused), raw=raw)
        return Checked(claim, True, None, spans, raw=raw)

    def _check(self, claim: Claim) -> list[Span]:
        f = self.figures
        for i, value in enumerate(claim.values):
            where = f"values[{i}]"
            for name, known in (("model", value.model), ("vs", value.vs)):
                if known is not None and known not in f.variants:
                    raise Refused(f"unknown id: {where}.{name} {known!r} is not a model of this run")
            if value.prompt is not None and value.prompt not in f.prompts:
                raise Refused(f"unknown id: {where}.prompt {value.prompt!r} is not a prompt of this run")
            if value.vs is not None and value.vs == value.model:
                raise Refused(f"{where}: a difference needs two different models")
            figure = f.figure(value)
            if figure is None:
                raise Refused(f"no figure: the run has no {value.metric} for {where}")
            if not _figure_matches(value, figure):
                raise Refused(f"wrong number: {where} says {value.value:g} where the run's {value.metric} is "
                              f"{figure:.4g}")
        for i, says in enumerate(claim.says):
            for name, known in (("model", says.model), ("vs", says.vs)):
                if known not in f.variants:
                    raise Refused(f"unknown id: says[{i}].{name} {known!r} is not a model of this run")
            verdict = f.verdict(says.model, says.vs)
            if verdict == "cant_tell":
                raise Refused(f"says[{i}]: the paired verdict of {says.model} against {says.vs} is "
                              "\"can't tell\"; no direction may be claimed")
            if verdict != says.direction:
                raise Refused(f"wrong direction: says[{i}] claims {says.direction}, the paired verdict is {verdict}")
        for finding in claim.findings:
            if finding not in f.findings:
                raise Refused(f"unknown id: finding {finding!r} does not exist")
        return self._check_text(claim)

    def _check_text(self, claim: Claim) -> list[Span]:
        text = claim.text
        masked = list(text)
        named_models: set[str] = set()
        for pattern, kind in ((self._models, "model"), (self._prompts, "prompt"), (self._findings, "finding")):
            if pattern is None:
                continue
            for match in pattern.finditer(text):
                if masked[match.start()] == "\0":
                    continue
                if kind == "model":
                    named_models.add(match.group(0))
                elif kind == "prompt":
                    allowed = {v.prompt for v in claim.values}
                    if match.group(0) not in allowed:
                        raise Refused(f"the text names prompt {match.group(0)!r}, which none of its values is of")
                masked[match.start():match.end()] = "\0" * (match.end() - match.start())
        mentioned = {v.model for v in claim.values} | {v.vs for v in claim.values if v.vs} | \
            {s.model for s in claim.says} | {s.vs for s in claim.says}
        for match in _FINDING_ID.finditer(text):
            if match.group(0) not in claim.findings:
                raise Refused(f"the text cites {match.group(0)}, which its 'findings' do not list")
        stray = sorted(named_models - mentioned)
        if stray:
            raise Refused(f"the text names model {stray[0]!r}, which none of its values or says is about")
        if len(named_models) >= 2 and _COMPARATIVE.search(text):
            pairs = {frozenset((s.model, s.vs)) for s in claim.says}
            if not any(frozenset((a, b)) in pairs for a in named_models for b in named_models if a != b):
                raise Refused("the text sets two models against each other without a 'says' for them")
        spans = []
        for match in _NUMBER.finditer("".join(masked)):
            index = next((i for i, v in enumerate(claim.values) if _states(match, v)), None)
            if index is None:
                raise Refused(f"the number {match.group(0).strip()!r} in the text is none of its values as written "
                              "(a score as 0.85 or 85%, a difference as 0.05 or 5 points, a cost as $0.01)")
            spans.append(Span(match.start(), match.end(), index))
        return spans


def check(raw: Any, figures: Figures) -> list[Checked]:
    """Every claim in ``raw`` checked against ``figures``."""
    return Checker(figures).check_all(raw)
