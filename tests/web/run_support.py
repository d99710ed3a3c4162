"""Shared by the result-page tests (no tests here): a blueprint that exercises every part of the
result pages, scripted candidates and judges for the fake LLM server, and a finished run made
through the runs code (tasks run inline)."""

from __future__ import annotations

import pytest

from blueprints.models import Blueprint
from runs import start as run_start
from runs.models import Run
from tests.fakes.pytest_fixtures import FAKE_KEY, fake_llm, fake_llm_server, fake_provider  # noqa: F401


BLUEPRINT = """\
title: Results fixture
description: Exercises every part of the result pages.
system: You are concise.
models: [openai:cand-good, openai:cand-bad]
---
- id: capital
  prompt: What is the capital of France?
  ideal: "**Paris** is the capital of France."
  weight: 2
  citation: Atlas of the world, p. 12
  should:
    - $icontains: paris
    - point: Names Paris as the capital.
      weight: 2
      citation: Geography 101
    - Mentions the Seine river.
    - $factcheck
  should_not:
    - Names Lyon as the capital.

- id: rome
  messages:
    - user: Plan a day in Rome.
    - assistant: null
    - user: Now make it cheaper.
  should:
    - [Suggests walking between sights., Mentions free churches.]
    - [Recommends a paid bus tour., Mentions the Colosseum.]
  should_not:
    - [Recommends a taxi for every trip.]

- id: page
  prompt: Write a small HTML page with a heading.
  render_as: html
  should:
    - $contains: "<h1>"
"""

GOOD = {
    "capital": "**Paris** is the capital of France, on the Seine.",
    "rome": "Walk everywhere and visit the free churches.",
    "page": "<h1>Hello</h1><p>A small page.</p>",
}
BAD = {
    "capital": "I think it is Lyon.",
    "rome": "Take a taxi for every trip.",
    "page": "Hello",
}

MET = "<reflection>{why}</reflection><classification>CLASS_EXACTLY_MET</classification>"
UNMET = "<reflection>{why}</reflection><classification>CLASS_UNMET</classification>"
MODERATE = "<reflection>{why}</reflection><classification>CLASS_MODERATELY_MET</classification>"


def candidate_rules(model: str, replies: dict[str, str]) -> list[dict]:
    return [
        {"model": model, "match": r"capital of France", "reply": replies["capital"]},
        {"model": model, "match": r"Plan a day", "reply": "Day plan: the Colosseum by bus."},
        {"model": model, "match": r"make it cheaper", "reply": replies["rome"]},
        {"model": model, "match": r"HTML page", "reply": replies["page"]},
    ]


def judge_rules() -> list[dict]:
    """Judges read the text, then the criterion; judge-a and judge-b disagree about the Seine."""

    def rule(text: str, criterion: str, reply: str, model: str = "judge") -> dict:
        return {"model": model, "match": rf"(?s)<TEXT>\n[^<]*{text}.*<CRITERION>\n{criterion}", "reply": reply}

    return [
        rule(r"\*\*Paris", "Mentions the Seine", MET.format(why="It says 'on the Seine'."), model="judge-a"),
        rule(r"\*\*Paris", "Mentions the Seine", UNMET.format(why="The river is named only in passing."),
             model="judge-b"),
        rule("I think it is Lyon", "Names Lyon", MET.format(why="It names Lyon.")),
        rule("Take a taxi", "Recommends a taxi", MET.format(why="It recommends taxis.")),
        rule(r"\*\*Paris", "Names Paris", MET.format(why="It names Paris as the capital.")),
        rule("Walk everywhere", "(Suggests walking|Mentions free churches)", MET.format(why="Yes, it does.")),
        rule("Colosseum", "Mentions the Colosseum", MET.format(why="The Colosseum is in the plan.")),
        rule("Walk everywhere", "Recommends a paid bus tour", MODERATE.format(why="A bus, but not a tour.")),
        rule("", "", UNMET.format(why="No sign of it.")),
    ]


def script(fake, extra: list[dict] | None = None) -> None:
    fake.script([*(extra or []), *candidate_rules("cand-good", GOOD), *candidate_rules("cand-bad", BAD),
                 *judge_rules()])


def make_blueprint(text: str = BLUEPRINT, slug: str = "results-fixture") -> Blueprint:
    blueprint = Blueprint.objects.create(slug=slug, title="")
    blueprint.save_revision(text)
    return blueprint


def make_run(fake, *, blueprint: Blueprint | None = None, models=("openai:cand-good", "openai:cand-bad"),
             judges=("openai:judge-a", "openai:judge-b"), extra_rules: list[dict] | None = None,
             fresh: bool = True) -> Run:
    """A run made by the runs code against the fake server; finished when this returns (tasks run inline).

    ``fresh`` (the default) bypasses the response cache, so two runs in one test each get their script's answers.
    """
    script(fake, extra_rules)
    blueprint = blueprint or make_blueprint()
    run = run_start.start_run(blueprint, models=list(models), judges=list(judges), fresh=fresh)
    run.refresh_from_db()
    assert run.is_finished, run.status
    return run


def offline_blueprint(prompts: int, slug: str = "many") -> Blueprint:
    """``prompts`` prompts answered by two fixtures models, scored by functions only: runs with no server.

    Model ``a`` says "yes" to every prompt, ``b`` to every third; the last prompt has only an
    unsupported point, so it is not evaluated for either model.
    """
    lines = ["title: Many prompts", "models: [fixtures:a, fixtures:b]", "fixtures:", "  strategy: first",
             "  responses:"]
    for i in range(prompts):
        b = "yes" if i % 3 == 0 else "no"
        lines.append(f"    p{i:03d}: {{default: 'yes {i}', byModel: {{'fixtures:b': '{b} {i}'}}}}")
    lines.append("---")
    for i in range(prompts - 1):
        lines += [f"- id: p{i:03d}", f"  prompt: Question number {i}?", "  should: [$contains: 'yes']"]
    lines += [f"- id: p{prompts - 1:03d}", "  prompt: The last question?", "  should: [$factcheck]"]
    return make_blueprint("\n".join(lines) + "\n", slug=slug)


def trials_blueprint_text(prompts: int, *, title: str, should_not: bool = False) -> str:
    """Two fixtures models (``a`` says yes to all, ``b`` to every third), two trials a prompt, a pass mark on every
    other prompt (some cells pass, some do not, some have no mark), with ``should_not`` a should-not point on every
    third (``b``'s "no" meets it), the last prompt not evaluated."""
    lines = [f"title: {title}", "models: [fixtures:a, fixtures:b]", "fixtures:", "  strategy: first", "  responses:"]
    for i in range(prompts):
        b = "yes" if i % 3 else "no"
        lines.append(f"    p{i:03d}: {{default: 'yes {i}', byModel: {{'fixtures:b': '{b} {i}'}}}}")
    lines.append("---")
    for i in range(prompts - 1):
        lines += [f"- id: p{i:03d}", f"  prompt: Question number {i}?", "  trials: 2",
                  "  should: [$contains: 'yes', $contains: '1']", *(["  threshold: 0.6"] if i % 2 else []),
                  *(["  should_not: [$contains: 'no']"] if should_not and i % 3 == 0 else [])]
    lines += [f"- id: p{prompts - 1:03d}", "  prompt: The last question?", "  should: [$factcheck]"]
    return "\n".join(lines) + "\n"


def make_offline_run(prompts: int, *, blueprint: Blueprint | None = None, slug: str = "many") -> Run:
    run = run_start.start_run(blueprint or offline_blueprint(prompts, slug=slug))
    run.refresh_from_db()
    assert run.is_finished, run.status
    return run


HOSTILE_BLUEPRINT = """\
title: Hostile output
models: [openai:cand-evil]
---
- id: md
  prompt: Say hello in markdown.
  should: [$contains: hello]
- id: web
  prompt: Say hello in HTML.
  render_as: html
  should: [$contains: hello]
- id: huge
  prompt: Say hello at length.
  should: [$contains: hello]
"""

EVIL = "evil.example"
HOSTILE_MARKDOWN = f"""hello <script>window.pwned = 1; alert(1)</script>
<img src=x onerror="window.pwned = 1"> [click me](javascript:window.pwned=1)
<a href="javascript:alert(1)">raw link</a>
<style>body {{ background: url(https://{EVIL}/css) }}</style>
<div style="background-image: url(https://{EVIL}/bg)">styled</div>
![tracking pixel](https://{EVIL}/pixel.png)
<iframe src="https://{EVIL}/frame"></iframe>
</pre></div></section></main><textarea>
"><script>window.pwned = 1</script>
"""
HOSTILE_HTML = f"""<h1>hello</h1><script>parent.pwned = 1; alert(1)</script>
<img src="https://{EVIL}/img.png" onerror="parent.pwned = 1">
<a href="javascript:parent.pwned = 1">click</a>
<p style="background: url(https://{EVIL}/p); color: red">styled</p>
<style>@import url(https://{EVIL}/i.css); h1 {{ background: url(https://{EVIL}/h) }}</style>
<form action="https://{EVIL}/f"><input name="q"><button>go</button></form>
<svg onload="parent.pwned = 1"><script>parent.pwned = 1</script></svg>
<object data="https://{EVIL}/o"></object><meta http-equiv="refresh" content="0;url=https://{EVIL}/r">
<base href="https://{EVIL}/">"></iframe><script>parent.pwned = 1</script><p onmouseover="parent.pwned = 1">x</p>
"""
HUGE = ("hello **bold** and `code` " * 50_000)[:1_048_576]


def hostile_rules() -> list[dict]:
    return [
        {"model": "cand-evil", "match": "in markdown", "reply": HOSTILE_MARKDOWN},
        {"model": "cand-evil", "match": "in HTML", "reply": HOSTILE_HTML},
        {"model": "cand-evil", "match": "at length", "reply": HUGE},
    ]


def make_hostile_run(fake) -> Run:
    fake.script(hostile_rules())
    run = run_start.start_run(make_blueprint(HOSTILE_BLUEPRINT, slug="hostile"))
    run.refresh_from_db()
    assert run.status == "done" and run.items_failed == 0, run.status
    return run
