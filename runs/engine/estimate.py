"""What a run would cost before it runs: calls and tokens per model and per judge, priced by prices.json.

Pure arithmetic over the parsed blueprint, beside the price table it uses (``providers/prices.py``):
the editor's preview and the run form show it. Token counts are estimates from characters
(4 per token); every generation is assumed to use its whole ``max_tokens`` (reference 5.8:
candidates get 1500 unless a custom model sets ``max_tokens``; judges 500 at temperature 0), so
the estimate is an upper bound for the answers and close for the prompts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from blueprints.spec.schema import Blueprint, CustomModel, Prompt

from .judge import JUDGE_MAX_TOKENS
from .providers.prices import DEFAULT_MAX_TOKENS, estimate_usd

# The judge's instructions and scale around each criterion, in characters (approximate).
JUDGE_PROMPT_OVERHEAD_CHARS = 2400
CHARS_PER_TOKEN = 4


def tokens(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN) if chars else 0


def max_tokens_of(model: str | CustomModel) -> int:
    """The answer length a model's calls may use: a custom model's ``max_tokens``, else the default."""
    if not isinstance(model, str) and model.parameters:
        value = model.parameters.get("max_tokens") or model.parameters.get("maxTokens")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 10**9:
            return int(value)
    return DEFAULT_MAX_TOKENS


def generations_per_variant(prompt: Prompt) -> int:
    """Model calls for one prompt and one model variant (reference 5.4, deviation 14)."""
    to_generate = sum(1 for m in prompt.messages if m.to_generate)
    last = prompt.messages[-1] if prompt.messages else None
    if last is not None and last.role == "user":
        to_generate += 1
    return to_generate


def conversation_chars(prompt: Prompt, bp: Blueprint) -> int:
    """The authored conversation's length, with the longest system prompt a variant may get."""
    system = (prompt.system if prompt.system_set else bp.system) or ""
    if bp.systems:
        system = max((s or "" for s in bp.systems), key=len)
    return len(system) + sum(len(m.content or "") for m in prompt.messages)


@dataclass
class CallEstimate:
    """The calls and tokens of one model (a candidate or a judge) over a run."""

    model_id: str
    canned: bool = False  # answered without a call (fixtures): no cost
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def cost(self) -> float | None:
        """US dollars; None when the model's price is unknown (never 0 for unknown)."""
        if self.canned:
            return 0.0
        return estimate_usd(self.model_id, self.input_tokens, self.output_tokens)

    def add_candidate(self, prompt: Prompt, bp: Blueprint, *, variants: int, max_out: int) -> None:
        """One prompt's generations for ``variants`` variants of this model; each call sees the
        conversation so far, earlier generated turns included."""
        chars = conversation_chars(prompt, bp)
        calls = generations_per_variant(prompt)
        self.calls += calls * variants
        self.input_tokens += variants * sum(tokens(chars) + i * max_out for i in range(calls))
        self.output_tokens += variants * calls * max_out

    def add_judging(self, prompt: Prompt, bp: Blueprint, *, judged: int, max_out: int) -> None:
        """``judged`` judge calls on one prompt's responses (each reads the conversation and the answer)."""
        chars = conversation_chars(prompt, bp)
        self.calls += judged
        self.input_tokens += judged * (tokens(chars + JUDGE_PROMPT_OVERHEAD_CHARS)
                                       + generations_per_variant(prompt) * max_out)
        self.output_tokens += judged * JUDGE_MAX_TOKENS
