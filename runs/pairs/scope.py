"""The Pairs page: blind pairwise preferences between model variants, and the ratings they add up to.

A reviewer sees one prompt and two responses to it by different model variants (the responses the results
matrix's cells stand for, ``Cell.response_id``), placed left and right at random, with no model name
anywhere on the pair. They choose A, B or a tie, optionally say why, and only then see who was who.
The next pair is chosen so every pair of models is judged about as often: first the pair of models judged
least often by everyone in view (then by this reviewer), then, among that pair's prompts, the prompt this
reviewer has judged least, never a pair of responses they already judged while another is left.

``/runs/<id>/pairs`` draws pairs from one run; ``/runs/pairs?blueprint=<slug>`` from the most recent runs
of a blueprint (each pair still comes from one run, so both answered the same revision of the prompt).
Each judgement is a ``PairJudgement``; the Bradley-Terry ratings of runs/engine/ratings.py are fitted from
every person's judgement in view. Responses are untrusted: they are rendered by runs/rendering.py, as the
response page does, and every input is bounded (ids, the reason, the reviewer's name).

An LLM judge can be asked too (``llm_judge``: ``PairJudging``, a task): pairs chosen as a person's
are, each asked both ways round (runs/engine/pairwise.py); each answer that reads is a ``PairJudgement`` of
its job, named ``judge:<model id>`` (a name people cannot take). Its ratings and its consistency and
position-bias figures are shown apart from people's, never mixed into their ratings.
"""

from __future__ import annotations

import hashlib
import random
import re
import threading
from collections import Counter, OrderedDict, defaultdict
from dataclasses import dataclass
from itertools import combinations
from urllib.parse import urlencode

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from django.urls import reverse

from blueprints.models import Blueprint

from ..engine import ratings as bt
from ..models import PairJudgement, PairJudging, Response, ResponseStatus, Run
from ..records import run_matrix
from ..rendering import render as render_text
from ..pages import blueprint_of

SESSION_WHO = "pairs_who"  # the reviewer's name, remembered for the next pair
PAIR_TEXT_CHARS = 20_000  # each side renders this much; the rest is a link away
BLUEPRINT_RUNS = 20  # the blueprint-wide page draws from this many of its most recent runs
MAX_ID_DIGITS = 12
WINNER_WORDS = {"left": "A", "right": "B", "tie": "a tie"}
JUDGE_WHO = "judge:"  # an LLM judge's answers are by "judge:<model id>"; a person's name may not start so
MAX_JUDGE_ID_CHARS = PairJudgement.MAX_WHO_CHARS - len(JUDGE_WHO)



# --- choosing the next pair (plain Python) ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class Candidate:
    """One cell that can be shown: its run, prompt and variant, and the response it stands for."""

    run_id: int
    prompt_index: int
    prompt_id: str
    variant_id: str
    response_id: int


@dataclass(frozen=True, slots=True)
class Judged:
    """What the next-pair choice needs of one of the reviewer's judgements."""

    prompt_id: str
    variant_a: str
    variant_b: str
    response_a: int
    response_b: int


def choose_pair(candidates: list[Candidate], judged: list[Judged], rng: random.Random,
                everyone: list[Judged] | None = None) -> tuple[Candidate, Candidate] | None:
    """The next pair for a reviewer, as (left, right); None when they have judged every pair on offer.

    ``judged``: the reviewer's own judgements; ``everyone``: every judgement in view that the balance counts
    (the reviewer's among them; None: only theirs). The pair of models judged least often by everyone first
    (so every pair is judged about as often), then by this reviewer, then that pair's prompt this reviewer
    has judged least, then the one everyone has (ties broken at random); a pair of responses the reviewer
    already judged is not offered again."""
    groups: dict[tuple[int, int], dict[str, Candidate]] = defaultdict(dict)
    for c in candidates:
        groups[(c.run_id, c.prompt_index)].setdefault(c.variant_id, c)
    groups_of: dict[str, set] = defaultdict(set)
    for key, cells in groups.items():
        if len(cells) > 1:
            for variant in cells:
                groups_of[variant].add(key)
    everyone = judged if everyone is None else everyone
    pair_count = Counter(tuple(sorted((j.variant_a, j.variant_b))) for j in judged)
    all_pair_count = Counter(tuple(sorted((j.variant_a, j.variant_b))) for j in everyone)
    prompt_count = Counter(j.prompt_id for j in judged)
    all_prompt_count = Counter((j.prompt_id, *sorted((j.variant_a, j.variant_b))) for j in everyone)
    seen = {frozenset((j.response_a, j.response_b)) for j in judged}

    model_pairs = [(v, w) for v, w in combinations(sorted(groups_of), 2) if groups_of[v] & groups_of[w]]
    rng.shuffle(model_pairs)
    model_pairs.sort(key=lambda p: (all_pair_count[p], pair_count[p]))
    for v, w in model_pairs:
        keys = sorted(groups_of[v] & groups_of[w])
        rng.shuffle(keys)
        keys.sort(key=lambda k: (prompt_count[groups[k][v].prompt_id],
                                 all_prompt_count[(groups[k][v].prompt_id, v, w)]))
        for key in keys:
            a, b = groups[key][v], groups[key][w]
            if frozenset((a.response_id, b.response_id)) not in seen:
                return (a, b) if rng.random() < 0.5 else (b, a)
    return None


# --- where pairs come from -------------------------------------------------------------------


@dataclass
class Scope:
    """One run, or the recent runs of one blueprint: where pairs are drawn from and whose judgements count."""

    blueprint: Blueprint
    runs: list[Run]
    run: Run | None = None

    @property
    def url(self) -> str:
        if self.run is not None:
            return reverse("runs:pairs", args=(self.run.pk,))
        return f"{reverse('runs:pairs-blueprint')}?{urlencode({'blueprint': self.blueprint.slug})}"

    @property
    def judge_url(self) -> str:
        """Where the LLM judge is asked (POST) and its progress read (GET, htmx)."""
        if self.run is not None:
            return reverse("runs:pairs-judge", args=(self.run.pk,))
        return f"{reverse('runs:pairs-blueprint-judge')}?{urlencode({'blueprint': self.blueprint.slug})}"

    def judgements(self) -> QuerySet:
        """Every judgement about this scope's responses: people's and LLM judges'."""
        if self.run is not None:
            return PairJudgement.objects.filter(left__run=self.run)
        return PairJudgement.objects.filter(left__run__blueprint=self.blueprint)

    def people_judgements(self) -> QuerySet:
        return self.judgements().filter(judging__isnull=True)

    def judge_judgements(self) -> QuerySet:
        return self.judgements().filter(judging__isnull=False)

    def judgings(self) -> QuerySet:
        """The LLM judges' jobs started from this page."""
        if self.run is not None:
            return PairJudging.objects.filter(run=self.run)
        return PairJudging.objects.filter(blueprint=self.blueprint, run__isnull=True)

    def candidates(self) -> list[Candidate]:
        out = []
        for run in self.runs:
            spec = blueprint_of(run)
            if spec is None:
                continue
            shown = set(Response.objects.filter(run=run, status=ResponseStatus.DONE, text__isnull=False)
                        .values_list("pk", flat=True))
            for cell in run_matrix(run, spec.prompts).cells.values():
                if cell.response_id in shown:
                    out.append(Candidate(run.pk, cell.prompt_index, cell.prompt_id, cell.variant_id,
                                         cell.response_id))
        return out


def run_scope(run_id: int) -> Scope:
    run = get_object_or_404(Run.objects.select_related("blueprint", "revision"), pk=run_id)
    return Scope(blueprint=run.blueprint, runs=[run], run=run)


def blueprint_scope(slug: str) -> Scope:
    blueprint = get_object_or_404(Blueprint, slug=slug[:300])
    runs = list(Run.objects.filter(blueprint=blueprint).select_related("blueprint", "revision")
                .order_by("-created_at", "-id")[:BLUEPRINT_RUNS])
    return Scope(blueprint=blueprint, runs=runs)


# --- what the page shows ---------------------------------------------------------------------


OUTCOME_OF_WINNER = {"left": "a", "right": "b", "tie": "tie"}


FITS_KEPT = 32  # Bradley-Terry fits kept in this process (each a few kilobytes)
_FITS: OrderedDict[bytes, object] = OrderedDict()
_FITS_LOCK = threading.Lock()


def _kept(kind: str, counted: Counter, fit):
    """``fit()``, kept under a digest of ``kind`` and ``counted`` (what the fit reads) for the next view."""
    key = hashlib.blake2b(repr((kind, sorted(counted.items()))).encode("utf-8"), digest_size=20).digest()
    with _FITS_LOCK:
        kept = _FITS.get(key)
        if kept is not None:
            _FITS.move_to_end(key)
            return kept
    fitted = fit()
    with _FITS_LOCK:
        _FITS[key] = fitted
        while len(_FITS) > FITS_KEPT:
            _FITS.popitem(last=False)
    return fitted


def fitted_ratings(comparisons: list[bt.Comparison]) -> list[bt.Rating]:
    """``bt.ratings(comparisons)``, kept in this process until the judgements change.

    A fit with its bootstrap intervals takes seconds with a hundred models, so a page must not refit on every
    view. It is kept under the judgements themselves: a fit is fully given by how many times each (model,
    model, outcome) was judged (the fit and its resamples read only those counts, from a fixed seed), so the
    key is a digest of those counts. A judgement added, or gone with its run, is a new key and a new fit;
    nothing else can make a kept fit out of date. The last ``FITS_KEPT`` fits are kept."""
    return _kept("bt", Counter((c.a, c.b, c.outcome) for c in comparisons), lambda: bt.ratings(comparisons))


def fitted_style(comparisons: list[bt.Comparison]) -> bt.StyleFit:
    """``bt.style_ratings(comparisons)``, kept the same way; its key also holds each judgement's style
    differences (a response re-run with another answer is a new key)."""
    return _kept("style", Counter((c.a, c.b, c.outcome, c.style) for c in comparisons),
                 lambda: bt.style_ratings(comparisons))


STYLES_KEPT = 50_000  # answers' style counts kept in this process (a few dozen bytes each)
STYLE_BATCH = 2_000  # responses read at once
_STYLES: OrderedDict[tuple, tuple] = OrderedDict()


def _styles(keys: set[tuple]) -> dict[tuple, tuple]:
    """``bt.style_of`` of each response named by (id, finished_at), counted once per process: a response re-run
    in place finishes again, so it is a new key. Only the texts not yet counted are read."""
    with _FITS_LOCK:
        found = {k: _STYLES[k] for k in keys if k in _STYLES}
    wanted = sorted({pk for pk, _ in keys - found.keys()})
    for start in range(0, len(wanted), STYLE_BATCH):
        rows = (Response.objects.filter(pk__in=wanted[start:start + STYLE_BATCH])
                .values_list("pk", "finished_at", "text"))
        counted = {(pk, when): bt.style_of(text) for pk, when, text in rows.iterator(chunk_size=200)
                   if text is not None}
        found.update(counted)
        with _FITS_LOCK:
            _STYLES.update(counted)
            while len(_STYLES) > STYLES_KEPT:
                _STYLES.popitem(last=False)
    return found


def comparisons_of(judgements: QuerySet) -> list[bt.Comparison]:
    """Each judgement as a comparison with the style differences of its two answers (``bt.style_of``); no
    style (left out of the style fit) when an answer has no text now (re-run and not finished again)."""
    rows = list(judgements.values_list("left__variant_id", "right__variant_id", "winner", "left_id",
                                       "left__finished_at", "right_id", "right__finished_at"))
    styles = _styles({(pk, when) for row in rows for pk, when in (row[3:5], row[5:7])})
    out = []
    for a, b, w, la, lw, ra, rw in rows:
        left, right = styles.get((la, lw)), styles.get((ra, rw))
        style = bt.style_difference(left, right) if left is not None and right is not None else ()
        out.append(bt.Comparison(a, b, OUTCOME_OF_WINNER[w], style))
    return out


def ratings_of(scope: Scope) -> tuple[list[bt.Rating], bt.StyleFit]:
    """Bradley-Terry ratings (ties half a win each) from every person's judgement in the scope, raw and
    controlled for style (an LLM judge's answers have their own tables: ``judge_tables``); both fits are kept
    until the judgements change."""
    comparisons = comparisons_of(scope.people_judgements())
    return fitted_ratings(comparisons), fitted_style(comparisons)


def _judged(rows: QuerySet) -> list[Judged]:
    return [Judged(*row) for row in rows.values_list("left__prompt_id", "left__variant_id", "right__variant_id",
                                                     "left_id", "right_id")]


def judged_by(scope: Scope, who: str) -> list[Judged]:
    return _judged(scope.judgements().filter(who=who))


def judged_by_people(scope: Scope) -> list[Judged]:
    """Every person's judgement in view: what the next pair balances (an LLM judge balances its own)."""
    return _judged(scope.people_judgements())


def _side(letter: str, response: Response, prompt) -> dict:
    mode = prompt.render_as if prompt is not None else "markdown"
    return {"letter": letter, "label": f"Response {letter}", "response": response,
            "rendered": render_text(response.text, mode, limit=PAIR_TEXT_CHARS)}


def turns_of(prompt) -> list[dict]:
    """The prompt's authored turns (no system prompt: a variant's own one could tell the models apart)."""
    return [{"role": m.role, "content": m.content} for m in prompt.messages] if prompt is not None else []


def pair_context(scope: Scope, left: Response, right: Response) -> dict:
    run = left.run
    spec = blueprint_of(run)
    prompt = run.prompt(left.prompt_index, spec) if spec is not None else None
    sides = [_side("A", left, prompt), _side("B", right, prompt)]
    return {"left": sides[0], "right": sides[1], "sides": sides, "turns": turns_of(prompt), "pair_run": run}


def next_pair(scope: Scope, who: str) -> dict | None:
    chosen = choose_pair(scope.candidates(), judged_by(scope, who), random.Random(), judged_by_people(scope))
    if chosen is None:
        return None
    rows = Response.objects.select_related("run").in_bulk([chosen[0].response_id, chosen[1].response_id])
    return pair_context(scope, rows[chosen[0].response_id], rows[chosen[1].response_id])


def page_context(request, scope: Scope, *, judging: dict | None = None, **extra) -> dict:
    """The page's context; ``judging``: the LLM judge's section (``llm_judge.judging_context``), None for a
    fragment without it (its tables are a fit of their own)."""
    who = request.session.get(SESSION_WHO, "")
    rated, styled = ratings_of(scope)
    context = {"scope": scope, "run": scope.run, "blueprint": scope.blueprint, "who": who,
               "ratings": rated, "style_fit": styled, "judged_count": scope.people_judgements().filter(who=who).count(),
               "total_count": scope.people_judgements().count(), "max_reason": PairJudgement.MAX_REASON_CHARS,
               "max_who": PairJudgement.MAX_WHO_CHARS, "intervals": bt.DEFAULT_BOOTSTRAP,
               **(judging or {})}
    context.update(extra)
    return context


# --- reading a judgement from a form ---------------------------------------------------------


class Refused(Exception):
    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def _response_id(value: str) -> int:
    value = (value or "").strip()
    if not value.isdigit() or len(value) > MAX_ID_DIGITS:
        raise Refused("That pair is not one this page offered; here is another.")
    return int(value)


def offered_pair(scope: Scope, post) -> tuple[Response, Response]:
    """The two responses a form names, if they are a fair pair of this scope: one run in it, one prompt, two
    model variants, both generated."""
    left_id, right_id = _response_id(post.get("left", "")), _response_id(post.get("right", ""))
    rows = (Response.objects.select_related("run").filter(run__in=scope.runs, status=ResponseStatus.DONE,
                                                          text__isnull=False).in_bulk([left_id, right_id]))
    left, right = rows.get(left_id), rows.get(right_id)
    if (left is None or right is None or left.run_id != right.run_id or left.prompt_index != right.prompt_index
            or left.variant_id == right.variant_id):
        raise Refused("That pair is not one this page offered; here is another.")
    return left, right


def clean_text(value: str) -> str:
    return (value or "").replace("\x00", "").strip()


def judgement_fields(post) -> dict:
    winner = post.get("winner", "")
    if winner not in WINNER_WORDS:
        raise Refused("Choose A, B or a tie (keys a, b, t), then submit.")
    reason = clean_text(post.get("reason", ""))
    if len(reason) > PairJudgement.MAX_REASON_CHARS:
        raise Refused(f"A reason is at most {PairJudgement.MAX_REASON_CHARS:,} characters; "
                      f"this one has {len(reason):,}.")
    who = " ".join(clean_text(post.get("who", "")).split())
    if len(who) > PairJudgement.MAX_WHO_CHARS:
        raise Refused(f"A name is at most {PairJudgement.MAX_WHO_CHARS} characters.")
    if _RESERVED_WHO.match(who):
        raise Refused(f"A name starting with “{JUDGE_WHO}” is kept for the LLM judges' answers; "
                      "write your own name, or leave it empty.")
    return {"winner": winner, "reason": reason, "who": who}


_RESERVED_WHO = re.compile(r"judge\s*:", re.I)


def who_of(request) -> str:
    return request.session.get(SESSION_WHO, "")
