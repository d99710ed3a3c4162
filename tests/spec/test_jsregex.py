# Over 500 lines: one table-driven test file per grammar, mirroring jsregex.py.
"""The JavaScript-to-Python regex translation.

Two kinds of test:
* tables, one per translation rule, with the expected verdict written out;
* every regex of the real corpus (shared/corpus/weval-configs), run through V8
  (mini-racer, `new RegExp(p, flags).test(s)`) and through our translation over
  a set of probe strings; the two must agree on every probe, and a pattern V8
  rejects must raise RegexError here.
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import pytest
import yaml

from blueprints.spec import functions
from blueprints.spec.jsregex import MAX_GROUP_DEPTH, MAX_PATTERN_CHARS, RegexError, RegexTimeout, compile_js, search_js, translate
from blueprints.spec.limits import Limits

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "weval-configs"


# ---------------------------------------------------------------------------
# V8 as the oracle

_V8_BATCH = """
(function (cases) {
  return cases.map(function (c) {
    try {
      var re = new RegExp(c[0], c[1]);
      return c[2].map(function (s) { return re.test(s); });
    } catch (e) {
      return "error: " + e.message;
    }
  });
})
"""


@pytest.fixture(scope="module")
def v8():
    from py_mini_racer import MiniRacer

    context = MiniRacer()
    context.eval(f"var testCases = {_V8_BATCH};")
    return context


def v8_verdicts(v8, cases: list[tuple[str, str, list[str]]]) -> list[list[bool] | str]:
    return v8.call("testCases", [list(case) for case in cases], timeout_sec=30)


def ours(pattern: str, ignore_case: bool, probes: list[str]) -> list[bool] | str:
    try:
        compiled = compile_js(pattern, ignore_case=ignore_case)
    except RegexError as error:
        return f"error: {error.message}"
    return [compiled.search(probe) is not None for probe in probes]


# ---------------------------------------------------------------------------
# Table tests: one row per rule, verdicts written out by hand


@pytest.mark.parametrize(
    ("pattern", "text", "expected"),
    [
        # `$` is the very end: no match before a final newline
        (r"^\d{4}$", "2024", True),
        (r"^\d{4}$", "2024\n", False),
        (r"end$", "the end\r", False),
        # `^` is the very start
        (r"^b", "a\nb", False),
        # `.` excludes all four line terminators
        (r"a.b", "a\rb", False),
        (r"a.b", "a\u2028b", False),
        (r"a.b", "a\tb", True),
        (r"a.b", "a\u00e9b", True),
        # \d, \w, \b are ASCII only
        (r"\d", "\u0663", False),
        (r"\w", "\u00e9", False),
        (r"\bcaf\b", "caf\u00e9", True),
        (r"\bna\b", "na\u00efve", True),
        (r"\W", "\u00e9", True),
        (r"\B", "\u00e9", True),
        # \s is JavaScript's whitespace: NBSP and BOM yes, U+0085 and U+001C no
        (r"a\sb", "a\u00a0b", True),
        (r"a\sb", "a\ufeffb", True),
        (r"a\sb", "a\u0085b", False),
        (r"a\sb", "a\x1cb", False),
        (r"[\s]", "\u3000", True),
        (r"[\S]", "\u3000", False),
        # empty class and any-char class
        (r"a[]", "a", False),
        (r"a[^]b", "a\nb", True),
        # `[` inside a class is literal
        (r"[[]", "[", True),
        (r"[a-c[]", "[", True),
        # named groups and named backreferences
        (r"(?<word>ab)-\k<word>", "ab-ab", True),
        (r"(?<word>ab)-\k<word>", "ab-ac", False),
        # a backreference to a group that did not match matches the empty string
        (r"(a)?b\1", "b", True),
        (r"\1(a)", "a", True),
        (r"(a)|b\1", "b", True),
        # \k without named groups is the letter k
        (r"\k<x>", "k<x>", True),
        # Annex B escapes
        (r"\/", "/", True),
        (r"\A", "A", True),
        (r"\Z", "Z", True),
        (r"\p{L}", "p{L}", True),
        (r"\p{L}", "a", False),
        (r"\8", "8", True),
        (r"\1", "\x01", True),
        (r"\101", "A", True),
        (r"\0", "\x00", True),
        (r"\cJ", "\n", True),
        (r"\c1", "\\c1", True),
        (r"[\c1]", "\x11", True),
        (r"\x41", "A", True),
        (r"\x4", "x4", True),
        (r"\u0041", "A", True),
        (r"\u{41}", "u" * 41, True),
        (r"\ud83d\ude00", "\U0001f600", True),
        (r"[\b]", "\x08", True),
        (r"[\-]", "-", True),
        (r"[a-\d]", "-", True),
        (r"[\w-]", "-", True),
        # braces that are no quantifier are literal; `{,n}` is not a quantifier
        (r"a{", "a{", True),
        (r"x{,3}", "x{,3}", True),
        (r"x{,3}", "xxx", False),
        (r"{foo}", "{foo}", True),
        (r"a{2,}", "aa", True),
        (r"a{2}", "a", False),
        # inline flags (deviation 4): leading, combined, mid-pattern, scoped
        (r"(?i)hello", "HELLO", True),
        (r"(?s)a.b", "a\nb", True),
        (r"(?m)^b$", "a\nb\nc", True),
        (r"(?m)^b$", "a\rb\rc", True),
        (r"(?is)A.B", "a\nb", True),
        (r"a(?i)b", "aB", True),
        (r"a(?i)b", "AB", False),
        (r"a(?i)b|c", "C", True),
        (r"(?:a(?i)b)c", "aBC", False),
        (r"(?i:a)b", "Ab", True),
        (r"(?i:a)b", "AB", False),
        (r"(?i)a(?-i:b)", "Ab", True),
        (r"(?i)a(?-i:b)", "AB", False),
        # case folding without the u flag never maps non-ASCII onto ASCII
        (r"(?i)k", "\u212a", False),
        (r"(?i)s", "\u017f", False),
        (r"(?i)[a-z]", "\u212a", False),
        (r"(?i)\u00e9", "\u00c9", True),
        (r"(?i)stra\u00dfe", "STRASSE", False),
        # lookaround
        (r"(?<=\$)\d+", "cost $42", True),
        (r"(?<!\$)\b\d+", "$42", False),
        (r"(?=a)*b", "b", True),
        # duplicate names in different alternatives (V8 allows them)
        (r"(?<y>a)|(?<y>b)", "b", True),
        (r"(?:(?<y>a)|(?<y>b))\k<y>", "bb", True),
        (r"(?:(?<y>a)|(?<y>b))\k<y>", "ba", False),
    ],
)
def test_translation_table(pattern: str, text: str, expected: bool) -> None:
    assert (compile_js(pattern).search(text) is not None) is expected


@pytest.mark.parametrize(
    ("pattern", "position"),
    [
        ("[", 0),
        ("(abc", 0),
        ("abc)", 3),
        ("a**", 2),
        ("a++", 2),
        ("a{2}{3}", 4),
        ("*a", 0),
        ("a|?", 2),
        ("{2}", 0),
        ("x{2,1}", 1),
        ("[z-a]", 2),
        ("^*", 0),
        ("\\b+", 0),
        ("(?<=a)*", 0),
        ("(?P<n>x)", 0),
        ("(?#comment)", 0),
        ("(?>atomic)", 0),
        ("(??)", 0),
        ("abc\\", 3),
        ("(?<1a>x)", 0),
        ("(?<a>x)\\k<b>", 7),
        ("(?<a>x)(?<a>y)", 7),
        ("(?x)a", 0),
        ("(?ii:a)", 0),
        ("(?i-i:a)", 0),
        ("(?-:a)", 0),
    ],
)
def test_patterns_javascript_rejects_raise_with_a_position(pattern: str, position: int) -> None:
    with pytest.raises(RegexError) as caught:
        translate(pattern)
    assert caught.value.position == position
    assert caught.value.message


def test_variable_length_lookbehind_runs_as_in_javascript() -> None:
    # JavaScript allows any lookbehind; the `regex` package does too (Python's `re` did not).
    assert compile_js(r"(?<=a+)b").search("caab") is not None
    assert compile_js(r"(?<!a+)b").search("caab") is None


def test_huge_repetition_counts_are_located_errors_not_an_out_of_memory_kill() -> None:
    # JavaScript accepts `a{2147483648}`; the `regex` package would lay out 2^31 units
    # in memory. Past MAX_REPEAT_UNITS (nested counts multiplied) the pattern is an error.
    for pattern, position in ((r"a{2147483648}", 0), (r"x(?:a{1000}){1000}", 1), (r"((a{100}){100}){100}", 0)):
        with pytest.raises(RegexError, match="repeats too much") as caught:
            compile_js(pattern)
        assert caught.value.position == position
    assert compile_js(r"(x{10}|y){5}").search("x" * 50)
    assert compile_js(r"a{0,2147483647}").search("aaa")  # a large maximum costs nothing


def test_a_pattern_longer_than_the_bound_is_a_located_error() -> None:
    assert compile_js("a" * MAX_PATTERN_CHARS).search("a" * MAX_PATTERN_CHARS)
    with pytest.raises(RegexError, match="characters long") as caught:
        compile_js("a" * (MAX_PATTERN_CHARS + 1))
    assert caught.value.position == MAX_PATTERN_CHARS


def test_deep_nesting_is_a_located_error_not_a_recursion_error() -> None:
    for opener in ("(", "(?:", "(?=", "(?<n>", "(?i:"):
        depth = 300
        openers = [opener.replace("<n>", f"<n{i}>") for i in range(depth)]
        pattern = "".join(openers) + "a" + ")" * depth
        with pytest.raises(RegexError, match="nest more than") as caught:
            compile_js(pattern)
        # Located at the first group too deep.
        assert caught.value.position == len("".join(openers[:MAX_GROUP_DEPTH]))
    nested = "(" * MAX_GROUP_DEPTH + "a" + ")" * MAX_GROUP_DEPTH
    assert compile_js(nested).search("a")


def test_long_literal_runs_are_cut_so_the_first_search_stays_fast() -> None:
    # `regex` builds a search table for one literal in time cubic in its length,
    # holding the interpreter lock: 5,000 characters took 27 s before the cut.
    pattern = "x" * 5000
    assert "(?:\\b|\\B)" in translate(pattern)
    started = time.monotonic()
    assert search_js(pattern, "a" * 100_000) is None
    assert search_js(pattern, "a" + "x" * 5000) is not None
    assert time.monotonic() - started < 2.0  # generous: it takes milliseconds


def test_search_js_stops_a_catastrophic_match_at_the_limit() -> None:
    limits = Limits(regex_timeout_s=0.2)
    started = time.monotonic()
    with pytest.raises(RegexTimeout) as caught:
        search_js(r"^(a|a)+$", "a" * 40 + "b", limits=limits)
    elapsed = time.monotonic() - started
    assert 0.15 < elapsed < 3.0
    assert "took longer than 0.2 s on this response" in caught.value.message
    assert "EVALSITE_REGEX_TIMEOUT_S" in caught.value.message
    # The issue's own pattern: `regex` sees through it, so it simply does not match.
    assert search_js(r"^(a+)+$", "a" * 40 + "b", limits=limits) is None
    assert search_js(r"^(a+)+$", "a" * 40, limits=limits) is not None


def test_search_js_releases_the_interpreter_lock_while_matching() -> None:
    ticks = []
    stop = threading.Event()

    def tick() -> None:
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.01)

    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        with pytest.raises(RegexTimeout):
            search_js(r"^(a|a)+$", "a" * 40 + "b", limits=Limits(regex_timeout_s=0.5))
    finally:
        stop.set()
        ticker.join()
    # Held lock: the ticker would get a tick or two in; released: about fifty.
    assert len(ticks) > 10


def test_translate_marks_the_i_flag_at_the_start() -> None:
    assert translate("abc", ignore_case=True).startswith("(?i)")
    assert not translate("abc").startswith("(?i)")


def test_compile_js_caches_successes_and_failures() -> None:
    assert compile_js("a+b") is compile_js("a+b")
    for _ in range(2):
        with pytest.raises(RegexError):
            compile_js("(")


def test_translation_never_warns(recwarn) -> None:
    compile_js(r"[[a&&b\-\-c||d~~e]")
    compile_js(r"[\w&&[]")
    assert not [w for w in recwarn if issubclass(w.category, (FutureWarning, DeprecationWarning))]


# ---------------------------------------------------------------------------
# Hand-written patterns compared with V8, including the error cases

HAND_PATTERNS = [
    r"^sentence\.$",
    r"[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}",
    r"(\d+)-\1",
    r"(?<y>\d{4})-(?<m>\d\d)",
    r"a|b|",
    r"()",
    r"[^\d\s]+",
    r"[\D]",
    r"\W+",
    r"\s\S",
    r"x*?y",
    r"(?:ab)+?c",
    r"a{1,3}?",
    r"\0",
    r"\07",
    r"\08",
    r"\377",
    r"\400",
    r"[\1]",
    r"[\8]",
    r"\cA",
    r"\c_",
    r"[\c_]",
    r"[\c]",
    r"\x",
    r"\u12",
    r"]",
    r"}",
    r"a{1",
    r"a{1,",
    r"a{1,2",
    r"(?=x)+",
    r"(?!x)?y",
    r"(?<a$>x)\k<a$>",
    r"(?<é>x)\k<é>",
    r"\k",
    r"(?<a>x)\k",
    r"[\d-z]",
    r"[%--]",
    r"[a-]",
    r"[-a]",
    r"\u00e9+",
    r"(?i:[a-z]+)\d",
    r"(?-i:a)",
    r"(?m-s:^.$)",
    r"(?s:.)",
    r"((a)|b)+\2",
    r"T[üu]rkiye",
    r"[^]*x",
    r"\b\w+\b",
    r"\B\w\B",
    r"a\d{0}b",
    r"\.\*\+\?\(\)\[\]\{\}\|\^\$\\",
    r"(?:)",
    r"(?<!\s)x",
    "s",
    "k",
    "i",
    "\u017f",
    "\u212a",
    "\u0131",
    "[a-z]",
    "[^a-z]",
    "[\u00e0-\u00ff]",
]

HAND_PROBES = [
    "",
    "sentence.",
    "Sentence.",
    "x@y.co",
    "12-12",
    "12-13",
    "2024-05",
    "abc",
    "ABC",
    "a\nb",
    "\n",
    "x",
    "xxy",
    "ababc",
    "aaa",
    "\x00",
    "\x07",
    "\x008",
    "\xff",
    " 0",
    "\x01",
    "8",
    "\x01\x1f",
    "c",
    "\\",
    "\\c",
    "x",
    "u12",
    "]",
    "}",
    "a{1",
    "a{1,",
    "a{1,2",
    "y",
    "k",
    "d-z",
    "%-",
    "-",
    "éé",
    "Éé",
    "abc1",
    "T\u00fcrkiye",
    "Turkiye",
    "TÜRKIYE",
    "café",
    "naïve",
    "ab",
    ".*+?()[]{}|^$\\",
    "a\u2028b",
    "\u017f",
    "\u212a",
    "\u0131",
    "\u0130",
    "S",
    "K",
    "I",
    "\u00c0",
]


def test_hand_written_patterns_agree_with_v8(v8) -> None:
    cases = [(pattern, flags, HAND_PROBES) for pattern in HAND_PATTERNS for flags in ("", "i")]
    disagreements = []
    for (pattern, flags, probes), expected in zip(cases, v8_verdicts(v8, cases)):
        actual = ours(pattern, flags == "i", probes)
        if isinstance(expected, str) or isinstance(actual, str):
            if isinstance(expected, str) != isinstance(actual, str):
                disagreements.append((pattern, flags, expected, actual))
            continue
        for probe, want, got in zip(probes, expected, actual):
            if want != got:
                disagreements.append((pattern, flags, probe, want, got))
    assert disagreements == []


# ---------------------------------------------------------------------------
# Every regex in the corpus, compared with V8


def _point_calls(node):
    """Yield (function name as written, args) for every point-function call in a loaded blueprint."""
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(key, str) and key.startswith("$"):
                yield key, value
        if isinstance(node.get("fn"), str):
            yield node["fn"], node.get("fnArgs", node.get("arg"))
        for value in node.values():
            yield from _point_calls(value)
    elif isinstance(node, list):
        if len(node) == 2 and isinstance(node[0], str) and functions.resolve(node[0]):
            yield node[0], node[1]  # legacy tuple point (deviation 8)
        for value in node:
            yield from _point_calls(value)
    elif isinstance(node, str) and node.startswith("$") and ":" in node:
        # A quoted "$name: args" point (deviation 15).
        name, _, rest = node.partition(":")
        if functions.resolve(name):
            try:
                yield name, yaml.safe_load(rest)
            except yaml.YAMLError:
                # Not valid YAML (for instance "\*" in double quotes); the raw text is still a regex.
                yield name, rest.strip().strip("\"'")


def _load_blueprint(path: Path):
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return json.loads(text)
    try:
        # libyaml's loader where PyYAML has it: the same documents, ~50 times faster (this runs at collection)
        return list(yaml.load_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    except yaml.YAMLError:
        return None  # one corpus file is not valid YAML; it holds no regex points


def corpus_regexes() -> list[tuple[str, bool]]:
    found: set[tuple[str, bool]] = set()
    for path in sorted((CORPUS / "blueprints").rglob("*.yml")) + sorted(
        (CORPUS / "history-json").rglob("*.json")
    ):
        for written_name, args in _point_calls(_load_blueprint(path)):
            name = functions.resolve(written_name)
            if name is None:
                continue
            for pattern in functions.regex_patterns(name, args):
                found.add((pattern, functions.is_case_insensitive_regex(name)))
    return sorted(found)


CORPUS_REGEXES = corpus_regexes()

ACCENTED = ["Paraná", "São Paulo", "Türkiye", "café", "İstanbul", "Ελλάδα", "Москва", "长江", "√5/2", "8n² + 4n + 1."]


def probes_for(pattern: str) -> list[str]:
    """Strings likely to sit on either side of the pattern's verdict."""
    unescaped = re.sub(r"\\([^a-zA-Z0-9])", r"\1", pattern)
    literal = re.sub(r"\\[a-zA-Z]|[\\^$.*+?()\[\]{}|]", "", pattern)
    words = re.findall(r"(?<!\\)[A-Za-zÀ-ÿ0-9]+", pattern)
    pieces = [pattern, unescaped, literal, " ".join(words), "\n".join(words), " ".join(reversed(words))]
    pieces += [alternative for alternative in re.split(r"\|", literal) if alternative]
    pieces += [word for word in words[:6]]
    probes = []
    for piece in pieces:
        probes += [piece, piece.upper(), piece.lower(), piece.swapcase(), piece + "\n", "\n" + piece, f"x {piece} y"]
    probes += ACCENTED + ["", "\n", "A", "B", "Yes", "1", "22", "22\n", "x22y\nz", "{'pred': 'yes', 'score': 3}"]
    probes += ['{"Answer": "Option A"}', "[[A]]", "Comparison: x\nPreferred: A", "Comparison: x\r\nPreferred: A"]
    return list(dict.fromkeys(probes))


def test_the_corpus_has_regexes_to_compare() -> None:
    # Guards the extraction below: the corpus holds about two hundred distinct regexes.
    assert len(CORPUS_REGEXES) > 150


def _v8_form(pattern: str, ignore_case: bool) -> tuple[str, str]:
    """The pattern and flags V8 should see: a leading inline flag group becomes real flags (deviation 4)."""
    flags = "i" if ignore_case else ""
    match = re.match(r"\(\?([ims]+)\)", pattern)
    if match:
        flags = "".join(sorted(set(flags + match.group(1))))
        pattern = pattern[match.end() :]
    return pattern, flags


def test_every_corpus_regex_agrees_with_v8(v8) -> None:
    cases = []
    for pattern, ignore_case in CORPUS_REGEXES:
        v8_pattern, flags = _v8_form(pattern, ignore_case)
        cases.append((v8_pattern, flags, probes_for(pattern)))
    disagreements = []
    checked = 0
    for (pattern, ignore_case), case, expected in zip(CORPUS_REGEXES, cases, v8_verdicts(v8, cases)):
        actual = ours(pattern, ignore_case, case[2])
        if isinstance(expected, str):
            if not isinstance(actual, str):
                disagreements.append((pattern, "V8 rejects it, we accept it", expected))
            continue
        if isinstance(actual, str):
            disagreements.append((pattern, "V8 accepts it, we reject it", actual))
            continue
        for probe, want, got in zip(case[2], expected, actual):
            checked += 1
            if want != got:
                disagreements.append((pattern, ignore_case, probe, want, got))
    assert disagreements == []
    assert checked > 5000
