"""Comparisons: one prompt with every model side by side, and two runs of one blueprint per prompt and model,
largest regression first, with a word diff of the two responses."""

import re

import pytest

from runs.models import Response
from runs.compare import text_diff

from .conftest import htmx
from .run_support import (  # noqa: F401
    fake_llm,
    fake_llm_server,
    fake_provider,
    make_blueprint,
    make_offline_run,
    make_run,
    offline_blueprint,
)

pytestmark = pytest.mark.django_db(transaction=True)

WORSE_CAPITAL = [{"model": "cand-good", "match": r"capital of France", "reply": "It is Lyon."}]


# --- one prompt, every model -----------------------------------------------------------------------


def test_one_prompt_shows_every_model_side_by_side_with_a_points_table(fake_provider, client):
    run = make_run(fake_provider)
    page = client.get(f"/runs/{run.pk}/prompts/1/")
    html = page.content.decode()
    assert page.status_code == 200
    assert "Plan a day in Rome." in html and "to be generated" in html
    cards = re.findall(r'<article class="response-card".*?</article>', html, re.S)
    assert [re.search(r"<code>(.*?)</code>", c).group(1) for c in cards] == [
        "openai:cand-good[temp:0]", "openai:cand-bad[temp:0]"]  # best first
    assert "Walk everywhere and visit the free churches." in cards[0]
    assert "Take a taxi for every trip." in cards[1]
    table = re.search(r'<table class="points-table">.*?</table>', html, re.S).group(0)
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.S)[1:]
    assert len(rows) == 1 + 5  # the score row, then one row per point
    taxi = next(r for r in rows if "Recommends a taxi" in r)
    assert "not_path_0" in taxi and "should not" in taxi
    assert re.findall(r'<td class="cell (heat-\d+)">', taxi) == ["heat-10", "heat-0"]
    responses = Response.objects.filter(run=run, prompt_id="rome")
    for r in responses:
        assert f'href="/runs/{run.pk}/responses/{r.pk}/"' in html


def test_an_html_prompt_side_by_side_uses_sandboxed_frames(fake_provider, client):
    run = make_run(fake_provider)
    html = client.get(f"/runs/{run.pk}/prompts/2/").content.decode()
    frames = re.findall(r"<iframe[^>]*>", html)
    assert len(frames) == 2 and all('sandbox=""' in f for f in frames)


def test_a_prompt_outside_the_run_is_404(fake_provider, client):
    run = make_run(fake_provider)
    assert client.get(f"/runs/{run.pk}/prompts/9/").status_code == 404


# --- two runs ------------------------------------------------------------------------------------


def two_runs(fake):
    blueprint = make_blueprint()
    base = make_run(fake, blueprint=blueprint)
    later = make_run(fake, blueprint=blueprint, extra_rules=WORSE_CAPITAL)
    return base, later


def test_two_runs_compare_per_prompt_and_model_largest_regression_first(fake_provider, client):
    base, later = two_runs(fake_provider)
    page = client.get(f"/runs/{later.pk}/compare?with={base.pk}")
    html = page.content.decode()
    assert page.status_code == 200
    rows = re.findall(r'<tr>\s*<th scope="row"><code>(.*?)</code></th>\s*<td><code>(.*?)</code></td>(.*?)</tr>',
                      html, re.S)
    assert len(rows) == 6
    first = rows[0]
    assert first[:2] == ("capital", "openai:cand-good[temp:0]")
    assert ">0.90<" in first[2] and ">0.20<" in first[2]
    assert '<td class="num delta delta-worse">-0.70</td>' in first[2]
    assert all('<td class="num delta">0.00</td>' in r[2] for r in rows[1:])
    assert "<strong class=\"problem\">1 worse</strong>" in html and "5 the same" in html
    assert f'href="/runs/{later.pk}/compare/{base.pk}/diff?prompt=capital&amp;variant=openai%3Acand-good%5Btemp%3A0%5D"' \
        in first[2]


def test_the_run_page_offers_the_other_runs_of_the_blueprint_to_compare(fake_provider, client):
    base, later = two_runs(fake_provider)
    html = client.get(f"/runs/{later.pk}/").content.decode()
    assert f'<form method="get" action="/runs/{later.pk}/compare"' in html
    assert f'<option value="{base.pk}">Run {base.pk}' in html


def test_runs_of_different_blueprints_are_not_compared(fake_provider, client):
    run = make_run(fake_provider)
    other = make_offline_run(2)
    html = client.get(f"/runs/{run.pk}/compare?with={other.pk}").content.decode()
    assert "is of another blueprint" in html and "delta" not in html
    assert client.get(f"/runs/{run.pk}/compare?with=9999").status_code == 404
    assert client.get(f"/runs/{run.pk}/compare/{other.pk}/diff?prompt=capital&variant=x").status_code == 404


def test_the_changes_page_paginates_and_answers_htmx_with_the_fragment(client):
    blueprint = offline_blueprint(60, slug="sixty")
    base = make_offline_run(60, blueprint=blueprint)
    later = make_offline_run(60, blueprint=blueprint)
    html = client.get(f"/runs/{later.pk}/compare?with={base.pk}").content.decode()
    assert "1–100 of 120" in html and f"?with={base.pk}&amp;page=2" in html
    fragment = client.get(f"/runs/{later.pk}/compare?with={base.pk}&page=2", **htmx()).content.decode()
    assert fragment.lstrip().startswith('<section id="changes"') and "101–120 of 120" in fragment


def test_the_diff_shows_what_went_and_what_came(fake_provider, client):
    base, later = two_runs(fake_provider)
    page = client.get(f"/runs/{later.pk}/compare/{base.pk}/diff",
                      {"prompt": "capital", "variant": "openai:cand-good[temp:0]"})
    html = page.content.decode()
    assert page.status_code == 200
    diff = re.search(r"<pre class=\"text-diff\"[^>]*>(.*?)</pre>", html, re.S).group(1)
    assert "<del>" in diff and "<ins>" in diff
    assert "Lyon" in "".join(re.findall(r"<ins>(.*?)</ins>", diff))
    assert "Paris" in "".join(re.findall(r"<del>(.*?)</del>", diff))
    assert "0.90" in html and "0.20" in html


@pytest.mark.parametrize("before, after, expected", [
    ("same text", "same text", [("equal", "same text")]),
    ("The cat sat.", "The dog sat.", [("equal", "The "), ("delete", "cat"), ("insert", "dog"), ("equal", " sat.")]),
    ("", "new", [("insert", "new")]),
    ("old", "", [("delete", "old")]),
    ("a <b> c", "a <i> c", [("equal", "a <"), ("delete", "b"), ("insert", "i"), ("equal", "> c")]),
])
def test_text_diff_works_on_words_and_keeps_whitespace(before, after, expected):
    assert [(p.op, p.text) for p in text_diff(before, after)] == expected


def test_text_diff_of_long_texts_falls_back_to_lines():
    before = "\n".join(f"line {i} word" for i in range(6000))
    after = before.replace("line 10 word", "line ten word")
    pieces = text_diff(before, after)
    assert [p.text for p in pieces if p.op == "delete"] == ["line 10 word\n"]
    assert [p.text for p in pieces if p.op == "insert"] == ["line ten word\n"]


# --- the gate, through manage.py compare ------------------------------------------------------------------


def _gate_run(fake, blueprint, bad):
    """A finished run of ``blueprint``: cand-a answers BAD to the prompts numbered in ``bad``, GOOD to the rest."""
    from runs import start as run_start

    fake.script([*({"model": "cand-a", "match": rf"Question number {i}\?", "reply": "BAD answer"} for i in bad),
                 {"model": "cand-a", "match": ".", "reply": "GOOD answer"}])
    run = run_start.start_run(blueprint, fresh=True)
    run.refresh_from_db()
    assert run.status == "done", run.status
    return run


def _compare(*args):
    import io

    from django.core.management import call_command

    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("compare", *[str(a) for a in args], stdout=out, stderr=err)
        return 0, out.getvalue(), err.getvalue()
    except SystemExit as exc:
        return exc.code, out.getvalue(), err.getvalue()


def test_the_gate_does_not_fail_a_pattern_the_normal_curve_called_beyond_its_level(fake_provider, client):
    """60 prompts that all moved: 18 up, 41 down, and one of weight 0.99 down. Were nothing changed, a drop this
    large comes with a chance of 0.13% (every sign pattern counted): not beyond the gate's 0.1%. The normal curve
    said 0.098% and failed the run; counted on the grid it passes, and says so on the page and in --markdown."""
    body = "".join(f"- id: q{i:02d}\n  prompt: Question number {i}?\n{'  weight: 0.99' + chr(10) if i == 59 else ''}"
                   f"  should:\n    - $contains: GOOD\n" for i in range(60))
    blueprint = make_blueprint("title: Gate\nmodels: [openai:cand-a]\n---\n" + body, slug="gate-grid")
    up, down = list(range(18)), [*range(18, 59), 59]
    base = _gate_run(fake_provider, blueprint, bad=up)
    later = _gate_run(fake_provider, blueprint, bad=down)
    code, out, err = _compare(later.pk, "--base", base.pk, "--json", "--fail-on-regression")
    data = __import__("json").loads(out)
    variant = "openai:cand-a[temp:0]"
    assert data["pairs"][0]["verdict"] == "worse"  # worse at 95%, but not a regression by the gate
    assert data["gate"]["variants"][variant]["p"] == pytest.approx(0.0013352, abs=1e-6)
    assert code == 0 and data["regression"] is False and "regression" not in err
    html = client.get(f"/runs/{later.pk}/compare?with={base.pk}").content.decode()
    gate = re.search(r'<p class="gate gate-passes">(.*?)</p>', html, re.S).group(1)
    assert "The gate passes" in gate and "0.1% (99.9%)" in gate
    assert re.search(r"<code>openai:cand-a\[temp:0\]</code></th><td class=\"num\">0.0013</td>", html)
    _, out, _ = _compare(later.pk, "--base", base.pk, "--markdown")
    assert "Gate (`--fail-on-regression`, family-wise level 0.1% (99.9%)): passes (exit 0)." in out


def test_pass_fail_prompts_get_the_paired_score_interval_through_manage_py_compare(fake_provider):
    """Ten pass/fail prompts: the interval `compare --json` shows is Newcombe's for paired proportions (the engine's
    ``paired_binary_interval``, held to a published example in tests/engine/test_stats.py), not the bootstrap's."""
    import json

    import numpy as np

    from runs.engine import stats

    body = "".join(f"- id: q{i:02d}\n  prompt: Question number {i}?\n  should:\n    - $contains: GOOD\n"
                   for i in range(10))
    blueprint = make_blueprint("title: Ten\nmodels: [openai:cand-a]\n---\n" + body, slug="ten-pass-fail")
    base = _gate_run(fake_provider, blueprint, bad=(0, 1))
    later = _gate_run(fake_provider, blueprint, bad=(0, 5, 6, 7))
    code, out, _ = _compare(later.pk, "--base", base.pk, "--json")
    (pair,) = json.loads(out)["pairs"]
    after = np.array([0.0 if i in (0, 5, 6, 7) else 1.0 for i in range(10)])
    before = np.array([0.0 if i in (0, 1) else 1.0 for i in range(10)])
    low, high = stats.paired_binary_interval(after, before)
    assert code == 0 and pair["n"] == 10 and pair["delta"] == pytest.approx(-0.2)
    assert (pair["low"], pair["high"]) == (pytest.approx(low), pytest.approx(high))
    assert low < -0.5 and high > 0.1 and pair["verdict"] == "cant_tell"


# --- trials: unbiased pass@k and pass^k -----------------------------------------------------------------------


TRIALS_TEXT = ("title: Trials\nmodels: [openai:cand-a]\nverdicts: {pass: 0.8}\n---\n" + "".join(
    f"- id: {rule.replace('_', '-')}\n  prompt: Question for {rule}?\n  trials: 3\n  trial_aggregation: {rule}\n"
    f"  should:\n    - $contains: GOOD\n" for rule in ("mean", "pass_at_k")))


def _trials_run(fake, blueprint):
    """cand-a answers GOOD to one trial of three of each prompt, BAD to the other two."""
    from runs import start as run_start

    rules = []
    for rule in ("mean", "pass_at_k"):
        rules += [{"model": "cand-a", "match": f"for {rule}", "reply": "GOOD answer", "times": 1},
                  {"model": "cand-a", "match": f"for {rule}", "reply": "BAD answer"}]
    fake.script(rules)
    run = run_start.start_run(blueprint, fresh=True)
    run.refresh_from_db()
    assert run.status == "done", run.status
    return run


def test_the_compare_page_shows_unbiased_pass_at_k_and_ai_evals_rule_stays_its_verdict(fake_provider, client):
    """One trial of three passes: pass@3 (at least one of 3 trials passes) is 1 and pass^3 (all 3 pass) is 0, the
    unbiased estimates (Chen et al. 2021); the plug-in 1 - (1 - 1/3)^3 = 0.70 and (1/3)^3 = 0.04 shown before are
    AI Eval's own rule, which still decides its pass_at_k cells' verdicts (0.70 < 0.8: fail)."""
    blueprint = make_blueprint(TRIALS_TEXT, slug="trials-pass-at-k")
    base, later = _trials_run(fake_provider, blueprint), _trials_run(fake_provider, blueprint)
    html = client.get(f"/runs/{later.pk}/compare?with={base.pk}").content.decode()
    row = re.search(r'<tr class="pair pair-[a-z_]+">(.*?)</tr>', html, re.S).group(1)
    cells = re.findall(r'<td class="num">([^<]*)</td>', row)
    assert cells[-3:] == ["1.00", "0.00", "100%"]  # pass@k, pass^k, flaky
    details = later.aggregates["cellDetails"]
    rule_cell = details["pass-at-k"]["openai:cand-a[temp:0]"]
    assert (rule_cell["passAtK"], rule_cell["passHatK"]) == (1.0, 0.0)
    assert rule_cell["rulePassAtK"] == pytest.approx(1 - (2 / 3) ** 3) and rule_cell["verdict"] == "fail"
    assert details["mean"]["openai:cand-a[temp:0]"]["rulePassAtK"] is None
    assert "unbiased" in html and "AI Eval" in html


def test_when_every_cell_moved_alike_the_page_and_markdown_say_so_and_show_the_gates_decision(fake_provider, client):
    """12 prompts x 2 variants, every one of the 24 cells 1.00 lower: no single cell stands out from the others
    (nothing is listed), and before the page said only that. Now it says that all 24 moved, each by -1.00, and
    shows the gate's decision (both variants fail it) with its level; so does --markdown."""
    from runs import start as run_start

    body = "".join(f"- id: q{i:02d}\n  prompt: Question number {i}?\n  should:\n    - $contains: GOOD\n"
                   for i in range(12))
    blueprint = make_blueprint("title: Shift\nmodels: [openai:cand-a, openai:cand-b]\n---\n" + body, slug="shift")
    runs = []
    for reply in ("GOOD answer", "BAD answer"):
        fake_provider.script([{"model": m, "match": ".", "reply": reply} for m in ("cand-a", "cand-b")])
        run = run_start.start_run(blueprint, fresh=True)
        run.refresh_from_db()
        runs.append(run)
    base, later = runs
    html = client.get(f"/runs/{later.pk}/compare?with={base.pk}").content.decode()
    assert "<strong>All 24 cells moved, each by -1.00</strong>" in html
    assert "<strong>0</strong> changed by more than" in html  # no single cell stands out
    gate = re.search(r'<p class="gate gate-fails">(.*?)</p>', html, re.S).group(1)
    assert "The gate fails" in gate and "<code>openai:cand-a[temp:0]</code>, <code>openai:cand-b[temp:0]</code>" in gate
    assert "family-wise 0.1% (99.9%)" in gate
    code, out, _ = _compare(later.pk, "--base", base.pk, "--markdown", "--fail-on-regression")
    assert code == 1
    assert ("Gate (`--fail-on-regression`, family-wise level 0.1% (99.9%)): **fails** on `openai:cand-a[temp:0]`, "
            "`openai:cand-b[temp:0]` (exit 1).") in out
    assert "All 24 cells moved, each by -1.00: the whole run shifted alike" in out


def test_cached_cells_do_not_hide_the_cells_that_dropped(fake_provider, client):
    """40 of 63 cells did not move (the same answers), 20 moved a little either way, 3 dropped from 0.90 to 0.00.
    The old yardstick, with most cells unmoved, was the plain spread of every cell that moved, the drops included,
    and listed none of them; now the three are listed, and nothing else."""
    from runs import start as run_start

    noise = [0.1] * 7 + [-0.1] * 7 + [0.2] * 2 + [-0.2] * 2 + [0.3, -0.3]
    before = [1.0] * 40 + [0.5] * 20 + [0.9] * 3
    after = [1.0] * 40 + [0.5 + x for x in noise] + [0.0] * 3
    points = "".join(f"    - $contains: W{j}\n" for j in range(10))
    body = "".join(f"- id: q{i:02d}\n  prompt: Question number {i}?\n  should:\n{points}" for i in range(63))
    blueprint = make_blueprint("title: Cached\nmodels: [openai:cand-a]\n---\n" + body, slug="cached-drops")
    runs = []
    for scores in (before, after):
        fake_provider.script([{"model": "cand-a", "match": rf"Question number {i}\?",
                               "reply": " ".join(f"W{j}" for j in range(round(s * 10))) or "nothing"}
                              for i, s in enumerate(scores)])
        run = run_start.start_run(blueprint, fresh=True)
        run.refresh_from_db()
        assert run.status == "done", run.status
        runs.append(run)
    base, later = runs
    html = client.get(f"/runs/{later.pk}/compare?with={base.pk}").content.decode()
    listed = re.findall(r'<tr class="listed"><td><code>(.*?)</code>', html)
    assert sorted(listed) == ["q60", "q61", "q62"]
    assert "23 of the 63 cells scored in both runs moved; 40 did not" in html
