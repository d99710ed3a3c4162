"""An LLM judge on the Pairs page (runs/pairs.py): a job asks one judge model about pairs chosen as a person's
are, each both ways round (runs/engine/pairwise.py), and the page shows its ratings and its consistency and
position-bias figures apart from people's.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods
from django_htmx.http import HttpResponseStopPolling

from blueprints.models import model_id_problem
from blueprints.spec.model_ids import split_variant_suffixes
from evalsite.engine import engine_config

from ..cache import response_cache
from ..engine import pairwise
from ..engine import ratings as bt
from ..engine.providers import Router, check_models
from ..engine.types import Turn
from ..models import JudgingStatus, PairJudgement, PairJudging, Response, Run
from ..pages import blueprint_of, with_csp
from .scope import (BLUEPRINT_RUNS, JUDGE_WHO, MAX_JUDGE_ID_CHARS, OUTCOME_OF_WINNER, Candidate, Judged, Refused,
                    Scope, blueprint_scope, choose_pair, clean_text, fitted_ratings, judged_by, next_pair,
                    page_context, run_scope, turns_of, who_of)

log = logging.getLogger(__name__)


# --- an LLM judge on the pairs ---------------------------------------------------------------
# A job (``PairJudging``) asks one judge model about up to ``PairJudging.MAX_PAIRS`` pairs of its scope, chosen
# as a person's are (``choose_pair``: pairs of models it has compared least, then prompts), each pair both ways
# round (runs/engine/pairwise.py). It runs as a task (runs.tasks.judge_pairs): claimed with a conditional
# UPDATE, asked through the providers' router (their limits, retries and the response cache), for at most the
# item budget's time. Each answer that reads is a ``PairJudgement`` of the job; each asking that failed or did
# not read is counted on the job, its reason kept, and never becomes a judgement.

WINNER_OF_CHOICE = {"1": "left", "2": "right", "tie": "tie"}  # left: the response the judge was shown first
CHOICE_OF_WINNER = {winner: choice for choice, winner in WINNER_OF_CHOICE.items()}
JUDGINGS_SHOWN = 5  # the page lists this many of the scope's most recent jobs


def judge_who(model_id: str) -> str:
    return f"{JUDGE_WHO}{model_id}"


def default_judge_model() -> str:
    """The site's first default judge as ``provider:model`` (an approach written before it taken off)."""
    judges = [j.strip() for j in settings.EVALSITE_DEFAULT_JUDGES if j and j.strip()]
    if not judges:
        return ""
    first = judges[0]
    wrapped = re.fullmatch(r"(?:standard|prompt-aware|holistic)\((.+)\)", first)
    if wrapped:
        return wrapped.group(1).strip()
    head, sep, rest = first.partition(":")
    return rest.strip() if sep and head in ("standard", "prompt-aware", "holistic") and ":" in rest else first


def judging_budget_s() -> float:
    """How long a job may ask: the item budget, which the task queue's timeout is above."""
    return float(settings.EVALSITE_LIMITS.item_budget_s)


def _stalled(job: PairJudging) -> bool:
    """A running job whose worker went away: it had its time and some minutes more."""
    limit = timedelta(seconds=judging_budget_s() + 300)
    return job.status == JudgingStatus.RUNNING and job.started_at is not None \
        and job.started_at < timezone.now() - limit


def _judging_fields(post) -> tuple[str, int]:
    """The judge model and the number of pairs a form asks for, or Refused with what to write instead."""
    model_id = clean_text(post.get("model", ""))
    if not model_id:
        example = default_judge_model() or "openai:gpt-4.1-mini"
        raise Refused(f"Name the judge model as provider:model, e.g. {example}.")
    if len(model_id) > MAX_JUDGE_ID_CHARS:
        raise Refused(f"A judge model id is at most {MAX_JUDGE_ID_CHARS} characters; this one has "
                      f"{len(model_id):,}.")
    problem = model_id_problem(model_id)
    if problem is not None:
        problem = re.sub(r"\s*\(a blueprint's custom model cannot go in a collection\)$", "", problem)
        raise Refused(f"The judge model cannot be asked: {problem}.")
    if split_variant_suffixes(model_id)[0] != model_id:
        raise Refused(f"The judge is asked at temperature 0: write the model id without a suffix such as "
                      f"[temp:…], e.g. {split_variant_suffixes(model_id)[0]}.")
    count = clean_text(post.get("pairs", ""))
    if not count.isdigit() or len(count) > 4 or not 1 <= int(count) <= PairJudging.MAX_PAIRS:
        raise Refused(f"Ask about 1 to {PairJudging.MAX_PAIRS} pairs (a whole number), not “{count[:20]}”.")
    return model_id, int(count)


def start_judging(scope: Scope, model_id: str, pairs: int) -> PairJudging:
    """Queue a job for this scope; refused while another of its jobs is still asking."""
    with transaction.atomic():
        open_jobs = list(scope.judgings().filter(status__in=(JudgingStatus.QUEUED, JudgingStatus.RUNNING)))
        for job in open_jobs:
            if _stalled(job):
                PairJudging.objects.filter(pk=job.pk, status=JudgingStatus.RUNNING).update(
                    status=JudgingStatus.FAILED, finished_at=timezone.now(),
                    error="its worker stopped before it finished, and nothing it asked was stored: ask again")
        if any(not _stalled(j) for j in open_jobs):
            raise Refused("An LLM judge is already asking about these pairs; wait until it has finished.")
        job = PairJudging.objects.create(blueprint=scope.blueprint, run=scope.run, model_id=model_id,
                                         pairs_requested=pairs)
        transaction.on_commit(lambda: enqueue_judging(job.pk))
    return job


def enqueue_judging(job_id: int) -> None:
    from django_q.tasks import async_task

    async_task("runs.tasks.judge_pairs", job_id, task_name=f"pair judging {job_id}", group="pair-judging")


def _job_scope(job: PairJudging) -> Scope:
    if job.run_id is not None:
        run = Run.objects.select_related("blueprint", "revision").get(pk=job.run_id)
        return Scope(blueprint=run.blueprint, runs=[run], run=run)
    runs = list(Run.objects.filter(blueprint_id=job.blueprint_id).select_related("blueprint", "revision")
                .order_by("-created_at", "-id")[:BLUEPRINT_RUNS])
    return Scope(blueprint=job.blueprint, runs=runs)


def choose_pairs(candidates: list[Candidate], judged: list[Judged], count: int,
                 rng: random.Random) -> list[tuple[Candidate, Candidate]]:
    """Up to ``count`` pairs, each chosen as a person's next pair would be after judging the ones before."""
    judged = list(judged)
    chosen = []
    while len(chosen) < count:
        pair = choose_pair(candidates, judged, rng)
        if pair is None:
            break
        chosen.append(pair)
        left, right = pair
        judged.append(Judged(left.prompt_id, left.variant_id, right.variant_id, left.response_id,
                             right.response_id))
    return chosen


def _conversation(left: Response, right: Response) -> tuple[Turn, ...]:
    """The conversation both candidates answered, as they saw it: its authored turns, each generated turn as a
    gap, and the system prompt when both saw the same one (different ones would tell the models apart)."""
    def turns(response: Response) -> list[dict]:
        return [t for t in (response.conversation or []) if isinstance(t, dict)]

    def system(turns: list[dict]):
        return turns[0].get("content") if turns and turns[0].get("role") == "system" else None

    left_turns = turns(left)
    if not left_turns:  # nothing stored: the prompt's authored turns, as the page shows them
        spec = blueprint_of(left.run)
        prompt = left.run.prompt(left.prompt_index, spec) if spec is not None else None
        return tuple(Turn(t["role"], t["content"]) for t in turns_of(prompt))
    shared_system = system(left_turns) is not None and system(left_turns) == system(turns(right))
    out = []
    for turn in left_turns:
        role, content = str(turn.get("role", "")), turn.get("content")
        if role == "system" and not shared_system:
            continue
        generated = bool(turn.get("generated"))
        out.append(Turn(role, None if generated else (content if isinstance(content, str) else None), generated))
    return tuple(out)


def _questions(pairs: list[tuple[Candidate, Candidate]]) -> list[tuple[Response, Response, pairwise.PairQuestion]]:
    rows = Response.objects.select_related("run", "run__revision").in_bulk(
        [c.response_id for pair in pairs for c in pair])
    out = []
    for left_c, right_c in pairs:
        left, right = rows.get(left_c.response_id), rows.get(right_c.response_id)
        if left is None or right is None or left.text is None or right.text is None:
            continue  # re-run or deleted since the pairs were read
        question = pairwise.PairQuestion(conversation=_conversation(left, right),
                                         first=left.text, second=right.text, prompt_id=left.prompt_id)
        out.append((left, right, question))
    return out


def _ask(model_id: str, questions: list[pairwise.PairQuestion],
         budget_s: float) -> list[pairwise.BothOrders | None]:
    """Each question both ways round, through the router; None for a pair not answered within ``budget_s``."""
    config, cache = engine_config(), response_cache()

    async def ask_all() -> list[pairwise.BothOrders | None]:
        async with Router(config.providers, cache=cache) as router:
            tasks = [asyncio.ensure_future(pairwise.ask_both_orders(
                model_id, q, router.complete, label=f"pair judge on “{q.prompt_id[:100]}”")) for q in questions]
            if not tasks:
                return []
            done, pending = await asyncio.wait(tasks, timeout=budget_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            return [task.result() if task in done else None for task in tasks]

    try:
        return asyncio.run(ask_all())
    finally:
        close = getattr(cache, "close", None)
        if close is not None:
            close()


def _finish(job_id: int, status: str, **fields) -> None:
    PairJudging.objects.filter(pk=job_id).update(status=status, finished_at=timezone.now(), **fields)


def _reason(text: str) -> str:
    return pairwise.clip(" ".join(str(text).split()), PairJudging.MAX_REASON_CHARS)


def run_judging(job_id: int) -> None:
    """The task: claim the job, choose its pairs, ask the judge both ways round, store what it said."""
    claimed = PairJudging.objects.filter(pk=job_id, status=JudgingStatus.QUEUED).update(
        status=JudgingStatus.RUNNING, started_at=timezone.now())
    if not claimed:  # another worker has it, or it is over (a task delivered twice)
        return
    job = PairJudging.objects.select_related("blueprint").get(pk=job_id)
    try:
        _judge_job(job)
    except Exception:
        log.exception("pair judging %s stopped", job_id)
        _finish(job_id, JudgingStatus.FAILED, error="stopped by an internal error (the worker's log says more); "
                                                    "nothing it asked was stored")
        raise


def _judge_job(job: PairJudging) -> None:
    problems = check_models([job.model_id], engine_config().providers)
    if problems:
        _finish(job.pk, JudgingStatus.FAILED, error=_reason(f"the judge model cannot be called: "
                                                             f"{problems[0].message}"))
        return
    scope = _job_scope(job)
    who = judge_who(job.model_id)
    pairs = choose_pairs(scope.candidates(), judged_by(scope, who), job.pairs_requested, random.Random(job.pk))
    asked = _questions(pairs)
    PairJudging.objects.filter(pk=job.pk).update(pairs_chosen=len(asked))
    budget = judging_budget_s()
    results = _ask(job.model_id, [q for _, _, q in asked], budget)

    judgements, failures, failed = [], [], 0
    for (left, right, question), both in zip(asked, results):
        for first, second, verdict in ((left, right, both.a_first if both else None),
                                       (right, left, both.b_first if both else None)):
            if verdict is not None and verdict.ok:
                judgements.append(PairJudgement(
                    left=first, right=second, winner=WINNER_OF_CHOICE[verdict.choice], judging=job, who=who,
                    reason=verdict.reflection[:PairJudgement.MAX_REASON_CHARS]))
                continue
            failed += 1
            if len(failures) < PairJudging.MAX_FAILURES:
                reason = verdict.error if verdict is not None else f"not asked: the job's {budget:,.0f} s ran out"
                failures.append({"prompt": question.prompt_id, "first": first.variant_id,
                                 "second": second.variant_id, "reason": _reason(reason)})
    with transaction.atomic():
        PairJudgement.objects.bulk_create(judgements)
        if failed and not judgements:
            _finish(job.pk, JudgingStatus.FAILED, asked_failed=failed, failures=failures,
                    error="no answer could be used: every asking failed (the reasons are below)")
        else:
            _finish(job.pk, JudgingStatus.DONE, asked_done=len(judgements), asked_failed=failed, failures=failures)


@dataclass
class JudgeTable:
    """One judge model's answers in view: its ratings, and what asking each pair both ways round showed."""

    model_id: str
    ratings: list[bt.Rating]
    figures: pairwise.PositionFigures
    answers: int


def judge_tables(scope: Scope) -> list[JudgeTable]:
    """A table for each judge model whose answers are in the scope, by model id."""
    rows = scope.judge_judgements().values_list("judging__model_id", "judging_id", "left_id", "right_id",
                                                "left__variant_id", "right__variant_id", "winner")
    by_model: dict[str, list[tuple]] = defaultdict(list)
    for row in rows:
        by_model[row[0]].append(row[1:])
    tables = []
    for model_id in sorted(by_model):
        answers = by_model[model_id]
        orders: dict[tuple, list[str]] = defaultdict(list)
        for job_id, left, right, _a, _b, winner in answers:
            orders[(job_id, min(left, right), max(left, right))].append(CHOICE_OF_WINNER[winner])
        figures = pairwise.position_figures((choices[0], choices[1] if len(choices) > 1 else None)
                                            for choices in orders.values())
        ratings = fitted_ratings([bt.Comparison(a, b, OUTCOME_OF_WINNER[w]) for *_, a, b, w in answers])
        tables.append(JudgeTable(model_id, ratings, figures, len(answers)))
    return tables


def judging_context(scope: Scope) -> dict:
    jobs = list(scope.judgings()[:JUDGINGS_SHOWN])
    for job in jobs:
        job.stalled = _stalled(job)
    return {"judgings": jobs, "judging_live": any(j.is_open and not j.stalled for j in jobs),
            "judge_tables": judge_tables(scope), "max_pairs": PairJudging.MAX_PAIRS,
            "max_judge_chars": MAX_JUDGE_ID_CHARS,
            "judge_form": {"model": default_judge_model(), "pairs": PairJudging.DEFAULT_PAIRS}}


def _judging(request, scope: Scope):
    """GET (htmx): the LLM judge's progress and tables, polled while a job is asking; POST: start a job."""
    if request.method == "GET":
        if not request.htmx:
            return redirect(f"{scope.url}#llm-judge")
        context = judging_context(scope) | {"scope": scope}
        response = render(request, "runs/pairs.html#judging", context)
        if not context["judging_live"]:
            response.status_code = HttpResponseStopPolling.status_code
        return response
    try:
        model_id, count = _judging_fields(request.POST)
        start_judging(scope, model_id, count)
    except Refused as refused:
        typed = {"model": request.POST.get("model", "")[:MAX_JUDGE_ID_CHARS + 50],
                 "pairs": request.POST.get("pairs", "")[:10]}
        if request.htmx:
            return render(request, "runs/pairs.html#llm-judge",
                          judging_context(scope) | {"scope": scope, "judge_error": refused.message,
                                                     "judge_form": typed})
        return render(request, "runs/pairs.html", page_context(
            request, scope, judging=judging_context(scope), judge_error=refused.message, judge_form=typed,
            pair=next_pair(scope, who_of(request))))
    if not request.htmx:
        return redirect(f"{scope.url}#llm-judge")
    return render(request, "runs/pairs.html#llm-judge", judging_context(scope) | {
        "scope": scope, "judge_form": {"model": model_id, "pairs": count}})  # what was asked, to ask again


@require_http_methods(["GET", "POST"])
@with_csp
def run_pairs_judge(request, run_id):
    """One run's LLM judge: POST asks it about pairs (model, number of pairs); GET (htmx) polls its progress."""
    return _judging(request, run_scope(run_id))


@require_http_methods(["GET", "POST"])
@with_csp
def blueprint_pairs_judge(request):
    """The same across the recent runs of ``?blueprint=<slug>``."""
    slug = request.GET.get("blueprint", "").strip()
    if not slug:
        raise Http404("which blueprint? ?blueprint=<slug>")
    return _judging(request, blueprint_scope(slug))
