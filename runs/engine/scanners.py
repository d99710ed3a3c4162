"""Scanners: deterministic checks over every answer and call of a run, for what scores hide.

Each scanner looks at one answer (or its judges' answers) and says yes or no:

* ``refusal``: the answer declines ("I can't help with that", "I'm sorry, but I cannot") near its start;
* ``cut_off``: the provider stopped at the token limit (finish reason ``length``/``max_tokens``, or as many output
  tokens as the limit allowed);
* ``empty``: an answer with no text;
* ``language``: the answer is in another language than its prompt (by script, and for Latin script by common
  words of English, Spanish, French, German, Italian, Portuguese and Dutch; short texts are not judged);
* ``self_id``: the answer names a model or vendor (Claude, GPT, Gemini, OpenAI, ...) that its prompt does not;
* ``identical``: two models gave the same answer, word for word after spacing and case, to the same prompt;
* ``judge_unreadable``: a judge's answer that could not be read as a verdict.

Counted per model, with the cells that prove each count. A count is **notable** (and becomes a finding) when it is
frequent (at least ``FREQUENT`` of a model's answers, and at least two) or uneven (Fisher's exact test of that
model against the others, two-sided, p < ``UNEVEN_P``, at least two). Pure Python.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Iterable

KINDS = ("refusal", "cut_off", "empty", "language", "self_id", "identical", "judge_unreadable")
LABELS = {"refusal": "refusals", "cut_off": "answers cut off at the token limit", "empty": "empty answers",
          "language": "answers in another language than the prompt", "self_id": "answers naming a model or vendor",
          "identical": "answers identical to another model's", "judge_unreadable": "judge answers that could not be read"}
FREQUENT = 0.10
UNEVEN_P = 0.05
MIN_COUNT = 2
SCAN_CHARS = 20_000  # of each answer: the scanners read its start and end, never an unbounded text
LANGUAGE_MIN_LETTERS = 40

_REFUSAL = re.compile(
    r"^\W*(?:(?:i['’]?m|i am)\s+(?:really\s+|very\s+)?sorry,?\s*(?:but\s+)?)?"
    r"(?:(?:i|we)\s+(?:can(?:no|['’])t|cannot|won['’]?t|will\s+not|am\s+(?:not\s+able|unable)|['’]m\s+(?:not\s+able|"
    r"unable)|(?:do\s+not|don['’]t)\s+(?:feel\s+comfortable|think\s+i\s+(?:can|should)))\s+"
    r"(?:help|assist|provide|comply|do\s+that|fulfil|fulfill|answer|share|create|write|generate|engage|support)"
    r"|as\s+an?\s+(?:ai|language\s+model)[^.]{0,80}?(?:can(?:no|['’])t|cannot|unable|not\s+able)"
    r"|(?:sorry|apologies),?\s+(?:but\s+)?(?:i|we)\s+(?:can(?:no|['’])t|cannot|won['’]?t|am\s+unable))",
    re.IGNORECASE)
_CUT_REASONS = {"length", "max_tokens", "max_output_tokens", "model_length"}
NAME_PATTERN = re.compile(
    r"\b(ChatGPT|GPT-?[345](?:\.\d)?o?|GPT|OpenAI|Claude|Anthropic|Gemini|Bard|Google\s+DeepMind|DeepMind|"
    r"Mistral(?:\s+AI)?|Mixtral|Llama|LLaMA|Meta\s+AI|Grok|xAI|DeepSeek|Qwen|Alibaba\s+Cloud|Cohere|Command\s+R)\b",
    re.IGNORECASE)
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
_STOPWORDS = {
    "en": {"the", "and", "is", "are", "of", "to", "in", "that", "it", "you", "for", "with", "this", "be", "not",
           "was", "have", "what", "can", "your"},
    "es": {"el", "la", "los", "las", "de", "que", "y", "es", "en", "un", "una", "por", "para", "con", "no", "su",
           "como", "más", "pero", "del"},
    "fr": {"le", "la", "les", "de", "des", "et", "est", "un", "une", "que", "qui", "dans", "pour", "pas", "vous",
           "sur", "avec", "ce", "il", "du"},
    "de": {"der", "die", "das", "und", "ist", "nicht", "ein", "eine", "zu", "den", "mit", "sie", "ich", "es", "auf",
           "für", "von", "dem", "auch", "sich"},
    "it": {"il", "lo", "la", "gli", "le", "di", "che", "e", "è", "un", "una", "per", "non", "con", "sono", "del",
           "della", "si", "come", "anche"},
    "pt": {"o", "a", "os", "as", "de", "que", "e", "é", "um", "uma", "para", "com", "não", "do", "da", "em", "por",
           "se", "mais", "seu"},
    "nl": {"de", "het", "een", "en", "van", "is", "dat", "niet", "te", "op", "ik", "je", "voor", "met", "zijn",
           "die", "er", "maar", "om", "ook"},
}


@dataclass(frozen=True)
class Answer:
    """What the scanners read of one response."""

    prompt_id: str
    variant_id: str
    trial: int = 0
    prompt_text: str = ""  # what the model was asked (its last user message)
    text: str | None = None  # the final answer; None: generation failed (not scanned)
    finish_reasons: tuple[str | None, ...] = ()
    output_tokens: int | None = None
    max_tokens: int | None = None
    judge_answers: int = 0
    judge_unreadable: int = 0


@dataclass
class Count:
    kind: str
    variant_id: str
    count: int  # answers (or judge answers) flagged
    of: int  # answers (or judge answers) scanned
    cells: list[tuple[str, str]] = field(default_factory=list)  # (prompt id, variant id)
    p_uneven: float | None = None
    frequent: bool = False

    @property
    def rate(self) -> float:
        return self.count / self.of if self.of else 0.0

    @property
    def uneven(self) -> bool:
        return self.p_uneven is not None and self.p_uneven < UNEVEN_P

    @property
    def notable(self) -> bool:
        return self.count >= MIN_COUNT and (self.frequent or self.uneven)

    def to_dict(self) -> dict:
        return {"count": self.count, "of": self.of, "rate": round(self.rate, 6), "frequent": self.frequent,
                "pUneven": None if self.p_uneven is None else round(self.p_uneven, 6), "notable": self.notable,
                "cells": [list(c) for c in self.cells]}


@dataclass
class ScanReport:
    counts: dict[str, dict[str, Count]]  # kind -> variant -> count
    identical_pairs: list[tuple[str, str, int, int]]  # (variant a, variant b, prompts alike, prompts both answered)

    def notable(self) -> list[Count]:
        return [c for by_variant in self.counts.values() for c in by_variant.values() if c.notable]

    def to_dict(self) -> dict:
        return {"kinds": {k: LABELS[k] for k in KINDS},
                "counts": {k: {v: c.to_dict() for v, c in sorted(by.items())} for k, by in self.counts.items()},
                "identicalPairs": [{"a": a, "b": b, "alike": n, "of": of} for a, b, n, of in self.identical_pairs]}


def _bounded(text: str) -> str:
    if len(text) <= SCAN_CHARS:
        return text
    half = SCAN_CHARS // 2
    return text[:half] + "\n" + text[-half:]


def is_refusal(text: str) -> bool:
    return bool(_REFUSAL.search(text[:400]))


def is_cut_off(answer: Answer) -> bool:
    if any((r or "").lower() in _CUT_REASONS for r in answer.finish_reasons):
        return True
    return bool(answer.max_tokens and answer.output_tokens is not None and answer.output_tokens >= answer.max_tokens)


def _script(ch: str) -> str | None:
    if not ch.isalpha():
        return None
    name = unicodedata.name(ch, "")
    for script in ("LATIN", "CYRILLIC", "GREEK", "ARABIC", "HEBREW", "DEVANAGARI", "HANGUL", "THAI", "HIRAGANA",
                   "KATAKANA", "CJK"):
        if name.startswith(script) or f" {script} " in f" {name} ":
            return {"HIRAGANA": "JAPANESE", "KATAKANA": "JAPANESE"}.get(script, script)
    return "OTHER"


def language_of(text: str) -> str | None:
    """A language (or a script) for a text long enough to say, else None. Japanese is any kana among Han."""
    scripts = Counter(s for s in map(_script, text[:4000]) if s)
    letters = sum(scripts.values())
    if letters < LANGUAGE_MIN_LETTERS:
        return None
    if scripts.get("JAPANESE", 0) >= 0.05 * letters:
        return "ja"
    top, n = scripts.most_common(1)[0]
    if n < 0.6 * letters:
        return None
    if top != "LATIN":
        return {"CJK": "zh", "HANGUL": "ko", "CYRILLIC": "cyrillic", "GREEK": "el", "ARABIC": "arabic",
                "HEBREW": "he", "DEVANAGARI": "devanagari", "THAI": "th"}.get(top)
    words = [w.lower() for w in _WORD.findall(text[:4000])]
    if len(words) < 8:
        return None
    hits = {lang: sum(1 for w in words if w in stop) for lang, stop in _STOPWORDS.items()}
    best = max(hits, key=hits.get)
    ranked = sorted(hits.values(), reverse=True)
    if ranked[0] < 3 or ranked[0] < 1.5 * ranked[1]:
        return None  # too few common words, or two languages alike
    return best


def other_language(answer: Answer) -> bool:
    asked, said = language_of(answer.prompt_text), language_of(_bounded(answer.text or ""))
    return asked is not None and said is not None and asked != said


def names_itself(answer: Answer) -> bool:
    asked = {m.group(0).lower() for m in NAME_PATTERN.finditer(answer.prompt_text[:SCAN_CHARS])}
    return any(m.group(0).lower() not in asked for m in NAME_PATTERN.finditer(_bounded(answer.text or "")))


def _normal(text: str) -> str:
    return " ".join(text.lower().split())


def _fisher(a: int, n_a: int, b: int, n_b: int) -> float | None:
    if n_a == 0 or n_b == 0 or a + b == 0:
        return None
    from scipy.stats import fisher_exact

    return float(fisher_exact([[a, n_a - a], [b, n_b - b]]).pvalue)


def scan(answers: Iterable[Answer]) -> ScanReport:
    answers = list(answers)
    flagged: dict[str, dict[str, list[tuple[str, str]]]] = {k: defaultdict(list) for k in KINDS}
    scanned: Counter = Counter()
    judged: Counter = Counter()
    unreadable: Counter = Counter()
    by_prompt: dict[tuple[str, int], dict[str, str]] = defaultdict(dict)
    for a in answers:
        cell = (a.prompt_id, a.variant_id)
        judged[a.variant_id] += a.judge_answers
        if a.judge_unreadable:
            unreadable[a.variant_id] += a.judge_unreadable
            flagged["judge_unreadable"][a.variant_id].append(cell)
        if a.text is None:
            continue
        scanned[a.variant_id] += 1
        text = a.text
        if not text.strip():
            flagged["empty"][a.variant_id].append(cell)
            continue
        if is_refusal(text):
            flagged["refusal"][a.variant_id].append(cell)
        if is_cut_off(a):
            flagged["cut_off"][a.variant_id].append(cell)
        if other_language(a):
            flagged["language"][a.variant_id].append(cell)
        if names_itself(a):
            flagged["self_id"][a.variant_id].append(cell)
        by_prompt[(a.prompt_id, a.trial)][a.variant_id] = _normal(_bounded(text))
    pairs: Counter = Counter()
    both: Counter = Counter()
    for (prompt_id, _), texts in by_prompt.items():
        variants = sorted(texts)
        for i, x in enumerate(variants):
            for y in variants[i + 1:]:
                both[(x, y)] += 1
                if texts[x] == texts[y]:
                    pairs[(x, y)] += 1
                    flagged["identical"][x].append((prompt_id, x))
                    flagged["identical"][y].append((prompt_id, y))
    identical = sorted(((x, y, n, both[(x, y)]) for (x, y), n in pairs.items()), key=lambda t: (-t[2] / t[3], t[:2]))
    counts: dict[str, dict[str, Count]] = {}
    for kind in KINDS:
        totals = judged if kind == "judge_unreadable" else scanned
        variants = sorted(v for v, n in totals.items() if n > 0)
        hits = {v: (unreadable[v] if kind == "judge_unreadable" else len(set(flagged[kind][v]))) for v in variants}
        all_hits, all_of = sum(hits.values()), sum(totals[v] for v in variants)
        by_variant = {}
        for v in variants:
            of = totals[v]
            count = Count(kind, v, hits[v], of, sorted(set(flagged[kind][v]))[:50])
            count.frequent = of > 0 and hits[v] / of >= FREQUENT
            if len(variants) > 1:
                count.p_uneven = _fisher(hits[v], of, all_hits - hits[v], all_of - of)
            by_variant[v] = count
        counts[kind] = by_variant
    return ScanReport(counts, identical)


def describe(count: Count) -> str:
    """The sentence a finding of a notable count says."""
    share = f"{count.count} of {count.of}"
    label = LABELS[count.kind]
    why = "frequent" if count.frequent else "more than the other models"
    return f"{count.variant_id}: {share} {label} ({why})."

