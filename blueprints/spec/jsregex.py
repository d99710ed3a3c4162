# Over 500 lines: one grammar, JavaScript regex syntax, translated and bounded in one place.
"""JavaScript regular expressions, read the way the upstream reads them, run by Python's `regex`.

Blueprints write regexes for JavaScript: the upstream scores `$matches` with
`new RegExp(source)` (or `new RegExp(source, "i")`), never with the `u` flag.
`translate` turns such a source into a Python source (for the `regex` package,
VERSION0, which reads `re` syntax) that matches the same strings, so scoring
never needs a JavaScript engine. `search_js` is the one place a user-written
pattern meets text: every match has a time limit (`Limits.regex_timeout_s`) and
runs with the interpreter lock released, so a catastrophic pattern costs its
caller at most that long and never stalls other threads (the web server's).
The differences the translation covers:

* `$` matches only at the very end (Python's `$` also matches before a final
  newline): it becomes `\\Z`.
* `.` excludes all four JavaScript line terminators (`\\n`, `\\r`, U+2028, U+2029),
  not only `\\n`.
* `\\d`, `\\w`, `\\b` are ASCII-only; `\\s` is JavaScript's own whitespace set.
* `[]` matches nothing and `[^]` matches any character; `[` inside a class is a
  plain character.
* Named groups `(?<name>...)` and `\\k<name>`; a backreference to a group that has
  not matched matches the empty string (Python would fail the match).
* Annex B leniencies: `\\8` is the digit 8, `\\1` with no group one is an octal
  escape, `\\c` without a letter is a backslash, `{` that starts no quantifier is
  a plain brace, and any other escaped character stands for itself (`\\/`, `\\A`,
  `\\p`).
* Syntax Python has and JavaScript rejects (possessive `a++`, `(?P<name>`,
  `(?#...)`, atomic groups) is an error here too.

One deliberate extension (DESIGN deviation 4): inline flags `(?i)`, `(?m)`,
`(?s)` and combinations such as `(?is)` or `(?i-s)` are accepted anywhere. They
apply from where they stand to the end of the enclosing group, as in PCRE and
Python; JavaScript itself only accepts the scoped form `(?i:...)`, which is
supported too.

Known differences that remain (documented in docs/points.md): characters outside
the Basic Multilingual Plane (most emoji) count as one character, as they would
with JavaScript's `u` flag, not as two; case-insensitive matching of a few dozen
rare characters (Greek letters with iota subscript, capital sharp s, theta
symbol) follows Python's Unicode tables.

Bounds the engine needs, each a located error: a pattern has at most
`MAX_PATTERN_CHARS` characters (the `regex` compiler is pure Python and holds the
interpreter lock, about 8 µs a character); groups nest at most `MAX_GROUP_DEPTH`
deep (the translator and the compiler both recurse); repetition counts ask for at
most `MAX_REPEAT_UNITS` (memory, see there). And a long run of literal characters is cut every `_LITERAL_RUN` characters by an
always-true assertion, because `regex` builds its string-search table for one
literal in time cubic in its length, before the time limit applies and with the
interpreter lock held (2,000 characters took 1.8 s; 5,000 took 27 s).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, replace

import regex as regex_engine

from .limits import DEFAULT_LIMITS, Limits

__all__ = ["RegexError", "RegexTimeout", "translate", "compile_js", "search_js", "MAX_GROUP_DEPTH", "MAX_PATTERN_CHARS"]

MAX_CODE_POINT = 0x10FFFF

# Character sets as sorted, merged lists of inclusive (low, high) code point ranges.
Ranges = list[tuple[int, int]]

DIGIT_RANGES: Ranges = [(0x30, 0x39)]
WORD_RANGES: Ranges = [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)]
# JavaScript's WhiteSpace and LineTerminator productions (what `\s` matches).
SPACE_RANGES: Ranges = [
    (0x09, 0x0D),
    (0x20, 0x20),
    (0xA0, 0xA0),
    (0x1680, 0x1680),
    (0x2000, 0x200A),
    (0x2028, 0x2029),
    (0x202F, 0x202F),
    (0x205F, 0x205F),
    (0x3000, 0x3000),
    (0xFEFF, 0xFEFF),
]
LINE_TERMINATOR_RANGES: Ranges = [(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)]

# What `^` and `$` become under the `m` flag: JavaScript counts \r, U+2028 and
# U+2029 as line ends too, where Python's MULTILINE knows only \n.
_LINE_START = r"(?:\A|(?<=[\n\r\u2028\u2029]))"
_LINE_END = r"(?=[\n\r\u2028\u2029]|\Z)"

_QUANTIFIER_RE = re.compile(r"\{(\d+)(,(\d*))?\}")
_INLINE_FLAGS_RE = re.compile(r"\(\?([a-zA-Z]*)(?:-([a-zA-Z]*))?\)")
_FLAG_GROUP_RE = re.compile(r"([a-zA-Z]*)(?:-([a-zA-Z]*))?:")
# Python's `re` rejects repeat counts at or above this (sre_constants.MAXREPEAT).
_PYTHON_MAX_REPEAT = 4294967295
# Characters in one pattern (the corpus's longest is a few hundred).
MAX_PATTERN_CHARS = 10_000
# Groups inside groups: deeper than this is an error (real patterns nest a few levels).
MAX_GROUP_DEPTH = 64
# Literal characters in a row before an always-true assertion cuts the run (see above).
_LITERAL_RUN = 100
_RUN_BREAK = r"(?:\b|\B)"
# The `regex` package lays out a repetition's minimum count in memory (about 270
# bytes per unit: `a{1000000}` takes 270 MB), nested counts multiplied. Past this
# many units a pattern is an error rather than an out-of-memory kill.
MAX_REPEAT_UNITS = 100_000


class RegexError(ValueError):
    """A regex that JavaScript would reject, or that cannot be run the same way in Python."""

    def __init__(self, message: str, position: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.position = position  # 0-based index into the JavaScript source, when known

    def __str__(self) -> str:
        return self.message


class RegexTimeout(Exception):
    """A match that went past `Limits.regex_timeout_s`: the point is not evaluated, never passed or failed."""

    def __init__(self, pattern: str, timeout_s: float) -> None:
        shown = pattern if len(pattern) <= 60 else pattern[:57] + "..."
        self.message = (
            f"the regex `{shown}` took longer than {timeout_s:g} s on this response; "
            "simplify it or raise EVALSITE_REGEX_TIMEOUT_S"
        )
        super().__init__(self.message)
        self.pattern = pattern
        self.timeout_s = timeout_s

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class _Flags:
    ignore_case: bool = False
    multiline: bool = False
    dot_all: bool = False


def translate(pattern: str, *, ignore_case: bool = False) -> str:
    """Translate a JavaScript regex source into a Python `re` source with the same meaning.

    `ignore_case` stands for JavaScript's `i` flag; a leading `(?i)` in the
    output carries it, so the result compiles with no extra flags.
    """
    if not isinstance(pattern, str):
        raise RegexError("a regex must be a string")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise RegexError(
            f"the regex is {len(pattern):,} characters long; at most {MAX_PATTERN_CHARS:,} are allowed: shorten it",
            MAX_PATTERN_CHARS,
        )
    return _Translator(pattern, _Flags(ignore_case=ignore_case)).run()


def compile_js(pattern: str, *, ignore_case: bool = False) -> regex_engine.Pattern:
    """Compile a JavaScript regex source for Python; results (and failures) are cached.

    To run a user-written pattern on text use `search_js`, which bounds the time;
    the compiled pattern is for checking a pattern and for our own fixed ones.
    """
    compiled = _compile_cached(pattern, ignore_case)
    if isinstance(compiled, RegexError):
        raise RegexError(compiled.message, compiled.position)
    return compiled


def search_js(
    pattern: str, text: str, *, ignore_case: bool = False, limits: Limits = DEFAULT_LIMITS
) -> regex_engine.Match | None:
    """The first match of the JavaScript regex `pattern` in `text`, or None; the one bounded match.

    Raises RegexError for a pattern that does not compile and RegexTimeout when
    the match takes longer than `limits.regex_timeout_s`. The interpreter lock
    is released while matching (`text` is an immutable str, so that is safe).
    """
    compiled = compile_js(pattern, ignore_case=ignore_case)
    try:
        return compiled.search(text, timeout=limits.regex_timeout_s, concurrent=True)
    except TimeoutError:
        raise RegexTimeout(pattern, limits.regex_timeout_s) from None


@functools.lru_cache(maxsize=4096)
def _compile_cached(pattern: str, ignore_case: bool) -> regex_engine.Pattern | RegexError:
    # Failures are cached as values so that a bad pattern in a blueprint costs
    # one translation per process, not one per response scored.
    try:
        source = translate(pattern, ignore_case=ignore_case)
    except RegexError as error:
        return error
    try:
        return regex_engine.compile(source, regex_engine.VERSION0)
    except regex_engine.error as error:
        return RegexError(f"the regex cannot be run: {error.msg}", None)
    except (OverflowError, RecursionError, MemoryError):
        return RegexError("the regex is too large or too deeply nested", None)


# --------------------------------------------------------------------------
# Emitting Python source


def _hex_escape(code: int) -> str:
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _literal(code: int) -> str:
    """A Python regex source for one literal character, outside a class."""
    char = chr(code)
    if char.isalnum() or char == "_":
        return char
    if not char.isprintable() or 0xD800 <= code <= 0xDFFF:
        return _hex_escape(code)
    return re.escape(char)


def _class_char(code: int) -> str:
    """One literal character inside a Python class; escapes anything Python might read as syntax."""
    char = chr(code)
    if char.isalnum() or char in " _!\"#%',/:;<=>@`{}":
        if char.isprintable() and not 0xD800 <= code <= 0xDFFF:
            return char
    return _hex_escape(code)


def _merge(ranges: Ranges) -> Ranges:
    merged: Ranges = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            if high > merged[-1][1]:
                merged[-1] = (merged[-1][0], high)
        else:
            merged.append((low, high))
    return merged


def _complement(ranges: Ranges) -> Ranges:
    result: Ranges = []
    next_low = 0
    for low, high in _merge(ranges):
        if low > next_low:
            result.append((next_low, low - 1))
        next_low = high + 1
    if next_low <= MAX_CODE_POINT:
        result.append((next_low, MAX_CODE_POINT))
    return result


def _emit_class(ranges: Ranges, negated: bool, ignore_case: bool) -> str:
    ranges = _merge(ranges)
    if not ranges:
        return "(?s:.)" if negated else "(?!)"
    if not negated and ranges == [(0, MAX_CODE_POINT)]:
        # `[\s\S]`, `[^]`: any character. Written as a class, the compiler folds
        # case over every code point under `i`, which costs milliseconds a pattern.
        return "(?s:.)"
    ascii_under_i = ignore_case and ranges[-1][1] < 0x80
    if ascii_under_i:
        # Under `i`, Python folds ASCII letters together with a few non-ASCII ones
        # (K and KELVIN SIGN, s and LONG S, i and DOTLESS I); JavaScript without the
        # `u` flag never maps non-ASCII to ASCII. So the class lists both cases of
        # its letters itself and is matched with case folding off.
        ranges = _merge(ranges + _ascii_case_partners(ranges))
    body = "".join(
        _class_char(low) if low == high else f"{_class_char(low)}-{_class_char(high)}"
        for low, high in ranges
    )
    source = f"[{'^' if negated else ''}{body}]"
    return f"(?-i:{source})" if ascii_under_i else source


def _ascii_case_partners(ranges: Ranges) -> Ranges:
    """The other case of every ASCII letter in `ranges`, as ranges."""
    partners: Ranges = []
    for low, high in ranges:
        for first, last, shift in ((0x41, 0x5A, 0x20), (0x61, 0x7A, -0x20)):
            a, b = max(low, first), min(high, last)
            if a <= b:
                partners.append((a + shift, b + shift))
    return partners


# Letters that Python's Unicode case folding pairs across the ASCII boundary
# (i and DOTLESS I, k and KELVIN SIGN, s and LONG S); JavaScript keeps them apart.
_FOLDS_BEYOND_ASCII = frozenset("iksIKS\u0131\u212a\u017f")


# --------------------------------------------------------------------------
# Parsing


def _scan_groups(pattern: str) -> tuple[int, dict[str, list[int]]]:
    """Count capturing groups and collect their names, before the real parse.

    JavaScript decides whether `\\2` is a backreference or an octal escape by the
    number of groups in the whole pattern, so this must be known up front.
    """
    count = 0
    names: dict[str, list[int]] = {}
    index = 0
    length = len(pattern)
    in_class = False
    while index < length:
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if in_class:
            if char == "]":
                in_class = False
        elif char == "[":
            in_class = True
        elif char == "(":
            rest = pattern[index + 1 : index + 4]
            if not rest.startswith("?"):
                count += 1
            elif rest.startswith("?<") and rest[2:3] not in ("=", "!"):
                count += 1
                end = pattern.find(">", index + 3)
                if end != -1:
                    names.setdefault(pattern[index + 3 : end], []).append(count)
        index += 1
    return count, names


def _in_different_alternatives(a: tuple[tuple[int, int], ...], b: tuple[tuple[int, int], ...]) -> bool:
    for (disjunction_a, alternative_a), (disjunction_b, alternative_b) in zip(a, b):
        if disjunction_a != disjunction_b:
            return False
        if alternative_a != alternative_b:
            return True
    return False


def _is_id_start(char: str) -> bool:
    return char in "$_" or char.isidentifier()


def _is_id_part(char: str) -> bool:
    return char in "$_\u200c\u200d" or ("a" + char).isidentifier()


class _Translator:
    def __init__(self, pattern: str, flags: _Flags) -> None:
        self.src = pattern
        self.pos = 0
        self.base_flags = flags
        self.total_groups, self.group_names = _scan_groups(pattern)
        self.opened_groups = 0
        self.closed_groups: set[int] = set()
        # Where each named group stands: the chain of (disjunction, alternative) above it.
        self.alternative_path: list[tuple[int, int]] = []
        self.disjunction_count = 0
        self.name_paths: dict[str, list[tuple[tuple[int, int], ...]]] = {}
        self.depth = 0  # groups open around the current position
        # Units each open disjunction expands to (see MAX_REPEAT_UNITS); the last group's.
        self.sizes: list[int] = []
        self.group_size = 1
        self.last_low = 1
        self.terms_since_break = 0  # terms emitted since the last literal-run break

    # -- helpers

    def error(self, message: str, position: int | None = None) -> RegexError:
        return RegexError(message, self.pos if position is None else position)

    def peek(self, offset: int = 0) -> str:
        index = self.pos + offset
        return self.src[index] if index < len(self.src) else ""

    def at_end(self) -> bool:
        return self.pos >= len(self.src)

    # -- structure

    def run(self) -> str:
        body = self.disjunction(self.base_flags)
        if not self.at_end():
            # disjunction() only stops early at a `)` with no group open.
            raise self.error("unmatched `)`: there is no `(` for it to close")
        return ("(?i)" if self.base_flags.ignore_case else "") + body

    def disjunction(self, entry: _Flags) -> str:
        alternatives = []
        flags = entry
        self.disjunction_count += 1
        self.alternative_path.append((self.disjunction_count, 0))
        self.sizes.append(0)
        while True:
            self.alternative_path[-1] = (self.alternative_path[-1][0], len(alternatives))
            text, flags_after = self.alternative(flags)
            if flags.ignore_case != entry.ignore_case:
                # A `(?i)` earlier in this group still applies to this alternative.
                text = ("(?i:" if flags.ignore_case else "(?-i:") + text + ")"
            alternatives.append(text)
            flags = flags_after
            if self.peek() == "|":
                self.pos += 1
                continue
            self.alternative_path.pop()
            self.group_size = max(1, self.sizes.pop())
            return "|".join(alternatives)

    def alternative(self, flags: _Flags) -> tuple[str, _Flags]:
        parts: list[str] = []
        wrappers = 0
        while not self.at_end() and self.peek() not in "|)":
            inline = self.inline_flags(flags)
            if inline is not None:
                if inline.ignore_case != flags.ignore_case:
                    parts.append("(?i:" if inline.ignore_case else "(?-i:")
                    wrappers += 1
                flags = inline
                continue
            parts.append(self.term(flags))
            self.terms_since_break += 1
            if self.terms_since_break >= _LITERAL_RUN:
                # Counted over the whole pattern, as `regex` flattens non-capturing groups.
                parts.append(_RUN_BREAK)
                self.terms_since_break = 0
        parts.append(")" * wrappers)
        return "".join(parts), flags

    def inline_flags(self, flags: _Flags) -> _Flags | None:
        """Read `(?i)`, `(?is)`, `(?-m)`, `(?i-s)` at the current position, if there is one."""
        match = _INLINE_FLAGS_RE.match(self.src, self.pos)
        if not match or (match.group(1) == "" and match.group(2) is None):
            return None
        new = self.apply_flag_letters(flags, match.group(1), match.group(2), self.pos)
        self.pos = match.end()
        return new

    def apply_flag_letters(self, flags: _Flags, add: str, remove: str | None, at: int) -> _Flags:
        if remove is not None and not add and not remove:
            raise self.error("an inline flag group `(?-)` needs a flag after `-`", at)
        seen = set()
        for letter in add + (remove or ""):
            if letter not in "ims":
                raise self.error(
                    f"unsupported inline flag `{letter}`: only `i`, `m` and `s` can be set inside a regex",
                    at,
                )
            if letter in seen:
                raise self.error(f"the flag `{letter}` is repeated in the same flag group", at)
            seen.add(letter)
        for letters, value in ((add, True), (remove or "", False)):
            if "i" in letters:
                flags = replace(flags, ignore_case=value)
            if "m" in letters:
                flags = replace(flags, multiline=value)
            if "s" in letters:
                flags = replace(flags, dot_all=value)
        return flags

    # -- terms

    def term(self, flags: _Flags) -> str:
        start = self.pos
        char = self.peek()
        quantifiable = True
        self.group_size = 1
        if char == "^":
            self.pos += 1
            atom = _LINE_START if flags.multiline else r"\A"
            quantifiable = False
        elif char == "$":
            self.pos += 1
            atom = _LINE_END if flags.multiline else r"\Z"
            quantifiable = False
        elif char == "\\" and self.peek(1) in ("b", "B"):
            # JavaScript's \b is ASCII-only; (?a:...) scopes Python's to ASCII too.
            atom = r"(?a:\b)" if self.peek(1) == "b" else r"(?a:\B)"
            self.pos += 2
            quantifiable = False
        elif char == "\\":
            atom = self.atom_escape(flags)
        elif char == "(":
            atom, quantifiable = self.group(flags)
        elif char == ".":
            self.pos += 1
            atom = "(?s:.)" if flags.dot_all else _emit_class(LINE_TERMINATOR_RANGES, True, False)
        elif char == "[":
            atom = self.character_class(flags)
        elif char in "*+?":
            raise self.error(f"nothing to repeat: `{char}` must follow something it can repeat")
        elif char == "{" and self.quantifier_braces() is not None:
            raise self.error("nothing to repeat: `{` starts a repetition count but follows nothing")
        else:
            self.pos += 1
            atom = self.literal(ord(char), flags)
        size = self.group_size
        quantifier = self.quantifier()
        if quantifier is not None:
            size *= max(1, self.last_low)
        self.sizes[-1] += size
        if self.sizes[-1] > MAX_REPEAT_UNITS:
            raise self.error(
                f"the regex repeats too much: its repetition counts ask for more than {MAX_REPEAT_UNITS:,} "
                "characters at least; lower the `{n}` counts",
                start,
            )
        if quantifier is None:
            return atom
        if not quantifiable:
            raise self.error(
                f"nothing to repeat: `{self.src[start:self.pos]}` repeats an assertion, which cannot be repeated",
                start,
            )
        follow = self.peek()
        if follow in ("*", "+", "?") or (follow == "{" and self.quantifier_braces() is not None):
            raise self.error(
                "nothing to repeat: two repetition operators in a row "
                "(JavaScript has no possessive quantifiers such as `a++`)"
            )
        return atom + quantifier

    def literal(self, code: int, flags: _Flags) -> str:
        if flags.ignore_case and chr(code) in _FOLDS_BEYOND_ASCII:
            # Spelled out with folding off: JavaScript keeps these apart from their
            # Unicode case partners across the ASCII boundary.
            char = chr(code)
            return f"(?-i:[{char.lower()}{char.upper()}])" if char.isascii() else f"(?-i:{char})"
        return _literal(code)

    def quantifier_braces(self) -> re.Match[str] | None:
        return _QUANTIFIER_RE.match(self.src, self.pos) if self.peek() == "{" else None

    def quantifier(self) -> str | None:
        char = self.peek()
        self.last_low = 1
        if char in ("*", "+", "?"):
            self.pos += 1
            text = char
        elif char == "{":
            match = self.quantifier_braces()
            if match is None:
                return None  # a plain brace, read as a literal by the next term
            low = int(match.group(1))
            high = None if match.group(2) and not match.group(3) else int(match.group(3) or low)
            if high is not None and high < low:
                raise self.error("numbers out of order in a `{min,max}` repetition: min is larger than max")
            if low >= _PYTHON_MAX_REPEAT:
                raise self.error(f"the repetition count {low} is too large")
            if high is not None and high >= _PYTHON_MAX_REPEAT:
                high = None  # JavaScript treats an enormous maximum as unbounded too
            self.pos = match.end()
            self.last_low = low
            text = f"{{{low}}}" if high == low and not match.group(2) else f"{{{low},{'' if high is None else high}}}"
        else:
            return None
        if self.peek() == "?":
            self.pos += 1
            text += "?"
        return text

    # -- groups

    def group(self, flags: _Flags) -> tuple[str, bool]:
        """A parenthesised group: the Python source and whether a quantifier may follow it."""
        start = self.pos
        if self.depth >= MAX_GROUP_DEPTH:
            raise self.error(
                f"groups nest more than {MAX_GROUP_DEPTH} deep here: flatten the pattern", start
            )
        self.depth += 1
        try:
            return self._group(flags, start)
        finally:
            self.depth -= 1

    def _group(self, flags: _Flags, start: int) -> tuple[str, bool]:
        self.pos += 1  # (
        if self.peek() != "?":
            number = self.open_capture()
            body = self.disjunction(flags)
            self.expect_close(start)
            self.closed_groups.add(number)
            return f"({body})", True
        self.pos += 1  # ?
        char = self.peek()
        if char == ":":
            self.pos += 1
            body = self.disjunction(flags)
            self.expect_close(start)
            return f"(?:{body})", True
        if char in ("=", "!"):
            self.pos += 1
            # A repeated lookahead is legal in JavaScript (Annex B); the extra group keeps Python happy.
            body = self.disjunction(flags)
            self.expect_close(start)
            return f"(?:(?{char}{body}))", True
        if char == "<" and self.peek(1) in ("=", "!"):
            kind = self.peek(1)
            self.pos += 2
            body = self.disjunction(flags)
            self.expect_close(start)
            return f"(?<{kind}{body})", False
        if char == "<":
            self.pos += 1
            name = self.group_name(start)
            number = self.open_capture()
            opening = self.register_name(name, number, start)
            body = self.disjunction(flags)
            self.expect_close(start)
            self.closed_groups.add(number)
            return f"{opening}{body})", True
        # Scoped flags, `(?i:...)` or `(?m-s:...)`, which V8 supports.
        match = _FLAG_GROUP_RE.match(self.src, self.pos)
        if not match:
            raise self.error(self.invalid_group_message(), start)
        inner = self.apply_flag_letters(flags, match.group(1), match.group(2), start)
        self.pos = match.end()
        body = self.disjunction(inner)
        self.expect_close(start)
        if inner.ignore_case != flags.ignore_case:
            return ("(?i:" if inner.ignore_case else "(?-i:") + body + ")", True
        return f"(?:{body})", True

    def invalid_group_message(self) -> str:
        rest = self.src[self.pos :]
        if rest.startswith("P<") or rest.startswith("P="):
            return "invalid group `(?P`: JavaScript writes a named group as `(?<name>...)` and refers to it as `\\k<name>`"
        if rest.startswith("#"):
            return "invalid group `(?#`: JavaScript regexes have no comments"
        if rest.startswith(">"):
            return "invalid group `(?>`: JavaScript has no atomic groups"
        return "invalid group: `(?` must be followed by `:`, `=`, `!`, `<=`, `<!`, `<name>` or flags"

    def open_capture(self) -> int:
        self.opened_groups += 1
        return self.opened_groups

    def expect_close(self, start: int) -> None:
        if self.peek() != ")":
            raise self.error("unterminated group: add a closing `)`", start)
        self.pos += 1

    def group_name(self, start: int) -> str:
        end = self.src.find(">", self.pos)
        name = self.src[self.pos : end] if end != -1 else ""
        if (
            end == -1
            or not name
            or not _is_id_start(name[0])
            or not all(_is_id_part(char) for char in name[1:])
        ):
            raise self.error("invalid capture group name: use letters, digits, `_` or `$`, starting with a letter", start)
        self.pos = end + 1
        return name

    def register_name(self, name: str, number: int, start: int) -> str:
        """Check a group name and return the Python group syntax for it.

        JavaScript allows one name in several alternatives (only one of them can
        match); Python wants unique names, so a repeated name becomes a plain
        group and `\\k<name>` refers to every group of that name.
        """
        path = tuple(self.alternative_path)
        for earlier in self.name_paths.get(name, []):
            if not _in_different_alternatives(earlier, path):
                raise self.error(f"duplicate capture group name `{name}` in the same alternative", start)
        self.name_paths.setdefault(name, []).append(path)
        if len(self.name_paths[name]) == 1 and name.isidentifier():
            return f"(?P<{name}>"
        return "("

    # -- escapes outside classes

    def atom_escape(self, flags: _Flags) -> str:
        start = self.pos
        self.pos += 1  # backslash
        if self.at_end():
            raise self.error("`\\` at end of pattern: a backslash must escape something", start)
        char = self.peek()
        class_ranges = self.class_escape_ranges(char)
        if class_ranges is not None:
            self.pos += 1
            ranges, negated = class_ranges
            return _emit_class(ranges, negated, flags.ignore_case)
        if char.isdigit() and char != "0":
            return self.decimal_escape(flags, start)
        if char == "k" and self.group_names:
            return self.named_backreference(start)
        code = self.character_escape(in_class=False)
        return self.literal(code, flags)

    def class_escape_ranges(self, char: str) -> tuple[Ranges, bool] | None:
        table = {"d": DIGIT_RANGES, "w": WORD_RANGES, "s": SPACE_RANGES}
        if char.lower() in table:
            return table[char.lower()], char.isupper()
        return None

    def decimal_escape(self, flags: _Flags, start: int) -> str:
        match = re.compile(r"\d+").match(self.src, self.pos)
        assert match is not None
        digits = match.group()
        number = int(digits)
        if number <= self.total_groups:
            self.pos = match.end()
            return self.backreference([number])
        # Annex B: not a backreference, so an octal escape or the digit itself.
        if digits[0] in "89":
            self.pos += 1
            return self.literal(ord(digits[0]), flags)
        return self.literal(self.legacy_octal(), flags)

    def legacy_octal(self) -> int:
        match = re.compile(r"[0-3][0-7]{0,2}|[4-7][0-7]?").match(self.src, self.pos)
        assert match is not None
        self.pos = match.end()
        return int(match.group(), 8)

    def named_backreference(self, start: int) -> str:
        match = re.compile(r"k<([^>]*)>").match(self.src, self.pos)
        if not match or match.group(1) not in self.group_names:
            raise self.error("invalid named reference: `\\k<name>` must name a group in this regex", start)
        self.pos = match.end()
        return self.backreference(self.group_names[match.group(1)])

    def backreference(self, numbers: list[int]) -> str:
        # In JavaScript a reference to a group that has not matched (yet) matches
        # the empty string. Python fails instead, hence the conditional form; a
        # group still open or further right can only be empty here.
        parts = [f"(?({n})\\{n})" if n in self.closed_groups else "" for n in numbers]
        joined = "".join(parts)
        return f"(?:{joined})"

    def character_escape(self, *, in_class: bool) -> int:
        """Read an escape that stands for one character; self.pos is just after the backslash."""
        char = self.peek()
        simple = {"t": 0x09, "n": 0x0A, "v": 0x0B, "f": 0x0C, "r": 0x0D}
        if char in simple:
            self.pos += 1
            return simple[char]
        if char == "0" and not self.peek(1).isdigit():
            self.pos += 1
            return 0
        if char.isdigit() and char not in "89":
            return self.legacy_octal()
        if char == "c":
            letter = self.peek(1)
            if letter.isascii() and (letter.isalpha() or (in_class and (letter.isdigit() or letter == "_"))):
                self.pos += 2
                return ord(letter) % 32
            return ord("\\")  # Annex B: `\c` without a letter is a backslash, and `c` follows
        if char == "x":
            match = re.compile(r"x([0-9a-fA-F]{2})").match(self.src, self.pos)
            if match:
                self.pos = match.end()
                return int(match.group(1), 16)
        if char == "u":
            match = re.compile(r"u([0-9a-fA-F]{4})").match(self.src, self.pos)
            if match:
                self.pos = match.end()
                code = int(match.group(1), 16)
                low = re.compile(r"\\u([dD][c-fC-F][0-9a-fA-F]{2})").match(self.src, self.pos)
                if 0xD800 <= code <= 0xDBFF and low:
                    # A surrogate pair written as two escapes is one character in Python.
                    self.pos = low.end()
                    return 0x10000 + ((code - 0xD800) << 10) + (int(low.group(1), 16) - 0xDC00)
                return code
        self.pos += 1
        return ord(char)  # identity escape: `\/`, `\-`, `\A`, `\p` ... stand for themselves

    # -- classes

    def character_class(self, flags: _Flags) -> str:
        start = self.pos
        self.pos += 1  # [
        negated = self.peek() == "^"
        if negated:
            self.pos += 1
        ranges: Ranges = []
        while True:
            if self.at_end():
                raise self.error("unterminated character class: add a closing `]`", start)
            if self.peek() == "]":
                self.pos += 1
                break
            first = self.class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                dash = self.pos
                self.pos += 1
                second = self.class_atom()
                if isinstance(first, int) and isinstance(second, int):
                    if first > second:
                        raise self.error("range out of order in character class", dash)
                    ranges.append((first, second))
                    continue
                # Annex B: a class escape such as \d next to `-` makes the `-` literal.
                ranges.extend(self.atom_ranges(first))
                ranges.append((0x2D, 0x2D))
                ranges.extend(self.atom_ranges(second))
                continue
            ranges.extend(self.atom_ranges(first))
        return _emit_class(ranges, negated, flags.ignore_case)

    @staticmethod
    def atom_ranges(atom: int | Ranges) -> Ranges:
        return [(atom, atom)] if isinstance(atom, int) else atom

    def class_atom(self) -> int | Ranges:
        char = self.peek()
        if self.at_end():
            raise self.error("unterminated character class: add a closing `]`")
        if char != "\\":
            self.pos += 1
            return ord(char)
        self.pos += 1
        if self.at_end():
            raise self.error("`\\` at end of pattern: a backslash must escape something", self.pos - 1)
        char = self.peek()
        class_ranges = self.class_escape_ranges(char)
        if class_ranges is not None:
            self.pos += 1
            ranges, negated = class_ranges
            return _complement(ranges) if negated else list(ranges)
        if char == "b":
            self.pos += 1
            return 0x08
        if char in "89":
            self.pos += 1
            return ord(char)
        return self.character_escape(in_class=True)
