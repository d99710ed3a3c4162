"""python manage.py run_blueprint PATH_OR_ID [--models a,b] [--judges x,y] [--backup-judge z] [--judge-repeats K]
[--fresh] [--enqueue] [--dry-run] [--json OUT]"""

import json
import sys
import time
from pathlib import Path

from django.core.management.base import BaseCommand
from django.db import transaction

from blueprints.models import Blueprint, ModelCollection, shown_id
from blueprints import importing
from blueprints.spec.collections import lookup_for_file
from blueprints.spec.files import read_text
from blueprints.spec.ids import blueprint_id_for_file
from runs.spec import RunRefused, parsed_blueprint
from runs.request import RunRequest, RunRequestError
from runs.start import prepare, start_prepared
from runs.work import Progress, run_inline


def _ready_the_finish(prompts: int, *modules: str) -> None:
    """On a thread of its own, import these and draw the resamples of the run's intervals: the run's calls spend
    most of their time waiting for the network, and finishing the run (its summary, its intervals) would otherwise
    do both after the last call, 0.2-0.5 s of the command's wall time (tests/bench/bench_cli_run.py)."""
    import importlib
    import threading

    def ready():
        try:
            for name in modules:
                importlib.import_module(name)
            from runs.engine.aggregates import draw_intervals_ahead

            draw_intervals_ahead(prompts)
        except Exception:  # noqa: BLE001 - finishing does it again and says what is wrong
            return

    threading.Thread(target=ready, name="evalsite-finish", daemon=True).start()


class Command(BaseCommand):
    help = ("Run a blueprint file or a stored blueprint in this process (no worker needed), store it like any other "
            "run, and print a per-model score table. Exit 0 when the run completed (even with failed items), 1 when "
            "it failed or was cancelled, 2 when the blueprint cannot run.")
    # The site's system checks (URLs, templates, every view imported) are `manage.py check`'s and the
    # server's business; here they cost about 0.3 s of every invocation (tests/bench/bench_cli_run.py).
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("target", metavar="PATH_OR_ID", help="a blueprint file, or the id of a stored blueprint")
        parser.add_argument("--models", help="comma-separated models replacing the blueprint's (may name its "
                                             "custom models or a collection)")
        parser.add_argument("--judges", help="comma-separated provider:model judges replacing the blueprint's")
        parser.add_argument("--backup-judge", metavar="MODEL",
                            help="provider:model asked when every judge failed on a point (default: the site's "
                                 "EVALSITE_BACKUP_JUDGE when the blueprint names no judges)")
        parser.add_argument("--fresh", action="store_true", help="do not use cached responses")
        parser.add_argument("--trials", default=None,
                            help="responses per prompt and model (default: the blueprint's `trials`, else 1)")
        parser.add_argument("--judge-repeats", default=None, metavar="K",
                            help="ask each judge K times (1 to 5) about each point: the first asking scores, the "
                                 "others give the judges' flip rate (docs/results.md); default 1")
        parser.add_argument("--enqueue", action="store_true", help="hand the run to the workers and print its id")
        parser.add_argument("--budget", default=None, metavar="USD",
                            help="stop the run before its calls would cost more than this many US dollars "
                                 "(docs/runs.md, Budget); every model it calls needs a price")
        parser.add_argument("--json", metavar="OUT", help="also write the result file (as export_run --format json); "
                                                          "with --dry-run, the estimate")
        parser.add_argument("--dry-run", action="store_true",
                            help="print what the run would cost (calls by kind, tokens, dollars, what is unknown) "
                                 "and stop: nothing is sent and nothing is stored")

    def handle(self, *args, **options):
        request = self._request(options)
        if options["dry_run"]:
            return self._dry_run(options, request)
        blueprint, collections = self._blueprint(options["target"])
        try:
            # No estimate: this door shows none and asks no confirmation (``--dry-run`` shows it).
            prepared = prepare(blueprint, request, collections=collections, door="cli", estimated=False)
            run = start_prepared(blueprint, prepared, source="cli", enqueue=options["enqueue"])
        except RunRefused as refused:
            self._refused(refused)
        for problem in run.options.get("problems", []):
            self.stderr.write(f"warning: {problem}")
        if options["enqueue"]:
            self.stdout.write(str(run.pk))
            return
        self.stderr.write(f"run {run.pk}: {run.items_total} items ({blueprint.slug})")
        bar = _Bar(run.items_total, self.stderr)
        # What finishing (and --json's export) needs, imported while the calls wait instead of before the first,
        # once the first item is stored: by then the first calls have left, which the thread would have delayed.
        prompts = len(parsed_blueprint(run.revision).prompts)
        modules = ("runs.summaries", "scipy.special", *(("runs.exports",) if options["json"] else ()))
        readied = []

        def stored(item):
            if not readied:
                readied.append(True)
                _ready_the_finish(prompts, *modules)
            bar.step(item)

        run = run_inline(run, progress=Progress(on_item=stored, on_wait=bar.wait))
        bar.close()
        self._table(run)
        if run.stopped_reason:
            self.stderr.write(f"{run.stopped_detail} (spent ${run.spent_usd:.4f}); resume it with a higher cap: "
                              f"POST /api/runs/{run.pk}/resume {{\"budgetUsd\": N}}")
        if options["json"]:
            from runs.exports import run_to_json  # imported on the calls' thread meanwhile (above)

            Path(options["json"]).write_text(json.dumps(run_to_json(run), ensure_ascii=False, indent=2),
                                             encoding="utf-8")
            self.stderr.write(f"wrote {options['json']}")
        if run.status != "done":
            raise SystemExit(1)

    def _request(self, options) -> RunRequest:
        """The options, read once (``runs.request``): an empty ``--models ''`` is refused, exit 2."""
        try:
            return RunRequest.from_cli(options)
        except RunRequestError as exc:
            self.stderr.write(f"cannot run: {exc.message}")
            raise SystemExit(2) from None

    def _refused(self, refused: RunRefused):
        self.stderr.write(f"cannot run: {refused.message}")
        for problem in refused.problems:
            self.stderr.write(f"  {problem}")
        raise SystemExit(2)

    def _dry_run(self, options, request: RunRequest):
        with transaction.atomic():  # a file is imported to be read like any blueprint, then forgotten
            blueprint, collections = self._blueprint(options["target"])
            try:
                prepared = prepare(blueprint, request, collections=collections, door="cli")
            except RunRefused as refused:
                self._refused(refused)
            finally:
                transaction.set_rollback(True)
        planned, estimate = prepared.planned, prepared.estimate
        for problem in planned.problems:
            self.stderr.write(f"warning: {problem}")
        for line in estimate_lines(estimate):
            self.stdout.write(line)
        if options["json"]:
            data = {"blueprint": blueprint.slug, **estimate.to_json(), "problems": planned.problems}
            Path(options["json"]).write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")
            self.stderr.write(f"wrote {options['json']}")

    def _blueprint(self, target):
        path = Path(target)
        stored = ModelCollection.lookup()
        if path.is_file():
            text = read_text(path)
            slug = blueprint_id_for_file(str(path))
            companions = importing.companion_files(path, text, blueprint_id=slug)
            outcome = importing.import_files([(f"{slug.replace('__', '/')}{path.suffix}", text, companions)],
                                   via="run_blueprint")
            item = outcome.items[0]
            if item.blueprint is None:
                self.stderr.write(f"cannot run: {item.message}")
                raise SystemExit(2)
            if item.message:  # the same text stored under another id, a collection evalsite lacks...
                self.stderr.write(f"{path.name} -> {item.slug}: {item.status}; {item.message}")
            # The one rule: the models/ folders near the file first, then the collections stored in evalsite.
            return item.blueprint, lookup_for_file(path, stored)
        blueprint = Blueprint.objects.filter(slug=target).first()
        if blueprint is None:
            self.stderr.write(f"cannot run: '{shown_id(target)}' is neither a file nor the id of a stored "
                              "blueprint")
            raise SystemExit(2)
        return blueprint, stored

    def _table(self, run):
        variants = (run.aggregates or {}).get("variants", {})
        width = max([len("model")] + [len(v) for v in variants])
        self.stdout.write(f"{'model'.ljust(width)}  score   ±std   n  not evaluated  failed")
        for variant_id, stats in sorted(variants.items(), key=lambda kv: -(kv[1]["mean"] or -1)):
            mean = "  n/a" if stats["mean"] is None else f"{stats['mean']:.3f}"
            std = "   - " if stats["std"] is None else f"{stats['std']:.3f}"
            self.stdout.write(f"{variant_id.ljust(width)}  {mean}  {std}  {stats['n']:>2}  {stats['notEvaluated']:>13}"
                              f"  {stats['failed']:>6}")
        overall = (run.aggregates or {}).get("overall", {})
        if overall.get("mean") is not None:
            self.stdout.write(f"overall {overall['mean']:.3f} over {overall['n']} model variant(s); run {run.pk} "
                              f"{run.status}")
        else:
            self.stdout.write(f"run {run.pk} {run.status}: nothing could be scored")


def estimate_lines(estimate) -> list[str]:
    """The dry run's summary, one figure a line: the cost twice, expected and the most it can cost."""
    calls = estimate.to_json()["calls"]

    def dollars(value):
        return "unknown" if value is None else f"${value:,.4f}"

    unpriced = (f"{estimate.unpriced_calls:,} calls of unknown cost (no price); the others: "
                if estimate.unpriced_calls else "")
    lines = [f"{calls['total']:,} calls: {calls['generation']:,} generations, {calls['judge']:,} judge calls, "
             + (f"{calls['user']:,} simulated-user calls (up to max_turns), " if calls["user"] else "")
             + f"{calls['embedding']:,} embeddings ({estimate.responses:,} responses)",
             f"not sent: {'at least ' if not estimate.cache_complete else ''}{calls['cached']:,} answered from the "
             f"response cache, {calls['canned']:,} from fixtures"
             + (f" ({estimate.cache_unprobed:,} responses not looked up in time are counted as calls)"
                if not estimate.cache_complete else ""),
             f"tokens: ~{estimate.input_tokens:,} in, up to {estimate.output_tokens:,} out",
             f"cost: {unpriced}expected about {dollars(estimate.expected_cost)}, at most "
             f"{dollars(estimate.most_cost)} (every answer at its max tokens: what a budget reserves)"
             if estimate.unpriced_calls < estimate.total_calls or not estimate.total_calls else
             f"cost: unknown: all {estimate.total_calls:,} calls are to models with no price"]
    lines += [f"expected: {line}" for line in estimate.expected_basis]
    lines += [f"unknown: {part.message}" for part in estimate.unknown]
    return lines


class _Bar:
    """A progress bar on a terminal; a line every tenth of the run otherwise."""

    def __init__(self, total, stream):
        self.total, self.stream, self.done, self.failed = total, stream, 0, 0
        self.tty = hasattr(stream, "isatty") and stream.isatty() or sys.stderr.isatty()
        self.last_line = -1
        self.started = time.monotonic()

    def step(self, response):
        self.done += 1
        self.failed += response.status == "failed"
        if self.tty:
            filled = int(30 * self.done / max(1, self.total))
            self.stream.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.total}"
                              f"{f', {self.failed} failed' if self.failed else ''}", ending="")
            self.stream.flush()
        else:
            tenth = 10 * self.done // max(1, self.total)
            if tenth != self.last_line:
                self.last_line = tenth
                self.stream.write(f"{self.done}/{self.total} items done{f', {self.failed} failed' if self.failed else ''}"
                                  f" ({time.monotonic() - self.started:.1f} s)")

    def wait(self, model_id, message):
        if self.tty:
            self.stream.write(f"\r{model_id}: {message}".ljust(70), ending="")
        else:
            self.stream.write(f"{model_id}: {message}")

    def close(self):
        if self.tty:
            self.stream.write("")
