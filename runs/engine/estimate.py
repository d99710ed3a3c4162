# Over 500 lines: a run's bill in one module (calls, tokens, the cache probe, expected and at most).
"""What a run would cost before it runs: its calls by kind, tokens and dollars, priced by prices.json.

One function, :func:`estimate_run`, for every door: the editor's preview, the run form (as its boxes
change), ``run_blueprint --dry-run`` and the API's ``dryRun``. It walks the same items a run makes
(prompt x model variant x trial, ``generate.expand_variants``) and the same judge plan, so its
``calls.total`` is the number of requests the run sends when every call succeeds the first time.

Pure arithmetic over the parsed blueprint, beside the price table it uses (``providers/prices.py``).
Token counts are estimates from characters (4 per token). Each figure is given twice: **at most**, every
answer using its whole ``max_tokens`` (reference 5.8: candidates get 1500 unless a custom model sets
``max_tokens``; judges 500 at temperature 0), the cap a budget reserves against; and **expected**, each
answer at the mean length of the model's earlier answers when the caller passes them (``observed``), else
at a stated assumption (``EXPECTED_ANSWER_TOKENS``, ``EXPECTED_JUDGE_TOKENS``), never at max tokens.
What it cannot know is said, never guessed: a model without a
price, the backup judge (asked only when every judge failed on a point), a judge's unreadable answer
(asked once more). With judge repeats K (``JudgePlan.repeats``) every judge is asked K times about every
point, so its calls and tokens are K times those of asking once; the backup is not repeated.
A simulated user (a prompt's ``simulated_user``) is a line of its own (role ``user``): both figures assume the
conversation runs to ``max_turns`` (``max_turns`` candidate calls, ``max_turns - 1`` user-model calls, the
conversation growing by both sides' answers), never cached in the estimate.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Mapping, Sequence

from blueprints.spec.model_ids import parse_for_api_call, provider_of
from blueprints.spec.schema import Blueprint, CustomModel, Prompt

from .generate import SIMULATOR_INSTRUCTIONS, ModelVariant, expand_variants, tools_for, uses_cache
from .judge import (JUDGE_MAX_TOKENS, JUDGE_TEMPERATURE, JudgePlan, JudgeSpec, JudgeTask, band_scale,
                    build_judge_messages, parse_judge_answer)
from .providers.endpoints import FIXTURES_PREFIX, Problem, resolve_endpoint
from .providers.prices import DEFAULT_MAX_TOKENS, Price, price_table
from .providers.settings import ProviderSettings
from .types import Turn

CHARS_PER_TOKEN = 4
# The expected figure's assumptions when no earlier answer of a model is known (said wherever it is shown).
EXPECTED_ANSWER_TOKENS = 300
EXPECTED_JUDGE_TOKENS = 150


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
    """Model calls for one prompt and one model variant (reference 5.4, deviation 14); a simulated conversation
    at most ``max_turns``."""
    if prompt.simulated_user is not None:
        return prompt.simulated_user.max_turns
    to_generate = sum(1 for m in prompt.messages if m.to_generate)
    last = prompt.messages[-1] if prompt.messages else None
    if last is None or last.role != "assistant":
        to_generate += 1
    return to_generate


def conversation_chars(prompt: Prompt, bp: Blueprint) -> int:
    """The authored conversation's length, with the longest system prompt a variant may get."""
    system = (prompt.system if prompt.system_set else bp.system) or ""
    if bp.systems:
        system = max((s or "" for s in bp.systems), key=len)
    return len(system) + sum(len(m.content or "") for m in prompt.messages)


def judged_points(prompt: Prompt) -> list:
    """The points the judges are asked about (assess.judge_tasks): every point without a function."""
    return [p for p in prompt.all_points() if p.fn is None]


def trials_of(prompt: Prompt, trials: int | None) -> int:
    """Responses per prompt and variant: the run's override, else the prompt's ``trials``, else one (runs.start)."""
    return max(1, int(trials)) if trials is not None else (prompt.trials or 1)


# --------------------------------------------------------------------------------------
# What the response cache already holds


class CacheProbe:
    """Asks the response cache, with the router's keys, whether a call would be answered from it.

    ``get`` is the cache's (synchronous) ``get``. Only what can be known is looked up: a generated
    turn after an uncached one, and the judging of a response not wholly cached, are calls.

    Its work does not grow with a prompt's size times its variants and trials: the messages of a request
    are hashed once (``Endpoint.answer_head``) and every variant and trial asking them finishes that hash
    with its own small parts (the key is the router's, one recipe). It looks up until ``deadline`` (a
    ``time.monotonic()`` value; None: no limit), then answers "not cached" to everything: ``complete`` turns
    False and the estimate's cached figure is "at least" (calls counted as sent are then an upper bound).
    """

    HEADS_KEPT = 64  # messages hashed and kept for reuse (a prompt's systems x token limits)

    def __init__(self, settings: ProviderSettings, get: Callable[[str], dict | None], *,
                 custom_models: Mapping[str, CustomModel] | None = None, deadline: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.settings, self.get, self.custom_models = settings, get, dict(custom_models or {})
        self.deadline, self.clock = deadline, clock
        self.complete = True  # every lookup asked for was made
        self.lookups = 0
        self._endpoints: dict[str, object] = {}
        self._heads: dict[tuple, object] = {}

    @property
    def live(self) -> bool:
        """Whether it still looks up (the deadline not passed)."""
        if self.complete and self.deadline is not None and self.clock() >= self.deadline:
            self.complete = False
        return self.complete

    def _head(self, endpoint, messages: Sequence[dict], max_tokens: int | None, reuse: bool):
        if not reuse:
            return endpoint.answer_head(messages, max_tokens=max_tokens)
        limit = max_tokens if max_tokens is not None else endpoint.default_max_tokens
        # The strings are the prompt's own objects: hashing and comparing them is cheap after the first time.
        memo = (limit, tuple((m["role"], m.get("content")) for m in messages))
        head = self._heads.get(memo)
        if head is None:
            if len(self._heads) >= self.HEADS_KEPT:
                self._heads.clear()
            head = self._heads[memo] = endpoint.answer_head(messages, max_tokens=limit)
        return head

    def answer(self, model_id: str, messages: Sequence[dict], *, temperature: float | None, max_tokens: int | None,
               trial: int = 0, readable: Callable[[str], bool] | None = None, repeat: int = 0,
               reuse: bool = False) -> str | None:
        """The cached answer's text, or None. ``reuse``: these messages are asked again (other variants and
        trials of a prompt), so their hash is kept for them."""
        if not self.live:
            return None
        model_id = parse_for_api_call(model_id).original_model_id
        endpoint = self._endpoints.get(model_id)
        if endpoint is None:
            endpoint = self._endpoints[model_id] = resolve_endpoint(model_id, self.settings, self.custom_models)
        if isinstance(endpoint, Problem):
            return None
        key = endpoint.answer_key_from(self._head(endpoint, messages, max_tokens, reuse), temperature=temperature,
                                       trial=trial, repeat=repeat)
        self.lookups += 1
        try:
            hit = self.get(key)
        except Exception:  # a broken cache only makes the estimate count a call
            return None
        text = hit.get("text") if isinstance(hit, dict) else None
        if not isinstance(text, str) or not text.strip() or (readable is not None and not readable(text)):
            return None
        return text


# --------------------------------------------------------------------------------------
# The estimate


@dataclass
class ModelEstimate:
    """The calls and tokens of one model in one role over a run (a judge: one line per judge of the plan)."""

    model_id: str
    role: str = "candidate"  # candidate | judge | embedding | user (a simulated user's model)
    label: str = ""  # a judge's id, ``holistic-gpt-4-1-mini(openrouter:...)``
    canned: bool = False  # answered without a call (fixtures): no cost
    custom: bool = False  # a blueprint's own endpoint: no price
    calls: int = 0  # requests it sends
    cached: int = 0  # answered from the response cache: free
    canned_answers: int = 0  # generated turns answered from fixtures
    input_tokens: int = 0  # at most: every earlier answer of a conversation at its max tokens
    output_tokens: int = 0  # at most: every answer at its max tokens
    price: Price | None = None
    expected_input_tokens: int = 0
    expected_output_tokens: int = 0
    answer_tokens: int = 0  # the expected length of one answer
    observed_answers: int = 0  # earlier answers that length is the mean of; 0: assumed

    def _priced(self, input_tokens: int, output_tokens: int) -> float | None:
        if self.canned or not self.calls:
            return 0.0
        if self.price is None:
            return None
        return (input_tokens * self.price.input_per_million + output_tokens * self.price.output_per_million) / 1_000_000

    @property
    def cost(self) -> float | None:
        """US dollars at most for the calls it sends; None when its price is unknown (never 0 for unknown)."""
        return self._priced(self.input_tokens, self.output_tokens)

    @property
    def expected_cost(self) -> float | None:
        """US dollars expected: answers at ``answer_tokens``; None when its price is unknown."""
        return self._priced(self.expected_input_tokens, self.expected_output_tokens)

    @property
    def basis(self) -> str:
        """Where the expected answer length comes from, in words."""
        if self.observed_answers:
            return (f"{self.answer_tokens:,} tokens an answer, the mean of {self.observed_answers:,} earlier "
                    f"answer{'s' if self.observed_answers != 1 else ''}")
        return f"{self.answer_tokens:,} tokens an answer (an assumption: no earlier answers known)"

    def to_json(self) -> dict:
        return {"id": self.model_id, "role": self.role, **({"judge": self.label} if self.label else {}),
                "calls": self.calls, "cached": self.cached, "canned": self.canned_answers,
                "inputTokens": self.input_tokens, "outputTokens": self.output_tokens, "costUsd": self.cost,
                "expected": {"inputTokens": self.expected_input_tokens, "outputTokens": self.expected_output_tokens,
                             "costUsd": self.expected_cost, "answerTokens": self.answer_tokens,
                             "fromEarlierAnswers": self.observed_answers}}


@dataclass(frozen=True)
class UnknownPart:
    """What the estimate cannot price or count, in words: ``model 'local:x' has no price``."""

    kind: str  # price | backup-judge | judge-repairs | service
    id: str
    message: str
    calls: int = 0

    def to_json(self) -> dict:
        return {"kind": self.kind, "id": self.id, "calls": self.calls, "message": self.message}


@dataclass
class RunEstimate:
    candidates: list[ModelEstimate]
    judges: list[ModelEstimate]
    embeddings: list[ModelEstimate]
    responses: int  # items the run makes (prompt x variant x trial)
    backup_calls: int = 0  # at most, if every judge fails on every point
    backup_model: str | None = None
    repair_calls: int = 0  # at most, if every judge answer is unreadable once
    service_points: int = 0  # `$call` points: outside services, not model calls
    prices_as_of: str = ""
    unknown: list[UnknownPart] = field(default_factory=list)
    # False when the cache look-up ran out of time: ``cache_unprobed`` responses were counted as calls without
    # looking, so ``cached_calls`` is "at least" and the calls are at most (docs/runs.md, "The estimate").
    cache_complete: bool = True
    cache_unprobed: int = 0
    users: list[ModelEstimate] = field(default_factory=list)  # simulated users' models, counted apart

    @property
    def lines(self) -> list[ModelEstimate]:
        return [*self.candidates, *self.users, *self.judges, *self.embeddings]

    @property
    def user_calls(self) -> int:
        return sum(m.calls for m in self.users)

    @property
    def generation_calls(self) -> int:
        return sum(m.calls for m in self.candidates)

    @property
    def generated_turns(self) -> int:
        """Every generated turn, those answered from fixtures or the cache included."""
        return sum(m.calls + m.cached + m.canned_answers for m in self.candidates)

    @property
    def judge_calls(self) -> int:
        return sum(m.calls for m in self.judges)

    @property
    def embedding_calls(self) -> int:
        return sum(m.calls for m in self.embeddings)

    @property
    def total_calls(self) -> int:
        return self.generation_calls + self.user_calls + self.judge_calls + self.embedding_calls

    @property
    def cached_calls(self) -> int:
        return sum(m.cached for m in self.lines)

    @property
    def canned_calls(self) -> int:
        return sum(m.canned_answers for m in self.candidates)

    @property
    def input_tokens(self) -> int:
        return sum(m.input_tokens for m in self.lines)

    @property
    def output_tokens(self) -> int:
        return sum(m.output_tokens for m in self.lines)

    @property
    def cost(self) -> float | None:
        """Dollars for the calls of known price; None when there are calls and no price is known for any."""
        known = [m.cost for m in self.lines if m.calls and m.cost is not None]
        if not known and any(m.calls and m.cost is None for m in self.lines):
            return None
        return sum(known)

    @property
    def cost_complete(self) -> bool:
        return not any(m.calls and m.cost is None for m in self.lines)

    @property
    def most_cost(self) -> float | None:
        """The most the calls of known price can cost: every answer at its max tokens (what a budget reserves)."""
        return self.cost

    @property
    def expected_cost(self) -> float | None:
        """What the calls of known price are expected to cost (answers at ``ModelEstimate.answer_tokens``);
        None when there are calls and no price is known for any."""
        known = [m.expected_cost for m in self.lines if m.calls and m.expected_cost is not None]
        if not known and any(m.calls and m.expected_cost is None for m in self.lines):
            return None
        return sum(known)

    @property
    def unpriced_calls(self) -> int:
        """Calls to models with no price: neither figure counts them."""
        return sum(m.calls for m in self.lines if m.calls and m.cost is None)

    @property
    def expected_basis(self) -> list[str]:
        """Where each expected answer length comes from: ``'openai:x': 212 tokens an answer, the mean of 40
        earlier answers``, one line per model and role that sends calls."""
        seen, lines = set(), []
        for m in self.lines:
            if not m.calls or m.role == "embedding" or (m.model_id, m.role) in seen:
                continue
            seen.add((m.model_id, m.role))
            kind = {"judge": "judge ", "user": "simulated user "}.get(m.role, "")
            lines.append(f"{kind}'{m.model_id}': {m.basis}")
        return lines

    def to_json(self) -> dict:
        return {
            "calls": {"total": self.total_calls, "generation": self.generation_calls, "judge": self.judge_calls,
                      "user": self.user_calls, "embedding": self.embedding_calls, "cached": self.cached_calls,
                      "canned": self.canned_calls,
                      "possibleExtra": {"backupJudge": self.backup_calls, "judgeRepairs": self.repair_calls}},
            # complete False: the cache look-up ran out of time; ``calls.cached`` is at least, the calls at most.
            "cacheLookup": {"complete": self.cache_complete, "responsesNotLookedUp": self.cache_unprobed},
            "responses": self.responses,
            "tokens": {"input": self.input_tokens, "output": self.output_tokens},
            "costUsd": None if self.cost is None else round(self.cost, 6),
            "costComplete": self.cost_complete,
            # The two figures (docs/runs.md, "The estimate"): expected, and the most (``costUsd``, every answer at
            # its max tokens). Both leave out the ``unpricedCalls``.
            "cost": {"expectedUsd": None if self.expected_cost is None else round(self.expected_cost, 6),
                     "mostUsd": None if self.cost is None else round(self.cost, 6),
                     "expectedBasis": self.expected_basis, "unpricedCalls": self.unpriced_calls},
            "pricesAsOf": self.prices_as_of,
            "unknown": [u.to_json() for u in self.unknown],
            "models": [m.to_json() for m in self.lines],
        }


def _model_id(model: str | CustomModel) -> str:
    return model.id if isinstance(model, CustomModel) else model


def _judge_input_chars(prompt: Prompt, point, judge: JudgeSpec, plan: JudgePlan, bp: Blueprint,
                       answer_chars: int) -> int:
    """The judge's request for one point, rendered as it is sent, with a stand-in answer of the assumed length."""
    system = (prompt.system if prompt.system_set else bp.system) or None
    if bp.systems:
        system = max((s or "" for s in bp.systems), key=len) or None
    turns = [Turn("system", system)] if system else []
    answer = "x" * answer_chars
    generated = []
    for message in prompt.messages:
        if message.to_generate:
            turns.append(Turn("assistant", answer, generated=True))
            generated.append(answer)
        else:
            turns.append(Turn(message.role, message.content))
    if not prompt.messages or prompt.messages[-1].role != "assistant":
        turns.append(Turn("assistant", answer, generated=True))
        generated.append(answer)
    if prompt.simulated_user is not None:  # run to max_turns, the user's turns as long as the answers
        while len(generated) < prompt.simulated_user.max_turns:
            turns.append(Turn("user", answer, simulated=True))
            turns.append(Turn("assistant", answer, generated=True))
            generated.append(answer)
    subject = "\n\n".join(generated) or next((t.content or "" for t in reversed(turns) if t.role == "assistant"), "")
    task = JudgeTask(criterion=point.text or "", conversation=tuple(turns), subject_text=subject,
                     inverted=point.inverted, prompt_id=prompt.id,
                     scale=band_scale(point.score_ranges) if point.score_ranges else None)
    plan_for_point = plan if task.scale is None else _with_scale(plan, task.scale)
    return sum(len(m["content"]) for m in build_judge_messages(task, judge, plan_for_point))


def _with_scale(plan: JudgePlan, scale) -> JudgePlan:
    return replace(plan, scale=scale)


def _cached_generation(prompt: Prompt, variant: ModelVariant, trial: int, probe: CacheProbe
                       ) -> tuple[int, list[Turn] | None]:
    """How many of a response's turns the cache answers (in order), and its conversation when all are."""
    temperature = variant.temperature_for(prompt)
    system = variant.system_for(prompt)
    history: list[dict] = [{"role": "system", "content": system}] if system else []
    conversation: list[Turn] = [Turn("system", system)] if system else []
    hits = 0

    def turn() -> bool:
        nonlocal hits
        text = probe.answer(variant.base_model_id, history, temperature=temperature, max_tokens=None, trial=trial,
                            reuse=not hits)
        if text is None:
            return False
        hits += 1
        history.append({"role": "assistant", "content": text})
        conversation.append(Turn("assistant", text, generated=True))
        return True

    for message in prompt.messages:
        if message.to_generate:
            if not turn():
                return hits, None
        else:
            history.append({"role": message.role, "content": message.content})
            conversation.append(Turn(message.role, message.content))
    if (not prompt.messages or prompt.messages[-1].role != "assistant") and not turn():
        return hits, None
    return hits, conversation


def _cached_judgings(prompt: Prompt, conversation: list[Turn], plan: JudgePlan, probe: CacheProbe) -> set:
    """The (point index, judge index, repeat) askings whose readable verdict the cache already holds."""
    from .assess import judge_tasks
    from .types import GeneratedResponse

    generated = [t.content for t in conversation if t.generated]
    text = "\n\n".join(generated) if generated else None
    final = next((t.content for t in reversed(conversation) if t.role == "assistant"), None)
    response = GeneratedResponse(prompt_id=prompt.id, model_variant_id="", conversation=tuple(conversation),
                                 text=text, final_text=final)
    found = set()
    for p_index, task in enumerate(judge_tasks(prompt, response)):
        task_plan = plan if task.scale is None else _with_scale(plan, task.scale)
        for j_index, judge in enumerate(plan.judges):
            if not probe.live:  # out of time: the rest are counted as calls
                return found
            messages = build_judge_messages(task, judge, task_plan)
            for repeat in range(max(1, plan.repeats)):
                if probe.answer(judge.model, messages, temperature=JUDGE_TEMPERATURE, max_tokens=JUDGE_MAX_TOKENS,
                                readable=lambda t, s=task_plan.scale: parse_judge_answer(t, s).ok,
                                repeat=repeat) is not None:
                    found.add((p_index, j_index, repeat))
    return found


def _loop(variant: ModelVariant, model: ModelEstimate, prompt: Prompt | None = None) -> int:
    """Model calls a generated turn of this variant may take: a native tool loop's ``maxSteps`` (the prompt's own
    tools when it has them: an imported AI Eval case's ``max_steps``), else one (record-only tool use: one)."""
    setup = variant.tools if prompt is None else tools_for(prompt, variant)
    if setup is None or model.canned or setup.record_only:
        return 1
    return setup.max_steps


def _native(variant: ModelVariant, prompt: Prompt) -> bool:
    """Whether this prompt's generation sends tools (a native call is never answered from the cache)."""
    return tools_for(prompt, variant) is not None


def estimate_run(
    bp: Blueprint,
    models: Iterable[str | CustomModel],
    plan: JudgePlan,
    *,
    trials: int | None = None,
    fresh: bool = False,
    embedding_model: str | None = None,
    cache: CacheProbe | None = None,
    answer_tokens: int | None = None,
    prices: Mapping[str, Price] | None = None,
    observed: Mapping[str, tuple[float, int]] | None = None,
) -> RunEstimate:
    """The calls, tokens and dollars of a run of ``bp`` with these choices (what ``runs.start`` would make).

    ``models`` are the run's resolved models (collections expanded, custom models as objects); ``plan`` its
    judges (``judge.plan_for_run``, with its ``repeats``: each judge asked that many times about each point);
    ``trials`` the run's override (None: each prompt's own). ``cache``, when
    given and the run is not ``fresh``, counts answers the response cache already holds as free.
    ``answer_tokens`` is the assumed length of a generated answer (None: its whole ``max_tokens``).
    ``observed``: model id -> (mean output tokens of its earlier answers, how many), for the expected figure;
    a model not in it is expected at ``EXPECTED_ANSWER_TOKENS`` (judges at ``EXPECTED_JUDGE_TOKENS``).
    """
    models = list(models)
    prices = price_table() if prices is None else prices
    customs = {m.id: m for m in models if isinstance(m, CustomModel)}
    variants = expand_variants(bp, models)
    probe = None if fresh else cache
    judged_per_prompt = [judged_points(p) for p in bp.prompts]
    repeats = max(1, plan.repeats)
    any_judged = any(judged_per_prompt)
    ideal_prompts = [p for p in bp.prompts if p.ideal_response] if embedding_model else []

    def line(model_id: str, role: str, label: str = "") -> ModelEstimate:
        canned = role == "candidate" and model_id not in customs and provider_of(model_id) == FIXTURES_PREFIX
        return ModelEstimate(model_id, role=role, label=label, canned=canned, custom=model_id in customs,
                             price=None if model_id in customs else prices.get(model_id))

    candidates: dict[str, ModelEstimate] = {}
    for model in models:
        candidates.setdefault(_model_id(model), line(_model_id(model), "candidate"))
    max_out = {_model_id(m): max_tokens_of(m) for m in models}
    observed = observed or {}
    for model_id, model in candidates.items():
        mean, count = observed.get(model_id, (0, 0))
        if count and mean > 0:
            model.answer_tokens, model.observed_answers = min(max(1, round(mean)), max_out[model_id]), count
        else:
            model.answer_tokens = min(EXPECTED_ANSWER_TOKENS, max_out[model_id])
    judges = [line(j.model, "judge", j.judge_id) for j in plan.judges] if any_judged else []
    for judge_line in judges:
        judge_line.answer_tokens = min(EXPECTED_JUDGE_TOKENS, JUDGE_MAX_TOKENS)
    embeddings = [line(embedding_model, "embedding")] if ideal_prompts else []
    users: dict[str, ModelEstimate] = {}
    responses = backup = repairs = services = unprobed = 0
    # Variants per model: what a response costs depends on its model alone unless the cache answers part of it,
    # so responses not looked up are counted in one step per model (the work grows with prompts x models).
    blueprint_per_model = Counter((v.base_model_id, _loop(v, candidates[v.base_model_id])) for v in variants)

    for index, prompt in enumerate(bp.prompts):
        n_trials = trials_of(prompt, trials)
        per_model = blueprint_per_model if prompt.tools is None and prompt.tool_use is None else Counter(
            (v.base_model_id, _loop(v, candidates[v.base_model_id], prompt)) for v in variants)
        points = judged_per_prompt[index]
        services += sum(1 for p in prompt.all_points() if p.fn == "call") * len(variants) * n_trials
        turns = generations_per_variant(prompt)
        chars = conversation_chars(prompt, bp)
        prompt_tokens = tokens(chars)
        judge_chars: dict[tuple[int, int], int] = {}  # (answer tokens, judge index) -> judge input per point
        simulated = prompt.simulated_user
        user_line = None
        if simulated is not None:  # a simulated user: a line of its own, the conversation run to max_turns
            user_line = users.get(simulated.model)
            if user_line is None:
                user_line = users[simulated.model] = line(simulated.model, "user")
                user_line.canned = False
                user_line.answer_tokens = min(EXPECTED_ANSWER_TOKENS, DEFAULT_MAX_TOKENS)
            user_out, user_expected = DEFAULT_MAX_TOKENS, user_line.answer_tokens
            user_system = tokens(_simulator_chars(simulated))

        def account(model_id: str, loop: int, hits: int, cached: set, times: int) -> None:
            """``times`` responses of this prompt by ``model_id`` (up to ``loop`` calls a turn), the cache answering
            ``hits`` turns of each and the judge askings in ``cached``."""
            nonlocal responses, backup, repairs
            model = candidates[model_id]
            out = answer_tokens if answer_tokens is not None else max_out[model_id]
            expected = model.answer_tokens
            # A native tool loop (toolUse native/auto) may make up to maxSteps model calls a turn, none cached.
            calls_here = turns * loop
            responses += times
            if model.canned:
                model.canned_answers += turns * times
            elif simulated is not None:
                # Turn i (from 0) is sent the opening, i answers and i simulated user turns; none cached.
                model.calls += calls_here * times
                model.input_tokens += sum(prompt_tokens + (i // loop) * (out + user_out)
                                          for i in range(calls_here)) * times
                model.output_tokens += calls_here * out * times
                model.expected_input_tokens += sum(prompt_tokens + (i // loop) * (expected + user_expected)
                                                   for i in range(calls_here)) * times
                model.expected_output_tokens += calls_here * expected * times
            else:
                model.cached += hits * times
                model.calls += (calls_here - hits) * times
                model.input_tokens += sum(prompt_tokens + i * out for i in range(hits, calls_here)) * times
                model.output_tokens += (calls_here - hits) * out * times
                model.expected_input_tokens += \
                    sum(prompt_tokens + i * expected for i in range(hits, calls_here)) * times
                model.expected_output_tokens += (calls_here - hits) * expected * times
            if user_line is not None:
                # User call j (from 0) follows assistant turn j + 1: the opening, j + 1 answers, j user turns.
                asked = simulated.max_turns - 1
                user_line.calls += asked * times
                user_line.input_tokens += sum(user_system + prompt_tokens + (j + 1) * out + j * user_out
                                              for j in range(asked)) * times
                user_line.output_tokens += asked * user_out * times
                user_line.expected_input_tokens += sum(
                    user_system + prompt_tokens + (j + 1) * expected + j * user_expected for j in range(asked)) * times
                user_line.expected_output_tokens += asked * user_expected * times
            if points and judges:
                for j_index, judge_line in enumerate(judges):
                    for length in {out, expected}:
                        if (length, j_index) not in judge_chars:
                            judge_chars[(length, j_index)] = sum(
                                _judge_input_chars(prompt, p, plan.judges[j_index], plan, bp,
                                                   length * CHARS_PER_TOKEN)
                                for p in points)
                    hit = sum(1 for p_index in range(len(points)) for repeat in range(repeats)
                              if (p_index, j_index, repeat) in cached)
                    sent = len(points) * repeats - hit
                    judge_line.cached += hit * times
                    judge_line.calls += sent * times
                    # Each point's request differs by its criterion; spread the prompt's total evenly.
                    judge_line.input_tokens += tokens(judge_chars[(out, j_index)]) * sent // len(points) * times
                    judge_line.output_tokens += sent * JUDGE_MAX_TOKENS * times
                    judge_line.expected_input_tokens += \
                        tokens(judge_chars[(expected, j_index)]) * sent // len(points) * times
                    judge_line.expected_output_tokens += sent * judge_line.answer_tokens * times
                    repairs += sent * times
                if plan.backup is not None:
                    backup += len(points) * times
            if prompt.ideal_response and embeddings:
                embeddings[0].calls += times
                embeddings[0].input_tokens += (out + tokens(len(prompt.ideal_response))) * times
                embeddings[0].expected_input_tokens += (expected + tokens(len(prompt.ideal_response))) * times

        if probe is None or not probe.live:
            for (model_id, loop), count in per_model.items():
                account(model_id, loop, 0, set(), count * n_trials)
            if probe is not None:
                unprobed += sum(count * n_trials for (model_id, loop), count in per_model.items()
                                if not candidates[model_id].canned and loop == 1)
            continue
        for variant in variants:
            model_id = variant.base_model_id
            loop = _loop(variant, candidates[model_id], prompt)
            if candidates[model_id].canned or not uses_cache(prompt, variant) or loop != 1 or simulated is not None \
                    or _native(variant, prompt):
                # a tool loop or a simulated conversation: never looked up
                account(model_id, loop, 0, set(), n_trials)
                continue
            for trial in range(n_trials):
                if not probe.live:  # out of time: the rest of this variant's trials are counted as calls
                    account(model_id, loop, 0, set(), n_trials - trial)
                    unprobed += n_trials - trial
                    break
                hits, conversation = _cached_generation(prompt, variant, trial, probe)
                cached = _cached_judgings(prompt, conversation, plan, probe) \
                    if points and judges and conversation is not None else set()
                account(model_id, loop, hits, cached, 1)

    estimate = RunEstimate(
        candidates=list(candidates.values()), judges=judges, embeddings=embeddings, responses=responses,
        users=list(users.values()),
        backup_calls=backup, backup_model=plan.backup.model if plan.backup is not None and backup else None,
        repair_calls=repairs, service_points=services,
        prices_as_of=max((p.as_of for p in prices.values() if p.as_of), default=""),
        cache_complete=probe is None or probe.complete, cache_unprobed=unprobed,
    )
    estimate.unknown = _unknown_parts(estimate, prices)
    return estimate


def _simulator_chars(simulated) -> int:
    """The user model's system prompt for a simulated user (generate.user_view), in characters."""
    return len(SIMULATOR_INSTRUCTIONS) + len(simulated.persona or "") + len(simulated.goal) + \
        len(simulated.stop_phrase or "") + 120


def _unknown_parts(estimate: RunEstimate, prices: Mapping[str, Price]) -> list[UnknownPart]:
    parts = []
    seen = set()
    for m in estimate.lines:
        if not m.calls or m.cost is not None or m.model_id in seen:
            continue
        seen.add(m.model_id)
        calls = sum(x.calls for x in estimate.lines if x.model_id == m.model_id)
        if m.custom:
            message = f"custom model '{m.model_id}' has no price (its endpoint is yours): its {calls} calls are not in the total"
        else:
            message = (f"no price for '{m.model_id}' in prices.json: its {calls} calls are not in the total; "
                       "add it to runs/engine/providers/prices.json")
        parts.append(UnknownPart("price", m.model_id, message, calls))
    if estimate.backup_calls:
        backup = estimate.backup_model or ""
        parts.append(UnknownPart(
            "backup-judge", backup,
            f"up to {estimate.backup_calls} more calls to the backup judge '{backup}', one per point on which "
            "every judge fails", estimate.backup_calls))
    if estimate.repair_calls:
        parts.append(UnknownPart(
            "judge-repairs", "", f"up to {estimate.repair_calls} more judge calls if answers are unreadable "
            "(each is asked once more)", estimate.repair_calls))
    if estimate.service_points:
        parts.append(UnknownPart(
            "service", "$call", f"{estimate.service_points} `$call` checks call outside services: not model calls, "
            "not counted", estimate.service_points))
    return parts
