"""Hostile blueprints (issue 12): each is refused quickly with one located error, never built or raised on.

A case is (name, text, code, line, column, words): the first error's ``code``, where it
points, and words its message or hint must contain. tests/spec/test_fuzz.py runs them
through parse_any, ``validate_blueprint --json`` and ``/validate/``; the fuzz bench
(tests/bench/bench_fuzz.py) mixes them into its inputs.
"""

from __future__ import annotations

from dataclasses import dataclass

PROMPT = "---\n- prompt: hi\n  should: [says hi]\n"


@dataclass(frozen=True)
class Case:
    name: str
    text: str
    code: str
    line: int
    column: int
    words: tuple[str, ...]


def alias_bomb(indent: str = "", levels: int = 9) -> list[str]:
    """Anchors of ten aliases each: 10**levels values once expanded, a few hundred bytes as text."""
    lines = [f"{indent}x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"{indent}x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels)]
    return lines


MODELS_BOMB = "\n".join(["title: bomb", "bomb:", *alias_bomb("  "), "models: *a8", PROMPT])
CITATION_BOMB = "\n".join(["title: bomb", "models: [openai:gpt-4o-mini]", "---", "- prompt: hi",
                           "  should:", "    - text: says hi", "      citation:", *alias_bomb("        ")])
VARIANTS = ("models: [" + ", ".join(f"openai:m{i}" for i in range(150)) + "]\n"
            "temperatures: [" + ", ".join(f"{i / 150:.4f}" for i in range(150)) + "]\n"
            "systems: [" + ", ".join(f"s{i}" for i in range(150)) + "]\n" + PROMPT)

ANCHORED = ("title: t\nmodels: [openai:x]\nlong: &long " + "a" * 200_000 + "\nprompts:\n"
            + "".join("  - prompt: *long\n    should: [says hi]\n" for _ in range(30)))

CASES = [
    Case("one long anchored text used 30 times", ANCHORED, "limit", 51, 13,
         ("5,000,000 characters of text once aliases are expanded", "EVALSITE_MAX_EXPANDED_CHARS")),
    Case("alias bomb under models:", MODELS_BOMB, "limit", 7, 47, ("100,000 values", "EVALSITE_MAX_NODES")),
    Case("alias bomb in a citation", CITATION_BOMB, "limit", 12, 53, ("100,000 values", "EVALSITE_MAX_NODES")),
    Case("recursive alias", "title: t\nmodels: &m [openai:x, *m]\n" + PROMPT, "syntax", 2, 23,
         ("alias `*m` is inside the node",)),
    Case("150 x 150 x 150 variants", VARIANTS, "limit", 1, 1,
         ("150 models x 150 temperatures x 150 system prompts = 3,375,000", "EVALSITE_MAX_VARIANTS")),
    Case("deep nesting (YAML)", "models: [openai:x]\n---\n- prompt: hi\n  should: " + "[" * 300 + "]" * 300,
         "limit", 4, 209, ("nested more than 200 deep", "EVALSITE_MAX_DEPTH")),
    Case("deep nesting through an alias", "models: [openai:x]\nx: &x " + "[" * 150 + "]" * 150 + "\ny: " + "[" * 60
         + "*x" + "]" * 60 + "\n" + PROMPT, "limit", 3, 64, ("nested more than 200 deep", "once the alias is expanded")),
    Case("deep nesting (JSON)", '{"models": ["openai:x"], "prompts": ' + "[" * 100_000 + "]" * 100_000 + "}",
         "limit", 1, 236, ("nested more than 200 deep", "EVALSITE_MAX_DEPTH")),
    Case("NaN in JSON", '{"models": ["openai:x"],\n "prompts": [{"prompt": "hi", "weight": NaN}]}', "syntax", 2,
         41, ("`NaN` is not a JSON value", "no NaN or Infinity")),
    Case("Infinity in JSON", '{"temperature": -Infinity}', "syntax", 1, 17, ("`-Infinity` is not a JSON value",)),
    Case("1e400 in JSON", '{"temperature": 1e400}', "syntax", 1, 17, ("too large",)),
    Case("huge int as temperature", "models: [openai:x]\ntemperature: " + "9" * 400 + "\n" + PROMPT, "syntax", 2,
         14, ("too large", "quote it")),
    Case("huge int past Python's digit limit", "models: [openai:x]\ntemperature: " + "9" * 5000 + "\n" + PROMPT,
         "syntax", 2, 14, ("too large",)),
    Case("huge int as a weight", "models: [openai:x]\n---\n- prompt: hi\n  should: [{text: x, weight: "
         + "9" * 320 + "}]\n", "syntax", 4, 30, ("too large",)),
    Case("huge int in JSON", '{"models": ["openai:x"], "temperature": ' + "1" * 5000 + "}", "syntax", 1, 41,
         ("too large",)),
    Case("huge int as a word-count bound", "models: [openai:x]\n---\n- prompt: hi\n  should: "
         "[{$word_count_between: [1, " + "9" * 600 + "]}]\n", "syntax", 4, 38, ("too large",)),
    Case(".inf temperature", "models: [openai:x]\ntemperature: .inf\n" + PROMPT, "type", 2, 14,
         ("invalid 'temperature'",)),
    Case(".nan in temperatures", "models: [openai:x]\ntemperatures: [.nan, 0.5]\n" + PROMPT, "type", 2, 15,
         ("invalid 'temperatures'",)),
    Case(".inf max_tokens", "models:\n  - {id: 'custom:x', url: 'https://x.test', modelName: x, inherit: openai, "
         "parameters: {max_tokens: .inf}}\n" + PROMPT, "custom-model", 2, 101,
         ("'parameters.max_tokens' must be a finite number",)),
    Case("author url that is a number", "title: t\nauthor: {name: a, url: 17}\nmodels: [openai:x]\n" + PROMPT,
         "author", 2, 24, ("`author.url` must be text",)),
    Case("too much text", "title: t\ndescription: " + "x" * 5_000_001 + "\n", "limit", 2, 4_999_992,
         ("more than the limit of 5,000,000", "EVALSITE_MAX_BLUEPRINT_CHARS")),
]
