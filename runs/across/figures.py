"""Across runs, the Django side: each finished run's summary kept as a row (built on first need from the run's
results matrix, ``records.run_matrix``, and rebuilt when its ``results_version`` or status moved), the pinned
baseline of a blueprint, and what the history, model, leaderboard and overview pages and their API show.

The arithmetic is ``runs.engine.across`` (over cell scores) and ``runs.engine.stats``; nothing here reads a
``Response`` score. A page reads a bounded number of queries: the runs' small columns, their summary rows,
and for the few runs whose summary is missing or out of date, their matrices once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Q
from django.utils import timezone

from blueprints.models import Blueprint

from ..compare import changed_prompts
from ..records import critical_failed
from ..engine import across as engine
from ..engine import stats
from ..models import FINISHED, BaselinePin, Run, RunStatus, RunSummary
from ..records import run_matrix
from ..spec import RunRefused, parsed_blueprint
from ..summaries import store as store_summary

RUN_COLUMNS = ("pk", "blueprint_id", "revision_id", "revision__number", "status", "results_version", "created_at",
               "finished_at", "name")


@dataclass
class RunInfo:
    """A run's small columns and, once finished, its summary."""

    pk: int
    blueprint_id: int
    revision_id: int
    revision: int
    status: str
    results_version: int
    created_at: datetime
    finished_at: datetime | None
    name: str
    summary: dict | None = None
    baseline: dict = field(default_factory=dict)  # the stored comparison with the pinned baseline

    @property
    def display_name(self) -> str:
        return self.name or f"Run {self.pk}"

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    @property
    def when(self) -> datetime:
        return self.finished_at or self.created_at


def _infos(runs) -> list[RunInfo]:
    return [RunInfo(*row) for row in runs.values_list(*RUN_COLUMNS)]


def build_summary(run: Run) -> dict | None:
    """A finished run's summary from its matrix (None when its revision no longer parses)."""
    try:
        prompts = parsed_blueprint(run.revision).prompts
    except RunRefused:
        return None
    return engine.summarise(run_matrix(run, prompts), prompts, critical_failed=critical_failed(run, prompts))


def summaries(infos: list[RunInfo], only: Q | None = None) -> list[RunInfo]:
    """Fill in the summary of each finished run: the stored one when it is of the run's current version and
    status, otherwise built now from its matrix and stored. Unfinished runs get none (their figures move).
    ``only``: a filter on the summary rows to read (e.g. the runs a model took part in); the others are kept
    up to date but not read."""
    finished = {i.pk: i for i in infos if i.finished}
    if not finished:
        return infos
    keys = {row[0]: row[1:] for row in RunSummary.objects.filter(run_id__in=list(finished)).values_list(
        "run_id", "results_version", "status", "shape")}
    stale = [pk for pk, i in finished.items()
             if keys.get(pk) != (i.results_version, i.status, engine.SUMMARY_SHAPE)]
    if stale:
        for run in Run.objects.filter(pk__in=stale).select_related("revision").defer("aggregates"):
            data = build_summary(run)
            info = finished[run.pk]
            if data is None:
                continue
            # The version and status read with the run: if either moved meanwhile, the next reader rebuilds.
            store_summary(run, data)
            info.summary, info.baseline = data, {}
            info.results_version, info.status = run.results_version, run.status
    fresh = [pk for pk in finished if pk not in set(stale)]
    if fresh:
        rows = RunSummary.objects.filter(run_id__in=fresh)
        if only is not None:
            rows = rows.filter(only)
        for pk, data, baseline in rows.values_list("run_id", "data", "baseline"):
            finished[pk].summary, finished[pk].baseline = data, baseline or {}
    return infos


def summary_of(run: Run) -> RunInfo:
    info = RunInfo(run.pk, run.blueprint_id, run.revision_id, run.revision.number, run.status, run.results_version,
                   run.created_at, run.finished_at, run.name)
    return summaries([info])[0]


# --- the baseline ----------------------------------------------------------------------------------------------


def baseline_of(blueprint_id: int) -> Run | None:
    pin = BaselinePin.objects.filter(blueprint_id=blueprint_id).select_related("run", "run__revision").first()
    return pin.run if pin else None


def pin_baseline(blueprint: Blueprint, run: Run | None, who: str = "") -> None:
    """Pin ``run`` as the blueprint's baseline (None: unpin)."""
    if run is None:
        BaselinePin.objects.filter(blueprint=blueprint).delete()
        return
    if run.blueprint_id != blueprint.pk:
        raise ValueError(f"run {run.pk} is not a run of {blueprint.slug}")
    BaselinePin.objects.update_or_create(blueprint=blueprint, defaults={"run": run, "who": who[:150],
                                                                        "pinned_at": timezone.now()})


def _changed_between(run_revision, base_revision) -> list[str]:
    if run_revision.pk == base_revision.pk:
        return []
    try:
        return changed_prompts(parsed_blueprint(base_revision).prompts, parsed_blueprint(run_revision).prompts)
    except RunRefused:
        return []


def against_baseline(infos: list[RunInfo], base: RunInfo, revisions: dict) -> dict[int, dict]:
    """Each finished run's comparison with ``base`` per variant (``engine.compare_summaries``: the compare page's
    verdicts), stored on the run's summary row and reused while both runs' versions are what they were.
    ``revisions``: revision id -> revision (to name the prompts whose content changed). Returns run id ->
    ``{"pairs": {variant: Comparison}, "changed": [prompt id], "worse": [variant]}``."""
    out = {}
    if base.summary is None:
        return out
    key = [base.pk, base.results_version, base.status]
    for info in infos:
        if info.summary is None or info.pk == base.pk:
            continue
        kept = info.baseline if info.baseline.get("key") == key else None
        if kept is None:
            changed = _changed_between(revisions[info.revision_id], revisions[base.revision_id])
            pairs = engine.compare_summaries(info.summary, base.summary, changed)
            kept = {"key": key, "changed": changed,
                    "pairs": {v: engine.comparison_to_dict(c) for v, c in pairs.items()}}
            RunSummary.objects.filter(run_id=info.pk, results_version=info.results_version,
                                      status=info.status).update(baseline=kept)
            info.baseline = kept
        pairs = {v: engine.comparison_from_dict(c) for v, c in kept["pairs"].items()}
        out[info.pk] = {"pairs": pairs, "changed": kept["changed"],
                        "worse": [v for v, c in pairs.items() if c.verdict == "worse"]}
    return out


# --- a blueprint's history ---------------------------------------------------------------------------------------


@dataclass
class History:
    blueprint: Blueprint
    runs: list[RunInfo]  # oldest first
    baseline: RunInfo | None
    compared: dict[int, dict]
    trends: dict[str, list]
    revisions: list[dict]  # number, runs, prompts changed from the previous revision used


def history(blueprint: Blueprint) -> History:
    infos = summaries(_infos(Run.objects.filter(blueprint=blueprint).order_by("created_at", "pk")))
    revision_ids = {i.revision_id for i in infos}
    from blueprints.models import BlueprintRevision

    revisions = {r.pk: r for r in BlueprintRevision.objects.filter(pk__in=revision_ids).select_related("blueprint")}
    pin = BaselinePin.objects.filter(blueprint=blueprint).values_list("run_id", flat=True).first()
    base = next((i for i in infos if i.pk == pin), None)
    compared = against_baseline(infos, base, revisions) if base is not None else {}
    # A follow-up runs a few prompts of its run: its means are of another set, so it stays off the trend lines
    # (the table lists it, linked to its run).
    followups = set(Run.objects.filter(blueprint=blueprint, options__has_key="followupOf").values_list("pk", flat=True))
    done = [i for i in infos if i.summary is not None and i.pk not in followups]
    trends = engine.trends([(i.pk, i.when, i.revision, i.summary) for i in done])
    used = sorted(revisions.values(), key=lambda r: r.number)
    described, previous = [], None
    for revision in used:
        entry = {"number": revision.number, "revision": revision,
                 "runs": [i.pk for i in infos if i.revision_id == revision.pk], "changed": [], "added": [],
                 "removed": [], "previous": previous.number if previous else None}
        if previous is not None:
            try:
                before, after = parsed_blueprint(previous).prompts, parsed_blueprint(revision).prompts
            except RunRefused:
                before = after = []
            entry["changed"] = changed_prompts(before, after)
            ids_before, ids_after = {p.id for p in before}, {p.id for p in after}
            entry["added"] = [p.id for p in after if p.id not in ids_before]
            entry["removed"] = [p.id for p in before if p.id not in ids_after]
        described.append(entry)
        previous = revision
    return History(blueprint, infos, base, compared, trends, described)


def run_against_baseline(run: Run) -> dict | None:
    """The run page's "compared with the baseline": None without a pinned baseline."""
    base_run = baseline_of(run.blueprint_id)
    if base_run is None:
        return None
    info, base = summary_of(run), summary_of(base_run)
    out = {"base": base, "run": info, "is_base": base.pk == run.pk, "pairs": {}, "changed": [], "worse": []}
    if not out["is_base"] and info.summary is not None:
        revisions = {run.revision_id: run.revision, base_run.revision_id: base_run.revision}
        out.update(against_baseline([info], base, revisions).get(run.pk, {}))
    return out


# --- models ------------------------------------------------------------------------------------------------------


def finished_infos(extra: Q | None = None, only: Q | None = None) -> list[RunInfo]:
    runs = Run.objects.filter(status__in=FINISHED)
    if extra is not None:
        runs = runs.filter(extra)
    return summaries(_infos(runs.order_by("created_at", "pk")), only)


@dataclass
class ModelRun:
    info: RunInfo
    blueprint: Blueprint
    variant_id: str
    variant: dict  # the summary's figures of the variant
    rank: int | None
    of: int


@dataclass
class BlueprintCoverage:
    blueprint: Blueprint
    info: RunInfo  # the latest finished run of the blueprint it is read from
    coverage: engine.Coverage


@dataclass
class ModelPage:
    model: str
    runs: list[ModelRun]  # newest first
    weak: list
    strong: list
    drift: list
    blueprints: dict[int, Blueprint]
    coverage: list[BlueprintCoverage] = field(default_factory=list)  # per blueprint, its latest finished run
    total: engine.Coverage | None = None  # those pooled: the deal-breaker bound among them


def blueprints_of(ids) -> dict[int, Blueprint]:
    return {b.pk: b for b in Blueprint.objects.filter(pk__in=set(ids)).only("pk", "slug", "title", "tags")}


def latest_per_blueprint(infos: list[RunInfo]) -> dict[int, RunInfo]:
    """The latest finished run (done: a cancelled or failed run covers only part) of each blueprint."""
    out = {}
    for info in infos:
        if info.summary is not None and info.status == RunStatus.DONE:
            current = out.get(info.blueprint_id)
            if current is None or (info.when, info.pk) > (current.when, current.pk):
                out[info.blueprint_id] = info
    return out


def model_page(model: str) -> ModelPage | None:
    # The summary rows name their models; runs not yet summarised are summarised first (finished_infos).
    infos = [i for i in finished_infos(only=Q(models_key__contains=f"\n{model}\n")) if i.summary is not None
             and any(v["model"] == model for v in i.summary["variants"].values())]
    if not infos:
        return None
    blueprints = blueprints_of(i.blueprint_id for i in infos)
    rows = []
    for info in sorted(infos, key=lambda i: (i.when, i.pk), reverse=True):
        for variant_id in info.summary["order"]:
            variant = info.summary["variants"][variant_id]
            if variant["model"] == model:
                rank, of = engine.rank_of(info.summary, variant_id)
                rows.append(ModelRun(info, blueprints[info.blueprint_id], variant_id, variant, rank, of))
    gaps = []
    latest = latest_per_blueprint(infos)
    for info in latest.values():
        gaps.extend(engine.prompt_gaps(info.pk, info.summary, model))
    weak, strong = engine.weakest_and_strongest(gaps)
    drifts = [d for d in drift_of(infos) if d.model == model]
    covered = sorted((BlueprintCoverage(blueprints[i.blueprint_id], i,
                                        engine.coverage([(blueprints[i.blueprint_id].slug, i.summary)], model))
                      for i in latest.values()), key=lambda c: c.blueprint.slug)
    total = engine.coverage([(blueprints[i.blueprint_id].slug, i.summary) for i in latest.values()], model)
    return ModelPage(model, rows, weak, strong, drifts, blueprints, covered, total)


def model_list(infos: list[RunInfo] | None = None) -> list[dict]:
    """Every model id as written, with how many runs and blueprints it took part in (``infos``: the finished
    runs when the caller has them)."""
    seen: dict[str, dict] = {}
    infos = finished_infos() if infos is None else infos
    for info in infos:
        if info.summary is None:
            continue
        for model in {v["model"] for v in info.summary["variants"].values()}:
            entry = seen.setdefault(model, {"model": model, "runs": 0, "blueprints": set(), "last": info.when})
            entry["runs"] += 1
            entry["blueprints"].add(info.blueprint_id)
            entry["last"] = max(entry["last"], info.when)
    latest = latest_per_blueprint(infos)
    covered = engine.coverages([(str(i.blueprint_id), i.summary) for i in latest.values()], seen)
    out = [{**e, "blueprints": len(e["blueprints"]), "coverage": covered[e["model"]]} for e in seen.values()]
    out.sort(key=lambda e: e["model"])
    return out


def drift_of(infos: list[RunInfo]) -> list[engine.Drift]:
    return engine.drift([(i.pk, i.revision_id, i.when, i.summary) for i in infos
                         if i.summary is not None and i.status == RunStatus.DONE])


# --- leaderboards ----------------------------------------------------------------------------------------------


def all_tags() -> dict[str, int]:
    """Every tag with the number of blueprints that carry it."""
    out: dict[str, int] = {}
    for tags in Blueprint.objects.values_list("tags", flat=True):
        for tag in tags or ():
            out[tag] = out.get(tag, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: kv[0].lower()))


@dataclass
class TagBoard:
    tag: str
    blueprints: list[Blueprint]
    board: engine.Board
    latest: dict[int, RunInfo]  # blueprint id -> the run it is read from

    @property
    def not_run(self) -> list[Blueprint]:
        return [b for b in self.blueprints if b.pk not in self.latest]


def tag_board(tag: str, infos: list[RunInfo] | None = None, blueprints: list[Blueprint] | None = None
              ) -> TagBoard | None:
    """``infos``, ``blueprints``: every finished run and blueprint, when the caller has them."""
    if blueprints is None:
        blueprints = list(Blueprint.objects.only("pk", "slug", "title", "tags"))
    tagged = [b for b in blueprints if tag in (b.tags or ())]
    if not tagged:
        return None
    ids = {b.pk for b in tagged}
    if infos is None:
        infos = finished_infos(Q(blueprint_id__in=list(ids)))
    infos = [i for i in infos if i.blueprint_id in ids]
    latest = latest_per_blueprint(infos)
    board = engine.leaderboard({b.slug: latest[b.pk].summary for b in tagged if b.pk in latest}, len(tagged))
    return TagBoard(tag, tagged, board, latest)


# --- the overview ----------------------------------------------------------------------------------------------


def since(infos: list[RunInfo], last_visit: datetime | None) -> list[RunInfo]:
    """Runs that finished since the last visit, newest first (every finished run of the last week without one)."""
    if last_visit is None:
        last_visit = timezone.now() - timezone.timedelta(days=7)
    return sorted((i for i in infos if i.finished and i.when > last_visit), key=lambda i: (i.when, i.pk),
                  reverse=True)


def worse_of(infos: list[RunInfo]) -> dict[int, list[str]]:
    """Run id -> the variants its blueprint's pinned baseline says got worse (runs of blueprints with a pin)."""
    pins = dict(BaselinePin.objects.filter(blueprint_id__in={i.blueprint_id for i in infos})
                .values_list("blueprint_id", "run_id"))
    if not pins:
        return {}
    from blueprints.models import BlueprintRevision

    by_pk = {i.pk: i for i in infos}
    missing = [pk for pk in pins.values() if pk not in by_pk]
    if missing:
        for extra in summaries(_infos(Run.objects.filter(pk__in=missing))):
            by_pk[extra.pk] = extra
    revisions = {r.pk: r for r in BlueprintRevision.objects.filter(
        pk__in={i.revision_id for i in by_pk.values()}).select_related("blueprint")}
    out = {}
    for blueprint_id, base_pk in pins.items():
        base = by_pk.get(base_pk)
        if base is None:
            continue
        mine = [i for i in infos if i.blueprint_id == blueprint_id]
        for run_id, result in against_baseline(mine, base, revisions).items():
            out[run_id] = result["worse"]
    return out


def comparison_json(c: stats.Comparison) -> dict:
    return engine.comparison_to_dict(c)
