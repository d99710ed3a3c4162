"""python manage.py followup RUN --a VARIANT --b VARIANT [--budget USD] [--dry-run] [--json OUT]
   python manage.py followup RUN --baseline OTHER_RUN --model VARIANT [--budget USD] [--dry-run] [--json OUT]

What would settle "A against B" in RUN (two model variants of that run), or "VARIANT in RUN against VARIANT in
OTHER_RUN" (a model across two runs, as ``compare RUN --base OTHER_RUN`` pairs it): the prompts where the two
disagree most, the answers needed (from the observed spread of their paired differences), the calls, the
dollars (expected, and at most) and the time. Without ``--dry-run`` it starts a follow-up of just those (fresh
answers, the planned trials, ``--budget`` as its spending cap: across two runs, two runs that split it) that
stops by itself once an anytime-valid interval decides, and prints its verdict when it has finished
(runs/followup.py, docs/results.md).

Exit status: 0; 2 when RUN, OTHER_RUN or a variant does not exist, the flags do not name one pair, or there is
nothing to follow up.
"""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand

from runs import followup
from runs.models import Run
from runs.spec import RunRefused
from runs.start import check_budget


class Command(BaseCommand):
    help = ("Suggest (--dry-run) or start a follow-up run that settles a 'can't tell' between two model variants of "
            "a run: the prompts where they disagree most, asked again until an anytime-valid interval decides.")
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int, metavar="RUN")
        parser.add_argument("--a", metavar="VARIANT", help="a model variant id of RUN")
        parser.add_argument("--b", metavar="VARIANT", help="another model variant id of RUN")
        parser.add_argument("--baseline", type=int, metavar="OTHER_RUN",
                            help="across two runs: the run to compare RUN with (with --model)")
        parser.add_argument("--model", metavar="VARIANT",
                            help="across two runs: the model variant id, in both RUN and --baseline")
        parser.add_argument("--budget", metavar="USD", help="the follow-up's spending cap in US dollars")
        parser.add_argument("--dry-run", action="store_true", help="say what it would do and cost; start nothing")
        parser.add_argument("--json", metavar="OUT", help="also write the suggestion (and the follow-up) as JSON to OUT")

    def _fail(self, message: str, hints=()) -> None:
        self.stderr.write(message)
        for hint in hints:
            self.stderr.write(f"  {hint}")
        raise SystemExit(2)

    def handle(self, *args, **options):
        run = Run.objects.select_related("revision", "blueprint").filter(pk=options["run_id"]).first()
        if run is None:
            self._fail(f"no run {options['run_id']}")
        budget = None
        if options["budget"] is not None:
            try:
                budget = check_budget(options["budget"])
            except ValueError as exc:
                self._fail(f"--budget: {exc}, not {options['budget']!r}")
        within = options["a"] is not None or options["b"] is not None
        across = options["baseline"] is not None or options["model"] is not None
        if within == across or within and not (options["a"] and options["b"]) or \
                across and not (options["baseline"] is not None and options["model"]):
            self._fail("name one pair: --a VARIANT --b VARIANT (two variants of RUN), or --baseline OTHER_RUN "
                       "--model VARIANT (a variant across two runs)")
        base = None
        if across:
            base = Run.objects.select_related("revision", "blueprint").filter(pk=options["baseline"]).first()
            if base is None:
                self._fail(f"--baseline: no run {options['baseline']}")
        try:
            found = (followup.suggest_across(run, base, options["model"]) if across
                     else followup.suggest(run, options["a"], options["b"]))
        except RunRefused as exc:
            self._fail(exc.message, exc.problems)
        out = {"suggestion": found.to_dict()}
        if across:
            self.stdout.write(f"Run {run.pk} against run {base.pk}: {found.a}: {found.comparison.verdict} "
                              f"(n={found.comparison.n})\n{found.line}\n")
        else:
            self.stdout.write(f"Run {run.pk}: {found.a} against {found.b}: {found.comparison.verdict} "
                              f"(n={found.comparison.n})\n{found.line}\n")
        if found.plan.prompts:
            self.stdout.write("Prompts: " + ", ".join(found.plan.prompts) + "\n")
        if not options["dry_run"]:
            try:
                if across:
                    follow, other, _ = followup.start_across(run, base, found.a, budget_usd=budget, suggestion=found)
                else:
                    follow, _ = followup.start(run, found.a, found.b, budget_usd=budget, suggestion=found)
                    other = None
            except RunRefused as exc:
                self._fail(exc.message, exc.problems)
            follow.refresh_from_db()
            out["followup"] = {"run": follow.pk, "status": follow.status, "stoppedReason": follow.stopped_reason or None}
            if other is not None:
                other.refresh_from_db()
                out["followup"]["baseRun"] = other.pk
                out["followup"]["baseStatus"] = other.status
                self.stdout.write(f"Started follow-up runs {follow.pk} (as run {run.pk}) and {other.pk} (as run "
                                  f"{base.pk}) ({follow.status}, {other.status}).\n")
            else:
                self.stdout.write(f"Started follow-up run {follow.pk} of run {run.pk} ({follow.status}).\n")
            if follow.is_finished and (other is None or other.is_finished):
                result = followup.verdict(follow)
                out["followup"]["verdict"] = result.to_dict()
                low = "–" if result.low is None else f"{result.low:+.3f}"
                high = "–" if result.high is None else f"{result.high:+.3f}"
                stopped = f"; {follow.stopped_detail}" if follow.stopped_reason == followup.STOP_REASON else ""
                self.stdout.write(f"Follow-up verdict: {result.verdict} after {result.n} paired answers "
                                  f"({low} to {high}){stopped}\n")
        if options["json"]:
            Path(options["json"]).write_text(json.dumps(out, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
