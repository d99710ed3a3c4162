"""Stored results made up for runs/engine/robustness.py: two model variants judged by two judges, as
``robustness.Answer`` values (what ``runs.records.robustness_answers`` reads from rows), with their prompts.

``one_judge_reverses``: judge J1 prefers A strongly, J2 prefers B less strongly; the consensus says A is better,
J2 alone says B is. ``robust``: both judges prefer A. Both have tags, a should-not point and function points."""

from __future__ import annotations

import numpy as np

from blueprints.spec.parse import parse_blueprint
from runs.engine.robustness import Answer, PointRow

A, B = "m:a", "m:b"
J1, J2 = "j-one(openai:j1)", "j-two(openai:j2)"


def blueprint_text(n: int, *, trials: int = 1) -> str:
    body = "".join(f"- id: p{i}\n  prompt: Question {i}?\n  tags: [{'safety' if i % 4 == 0 else 'general'}"
                   f"{', maths' if i % 5 == 0 else ''}]\n  should:\n    - Answers question {i}\n"
                   f"    - $contains: ok\n  should_not:\n    - Is rude\n" for i in range(n))
    head = "title: Robust\nmodels: [m:a, m:b]\n" + (f"trials: {trials}\n" if trials > 1 else "") + "---\n"
    return head + body


def prompts(n: int, *, trials: int = 1):
    result = parse_blueprint(blueprint_text(n, trials=trials))
    assert result.blueprint is not None, result.errors
    return result.blueprint.prompts


def _scale(x: float) -> float:  # a five-point judge's score
    return float(np.clip(np.round(x * 4) / 4, 0, 1))


def answers(n: int, *, reverse: bool, seed: int = 0, trials: int = 1, rude_b: float = 0.0):
    """Per prompt, per variant, per trial: a judged point (two judges), a function point, a should-not point."""
    from runs.engine.scoring import calculate, round2

    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        for variant in (A, B):
            for trial in range(trials):
                good = variant == A
                j1 = _scale((0.95 if good else 0.05) + rng.normal(0, 0.1))
                j2 = _scale(((0.2 if good else 0.75) if reverse else (0.8 if good else 0.35)) + rng.normal(0, 0.1))
                said = (j1 + j2) / 2
                fn = 1.0 if rng.random() < 0.97 else 0.0
                rude = 1.0 if variant == B and rng.random() < rude_b else 0.0  # the judges say it is met
                points = (PointRow("judged", None, 1.0, False, round2(said), ((J1, j1), (J2, j2))),
                          PointRow("function", None, 1.0, False, fn),
                          PointRow("judged", "not_path_1", 1.0, True, 1 - rude, ((J1, rude), (J2, rude))))
                score = round2(calculate([_scored(p) for p in points]).score)
                out.append(Answer(i, variant, trial, score, None, points))
    return out


def _scored(row: PointRow):
    from runs.engine.scoring import ScoredPoint

    return ScoredPoint(row.score, row.multiplier, row.path_id, row.kind)


def store(data, text: str, slug: str = "robust", *, aggregates: bool = True):
    """The answers as a finished run's rows (Django): responses and point assessments with each judge's verdict,
    its aggregates stored as a finished run's are. Returns the run."""
    from django.utils import timezone

    from blueprints.models import Blueprint
    from runs.bulk import insert
    from runs.models import PointAssessment, Response, Run
    from runs.records import compute_aggregates
    from runs.start import run_label

    blueprint = Blueprint.objects.create(slug=slug, title=slug)
    revision, _ = blueprint.save_revision(text)
    now = timezone.now()
    judges = sorted({j for a in data for p in a.points for j, _ in p.judges})
    run = Run.objects.create(
        revision=revision, blueprint=blueprint, label=run_label(revision), status="running",
        resolved_models=[A, B], judges={"judges": [{"id": j.split("(")[0], "model": j[j.index("(") + 1:-1],
                                                    "approach": "holistic"} for j in judges],
                                        "backup": None, "configured": True, "scale": "five"},
        items_total=len(data), items_done=len(data), started_at=now, created_at=now)
    insert(Response, [dict(run_id=run.pk, prompt_id=f"p{a.prompt_index}", prompt_index=a.prompt_index,
                           variant_id=a.variant_id, model_id=a.variant_id, trial=a.trial, status="done", text="ok",
                           final_text="ok", score=a.score, judged_score=a.score, score_basis="coverage",
                           finished_at=now, violated_should_not=any(p.inverted and p.score is not None and p.score < 0.5
                                                                    for p in a.points)) for a in data],
           batch_size=2000)
    ids = {(i, v, t): pk for pk, i, v, t in Response.objects.filter(run=run).values_list(
        "pk", "prompt_index", "variant_id", "trial")}
    insert(PointAssessment, [dict(
        response_id=ids[(a.prompt_index, a.variant_id, a.trial)], position=position, kind=p.kind,
        text="" if p.kind == "function" else "criterion", fn="contains" if p.kind == "function" else "",
        multiplier=p.multiplier or 1.0, path_id=p.path_id or "", inverted=p.inverted, score=p.score,
        raw_score=None if p.score is None else (1 - p.score if p.inverted else p.score),
        verdicts=[{"judgeId": j, "model": j[j.index("(") + 1:-1], "approach": "holistic", "role": "primary",
                   "score": s, "error": None if s is not None else "the call failed", "calls": 1} for j, s in p.judges])
        for a in data for position, p in enumerate(a.points)], batch_size=2000)
    Run.objects.filter(pk=run.pk).update(status="done", finished_at=timezone.now(),
                                         aggregates=compute_aggregates(run.pk) if aggregates else {})
    return Run.objects.get(pk=run.pk)
