"""Benchmark: the estimate's most-it-can-cost figure is never below what a tool loop or a simulation makes.

    /work/main/.venv/bin/python tests/bench/bench_agent_estimate.py [--repeat 3]

Over the agent fixtures: Weval's corpus blueprint tool-use-native-test.yml, the imported AI Eval suite with
`tool_mocks`/`max_steps` and the AgentV suite with `tools` of tests/engine/test_imported_agents.py, and the
simulated-user blueprint of tests/runs/test_simulated_runs.py. Each is generated for real (runs.engine.generate
through the router) against the fake LLM server twice: with its test script, and "endless" (the model calls a tool
at every step, so every loop runs to its step limit). The estimate of the same run (runs.engine.estimate, no cache,
the answers' length given) is compared with the requests the fake server received.
Target: estimated calls (candidate + simulated user) >= requests made, for every fixture and script; the figure
printed beside it is how much of the estimate the run used (made / estimated). Timings: the estimate's wall time,
min and median over --repeat runs (the machine is shared: noisy).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CORPUS_FILE = Path("/work/shared/corpus/weval-configs/blueprints/tool-use-native-test.yml")
KEY = "sk-bench-agent-estimate-0001"
MODELS = ["openai:bench-a", "anthropic:bench-b", "google:bench-c"]


def fixtures():
    """(name, parse result, script, endless script)."""
    from blueprints.spec import parse_any
    from tests.engine import test_imported_agents as agents
    from tests.runs import test_simulated_runs as simulated

    out = []
    if CORPUS_FILE.is_file():
        result = parse_any(CORPUS_FILE.read_text(), path=CORPUS_FILE.name)
        calls = [[{"name": t["name"], "arguments": {}}] for t in result.blueprint.tools or []]
        out.append(("weval tool-use-native-test.yml", result, [{"match": "", "steps": calls, "reply": "Done."}],
                    _endless(result.blueprint)))
    aieval = parse_any(agents.AIEVAL, path="tests/weather-loop.yaml",
                       files={"../prompts/weather.yaml": agents.WEATHER_PROMPT})
    out.append(("ai eval weather-loop (tool_mocks)", aieval, agents.AIEVAL_SCRIPT, _endless(aieval.blueprint)))
    agentv = parse_any(agents.AGENTV, path="EVAL.yaml")
    out.append(("agentv kb-agent (tools)", agentv, agents.AGENTV_SCRIPT, _endless(agentv.blueprint)))
    sim = parse_any(simulated.BLUEPRINT, path="sim.yml")
    out.append(("simulated users", sim, simulated.RULES, [{"match": "", "reply": "Tell me more."}]))
    return out


def _endless(bp):
    """A model that calls the first tool it was offered at every step (60 steps: past any step limit)."""
    names = [t["name"] for t in bp.tools or []]
    for prompt in bp.prompts:
        names += [t["name"] for t in prompt.tools or []]
    name = names[0] if names else "search"
    return [{"match": "", "steps": [[{"name": name, "arguments": {"location": "Oslo", "query": "x"}}]] * 60,
             "reply": "Done."}]


def run_all(server, bp, models):
    from runs.engine.generate import expand_variants, generate
    from runs.engine.providers import Router, settings_from_env

    settings = settings_from_env({
        "OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": server.base_url + "/v1",
        "ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": server.base_url,
        "GEMINI_API_KEY": KEY, "GEMINI_BASE_URL": server.base_url + "/v1beta",
    })

    async def go():
        async with Router(settings) as router:
            for variant in expand_variants(bp, models):
                for prompt in bp.prompts:
                    for trial in range(prompt.trials or 1):
                        await generate(prompt, variant, router.complete, trial=trial, use_cache=False)

    asyncio.run(go())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("EVALSITE_DATA_DIR", tempfile.mkdtemp(prefix="bench-agent-estimate-"))
    os.environ["DJANGO_SETTINGS_MODULE"] = "evalsite.settings"
    import django

    django.setup()  # the simulated-user fixture's module imports the models (no database is used)
    from runs.engine.estimate import estimate_run, tokens
    from runs.engine.judge import plan_judges
    from tests.fakes.llm_server import FakeLLMServer

    server = FakeLLMServer(latency_ms=0)
    server.start_in_thread()
    print(f"models {MODELS}; fresh generations against the fake server; target: estimated calls >= made")
    print(f"{'fixture':36} {'script':8} {'est calls':>9} {'made':>6} {'used':>6} {'est ms min/med':>15}  ok")
    bad = 0
    for name, result, script, endless in fixtures():
        assert result.ok, (name, [d.message for d in result.errors])
        bp = result.blueprint
        plan = plan_judges(bp.coverage, default_judges=["openai:bench-judge"], backup_judge=None,
                           description=bp.description)
        timings = []
        for _ in range(max(1, args.repeat)):
            started = time.perf_counter()
            estimate = estimate_run(bp, MODELS, plan, fresh=True, answer_tokens=tokens(len("Done.")))
            timings.append((time.perf_counter() - started) * 1000)
        estimated = estimate.generation_calls + estimate.user_calls
        for label, rules in (("scripted", script), ("endless", endless)):
            server.reset()
            server.script(rules)
            run_all(server, bp, MODELS)
            made = len(server.requests())
            ok = estimated >= made
            bad += not ok
            print(f"{name[:36]:36} {label:8} {estimated:9} {made:6} {made / estimated:6.0%} "
                  f"{min(timings):7.1f}/{statistics.median(timings):<7.1f}  {'ok' if ok else 'BELOW'}")
    server.stop_in_thread()
    print(f"{bad} fixture run(s) below target (target: 0)")


if __name__ == "__main__":
    main()
