"""The executive summary's writer side: what the writer sees, and how its answer is read back.

The writer (an LLM, ``EVALSITE_SUMMARY_MODEL``) sees only the run's findings and each model's mean, with every
model under an anonymous id (``M1``, ``M2``, ... in an order drawn per run) and every model or vendor name in the
answers it quotes redacted. It answers with claims as JSON (``claims.py``); the ids are mapped back to the run's
own before the checker reads them, so the checker and the pages only ever see the run's ids. A writer from the
same family as a candidate (a Claude writer judging Claude) is a conflict, shown beside the summary.

Pure Python: the caller sends the messages and hands back the answer.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from .claims import Checked
from .findings import Finding
from .judge import json_object_in
from .scanners import NAME_PATTERN

ANON = re.compile(r"(?<![\w.\-])M(\d{1,3})(?![\w\-\[])")
REDACTED = "[model]"
QUOTE_CHARS = 400
FAMILIES = (  # a word in a model id -> its maker
    ("claude", "anthropic"), ("anthropic", "anthropic"), ("gpt", "openai"), ("openai", "openai"), ("o1", "openai"),
    ("o3", "openai"), ("o4", "openai"), ("gemini", "google"), ("gemma", "google"), ("google", "google"),
    ("palm", "google"), ("llama", "meta"), ("meta", "meta"), ("mistral", "mistral"), ("mixtral", "mistral"),
    ("codestral", "mistral"), ("grok", "xai"), ("xai", "xai"), ("deepseek", "deepseek"), ("qwen", "alibaba"),
    ("command", "cohere"), ("cohere", "cohere"), ("phi", "microsoft"))

SYSTEM = """You write the executive summary of an evaluation run for a busy reader.
You receive the run's findings, computed from its data, and each model's mean score. Models are named only by
anonymous ids (M1, M2, ...); never guess who they are.
Answer with one JSON object and nothing else:
{"claims": [{"text": "...", "values": [...], "says": [...], "findings": ["F1", ...]}]}
Rules, each checked before anyone sees a claim; a claim that breaks one is thrown away:
- Write at most 8 claims, each one or two plain sentences, most important first.
- Every number you write in "text" must be one of the claim's "values", written as a score (0.85), a percentage
  (85%), a difference in points (5 points) or a cost ($0.0123). Write no other number: no counts, no ranks.
- Each value is {"metric": "mean"|"cell"|"delta"|"pass_rate"|"cost_usd", "model": id, "value": number}, with
  "prompt" for a cell and "vs" for a delta (model minus vs). Copy the figures given; do not compute new ones.
- To say one model is better or worse than another, add {"model": id, "vs": id, "direction": "better"|"worse"}
  to "says", only where a finding says the difference is significant.
- Name only models and prompts the claim's values or says are about; cite the findings you rest on."""


def anonymous_ids(variants: Sequence[str], seed: int) -> dict[str, str]:
    """The run's variant ids -> anonymous ids, in an order drawn from ``seed``."""
    order = list(variants)
    random.Random(seed).shuffle(order)
    return {v: f"M{i}" for i, v in enumerate(order, 1)}


def family(model_id: str) -> str | None:
    """Who makes a model, from the words of its id (``openrouter:anthropic/claude-3.5-haiku`` -> anthropic)."""
    words = re.split(r"[^a-z0-9]+", model_id.lower().split("[", 1)[0])
    for word in words:
        for key, maker in FAMILIES:
            if word == key or (len(key) > 2 and word.startswith(key)):
                return maker
    return None


def conflicts(writer: str, variants: Iterable[str]) -> list[str]:
    """The candidates made by the writer's maker."""
    mine = family(writer)
    return [] if mine is None else [v for v in variants if family(v) == mine]


def _name_words(variants: Iterable[str]) -> re.Pattern:
    words = set()
    for v in variants:
        base = v.split("[", 1)[0]
        words.add(base)
        words.update(w for w in re.split(r"[:/]", base) if len(w) > 2)
    ordered = sorted(words, key=len, reverse=True)
    return re.compile("|".join(re.escape(w) for w in ordered), re.IGNORECASE) if ordered else re.compile(r"(?!)")


def redact(text: str, variants: Iterable[str]) -> str:
    """``text`` with every model and vendor name (the candidates' ids and their parts, and the usual vendor and
    model names) replaced by ``[model]``."""
    text = _name_words(variants).sub(REDACTED, text)
    return NAME_PATTERN.sub(REDACTED, text)


def _anonymise(text: str, anon: Mapping[str, str]) -> str:
    if not anon:
        return text
    pattern = re.compile("|".join(re.escape(v) for v in sorted(anon, key=len, reverse=True)))
    return pattern.sub(lambda m: anon[m.group(0)], text)


@dataclass
class WriterInput:
    messages: list[dict]
    anon: dict[str, str]  # real -> anonymous


def writer_input(findings: Sequence[Finding], means: Mapping[str, float | None], quotes: Mapping[str, str],
                 seed: int) -> WriterInput:
    """The messages for the writer. ``quotes``: finding id -> an answer excerpt to show beside it (names
    redacted here)."""
    variants = sorted(means)
    anon = anonymous_ids(variants, seed)
    lines = ["Models and their mean scores:"]
    for v in sorted(variants, key=lambda v: anon[v]):
        mean = means[v]
        lines.append(f"- {anon[v]}: mean {'not scored' if mean is None else f'{mean:.2f}'}")
    lines.append("")
    lines.append("Findings:")
    for f in findings:
        value = "" if f.value is None else f" [value {f.value:.4g}]"
        lines.append(f"- {f.id} ({f.kind}){value}: {_anonymise(redact_except_ids(f.text, variants), anon)}")
        quote = quotes.get(f.id)
        if quote:
            excerpt = redact(quote[:QUOTE_CHARS], variants)
            lines.append(f"  An answer it rests on (names redacted): \"{_anonymise(excerpt, anon)}\"")
    user = "\n".join(lines)
    return WriterInput([{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}], anon)


def redact_except_ids(text: str, variants: Sequence[str]) -> str:
    """A finding's sentence with vendor names redacted but the run's variant ids kept (they are anonymised next)."""
    keep = {}

    def hold(match: re.Match) -> str:
        keep[f"\0{len(keep)}\0"] = match.group(0)
        return f"\0{len(keep) - 1}\0"

    if variants:
        ids = re.compile("|".join(re.escape(v) for v in sorted(variants, key=len, reverse=True)))
        text = ids.sub(hold, text)
    text = NAME_PATTERN.sub(REDACTED, text)
    for token, original in keep.items():
        text = text.replace(token, original)
    return text


def read_answer(text: str) -> dict | None:
    """The writer's JSON object, or None when its answer holds none."""
    return json_object_in(text or "")


def map_back(raw: Any, anon: Mapping[str, str]) -> Any:
    """The writer's answer with its anonymous ids replaced by the run's own (in values, says and text)."""
    real = {a: v for v, a in anon.items()}

    def swap(value: Any) -> Any:
        return real.get(value, value) if isinstance(value, str) else value

    def swap_text(text: Any) -> Any:
        if not isinstance(text, str):
            return text
        return ANON.sub(lambda m: real.get(m.group(0), m.group(0)), text)

    if not isinstance(raw, dict) or not isinstance(raw.get("claims"), list):
        return raw
    claims = []
    for claim in raw["claims"]:
        if not isinstance(claim, dict):
            claims.append(claim)
            continue
        out = dict(claim)
        out["text"] = swap_text(claim.get("text"))
        for key in ("values", "says"):
            if isinstance(claim.get(key), list):
                out[key] = [{k: (swap(x) if k in ("model", "vs") else x) for k, x in entry.items()}
                            if isinstance(entry, dict) else entry for entry in claim[key]]
        claims.append(out)
    return {**raw, "claims": claims}


def _escape_markdown(text: str) -> str:
    return re.sub(r"([\\`*_{}\[\]()<>#+!|~])", r"\\\1", text)


def markdown(checked: Sequence[Checked], link: Callable[[Any], str | None]) -> str:
    """The accepted claims as a markdown list, each number linked to where its figure is (``link(value)``: a URL
    or None)."""
    lines = []
    for item in checked:
        if not item.ok or item.claim is None:
            continue
        text, parts, at = item.claim.text, [], 0
        for span in item.spans:
            parts.append(_escape_markdown(text[at:span.start]))
            number = _escape_markdown(text[span.start:span.end])
            url = link(item.claim.values[span.value])
            parts.append(f"[{number}]({url})" if url else number)
            at = span.end
        parts.append(_escape_markdown(text[at:]))
        cited = f" ({', '.join(item.claim.findings)})" if item.claim.findings else ""
        lines.append(f"- {''.join(parts)}{cited}")
    return "\n".join(lines)
