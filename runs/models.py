# Over 500 lines: every model of the runs app, so the schema reads in one file.
"""Doing a run, and what came out of it.

A ``Run`` pins one ``BlueprintRevision``. Starting it creates one ``Response``
row per prompt x model variant x trial, all ``pending``; workers claim them in
chunks with a conditional update, so a duplicate task delivery does nothing
and a restart never redoes a finished item. Each response is generated and
then judged at once; its ``PointAssessment`` rows keep every judge's verdict.
When the last item finishes, the run's aggregates are stored on the row, so
pages never recompute them from every assessment.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils import timezone


class RunStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


FINISHED = (RunStatus.DONE, RunStatus.FAILED, RunStatus.CANCELLED)


class Run(models.Model):
    revision = models.ForeignKey("blueprints.BlueprintRevision", on_delete=models.PROTECT, related_name="runs")
    blueprint = models.ForeignKey("blueprints.Blueprint", on_delete=models.CASCADE, related_name="runs")
    label = models.CharField(max_length=80, db_index=True)  # hash of the whole revision text (deviation 12)
    name = models.CharField(max_length=200, blank=True)  # the user's name for it; "" shows "Run <id>"
    status = models.CharField(max_length=12, choices=RunStatus.choices, default=RunStatus.QUEUED, db_index=True)
    source = models.CharField(max_length=12, default="web")  # web, cli, api
    # What the run resolved at start: model ids (custom model objects as dicts), the judge plan, options.
    resolved_models = models.JSONField(default=list)
    judges = models.JSONField(default=dict)
    options = models.JSONField(default=dict)  # fresh, trials, max_tokens, ...
    cancel_requested = models.BooleanField(default=False)
    # A spending cap in US dollars (None: none). No call is sent once what was spent plus what is in flight
    # (each call estimated from its tokens and its model's price) would pass it; the run then stops as
    # cancelled with ``stopped_reason`` "budget", and resumes with a higher cap (docs/runs.md, "Budget").
    budget_usd = models.FloatField(null=True, blank=True)
    spent_usd = models.FloatField(default=0.0)  # the budget's ledger: what each call cost as it was answered
    # Why a cancelled run stopped when nobody cancelled it: "budget" (its cap), "replay" (an answer missing
    # from the cache while replaying); ``stopped_detail`` says it in words.
    stopped_reason = models.CharField(max_length=20, blank=True)
    stopped_detail = models.TextField(blank=True)
    # What the run pinned, to rebuild it (runs/replay.py): revision, models, parameters, judges, scale, trials.
    # The cache key of each call it made is kept in each response's call log (``cacheKey``, with its trial).
    manifest = models.JSONField(default=dict, blank=True)

    items_total = models.PositiveIntegerField(default=0)
    items_done = models.PositiveIntegerField(default=0)
    items_failed = models.PositiveIntegerField(default=0)
    judge_calls_total = models.PositiveIntegerField(default=0)
    judge_calls_done = models.PositiveIntegerField(default=0)
    judge_calls_failed = models.PositiveIntegerField(default=0)

    candidate_input_tokens = models.BigIntegerField(default=0)
    candidate_output_tokens = models.BigIntegerField(default=0)
    candidate_cost_usd = models.FloatField(default=0.0)
    candidate_cost_unknown = models.PositiveIntegerField(default=0)  # calls whose price we do not know
    # Requests that left for a provider (each HTTP attempt; no cache hit), every attempt of every item included.
    candidate_calls_sent = models.PositiveIntegerField(default=0)
    judge_calls_sent = models.PositiveIntegerField(default=0)
    judge_input_tokens = models.BigIntegerField(default=0)
    judge_output_tokens = models.BigIntegerField(default=0)
    judge_cost_usd = models.FloatField(default=0.0)
    judge_cost_unknown = models.PositiveIntegerField(default=0)

    waiting = models.JSONField(default=dict, blank=True)  # model id -> "429 from openai, attempt 2 of 3 in 12 s"
    aggregates = models.JSONField(default=dict, blank=True)  # per model variant, per cell, agreement; at the end
    # Moves whenever a stored result changes (an item stored, an override, an annotation): a results matrix
    # kept for the run is good while this, and the run's status, are what they were (records.run_matrix).
    results_version = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)

    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Time spent working: a resume or a retry adds its own stretch, the idle time between does not count.
    worked_s = models.FloatField(default=0.0)
    resumed_at = models.DateTimeField(null=True, blank=True)  # when the current stretch began (None: the start)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["blueprint", "-created_at"], name="run_blueprint_recent")]

    def __str__(self):
        return f"run {self.pk} of {self.blueprint_id} ({self.status})"

    def elapsed_s(self, now=None) -> float | None:
        """Seconds the run has spent working: finished stretches, and the current one while it goes."""
        begun = self.resumed_at or self.started_at
        if begun is None:
            return None if not self.worked_s else self.worked_s
        if self.finished_at is not None and self.finished_at >= begun:
            return self.worked_s + (self.finished_at - begun).total_seconds()
        if self.is_finished:
            return self.worked_s
        return self.worked_s + ((now or timezone.now()) - begun).total_seconds()

    @property
    def display_name(self) -> str:
        return self.name or f"Run {self.pk}"

    def rename(self, name: str) -> None:
        """Give the run a name (blank: back to "Run <id>"); names need not be unique."""
        name = " ".join(name.split())
        if len(name) > 200:
            raise ValidationError("A run's name is at most 200 characters.")
        self.name = name
        self.save(update_fields=["name"])

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED

    def variants(self, blueprint=None) -> list:
        """The run's model variants (models x temperatures x systems) in the order its items were made."""
        from blueprints.spec.schema import CustomModel
        from runs.engine.generate import expand_variants

        if blueprint is None:
            from .spec import parsed_blueprint

            blueprint = parsed_blueprint(self.revision)
        customs = {m.id: m for m in blueprint.models if isinstance(m, CustomModel)}
        models = [customs.get(m["id"]) if isinstance(m, dict) else m for m in self.resolved_models]
        return expand_variants(blueprint, [m for m in models if m is not None])

    def prompt(self, index: int, blueprint=None):
        """The prompt at ``index`` of the run's blueprint as parsed (pass ``blueprint`` if you have it), or None."""
        if blueprint is None:
            from .spec import parsed_blueprint

            blueprint = parsed_blueprint(self.revision)
        return blueprint.prompts[index] if 0 <= index < len(blueprint.prompts) else None

    @property
    def overall_score(self) -> float | None:
        return (self.aggregates or {}).get("overall", {}).get("mean")



class ResponseStatus(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"  # generation failed, or every judge call failed: shown, retried by "retry failed"


class ResponseManager(models.Manager):
    """Responses without their call logs: those are read one response at a time (``Response.calls``)."""

    def get_queryset(self):
        return super().get_queryset().defer("candidate_calls", "judge_calls")


class Response(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="responses")
    prompt_id = models.CharField(max_length=300)
    prompt_index = models.PositiveIntegerField(default=0)  # the prompt's place in the blueprint
    variant_id = models.CharField(max_length=400)  # model[temp:T] or model[temp:T][sp_idx:i]
    model_id = models.CharField(max_length=300)  # the base model
    # What the variant id says, kept as values: its place in Run.variants(), the temperature the
    # prompt is sent at, and the `systems` entry it uses (None without a list).
    variant_index = models.PositiveIntegerField(null=True, blank=True)
    temperature = models.FloatField(null=True, blank=True)
    system_index = models.PositiveSmallIntegerField(null=True, blank=True)
    trial = models.PositiveSmallIntegerField(default=0)
    status = models.CharField(max_length=10, choices=ResponseStatus.choices, default=ResponseStatus.PENDING)
    claimed_by = models.CharField(max_length=100, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)

    conversation = models.JSONField(default=list)  # [{role, content, generated}]
    text = models.TextField(null=True, blank=True)  # the subject of scoring: all generated turns
    final_text = models.TextField(null=True, blank=True)
    tool_calls = models.JSONField(default=list)
    latency_ms = models.FloatField(null=True, blank=True)
    input_tokens = models.IntegerField(null=True, blank=True)
    output_tokens = models.IntegerField(null=True, blank=True)
    cost_usd = models.FloatField(null=True, blank=True)
    cached = models.BooleanField(default=False)
    # Of the generation's calls: requests that left for a provider, and calls of unknown price (sent, no cost).
    candidate_calls_sent = models.PositiveIntegerField(default=0)
    candidate_cost_unknown = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)  # generation failed: nothing was scored

    score = models.FloatField(null=True, blank=True)  # coverage (2 places), overrides applied; None: not evaluated
    judged_score = models.FloatField(null=True, blank=True)  # the same before any override
    score_basis = models.CharField(max_length=12, blank=True)
    not_evaluated_reason = models.TextField(blank=True)
    similarity = models.FloatField(null=True, blank=True)
    calculation = models.JSONField(default=dict, blank=True)  # the worked calculation, for the response page
    agreement = models.JSONField(default=dict, blank=True)  # the upstream's judge-agreement figures
    judge_usage = models.JSONField(default=dict, blank=True)
    judge_errors = models.PositiveIntegerField(default=0)  # judge verdicts that failed (retry-failed redoes them)
    judge_calls_sent = models.PositiveIntegerField(default=0)  # the judges' requests that left for a provider
    violated_should_not = models.BooleanField(default=False)
    disagreement = models.BooleanField(default=False)
    # The pass/fail layer (prompts with verdicts, gates or per-check minimums; docs/scoring.md section 7).
    verdict = models.CharField(max_length=12, blank=True)  # pass, borderline, fail; "": none or undecided
    verdict_reason = models.TextField(blank=True)
    score_before_gates = models.FloatField(null=True, blank=True)  # the score a failed gate set to 0
    gates_failed = models.JSONField(default=list, blank=True)  # labels of the failed required checks
    checks = models.JSONField(default=list, blank=True)  # [{id, label, kind, score, gate, minScore, passed}]
    # Every call as sent and answered (runs/engine/calls.py), zlib-compressed JSON, read when a reviewer asks.
    # Candidate and judge calls apart: judging again replaces the judges' and keeps the generation's.
    candidate_calls = models.BinaryField(null=True, blank=True)
    judge_calls = models.BinaryField(null=True, blank=True)
    fresh_requested = models.BooleanField(default=False)  # re-run on its own: neither it nor its judges from the cache

    objects = ResponseManager()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["prompt_index", "variant_id", "trial"]
        constraints = [
            # By position, not id: two prompts sharing an id (a warning) still both run.
            models.UniqueConstraint(fields=["run", "prompt_index", "variant_id", "trial"], name="response_unique_item"),
        ]
        indexes = [
            models.Index(fields=["run", "status"], name="response_run_status"),
            models.Index(fields=["run", "variant_id"], name="response_run_variant"),
            models.Index(fields=["run", "prompt_index"], name="response_run_prompt"),
        ]

    def __str__(self):
        return f"{self.prompt_id} x {self.variant_id}"

    def call_log(self) -> list[dict]:
        """Every call this response made, candidate calls first, as ``runs/engine/calls.py`` keeps them; with
        earlier attempts (``EarlierAttempt``), theirs first, each call with ``attempt``: the one it belonged to."""
        from runs.engine import calls

        made, judged = Response.objects.filter(pk=self.pk).values_list("candidate_calls", "judge_calls").first() \
            or (None, None)
        earlier = list(EarlierAttempt.objects.filter(response_id=self.pk).order_by("pk")
                       .values_list("generation", "why", "calls"))
        if not earlier:
            return [*calls.unpack(made), *calls.unpack(judged)]
        out = []
        for number, (_, why, blob) in enumerate(earlier, start=1):
            out.extend({**c, "attempt": number, "attemptEnded": why} for c in calls.unpack(blob))
        # The generation kept is from the attempt after the last one whose generation gave way.
        generated_in = 1 + max((n for n, (generation, _, _) in enumerate(earlier, start=1) if generation), default=0)
        current = len(earlier) + 1
        kept = [{**c, "attempt": generated_in} for c in calls.unpack(made)]
        # By attempt, and in each its candidate calls before its judges' (as they were made).
        out = sorted([*out, *kept], key=lambda c: (c["attempt"], c.get("purpose") == "judge"))
        return [*out, *({**c, "attempt": current} for c in calls.unpack(judged))]

    def variant_in(self, variants: list, prompt):
        """This item's model variant among ``Run.variants()`` (None when the revision no longer has it)."""
        if self.variant_index is not None:
            variant = variants[self.variant_index] if self.variant_index < len(variants) else None
            return variant if variant is not None and variant.id_for(prompt) == self.variant_id else None
        # Rows made before variant_index was stored.
        return next((v for v in variants if v.id_for(prompt) == self.variant_id), None)

    @property
    def evaluated(self) -> bool:
        return self.score is not None

    @property
    def passed(self) -> bool | None:
        return None if not self.verdict else self.verdict == "pass"


class EarlierAttempt(models.Model):
    """What an earlier attempt of a response spent that the response no longer holds: a retry or a re-run
    replaced it, or a cancel (a budget) stopped it under way. Its calls, tokens and cost stay in the run's
    totals (``runs.engine.aggregates``), and its calls on the response's 'Every call', as "attempt N"."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="earlier_attempts")
    response = models.ForeignKey(Response, on_delete=models.CASCADE, related_name="earlier_attempts")
    why = models.CharField(max_length=12)  # "retry", "re-run", "stopped"
    generation = models.BooleanField(default=False)  # its generation gave way (its candidate calls are here)
    candidate_calls_sent = models.PositiveIntegerField(default=0)
    candidate_input_tokens = models.BigIntegerField(default=0)
    candidate_output_tokens = models.BigIntegerField(default=0)
    candidate_cost_usd = models.FloatField(null=True, blank=True)  # None: no call of known price
    candidate_cost_unknown = models.PositiveIntegerField(default=0)
    judge_calls_sent = models.PositiveIntegerField(default=0)
    judge_usage = models.JSONField(default=dict, blank=True)  # as Response.judge_usage (JudgeUsage.to_dict)
    calls = models.BinaryField(null=True, blank=True)  # its calls, candidate then judge (runs/engine/calls.py)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["pk"]

    def __str__(self):
        return f"earlier attempt of response {self.response_id} ({self.why})"


class PointAssessment(models.Model):
    response = models.ForeignKey(Response, on_delete=models.CASCADE, related_name="assessments")
    position = models.PositiveIntegerField()  # rubric order as authored (should, then should_not)
    kind = models.CharField(max_length=10)  # function or judged
    text = models.TextField(blank=True)  # the criterion, for judged points
    fn = models.CharField(max_length=60, blank=True)
    fn_args = models.JSONField(null=True, blank=True)
    citation = models.JSONField(null=True, blank=True)
    multiplier = models.FloatField(default=1.0)
    path_id = models.CharField(max_length=40, blank=True)  # "" required; path_2; not_path_0
    inverted = models.BooleanField(default=False)
    key_point_text = models.TextField(blank=True)
    source_line = models.PositiveIntegerField(null=True, blank=True)

    score = models.FloatField(null=True, blank=True)  # after inversion; None: not evaluated
    raw_score = models.FloatField(null=True, blank=True)
    reflection = models.TextField(blank=True)
    error = models.TextField(blank=True)
    warning = models.TextField(blank=True)
    judge_model_id = models.CharField(max_length=500, blank=True)
    verdicts = models.JSONField(default=list, blank=True)  # every judge asked: id, model, score, reflection, raw...
    judge_std_dev = models.FloatField(null=True, blank=True)
    disagreement = models.BooleanField(default=False)
    backup_used = models.BooleanField(default=False)

    class Meta:
        ordering = ["position"]
        constraints = [models.UniqueConstraint(fields=["response", "position"], name="assessment_unique_position")]

    def __str__(self):
        return self.key_point_text[:80]

    @property
    def effective_score(self) -> float | None:
        override = getattr(self, "override", None)
        return override.score if override is not None else self.score


class PointOverride(models.Model):
    """A reviewer's score for one assessment. The judges' verdict stays; aggregates use this."""

    assessment = models.OneToOneField(PointAssessment, on_delete=models.CASCADE, related_name="override")
    score = models.FloatField()
    reason = models.TextField()
    who = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(score__gte=0) & Q(score__lte=1), name="override_score_0_1")]


class PointConfirmation(models.Model):
    """A reviewer's word that the judges are right about one point: the score stands, and the point counts
    as reviewed when judges' trust is worked out (an unreviewed point says nothing either way)."""

    assessment = models.OneToOneField(PointAssessment, on_delete=models.CASCADE, related_name="confirmation")
    who = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(default=timezone.now)


class Annotation(models.Model):
    """A reviewer's word on one response: thumbs up or down, a comment, or both. Kept when the response is
    re-run (it says when it was written); it goes into the exports."""

    THUMBS = ((1, "thumbs up"), (-1, "thumbs down"))
    WORDS = {1: "up", -1: "down"}  # as the forms, the API and the exports write them

    response = models.OneToOneField(Response, on_delete=models.CASCADE, related_name="annotation")
    thumbs = models.SmallIntegerField(null=True, blank=True, choices=THUMBS)
    comment = models.TextField(blank=True)
    who = models.CharField(max_length=150, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    MAX_COMMENT_CHARS = 10_000

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(thumbs__in=(1, -1)) | Q(thumbs__isnull=True),
                                              name="annotation_thumbs_up_or_down")]

    def to_export(self) -> dict:
        return {"thumbs": self.WORDS.get(self.thumbs), "comment": self.comment, "who": self.who,
                "updatedAt": self.updated_at.isoformat()}


class CachedResponse(models.Model):
    """The response cache shared by every worker (keyed by provider, model, messages and parameters)."""

    key = models.CharField(max_length=64, unique=True)
    value = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now)


class JudgingStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class PairJudging(models.Model):
    """An LLM judge asked about pairs of the Pairs page, each pair both ways round (runs/pairs/llm_judge.py; the
    engine's runs/engine/pairwise.py). Its scope is one run, or (``run`` empty) the recent runs of ``blueprint``.

    Each readable answer is a ``PairJudgement`` of this job (``judging``); a failed or unreadable asking is
    counted in ``asked_failed`` and its reason kept in ``failures`` (the first ``MAX_FAILURES``), never a
    judgement. ``error`` says why the whole job failed (a model it cannot call, every asking failed)."""

    MAX_PAIRS = 200
    DEFAULT_PAIRS = 20
    MAX_FAILURES = 20
    MAX_REASON_CHARS = 500  # each failure's reason, and ``error``

    blueprint = models.ForeignKey("blueprints.Blueprint", on_delete=models.CASCADE, related_name="pair_judgings")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, null=True, blank=True, related_name="pair_judgings")
    model_id = models.CharField(max_length=200)  # the judge, provider:model
    pairs_requested = models.PositiveSmallIntegerField()
    pairs_chosen = models.PositiveSmallIntegerField(default=0)  # fewer when fewer pairs were left to ask about
    status = models.CharField(max_length=10, choices=JudgingStatus.choices, default=JudgingStatus.QUEUED)
    asked_done = models.PositiveIntegerField(default=0)  # askings (two a pair) answered and stored
    asked_failed = models.PositiveIntegerField(default=0)  # askings that failed or could not be read
    failures = models.JSONField(default=list, blank=True)  # [{"prompt", "first", "second", "reason"}]
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(pairs_requested__gte=1) & Q(pairs_requested__lte=200),
                                   name="pair_judging_pairs_1_200"),
        ]
        indexes = [models.Index(fields=["blueprint", "run", "created_at"], name="pair_judging_scope")]

    def __str__(self):
        return f"{self.model_id} on {self.pairs_requested} pairs: {self.status}"

    @property
    def is_open(self) -> bool:
        return self.status in (JudgingStatus.QUEUED, JudgingStatus.RUNNING)


class PairJudgement(models.Model):
    """A reviewer's blind preference between two responses to one prompt by two model variants (the Pairs page).

    ``left`` and ``right`` are where each response was shown; ``winner`` says which side won, or a tie. It lives
    as long as both responses do: deleting a run deletes its judgements. Ratings: runs/engine/ratings.py.
    An LLM judge's answer is one too, with its job in ``judging`` (``left``: the response shown it first)."""

    WINNERS = (("left", "left"), ("right", "right"), ("tie", "tie"))
    MAX_REASON_CHARS = 2_000
    MAX_WHO_CHARS = 150

    left = models.ForeignKey(Response, on_delete=models.CASCADE, related_name="+")
    right = models.ForeignKey(Response, on_delete=models.CASCADE, related_name="+")
    winner = models.CharField(max_length=5, choices=WINNERS)
    reason = models.TextField(blank=True)
    who = models.CharField(max_length=MAX_WHO_CHARS, blank=True)  # an LLM judge's: "judge:<model id>"
    created_at = models.DateTimeField(default=timezone.now)
    # The LLM judge's job that gave this answer; empty for a person's judgement (runs/pairs.py keeps them apart)
    judging = models.ForeignKey(PairJudging, on_delete=models.CASCADE, null=True, blank=True,
                                related_name="judgements")

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(winner__in=("left", "right", "tie")), name="pair_winner_side_or_tie"),
            models.CheckConstraint(condition=~Q(left=models.F("right")), name="pair_two_responses"),
        ]
        indexes = [models.Index(fields=["who", "created_at"], name="pair_who_recent")]

    def __str__(self):
        return f"{self.left_id} vs {self.right_id}: {self.winner}"


class RunSummary(models.Model):
    """A finished run's figures across runs read (``runs.engine.across.summarise`` of its results matrix: per
    variant mean, interval, n, per-prompt cell scores), built on first need and good while the run's
    ``results_version`` and status are what they were (``runs.across.figures.summaries``): never shown stale.

    ``baseline`` keeps the run's comparison with its blueprint's pinned baseline, good while the baseline's
    own version and status are the ones written there."""

    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="summary")
    results_version = models.PositiveIntegerField()
    status = models.CharField(max_length=12)
    shape = models.PositiveSmallIntegerField(default=1)
    models_key = models.TextField(blank=True)  # "\n<model>\n<model>\n": the runs a model took part in
    data = models.JSONField(default=dict)
    baseline = models.JSONField(default=dict, blank=True)
    built_at = models.DateTimeField(default=timezone.now)


class RunCells(models.Model):
    """What a comparison reads of a run's matrix (``runs.engine.matrix.cell_figures_json``: per cell its score and
    response, per variant its trials' and deal-breaker figures), stored whenever the run's aggregates are
    (``records.compute_aggregates``) and good while the run's ``results_version`` is the one written here: the
    compare page of two finished runs reads these instead of building both runs' matrices (``runs.compare``)."""

    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="stored_cells")
    results_version = models.PositiveIntegerField()
    data = models.JSONField(default=dict)


class BaselinePin(models.Model):
    """The run a blueprint's later runs are compared with (the history page pins it)."""

    blueprint = models.OneToOneField("blueprints.Blueprint", on_delete=models.CASCADE, related_name="baseline_pin")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    who = models.CharField(max_length=150, blank=True)
    pinned_at = models.DateTimeField(default=timezone.now)


class RunInsight(models.Model):
    """What is said of a run beyond its figures and costs calls: the similarity of its models' answers (from an
    embeddings model) and its checked executive summary (from a writer model). Each is kept with the
    ``results_version`` and status it was made at; a page shows one made at another as out of date.

    ``*_state``: "" (never asked), "working", "done" or "failed" (``*_error`` says why). Their calls' tokens and
    cost are kept here and shown beside the run's own (``runs.insight``)."""

    STATES = ("", "working", "done", "failed")

    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="insight")
    similarity_state = models.CharField(max_length=10, blank=True)
    similarity_version = models.PositiveIntegerField(null=True, blank=True)
    similarity_model = models.CharField(max_length=300, blank=True)
    similarity = models.JSONField(null=True, blank=True)
    similarity_error = models.TextField(blank=True)
    summary_state = models.CharField(max_length=10, blank=True)
    summary_version = models.PositiveIntegerField(null=True, blank=True)
    summary_model = models.CharField(max_length=300, blank=True)
    summary = models.JSONField(null=True, blank=True)  # {"claims": [...checked...], "summary": markdown, ...}
    summary_error = models.TextField(blank=True)
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    cost_usd = models.FloatField(default=0.0)
    cost_unknown = models.PositiveIntegerField(default=0)  # calls whose price we do not know
    updated_at = models.DateTimeField(default=timezone.now)
