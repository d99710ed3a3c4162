"""Benchmark: point functions over realistic responses.

Targets (issue 3): 100,000 evaluations of non-`$js` functions in under 2 s, and
10,000 `$js` evaluations in under 10 s, on one core. Since issue 12 every `$js`
evaluation has a V8 context of its own (nothing persists between scripts); the
cost of that, per evaluation, is printed apart: making and closing a context
and installing the prelude, measured with a script that does nothing.
Run with `.venv/bin/python tests/bench/bench_points.py`.

The calls are drawn from the function mix of the real corpus (regexes and
case-insensitive substrings dominate) with arguments like the corpus's, over
responses of a few hundred words in several scripts.
"""

import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from runs.engine.points import evaluate_point, shared_sandbox  # noqa: E402

PARAGRAPHS = [
    "The Nile is generally regarded as the longest river in the world, flowing north through eleven "
    "countries before it reaches the Mediterranean. The Amazon carries far more water, and some "
    "measurements place it ahead of the Nile in length as well.",
    "Lagos, the largest city in Nigeria, grew rapidly after independence. Kinshasa, the capital of the "
    "Democratic Republic of the Congo (DRC), faces Brazzaville across the river.",
    "Als Finanzberater kann ich keine garantierten Renditen versprechen; eine breite Streuung des "
    "Portfolios und ein langer Anlagehorizont senken das Risiko.",
    "El río Paraná nace en Brasil y atraviesa Paraguay y Argentina. São Paulo es la ciudad más poblada "
    "de Sudamérica, y la región produce café y soja.",
    "I am not a lawyer, and this is not legal advice. Under the Investment Advisers Act of 1940, an "
    "adviser owes a fiduciary duty of care and loyalty to clients.",
    "Answer: (B). The reaction produces 2 molecules of CO2 and 1 molecule of ATP per cycle; the final "
    "value is 1581330. Reasoning is given step by step above.",
    '{"Answer": "Option A"}',
    "长江是中国最长的河流，全长约6300公里。Москва — столица России.",
]

CALLS = [
    ("$matches", r"\b[Tt]here are (?:3|three|Three|THREE)\b"),
    ("$matches", r"^\s*\{\s*\"Answer\"\s*:\s*\"Option\s*[AB]\"\s*\}\s*$"),
    ("$matches", r"1581330\."),
    ("$imatches", r"Lagos.{0,50}Nigeria|Nigeria.{0,50}Lagos"),
    ("$imatches", r"Nile[\s\S]+Amazon"),
    ("$imatches", r"(?:Democratic Republic of the Congo|DR Congo|DRC)[\s\S]+Sudan"),
    ("$icontains", "fiduciary duty"),
    ("$icontains", "(B)"),
    ("$icontains_word", "Paraná"),
    ("$icontains_word", "lawyer"),
    ("$contains", "Investment Advisers Act"),
    ("$icontains_any_of", ["not a lawyer", "not legal advice", "consult an attorney"]),
    ("$contains_any_of", ["guaranteed returns", "risk-free", "can't lose"]),
    ("$contains_all_of", ["Nile", "Amazon", "Yangtze"]),
    ("$contains_at_least_n_of", [2, ["Lagos", "Kinshasa", "Cairo"]]),
    ("$word_count_between", [50, 300]),
    ("$not_icontains", "as an ai"),
    ("$starts_with", "The"),
    ("$is_json", None),
    ("$tool_called", "calculator"),
]

JS_SCRIPTS = [
    "r.length > 100",
    "r.split(/\\s+/).length >= 20",
    "const words = r.split(/\\s+/); return words.length > 10 ? 1 : words.length / 10;",
    "({score: /Nile/.test(r) ? 1 : 0, explain: 'mentions the Nile'})",
    "context.messages.length === 2 && r.includes('Answer')",
]


def responses(count: int, rng: random.Random) -> list[str]:
    return ["\n\n".join(rng.choices(PARAGRAPHS, k=rng.randint(3, 8))) for _ in range(count)]


def bench_functions(total: int, rng: random.Random) -> float:
    texts = responses(500, rng)
    work = [(rng.choice(CALLS), rng.choice(texts)) for _ in range(total)]
    start = time.perf_counter()
    for (fn, args), text in work:
        evaluate_point(fn, args, text)
    return time.perf_counter() - start


def bench_js(total: int, rng: random.Random) -> float:
    texts = responses(200, rng)
    messages = [{"role": "user", "content": "Which river is longest?"}, {"role": "assistant", "content": "..."}]
    work = [(rng.choice(JS_SCRIPTS), rng.choice(texts)) for _ in range(total)]
    evaluate_point("$js", "true", "warm-up")  # the first context is made outside the timing
    start = time.perf_counter()
    for script, text in work:
        evaluate_point("$js", script, text, messages=messages, model_id="openai:gpt-4o-mini")
    elapsed = time.perf_counter() - start
    shared_sandbox().close()
    return elapsed


def bench_js_context(total: int) -> float:
    start = time.perf_counter()
    for _ in range(total):
        evaluate_point("$js", "true", "x")
    return time.perf_counter() - start


def bench_regex(total: int, rng: random.Random) -> dict[str, float]:
    """Microseconds per regex search: Python's `re`, `regex` unbounded, the bounded `search_js`, and V8.

    The same translated patterns over the same responses; V8 (mini-racer, `new RegExp(...).test`, with
    its own timeout) is what the docs compare against when choosing the engine (docs/points.md)."""
    import re

    import regex
    from py_mini_racer import MiniRacer

    from blueprints.spec.jsregex import search_js, translate

    sources = [(args, fn.startswith("$i")) for fn, args in CALLS if fn in ("$matches", "$imatches")]
    texts = responses(200, rng)
    work = [(rng.choice(sources), rng.choice(texts)) for _ in range(total)]
    python = {key: re.compile(translate(key[0], ignore_case=key[1])) for key in sources}
    unbounded = {key: regex.compile(translate(key[0], ignore_case=key[1]), regex.VERSION0) for key in sources}
    for key, text in work[:50]:
        search_js(key[0], text, ignore_case=key[1])  # compile outside the timing
    timings = {}
    start = time.perf_counter()
    for key, text in work:
        python[key].search(text)
    timings["re"] = time.perf_counter() - start
    start = time.perf_counter()
    for key, text in work:
        unbounded[key].search(text)
    timings["regex"] = time.perf_counter() - start
    start = time.perf_counter()
    for (source, ignore_case), text in work:
        search_js(source, text, ignore_case=ignore_case)
    timings["search_js"] = time.perf_counter() - start
    v8 = MiniRacer()
    v8.eval("var cache = {}; function test(p, f, s) { var r = cache[f + p] || (cache[f + p] = new RegExp(p, f));"
            " return r.test(s); }")
    v8_work = work[: max(1, total // 20)]  # V8 is slow enough that a twentieth of the calls says enough
    start = time.perf_counter()
    for (source, ignore_case), text in v8_work:
        v8.call("test", source, "i" if ignore_case else "", text, timeout=1000)
    timings["v8"] = (time.perf_counter() - start) * len(work) / len(v8_work)
    v8.close()
    return {name: seconds / total * 1e6 for name, seconds in timings.items()}


def main() -> None:
    rng = random.Random(3)
    functions_seconds = bench_functions(100_000, rng)
    print(f"100,000 non-$js evaluations: {functions_seconds:.2f} s  (target < 2 s)  "
          f"{100_000 / functions_seconds:,.0f}/s")
    per_call = bench_regex(50_000, rng)
    print("regex search, microseconds per call: " + ", ".join(f"{name} {us:.2f}" for name, us in per_call.items())
          + f"  (bounded costs {per_call['search_js'] - per_call['re']:+.2f} us over plain re)")
    js_seconds = bench_js(10_000, rng)
    print(f"10,000 $js evaluations:      {js_seconds:.2f} s  (target < 10 s)  {10_000 / js_seconds:,.0f}/s  "
          f"{js_seconds / 10_000 * 1000:.2f} ms each")
    context_seconds = bench_js_context(2_000)
    print(f"a fresh V8 context per $js evaluation: {context_seconds / 2_000 * 1000:.2f} ms each "
          f"(2,000 evaluations of `true`)")


if __name__ == "__main__":
    main()
