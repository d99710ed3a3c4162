"""The Pairs page: a blind pair of responses, a judgement stored and revealed, hostile input bounded and escaped,
the next pair spread over model pairs and prompts, ratings in a table, judgements gone with their run."""

from __future__ import annotations

import random
import re

import pytest
import yaml

from runs.pairs import scope as pairs
from runs import start as run_start
from runs import work as run_work
from runs.models import PairJudgement, Response, Run

from .conftest import htmx
from .run_support import make_blueprint

pytestmark = pytest.mark.django_db(transaction=True)

MODELS = ["fixtures:alpha", "fixtures:beta", "fixtures:gamma"]
HOSTILE = 'hello <script>window.pwned = 1</script> <img src=x onerror="window.pwned=1"> [x](javascript:alert(1))'


def pairs_blueprint(slug: str = "pairs", prompts: int = 2, models=MODELS):
    answers = {f"q{i}": {"default": f"One answers {i}",
                         "byModel": {"fixtures:beta": f"Two answers {i}", "fixtures:gamma": HOSTILE}}
               for i in range(prompts)}
    header = {"title": "Pairs fixture", "models": list(models),
              "fixtures": {"strategy": "first", "responses": answers}}
    items = [{"id": f"q{i}", "prompt": f"Question {i}: <b>bold</b>?", "should": [{"$contains": "answers"}]}
             for i in range(prompts)]
    return make_blueprint(yaml.safe_dump(header) + "---\n" + yaml.safe_dump(items), slug=slug)


def make_pairs_run(blueprint=None, **kwargs) -> Run:
    run = run_start.start_run(blueprint or pairs_blueprint(**kwargs))
    run.refresh_from_db()
    assert run.is_finished and run.items_failed == 0, run.status
    return run


def offered(content: str) -> tuple[int, int]:
    left = re.search(r'name="left" value="(\d+)"', content)
    right = re.search(r'name="right" value="(\d+)"', content)
    assert left and right, content
    return int(left.group(1)), int(right.group(1))


def pair_section(content: str) -> str:
    return content.split('id="pair"', 1)[1].split('id="ratings"', 1)[0]


def test_the_run_page_links_to_its_pairs(client):
    run = make_pairs_run()
    assert f'href="/runs/{run.pk}/pairs"' in client.get(f"/runs/{run.pk}/").content.decode()


def test_a_pair_is_one_prompt_and_two_models_with_no_model_name_on_the_page(client):
    run = make_pairs_run()
    page = client.get(f"/runs/{run.pk}/pairs")
    assert page.status_code == 200
    assert "default-src 'self'" in page.headers["Content-Security-Policy"]
    content = page.content.decode()
    for model in ("fixtures", "alpha", "beta", "gamma"):  # names, variant ids, links: none before judging
        assert model not in content
    left, right = Response.objects.get(pk=offered(content)[0]), Response.objects.get(pk=offered(content)[1])
    assert left.run_id == right.run_id == run.pk
    assert left.prompt_index == right.prompt_index and left.variant_id != right.variant_id
    assert "Question" in content and "&lt;b&gt;bold&lt;/b&gt;" in content  # the prompt, escaped
    assert "No judgements yet" in content


def test_positions_are_random(client):
    run = make_pairs_run(prompts=1, models=MODELS[:2])
    seen = set()
    for _ in range(40):
        left, _right = offered(client.get(f"/runs/{run.pk}/pairs").content.decode())
        seen.add(Response.objects.get(pk=left).variant_id)
    assert len(seen) == 2


def test_a_judgement_is_stored_remembers_the_name_and_then_reveals_the_models(client):
    run = make_pairs_run()
    left_id, right_id = offered(client.get(f"/runs/{run.pk}/pairs").content.decode())
    answer = client.post(f"/runs/{run.pk}/pairs", {"left": left_id, "right": right_id, "winner": "right",
                                                   "reason": "B is clearer.", "who": "  Ada   Lovelace "})
    judgement = PairJudgement.objects.get()
    assert answer.status_code == 302 and answer.url == f"/runs/{run.pk}/pairs?judged={judgement.pk}"
    assert (judgement.left_id, judgement.right_id, judgement.winner) == (left_id, right_id, "right")
    assert (judgement.reason, judgement.who) == ("B is clearer.", "Ada Lovelace")

    revealed = client.get(answer.url).content.decode()
    left, right = Response.objects.get(pk=left_id), Response.objects.get(pk=right_id)
    reveal = pair_section(revealed)
    assert "You chose B." in reveal
    assert left.variant_id in reveal and right.variant_id in reveal and "B is clearer." in reveal
    assert 'data-key="next"' in reveal
    ratings = revealed.split('id="ratings"', 1)[1]
    assert right.variant_id in ratings and "1 judgement" in ratings

    again = client.get(f"/runs/{run.pk}/pairs").content.decode()
    assert 'name="who" maxlength="150" value="Ada Lovelace"' in again  # remembered in the session


def test_htmx_swaps_the_reveal_in_and_refreshes_the_ratings(client):
    run = make_pairs_run()
    left_id, right_id = offered(client.get(f"/runs/{run.pk}/pairs").content.decode())
    answer = client.post(f"/runs/{run.pk}/pairs", {"left": left_id, "right": right_id, "winner": "tie"}, **htmx())
    content = answer.content.decode()
    assert answer.status_code == 200 and "<html" not in content
    assert "You called it a tie." in content and 'id="ratings"' in content and 'hx-swap-oob="true"' in content
    assert PairJudgement.objects.get().winner == "tie"


def test_a_hostile_reason_is_bounded_and_escaped(client):
    run = make_pairs_run()
    left_id, right_id = offered(client.get(f"/runs/{run.pk}/pairs").content.decode())
    form = {"left": left_id, "right": right_id, "winner": "left", "who": "x" * 150}

    too_long = client.post(f"/runs/{run.pk}/pairs", {**form, "reason": "y" * 2001})
    assert too_long.status_code == 200 and "at most 2,000 characters; this one has 2,001" in too_long.content.decode()
    assert offered(too_long.content.decode()) == (left_id, right_id)  # the same pair, to try again
    assert not PairJudgement.objects.exists()
    assert "at most 150" in client.post(f"/runs/{run.pk}/pairs", {**form, "who": "x" * 151}).content.decode()
    assert not PairJudgement.objects.exists()

    hostile = '</dd><script>window.pwned = 1</script>\x00<img src=x onerror="alert(1)">'
    answer = client.post(f"/runs/{run.pk}/pairs", {**form, "reason": hostile}, follow=True)
    content = answer.content.decode()
    assert PairJudgement.objects.get().reason == hostile.replace("\x00", "")
    assert "<script>window.pwned" not in content and "<img src=x" not in content
    assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in content


def test_model_output_is_rendered_safely(client):
    run = make_pairs_run(prompts=1, models=MODELS[1:])  # beta against the hostile gamma
    content = client.get(f"/runs/{run.pk}/pairs").content.decode()
    assert "<script>window.pwned" not in content and "<img" not in content and 'href="javascript' not in content
    assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in content
    assert "hello" in content and "Two answers 0" in content


@pytest.mark.parametrize("change", [
    {"left": "abc"}, {"right": "9" * 13}, {"right": ""}, {"winner": "both"},
])
def test_a_form_that_does_not_name_an_offered_pair_stores_nothing(client, change):
    run = make_pairs_run()
    left_id, right_id = offered(client.get(f"/runs/{run.pk}/pairs").content.decode())
    answer = client.post(f"/runs/{run.pk}/pairs", {"left": left_id, "right": right_id, "winner": "left", **change})
    assert answer.status_code == 200 and 'role="alert"' in answer.content.decode()
    assert not PairJudgement.objects.exists()


def test_pairs_of_one_model_of_two_prompts_or_of_another_run_are_refused(client):
    run, other = make_pairs_run(), make_pairs_run(pairs_blueprint(slug="other"))
    rows = {(r.prompt_index, r.variant_id): r.pk for r in Response.objects.filter(run=run)}
    alpha, beta = "fixtures:alpha[temp:0]", "fixtures:beta[temp:0]"
    elsewhere = Response.objects.get(run=other, prompt_index=0, variant_id=beta).pk
    for left, right in [(rows[(0, alpha)], rows[(0, alpha)]), (rows[(0, alpha)], rows[(1, beta)]),
                        (rows[(0, alpha)], elsewhere)]:
        answer = client.post(f"/runs/{run.pk}/pairs", {"left": left, "right": right, "winner": "left"})
        assert "not one this page offered" in answer.content.decode()
    assert not PairJudgement.objects.exists()


def test_a_judgement_of_another_scope_or_a_bad_id_is_not_found(client):
    run, other = make_pairs_run(), make_pairs_run(pairs_blueprint(slug="other"))
    left, right = Response.objects.filter(run=other, prompt_index=0)[:2]
    judgement = PairJudgement.objects.create(left=left, right=right, winner="left")
    assert client.get(f"/runs/{run.pk}/pairs?judged={judgement.pk}").status_code == 404
    assert client.get(f"/runs/{run.pk}/pairs?judged=1e9").status_code == 404
    assert client.get(f"/runs/{other.pk}/pairs?judged={judgement.pk}").status_code == 200
    assert client.get("/runs/999999/pairs").status_code == 404
    assert client.put(f"/runs/{run.pk}/pairs").status_code == 405


def test_a_reviewer_gets_every_pair_once_then_is_told_so(client):
    run = make_pairs_run()  # 2 prompts x 3 model pairs
    judged = []
    for _ in range(6):
        content = client.get(f"/runs/{run.pk}/pairs").content.decode()
        left_id, right_id = offered(content)
        judged.append(frozenset((left_id, right_id)))
        client.post(f"/runs/{run.pk}/pairs", {"left": left_id, "right": right_id, "winner": "left", "who": "Ada"})
    assert len(set(judged)) == 6
    done = client.get(f"/runs/{run.pk}/pairs").content.decode()
    assert "You have judged every pair on offer here (6 judgements)" in done


def c(run, prompt, variant, response):
    return pairs.Candidate(run, prompt, f"p{prompt}", variant, response)


def test_the_next_pair_is_the_least_judged_model_pair_on_the_least_judged_prompt():
    cells = [c(1, p, v, 10 * p + i) for p in range(3) for i, v in enumerate("xyz")]
    judged = [pairs.Judged("p0", "x", "y", 0, 1), pairs.Judged("p1", "y", "x", 11, 10),
              pairs.Judged("p0", "x", "z", 0, 2)]
    for seed in range(20):
        left, right = pairs.choose_pair(cells, judged, random.Random(seed))
        assert {left.variant_id, right.variant_id} == {"y", "z"}  # never judged by this reviewer
        assert left.prompt_id == right.prompt_id == "p2"  # the prompt they have not judged at all


def test_no_pair_when_every_pair_is_judged_or_a_prompt_has_one_model():
    cells = [c(1, 0, "x", 1), c(1, 0, "y", 2), c(1, 1, "x", 3), c(2, 0, "y", 4)]
    assert pairs.choose_pair(cells, [pairs.Judged("p0", "x", "y", 2, 1)], random.Random(0)) is None
    assert pairs.choose_pair(cells[:1], [], random.Random(0)) is None


def test_ratings_rank_the_preferred_model_first(client):
    run = make_pairs_run()
    rows = {(r.prompt_index, r.variant_id.split(":")[1][:4]): r for r in Response.objects.filter(run=run)}
    for prompt in (0, 1):
        for left, right in [("alph", "beta"), ("alph", "gamm"), ("beta", "gamm")]:
            PairJudgement.objects.create(left=rows[(prompt, left)], right=rows[(prompt, right)], winner="left")
    table = (client.get(f"/runs/{run.pk}/pairs").content.decode().split('id="ratings"', 1)[1]
             .split('id="style-ratings"', 1)[0])  # the raw table (the style-controlled one follows it)
    names = re.findall(r"<code>fixtures:(\w+)\[temp:0\]</code>", table)
    assert names == ["alpha", "beta", "gamma"]
    assert "6 judgements" in table and "4 · 0 · 0" in table


def test_the_blueprint_page_draws_from_every_recent_run_and_counts_their_judgements(client):
    blueprint = pairs_blueprint()
    first, second = make_pairs_run(blueprint), make_pairs_run(blueprint)
    left, right = Response.objects.filter(run=first, prompt_index=0)[:2]
    PairJudgement.objects.create(left=left, right=right, winner="right")
    page = client.get("/runs/pairs?blueprint=pairs").content.decode()
    left_id, right_id = offered(page)
    assert Response.objects.get(pk=left_id).run_id in (first.pk, second.pk)
    assert "1 judgement" in page.split('id="ratings"', 1)[1]
    answer = client.post("/runs/pairs?blueprint=pairs", {"left": left_id, "right": right_id, "winner": "left"})
    assert answer.status_code == 302 and answer.url.startswith("/runs/pairs?blueprint=pairs&judged=")
    assert client.get(answer.url).status_code == 200
    assert client.get("/runs/pairs?blueprint=nope").status_code == 404
    assert client.get("/runs/pairs").status_code == 404


def test_deleting_a_run_deletes_its_judgements_and_keeps_the_others():
    blueprint = pairs_blueprint()
    kept, gone = make_pairs_run(blueprint), make_pairs_run(blueprint)
    for run in (kept, gone):
        left, right = Response.objects.filter(run=run, prompt_index=0)[:2]
        PairJudgement.objects.create(left=left, right=right, winner="left")
    run_work.delete_run(gone)
    assert list(PairJudgement.objects.values_list("left__run_id", flat=True)) == [kept.pk]


def ratings_section(page) -> str:
    return page.content.decode().split('id="ratings"', 1)[1].split("</section>", 1)[0]


def test_the_ratings_are_fitted_once_and_kept_until_a_judgement_changes_them(client, monkeypatch):
    """Bradley-Terry with its 500 bootstrap refits took 13-15 s a view with 120 models: the page keeps the fit
    until the judgements change, as the results matrix is kept (counted with the real fit, not replaced)."""
    from runs.engine import ratings as bt

    run = make_pairs_run()
    rows = {(r.prompt_index, r.variant_id.split(":")[1][:4]): r for r in Response.objects.filter(run=run)}
    PairJudgement.objects.create(left=rows[(0, "alph")], right=rows[(0, "beta")], winner="left")
    fits = []
    real_fit = bt.fit_strengths

    def counted(*args, **kwargs):
        fits.append(1)
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(bt, "fit_strengths", counted)
    pairs._FITS.clear()
    first = ratings_section(client.get(f"/runs/{run.pk}/pairs"))
    fitted = len(fits)
    assert fitted == 2  # the fit and its bootstrap (all resamples at once)
    for _ in range(3):
        again = ratings_section(client.get(f"/runs/{run.pk}/pairs"))
        assert again == first
    assert len(fits) == fitted, "the page refitted the same judgements"
    # A new judgement is a new fit, and the page shows it.
    left_id, right_id = offered(client.get(f"/runs/{run.pk}/pairs").content.decode())
    client.post(f"/runs/{run.pk}/pairs", {"left": left_id, "right": right_id, "winner": "tie"})
    after = ratings_section(client.get(f"/runs/{run.pk}/pairs"))
    assert len(fits) == 2 * fitted and "2 judgements" in after and "2 judgements" not in first
    # Judgements gone with their run are a change too: the other scope's fit is not served for it.
    other = make_pairs_run(pairs_blueprint(slug="pairs-other"))
    assert "No judgements yet" in client.get(f"/runs/{other.pk}/pairs").content.decode()


def test_the_next_pair_balances_every_judgement_in_view_not_only_the_reviewers():
    """Others have judged x-y and x-z often, y-z never: a new reviewer is offered y-z first (main offered any
    pair to a reviewer with no judgements of their own)."""
    cells = [c(1, p, v, 10 * p + i) for p in range(3) for i, v in enumerate("xyz")]
    others = [pairs.Judged("p0", "x", "y", 0, 1)] * 3 + [pairs.Judged("p1", "z", "x", 12, 10)] * 2
    for seed in range(20):
        left, right = pairs.choose_pair(cells, [], random.Random(seed), others)
        assert {left.variant_id, right.variant_id} == {"y", "z"}
    # with y-z judged as often, the reviewer's own count decides between equally judged pairs
    mine = [pairs.Judged("p2", "y", "z", 21, 22)] * 2
    everyone = others + mine + [pairs.Judged("p0", "y", "z", 1, 2), pairs.Judged("p0", "x", "z", 0, 2)]
    picks = {frozenset((l.variant_id, r.variant_id))
             for l, r in (pairs.choose_pair(cells, mine, random.Random(s), everyone) for s in range(30))}
    assert picks == {frozenset("xy"), frozenset("xz")}  # three each in all; y-z is the one this reviewer did


def test_many_reviewers_judge_every_pair_of_models_about_equally_often(client):
    """Through the page: eighteen reviewers judging one pair each, three model pairs: six judgements each (main
    offered each newcomer any pair at random: all six each about 1 time in 23)."""
    run = make_pairs_run(prompts=4)
    for n in range(18):
        client.post(f"/runs/{run.pk}/pairs", {"who": f"r{n}", "winner": "tie",
                                              **dict(zip(("left", "right"),
                                                         offered(client.get(f"/runs/{run.pk}/pairs").content.decode())))})
    counts = {}
    for a, b in PairJudgement.objects.values_list("left__variant_id", "right__variant_id"):
        key = tuple(sorted((a, b)))
        counts[key] = counts.get(key, 0) + 1
    assert PairJudgement.objects.count() == 18 and sorted(counts.values()) == [6, 6, 6]


def test_the_ratings_show_rank_ranges_chances_of_first_and_a_style_controlled_table(client):
    run = make_pairs_run()
    rows = {(r.prompt_index, r.variant_id.split(":")[1][:4]): r for r in Response.objects.filter(run=run)}
    for prompt in (0, 1):
        for left, right in [("alph", "beta"), ("alph", "gamm"), ("beta", "gamm")]:
            PairJudgement.objects.create(left=rows[(prompt, left)], right=rows[(prompt, right)], winner="left")
    section = client.get(f"/runs/{run.pk}/pairs").content.decode().split('id="ratings"', 1)[1]
    raw, styled = section.split('id="style-ratings"', 1)
    assert "Rank range" in raw and "Chance of first" in raw and "Tied group" in raw
    assert re.findall(r'class="p-first">(\d+%)<', raw)[0] != "0%"
    assert re.findall(r"<code>fixtures:(\w+)\[temp:0\]</code>", styled)[:3] != []
    for words in ("answer length (characters)", "markdown headers", "list items", "bold spans"):
        assert f'<th scope="row">{words}</th>' in styled


def coefficient(page, words: str) -> float:
    styled = page.content.decode().split('id="style-ratings"', 1)[1]
    return float(re.search(rf'<th scope="row">{re.escape(words)}</th><td>(-?[\d.]+)</td>', styled).group(1))


def test_the_style_fit_reads_each_answer_and_follows_an_answer_re_run_in_place(client):
    """gamma's long answers win every time: the length coefficient is positive. Re-run in place with a short
    answer (a new text, finished again), gamma's wins now go with the shorter answer: the kept fit is not served."""
    from django.utils import timezone

    run = make_pairs_run()
    rows = {(r.prompt_index, r.variant_id.split(":")[1][:4]): r for r in Response.objects.filter(run=run)}
    for prompt in (0, 1):
        for other in ("alph", "beta"):
            PairJudgement.objects.create(left=rows[(prompt, "gamm")], right=rows[(prompt, other)], winner="left")
    before = coefficient(client.get(f"/runs/{run.pk}/pairs"), "answer length (characters)")
    assert before > 0
    Response.objects.filter(run=run, variant_id__contains="gamma").update(text="ok", finished_at=timezone.now())
    after = coefficient(client.get(f"/runs/{run.pk}/pairs"), "answer length (characters)")
    assert after < 0


def test_a_judgement_whose_answer_has_no_text_now_is_left_out_of_the_style_fit_and_said_so(client):
    run = make_pairs_run()
    rows = {(r.prompt_index, r.variant_id.split(":")[1][:4]): r for r in Response.objects.filter(run=run)}
    PairJudgement.objects.create(left=rows[(0, "alph")], right=rows[(0, "beta")], winner="left")
    PairJudgement.objects.create(left=rows[(1, "alph")], right=rows[(1, "gamm")], winner="left")
    Response.objects.filter(pk=rows[(1, "gamm")].pk).update(text=None, finished_at=None)
    styled = client.get(f"/runs/{run.pk}/pairs").content.decode().split('id="style-ratings"', 1)[1]
    assert "Fitted from 1 of the 2 judgements" in styled
