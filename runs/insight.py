"""Insight with receipts, the Django side: a run's findings and scanners (computed from its stored rows, kept per
process while its results are what they were), the similarity of its models' answers (an embeddings model's
calls, stored) and its checked executive summary (a writer model's call, stored).

The arithmetic is the engine's (``findings``, ``scanners``, ``similarity``, ``claims``, ``summary``); the rows
are read by ``records`` (``point_records``, ``scan_answers``, ``run_matrix``); the paired verdicts are the
compare page's (``compare.variant_pairs``). LLM opinions never become figures: the summary is text beside them,
each claim checked against them, and nothing here writes a score, a verdict or a leaderboard.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import mark_safe

from evalsite.engine import engine_config

from .cache import response_cache
from .compare import run_bounds, variant_pairs
from .engine import claims as claim_rules
from .engine import findings as engine_findings
from .engine import scanners, similarity as engine_similarity, summary as writer
from .engine.matrix import Matrix
from .engine.providers import Router, check_models
from .engine.types import ChatRequest
from .models import Run, RunInsight
from .records import final_answers, point_records, run_matrix, scan_answers
from .spec import RunRefused, parsed_blueprint

log = logging.getLogger(__name__)

KEPT = 8  # runs whose findings a process keeps
CELLS_SHOWN = 8  # cells a finding links on a page (its text gives the count)
EMBED_BATCH = 64
EMBED_CHARS = 8000  # of each answer: what an embedding reads
WRITER_MAX_TOKENS = 2000
WRITER_TIMEOUT_S = 300
QUOTE_FINDINGS = ("refusal", "self_id", "worst_failure", "language", "empty")

_KEPT: OrderedDict = OrderedDict()
_LOCK = threading.Lock()


class NoInsight(ValueError):
    """The run cannot be looked into (unfinished, or its revision no longer parses): the message says why."""


@dataclass
class Insight:
    run_id: int
    matrix: Matrix
    pairs: dict  # (a, b) -> stats.Comparison, a the better mean
    findings: list[engine_findings.Finding]
    scan: scanners.ScanReport

    def finding_ids(self) -> frozenset[str]:
        return frozenset(f.id for f in self.findings)


def _prompts(run: Run):
    try:
        return parsed_blueprint(run.revision).prompts
    except RunRefused as refused:
        raise NoInsight(f"run {run.pk}'s blueprint no longer parses: {refused}") from None


def insight_of(run: Run) -> Insight:
    """The run's findings and scan, kept in this process while its ``results_version`` and status hold."""
    if not run.is_finished:
        raise NoInsight(f"run {run.pk} is {run.status}: findings are made once it has finished")
    key = (run.pk, run.results_version, run.status)
    with _LOCK:
        kept = _KEPT.get(key)
        if kept is not None:
            _KEPT.move_to_end(key)
            return kept
    prompts = _prompts(run)
    matrix = run_matrix(run, prompts)
    pairs = {(p.a, p.b): p.comparison for p in variant_pairs(matrix, prompts)}
    points, judged = point_records(run.pk)
    report = scanners.scan(scan_answers(run, prompts, judged))
    made = Insight(run.pk, matrix, pairs, engine_findings.findings(matrix, pairs, points, report,
                                                                  run_bounds(run, matrix)), report)
    with _LOCK:
        for old in [k for k in _KEPT if k[0] == run.pk]:
            del _KEPT[old]
        _KEPT[key] = made
        while len(_KEPT) > KEPT:
            _KEPT.popitem(last=False)
    return made


def stored(run: Run) -> RunInsight | None:
    return RunInsight.objects.filter(run=run).first()


def findings_json(run: Run) -> dict:
    """``manage.py findings --json`` and the API: the findings best first, the scanners, the similarity."""
    made = insight_of(run)
    row = stored(run)
    similar = row.similarity if row is not None and row.similarity_state == "done" and row.similarity else None
    return {"findings": [f.to_dict() for f in made.findings], "scanners": made.scan.to_dict(),
            "similarity": {k: v for k, v in similar.items() if k != "svg"} if similar else None}


# --- the figures a claim may state --------------------------------------------------------------------------------


def figures_of(made: Insight) -> claim_rules.Figures:
    matrix = made.matrix
    variants = frozenset(matrix.variants)
    costs: dict[str, float] = {}
    for cell in matrix.cells.values():
        if cell.cost_usd is not None:
            costs[cell.variant_id] = costs.get(cell.variant_id, 0.0) + cell.cost_usd
    pass_rates = {v: matrix.passes(v).rate for v in matrix.variants}
    return claim_rules.Figures(
        variants=variants, prompts=frozenset(p.id for p in matrix.prompts), findings=made.finding_ids(),
        means={v: s.mean for v, s in matrix.summaries.items()},
        cells={(c.prompt_id, c.variant_id): c.shown for c in matrix.cells.values()},
        deltas={k: (c.delta, c.verdict) for k, c in made.pairs.items()}, pass_rates=pass_rates, costs=costs)


def checker_of(run: Run) -> claim_rules.Checker:
    return claim_rules.Checker(figures_of(insight_of(run)))


def _link(run: Run, made: Insight):
    def link(value) -> str | None:
        if value.metric == "cell":
            index = next((i for i, p in enumerate(made.matrix.prompts) if p.id == value.prompt), None)
            cell = made.matrix.cell(index, value.model) if index is not None else None
            if cell is not None and cell.response_id is not None:
                return reverse("runs:response", args=[run.pk, cell.response_id])
            return None
        if value.metric == "delta":
            return reverse("runs:compare", args=[run.pk]) + "#pairs"
        return reverse("runs:detail", args=[run.pk]) + "#variants"
    return link


def check_claims(run: Run, raw) -> dict:
    """A claims file checked by the summary's rules, with no call: each claim with ``ok`` and ``reason``, and
    the accepted ones as markdown."""
    made = insight_of(run)
    checked = checker_of(run).check_all(raw)
    return {"claims": [c.to_dict() for c in checked], "summary": writer.markdown(checked, _link(run, made))}


# --- calls: the summary's writer, the similarity's embeddings ----------------------------------------------------


def _row(run: Run) -> RunInsight:
    row, _ = RunInsight.objects.get_or_create(run=run)
    return row


def _add_usage(run: Run, input_tokens: int | None, output_tokens: int | None, cost: float | None,
               calls: int = 1) -> None:
    """Add calls' tokens and cost to the run's insight (a call without a price counts as unknown)."""
    RunInsight.objects.filter(run=run).update(
        input_tokens=F("input_tokens") + (input_tokens or 0), output_tokens=F("output_tokens") + (output_tokens or 0),
        cost_usd=F("cost_usd") + (cost or 0.0), cost_unknown=F("cost_unknown") + (calls if cost is None else 0))


def _with_router(work):
    config, cache = engine_config(), response_cache()

    async def go():
        async with Router(config.providers, cache=cache) as router:
            return await work(router)

    try:
        return asyncio.run(go())
    finally:
        close = getattr(cache, "close", None)
        if close is not None:
            close()


def summary_model() -> str:
    return settings.EVALSITE_SUMMARY_MODEL or ""


def embeddings_model() -> str:
    return settings.EVALSITE_EMBEDDINGS_MODEL or ""


def _quotes(run: Run, made: Insight) -> dict[str, str]:
    wanted = {f.id: f.cells[0] for f in made.findings if f.kind in QUOTE_FINDINGS and f.cells}
    if not wanted:
        return {}
    texts = final_answers(run.pk, {c[0] for c in wanted.values()})
    return {fid: texts[cell] for fid, cell in wanted.items() if cell in texts}


def write_summary(run: Run, *, model: str | None = None) -> dict:
    """Ask the writer, check its claims, store the summary (or why there is none). Returns what is stored."""
    model = model or summary_model()
    row = _row(run)
    if not model:
        raise NoInsight("no summary writer is configured: set EVALSITE_SUMMARY_MODEL to a provider:model id")
    problems = check_models([model], engine_config().providers)
    if problems:
        raise NoInsight(f"EVALSITE_SUMMARY_MODEL {model!r}: {problems[0]}")
    made = insight_of(run)
    RunInsight.objects.filter(pk=row.pk).update(summary_state="working", summary_model=model, summary_error="",
                                                updated_at=timezone.now())
    prepared = writer.writer_input(made.findings, {v: s.mean for v, s in made.matrix.summaries.items()},
                                   _quotes(run, made), seed=run.pk)

    async def ask(router):
        return await asyncio.wait_for(router.complete(ChatRequest(
            model_id=model, messages=tuple(prepared.messages), temperature=0.0, max_tokens=WRITER_MAX_TOKENS,
            purpose="judge", label="summary writer")), WRITER_TIMEOUT_S)

    try:
        result = _with_router(ask)
    except asyncio.TimeoutError:
        return _summary_failed(run, f"the writer did not answer within {WRITER_TIMEOUT_S} s")
    _add_usage(run, result.usage.input_tokens, result.usage.output_tokens, result.cost_usd)
    if result.error:
        return _summary_failed(run, f"the writer's call failed: {result.error}")
    raw = writer.read_answer(result.text)
    if raw is None:
        return _summary_failed(run, "the writer's answer held no JSON object")
    raw = writer.map_back(raw, prepared.anon)
    try:
        checked = checker_of(run).check_all(raw)
    except claim_rules.Refused as refused:
        return _summary_failed(run, f"the writer's answer could not be read: {refused}")
    data = {"claims": [c.to_dict() for c in checked], "summary": writer.markdown(checked, _link(run, made)),
            "model": model, "conflicts": writer.conflicts(model, made.matrix.variants),
            "accepted": sum(1 for c in checked if c.ok), "refused": sum(1 for c in checked if not c.ok)}
    RunInsight.objects.filter(run=run).update(summary=data, summary_state="done", summary_error="",
                                              summary_version=run.results_version, updated_at=timezone.now())
    return data


def _summary_failed(run: Run, reason: str) -> dict:
    RunInsight.objects.filter(run=run).update(summary_state="failed", summary_error=reason[:2000],
                                              updated_at=timezone.now())
    return {"error": reason}


def build_similarity(run: Run, *, model: str | None = None) -> dict:
    """Embed each model's final answer to each prompt (trial 0), and store how alike the models are."""
    model = model or embeddings_model()
    row = _row(run)
    if not model:
        raise NoInsight("no embeddings model is configured: set EVALSITE_EMBEDDINGS_MODEL to a provider:model id")
    problems = check_models([model], engine_config().providers)
    if problems:
        raise NoInsight(f"EVALSITE_EMBEDDINGS_MODEL {model!r}: {problems[0]}")
    RunInsight.objects.filter(pk=row.pk).update(similarity_state="working", similarity_model=model,
                                                similarity_error="", updated_at=timezone.now())
    texts = [(p, v, t[:EMBED_CHARS]) for (p, v), t in final_answers(run.pk).items()]

    async def embed_all(router):
        vectors = []
        for start in range(0, len(texts), EMBED_BATCH):
            got = await router.embed(model, [t for _, _, t in texts[start:start + EMBED_BATCH]])
            if isinstance(got, str):
                return got
            vectors += got
        return vectors

    vectors = _with_router(embed_all)
    if texts:  # the embeddings API answers no usage we read: its calls are counted, at an unknown price
        _add_usage(run, None, None, None, calls=-(-len(texts) // EMBED_BATCH))
    if isinstance(vectors, str):
        RunInsight.objects.filter(run=run).update(similarity_state="failed", similarity_error=vectors[:2000],
                                                  updated_at=timezone.now())
        return {"error": vectors}
    answers: dict[str, dict[str, list[float]]] = {}
    for (prompt_id, variant_id, _), vector in zip(texts, vectors):
        answers.setdefault(prompt_id, {})[variant_id] = vector
    result = engine_similarity.similarity(answers)
    data = None if result is None else {**result.to_dict(), "model": model, "svg": engine_similarity.dendrogram_svg(
        result), "perPrompt": [{"prompt": p.prompt_id, "meanSimilarity": round(p.mean_similarity, 6),
                                "outlier": p.outlier, "outlierSimilarity": None if p.outlier_similarity is None
                                else round(p.outlier_similarity, 6)} for p in result.per_prompt[:50]]}
    with transaction.atomic():
        RunInsight.objects.filter(run=run).update(similarity=data, similarity_state="done",
                                                  similarity_version=run.results_version, updated_at=timezone.now())
    return data or {"error": "fewer than two models answered"}


def after_finish(run_id: int) -> None:
    """The background task after a run finishes when a summary writer is configured (``records.finish_run``):
    the similarity first when an embeddings model is configured too, then the summary; a failure is stored and
    shown, never raised. Without a writer, similarity is made on request (the run page's button, ``findings
    --similarity``), so configuring embeddings for ``ideal`` costs no more calls."""
    run = Run.objects.select_related("revision").filter(pk=run_id).first()
    if run is None or not run.is_finished:
        return
    if not summary_model():
        return
    for wanted, work in ((embeddings_model(), build_similarity), (summary_model(), write_summary)):
        if not wanted:
            continue
        try:
            work(run)
        except NoInsight as why:
            log.warning("run %s: %s", run_id, why)
        except Exception:  # a bug: logged; the run and its figures are untouched
            log.exception("run %s: insight failed", run_id)



def make_part(run_id: int, what: str) -> None:
    """The similarity or the summary of one finished run (a button's task); a failure is stored and shown."""
    run = Run.objects.select_related("revision").filter(pk=run_id).first()
    if run is None:
        return
    work = {"similarity": build_similarity, "summary": write_summary}[what]
    try:
        work(run)
    except NoInsight as why:
        field = f"{what}_state"
        RunInsight.objects.filter(run=run).update(**{field: "failed", f"{what}_error": str(why)[:2000]})
    except Exception as error:  # a bug: logged and shown; the run and its figures are untouched
        log.exception("run %s: the %s failed", run_id, what)
        RunInsight.objects.filter(run=run).update(**{f"{what}_state": "failed",
                                                     f"{what}_error": f"{type(error).__name__}: see the log"})


# --- what the pages show --------------------------------------------------------------------------------------


def insight_context(run: Run, cell_link) -> dict:
    """What the findings section shows (the run page's, the simple view's, the report's). ``cell_link(run id,
    response id)``: where a cell's link goes (a page, or an anchor in the report)."""
    try:
        made = insight_of(run)
    except NoInsight as why:
        return {"run": run, "unavailable": str(why)}
    index = {p.id: i for i, p in enumerate(made.matrix.prompts)}

    def cells(finding):
        out = []
        for prompt_id, variant_id in finding.cells[:CELLS_SHOWN]:
            cell = made.matrix.cell(index.get(prompt_id, -1), variant_id)
            url = cell_link(run.pk, cell.response_id) if cell is not None and cell.response_id is not None else None
            out.append(((prompt_id, variant_id), url))
        return out

    row = stored(run)
    similarity = row.similarity if row is not None and row.similarity_state == "done" else None
    summary = row.summary if row is not None and row.summary_state == "done" else None
    return {
        "run": run,
        "findings": [{"finding": f, "cells": cells(f), "more": max(0, len(f.cells) - CELLS_SHOWN)}
                     for f in made.findings],
        "scanner_kinds": [(k, scanners.LABELS[k]) for k in scanners.KINDS],
        "scanner_rows": [{"variant": v, "counts": [made.scan.counts.get(k, {}).get(v) for k in scanners.KINDS]}
                         for v in made.matrix.variants],
        "row": row,
        "similarity": similarity,
        # Built by engine/similarity.dendrogram_svg: every label escaped, no script, no outside reference.
        "similarity_svg": mark_safe(similarity["svg"]) if similarity and similarity.get("svg") else None,
        "similarity_stale": row is not None and row.similarity_version not in (None, run.results_version),
        "summary": summary,
        "summary_stale": row is not None and row.summary_version not in (None, run.results_version),
        "refused": [c for c in (summary or {}).get("claims", []) if not c.get("ok")],
        "summary_model": summary_model(),
        "embeddings_model": embeddings_model(),
    }
