"""The summary's writer side (runs/engine/summary.py) and the checker against a fake writer: every false claim
of the mutation suite refused, no true claim refused, the same claims whatever the anonymous ids."""

from __future__ import annotations

import random
import re

import pytest

from runs.engine import summary
from runs.engine.claims import Checker
from runs.engine.findings import Finding
from runs.engine.scanners import NAME_PATTERN
from tests.fakes.claims_writer import MUTATIONS, false_claim, fixture, true_claim


def test_every_false_claim_of_the_mutation_suite_is_refused_and_no_true_one():
    rng = random.Random(31)
    refused_true, made = [], {m: 0 for m in MUTATIONS}
    for _ in range(40):
        fx = fixture(rng)
        checker = Checker(fx.figures)
        for _ in range(8):
            claim = true_claim(fx, rng)
            result = checker.check(claim)
            if not result.ok:
                refused_true.append((claim["text"], result.reason))
        for mutation in MUTATIONS:
            claim = false_claim(fx, rng, mutation)
            if claim is None:
                continue
            made[mutation] += 1
            assert not checker.check(claim).ok, (mutation, claim)
    assert refused_true == []
    assert min(made.values()) >= 10, made


def _fake_writer(messages: list[dict]) -> str:
    """Answers by id: a claim per model mean line, and one citing each finding that names one model."""
    user = messages[-1]["content"]
    claims = []
    for anon, mean in re.findall(r"^- (M\d+): mean (\d\.\d\d)$", user, re.MULTILINE):
        claims.append({"text": f"{anon} averages {mean}.", "values": [{"metric": "mean", "model": anon,
                                                                      "value": float(mean)}]})
    return '{"claims": %s}' % __import__("json").dumps(claims)


def _findings(variants):
    return [Finding("refusal", f"{variants[0]}: 4 of 20 refusals (frequent).", 0.2, [variants[0]], ["p1"],
                    [("p1", variants[0])], 2.7, id="F1")]


def test_permuting_the_anonymous_ids_gives_the_same_accepted_claims():
    fx = fixture(random.Random(5))
    checker = Checker(fx.figures)
    accepted = []
    for seed in range(5):
        made = summary.writer_input(_findings(fx.variants), fx.figures.means, {}, seed)
        raw = summary.map_back(summary.read_answer(_fake_writer(made.messages)), made.anon)
        results = checker.check_all(raw)
        assert all(r.ok for r in results), [r.reason for r in results]
        accepted.append(sorted(r.claim.text for r in results))
    assert len({tuple(a) for a in accepted}) == 1
    assert len({tuple(summary.anonymous_ids(fx.variants, s).items()) for s in range(5)}) > 1


def test_no_model_or_vendor_name_reaches_the_writer():
    variants = ["openai:gpt-4o[temp:0]", "anthropic:claude-3-5-haiku[temp:0]"]
    quotes = {"F1": "As Claude, an AI assistant made by Anthropic, I would rather not; GPT-4o and gpt-4o agree."}
    made = summary.writer_input(_findings(variants), {v: 0.5 for v in variants}, quotes, seed=1)
    text = "\n".join(m["content"] for m in made.messages)
    assert not NAME_PATTERN.search(text), NAME_PATTERN.search(text)
    for v in variants:
        assert v not in text and v.split(":")[1].split("[")[0] not in text
    assert "M1" in text and "M2" in text


@pytest.mark.parametrize(("writer", "expected"), [
    ("anthropic:claude-sonnet-4", ["anthropic:claude-3-5-haiku[temp:0]"]),
    ("openrouter:openai/gpt-4.1-mini", ["openai:gpt-4o[temp:0]"]),
    ("mistral:mistral-large", []),
])
def test_a_writer_of_a_candidates_family_is_a_conflict(writer, expected):
    assert summary.conflicts(writer, ["openai:gpt-4o[temp:0]", "anthropic:claude-3-5-haiku[temp:0]"]) == expected


def test_the_summary_links_each_number_and_escapes_the_rest():
    fx = fixture(random.Random(2))
    m = fx.variants[0]
    mean = fx.figures.means[m]
    checked = Checker(fx.figures).check_all({"claims": [
        {"text": f"{m} averages {mean:.2f} *really*.", "values": [{"metric": "mean", "model": m, "value": mean}]},
        {"text": f"{m} averages 0.01.", "values": [{"metric": "mean", "model": m, "value": 0.01}]}]})
    text = summary.markdown(checked, lambda value: f"/models/{value.model}")
    assert text.count("\n") == 0 and f"[{mean:.2f}](/models/{m})" in text and r"\*really\*" in text
