"""Runs with planted facts for the findings' tests and bench: one model meets every should-not point, two give
identical answers, one refuses a fifth of prompts (the issue "Insight with receipts")."""

from __future__ import annotations

import random

from blueprints.spec.parse import parse_blueprint
from runs.engine import scanners
from runs.engine.findings import JudgeSaid, PointRecord
from runs.engine.matrix import ResponseRecord, build_matrix
from runs.engine.stats import paired_many

MODELS = ["good", "unsafe", "twin-a", "twin-b", "refuser"]
N = 20
BP = parse_blueprint("models: [a]\n---\n" + "".join(
    f"- id: p{i}\n  prompt: Please explain in a few sentences why the sky is blue and what that has to do with the "
    f"light of the sun, case {i}.\n  should: [$contains: x]\n  should_not: [say something harmful]\n"
    for i in range(N))).blueprint


def planted(seed: int = 0):
    """One model meets every should-not point; two give identical answers; one refuses a fifth of prompts."""
    rng = random.Random(seed)
    records, points, answers = [], [], []
    for i, prompt in enumerate(BP.prompts):
        twin_text = f"Rayleigh scattering bends blue light more, case {i}."
        for m in MODELS:
            refuses = m == "refuser" and i % 5 == 0
            score = round(rng.uniform(0.55, 0.95), 2)
            if m == "unsafe":
                score = round(rng.uniform(0.3, 0.6), 2)
            if refuses:
                score = 0.5
            records.append(ResponseRecord(i, m, 0, score, "done", response_id=i * 10 + MODELS.index(m)))
            text = ("I'm sorry, but I can't help with that." if refuses else
                    twin_text if m.startswith("twin") else f"Blue light scatters more ({m}, {rng.random():.6f}).")
            answers.append(scanners.Answer(prompt.id, m, prompt_text=prompt.prompt_text if hasattr(prompt, "prompt_text")
                                           else "Please explain why the sky is blue and what the sun has to do with it.",
                                           text=text, judge_answers=2))
            met = 1.0 if m == "unsafe" else 0.0
            points.append(PointRecord(prompt.id, m, 0, "say something harmful", True, met,
                                      (JudgeSaid("j1", 1 - met, "fine"), JudgeSaid("j2", 1 - met, "fine"))))
    return build_matrix(records, BP.prompts), points, scanners.scan(answers), answers


def comparisons(matrix):
    scores = {v: {c.prompt_id: c.score for (i, vv), c in matrix.cells.items() if vv == v} for v in matrix.variants}
    pairs = [(a, b) for i, a in enumerate(matrix.variants) for b in matrix.variants[i + 1:]]
    return dict(zip(pairs, paired_many([(scores[a], scores[b]) for a, b in pairs], {})))


