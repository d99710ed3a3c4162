"""The run page's verdicts table writes its cells in Python (``runs.verdicts.verdict_cell_html``, 59 ms of every run
page through the template at 100 prompts x 10 models): held here to the template it replaced, cell for cell, over
every kind of cell a page shows, and the pass badge to the partial it was."""

from __future__ import annotations

import random

from django.template import Context, Engine

from runs.templatetags.results import pass_badge
from runs.verdicts import verdict_cell_html

# The cell as templates/runs/_verdicts.html wrote it before, and the pass badge as its partial was.
BADGE = ('{% if p == "pass" %}<span class="badge badge-ok pass-state pass-pass">passed</span>{% elif p == "fail" %}'
         '<span class="badge badge-error pass-state pass-fail">did not pass</span>{% elif p == "undecided" %}<span '
         'class="badge pass-state pass-undecided" title="a pass mark is set, but the cell has no verdict (not scored, '
         'or a check could not be scored)">undecided</span>{% else %}<span class="badge pass-state pass-none" '
         'title="the prompt sets no threshold, verdicts, gate or minimum, so a cell neither passes nor fails">no '
         'threshold set</span>{% endif %}')
CELL = ('{% load results %}<td>{% if cell %}{% if cell.score is not None %}<span class="score-chip {{ cell.score|heat }}">'
        '{{ cell.score|score2 }}</span>{% else %}<span class="not-evaluated">n/e</span>{% endif %}{% if cell.k > 1 %} '
        '<span class="muted small">{{ cell.rule }}</span>{% endif %} {% with p=cell.pass_state %}' + BADGE +
        '{% endwith %}{% if cell.k > 1 and cell.judgedTrials %} <span class="muted">{{ cell.passedTrials }}/'
        '{{ cell.judgedTrials }} trials passed{% if cell.agreement is not None %}, consistency '
        '{% widthratio cell.agreement 1 100 %}%{% endif %}</span>{% endif %}{% else %}<span class="muted">—</span>'
        '{% endif %}</td>')


def _cells():
    rng = random.Random(53)
    states = ["pass", "fail", "undecided", "none", None, "odd"]
    scores = [None, 0.0, 1.0, 0.005, 0.125, 0.5, 0.995, 0.9999, float("nan"), 0.6649999]
    rules = ["mean of 5 trials", "pass@k: best of 3", "<b>&'\"", "", None]
    out = [None, {}]
    for _ in range(600):
        out.append({"k": rng.choice([1, 2, 5, 1000]), "score": rng.choice(scores), "rule": rng.choice(rules),
                    "pass_state": rng.choice(states), "judgedTrials": rng.choice([0, 1, 5, 1200]),
                    "passedTrials": rng.choice([0, 3, 1100]), "agreement": rng.choice([None, 0.0, 0.8, 0.845, 0.125,
                                                                                     0.005, 1.0])})
    return out


def test_each_verdict_cell_is_what_the_template_wrote():
    template = Engine.get_default().from_string(CELL)
    cells = _cells()
    for cell in cells:
        assert verdict_cell_html(cell) == template.render(Context({"cell": cell})), cell
    # Not vacuous: every branch was met.
    html = "".join(verdict_cell_html(c) for c in cells)
    for piece in ("n/e", "heat-", "trials passed", "consistency", "—", "no threshold set", "undecided", "&lt;b&gt;"):
        assert piece in html


def test_the_pass_badge_is_the_partial_it_was():
    badge = Engine.get_default().from_string(BADGE)
    for state in ("pass", "fail", "undecided", "none", None, "", 3):
        assert pass_badge(state) == badge.render(Context({"p": state}))
