"""The runs app: doing a run, and what came out. Its modules by phase (``.importlinter``'s "runs-phases"
contract holds these layers: each imports only from its own layer and those below it):

Doors, where a person or a program comes in:
    urls, views (run pages), api, api_across, api_compare (the JSON API), management/commands (run_blueprint,
    replay, compare, followup, findings, summarize, export_run, library), tasks (django-q2), apps, across/views,
    pairs/people, pairs/llm_judge, insight_views

Reading and reviewing results:
    actions (what a person can do to a run: one function each), compare, followup, grid, heatmap, report, exports,
    response_page, call_views, overrides, annotations, trust, repeats, verdicts, insight (findings, similarity,
    the checked summary), across/figures, pairs/scope, run_form, pages (what every page shares), templatetags,
    rendering

Doing a run:
    request (RunRequest, read once at every door), start (prepare, plan, items), work (enqueue, claim, execute,
    cancel, resume, retry), replay, cache, followup_look (a follow-up stops itself once decided)

Its records, and below everything:
    records (the one mapping between engine values and rows), summaries, bulk, models, spec (the pinned
    blueprint), outfiles, migrations

The engine (``runs/engine``) is pure Python under all of them: no Django, nothing of the apps.
"""
