"""The YAML loader builds values from the events its limits pre-pass read (blueprints/spec/source.py), where it
used to parse the text a second time into libyaml's nodes: held here to that way (libyaml's composer, then values
built from its nodes), values, positions, duplicate keys and errors alike, on the corpus and on texts aimed at
anchors, aliases, merge keys, tags and the order in which errors of several kinds are met."""

import json
from pathlib import Path

import pytest
import yaml

from blueprints.spec import source
from blueprints.spec.limits import DEFAULT_LIMITS, Limits

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "weval-configs"


class _NodeBuilder:
    """The reference: values built from composed nodes, as source.py built them before it read events."""

    def __init__(self, loader, locator, max_depth):
        self.loader, self.locator, self.max_depth, self.depth, self.memo = loader, locator, max_depth, 0, {}

    def build(self, node):
        cached = self.memo.get(id(node))
        if cached is not None:
            return cached
        if isinstance(node, yaml.ScalarNode):
            return self.scalar(node)
        if self.max_depth is not None:
            self.depth += 1
            if self.depth > self.max_depth:
                raise source._too_deep(Limits(max_depth=self.max_depth), node.start_mark.line + 1,
                                       node.start_mark.column + 1)
        try:
            return self.sequence(node) if isinstance(node, yaml.SequenceNode) else self.mapping(node)
        finally:
            if self.max_depth is not None:
                self.depth -= 1

    def started(self, out, node):
        self.memo[id(node)] = out
        self.locator._alive.append(out)
        self.locator.starts[id(out)] = (node.start_mark.line + 1, node.start_mark.column + 1)

    def sequence(self, node):
        out = []
        self.started(out, node)
        for index, child in enumerate(node.value):
            out.append(self.build(child))
            self.locator.values[(id(out), index)] = (child.start_mark.line + 1, child.start_mark.column + 1)
        return out

    def scalar(self, node):
        mark = node.start_mark
        if node.tag == "tag:yaml.org,2002:str":
            return node.value
        if node.tag == "tag:yaml.org,2002:null":
            return None
        if node.tag == "tag:yaml.org,2002:bool":
            return self.loader.construct_object(node)
        if node.tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float"):
            is_int = node.tag == "tag:yaml.org,2002:int"
            if is_int and len(node.value) > source._MAX_INT_CHARS:
                raise source._huge_number(mark.line + 1, mark.column + 1)
            try:
                value = self.loader.construct_object(node)
            except ValueError:
                raise source._huge_number(mark.line + 1, mark.column + 1) from None
            if is_int and abs(value) > source._MAX_INT:
                raise source._huge_number(mark.line + 1, mark.column + 1)
            return value
        return node.value

    def mapping(self, node):
        out = {}
        self.started(out, node)
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                merged = self.build(value_node)
                for part in merged if isinstance(merged, list) else [merged]:
                    if isinstance(part, dict):
                        for k, v in part.items():
                            out.setdefault(k, v)
                continue
            key = self.build(key_node)
            if isinstance(key, (dict, list)):
                key = json.dumps(key, default=str)
            kmark, vmark = key_node.start_mark, value_node.start_mark
            if key in out:
                first = self.locator.keys.get((id(out), key), (0, 0))
                self.locator.duplicates.append(source.DuplicateKey(str(key), kmark.line + 1, kmark.column + 1,
                                                                   first[0]))
            out[key] = self.build(value_node)
            self.locator.keys[(id(out), key)] = (kmark.line + 1, kmark.column + 1)
            self.locator.values[(id(out), key)] = (vmark.line + 1, vmark.column + 1)
        return out


def reference_load(text, limits=DEFAULT_LIMITS):
    """The limits pre-pass over the events (unless the text cannot pass a limit), then libyaml's composer."""
    locator, documents, starts = source.Locator(), [], []
    fast = "*" not in text and len(text) <= limits.max_nodes and len(text) <= limits.max_expanded_chars
    if not fast:
        try:
            source._check_yaml_events(text, limits)
        except yaml.YAMLError as exc:
            raise source._yaml_error(exc) from None
    loader = yaml.CSafeLoader(text)
    try:
        builder = _NodeBuilder(loader, locator, limits.max_depth if fast else None)
        while loader.check_node():
            node = loader.get_node()
            builder.memo.clear()
            value = builder.build(node)
            if value is not None:
                documents.append(value)
                starts.append((node.start_mark.line + 1, node.start_mark.column + 1))
    except yaml.YAMLError as exc:
        raise source._yaml_error(exc) from None
    finally:
        loader.dispose()
    return source.Loaded(documents, starts, locator, "yaml")


def outcome(load, text, limits):
    """What a load gives, comparable across loads: the values, every container's positions (by the order the
    values are met), the duplicate keys; or the error."""
    try:
        loaded = load(text, limits)
    except source.SourceError as exc:
        return ("error", exc.message, exc.line, exc.column, exc.hint, exc.code)
    places, seen = [], set()

    def visit(value):
        if not isinstance(value, (dict, list)) or id(value) in seen:
            return
        seen.add(id(value))
        keys = list(value) if isinstance(value, dict) else range(len(value))
        places.append((loaded.locator.starts.get(id(value)),
                       [(repr(k), loaded.locator.values.get((id(value), k)), loaded.locator.keys.get((id(value), k)))
                        for k in keys]))
        for child in (value.values() if isinstance(value, dict) else value):
            visit(child)

    for document in loaded.documents:
        visit(document)
    return ("loaded", repr(loaded.documents), loaded.document_starts, places,
            [(d.key, d.line, d.column, d.first_line) for d in loaded.locator.duplicates])


HUGE = "9" * 420
TEXTS = [
    "a: &x 1\nb: &x 2\n", "a: *y\n", "a: &x [1, *x]\n", "a: &x 1\n---\nb: *x\n", "&a a: 1\n*a : 2\n",
    "base: &b {x: 1, y: 2}\nd:\n  <<: *b\n  x: 3\n", "b: &b {x: 1}\nd:\n  <<: [*b, {z: 1}]\n  z: 2\n",
    "&m << : {a: 1}\nx: {*m : {b: 2}}\n", "'<<': {a: 1}\n", "a: !!merge <<\n", "? [a, b]\n: c\n{c: d}: 2\n",
    "a: !foo x\nb: ! y\nc: !!str 1\nd: ! 12\ne: !!int '7'\nf: !!float 1\ng: !!bool yes\nh: !!null ''\n",
    "a: yes\nb: No\nc: 0o17\nd: 0x1F\ne: .inf\nf: -.nan\ng: 1_000\nh: 012\ni: 2001-12-14\nj: !!binary aGk=\n",
    f"a: &s {HUGE}\nb: *s\n", "a: 1e999\n", "a: &x [[[[1]]]]\nb: *x\nc: *x\n",
    "x: &a [1,2]\ny: [" + ",".join(["*a"] * 200) + "]\n", "a: 1\na: 2\nb: {c: 1, c: 2}\n",
    "---\n---\n- a\n---\n~\n---\nnull\n", "", "# a comment\n", "--- &r\na: 1\n", "a: &e\nb: *e\n", "!!map {a: 1}\n",
    # errors of several kinds in one text: which is met first
    f"a: {HUGE}\n---\nb: [\n", f"a: {HUGE}\nb: [\n", f"x: &a 1\ny: *a\nz: {HUGE}\n---\nb: [\n", "a: [[[1]]]\n---\nb: [\n",
    "a: [[[1]]]\nb: [\n", f"a: {HUGE}\nb: &x 1\nc: &x 2\n", f"a: {HUGE}\n---\nb: &x 1\nc: &x 2\n",
    f"a: &x 1\nb: &x 2\n---\nc: {HUGE}\n", "a: 1\n---\nb: *q\n---\nc: [\n", f"a: {HUGE}\n...\n--- [\n",
    "a: [[[1]]]\n---\nb: *z\n", "--- 1\n--- [\n", "a: 1\n---\n" * 3 + "b: {\n",
]
LIMITS = [DEFAULT_LIMITS, Limits(max_depth=2), Limits(max_nodes=5), Limits(max_nodes=300, max_expanded_chars=3000,
                                                                          max_depth=4)]


@pytest.mark.parametrize("limits", LIMITS, ids=["default", "depth 2", "5 values", "small"])
@pytest.mark.parametrize("text", TEXTS)
def test_a_text_loads_as_the_composer_loaded_it(text, limits):
    assert outcome(source._load_yaml, text, limits) == outcome(reference_load, text, limits)


def test_the_corpus_loads_as_the_composer_loaded_it():
    files = sorted(p for p in CORPUS.rglob("*") if p.suffix in (".yml", ".yaml"))
    assert len(files) > 100
    for path in files:
        text = path.read_text(encoding="utf-8")
        for limits in (DEFAULT_LIMITS, LIMITS[-1]):
            assert outcome(source._load_yaml, text, limits) == outcome(reference_load, text, limits), path.name


def test_the_text_is_parsed_once():
    parses = []
    real = yaml.CSafeLoader.__init__

    def counted(self, stream):
        parses.append(len(stream))
        real(self, stream)

    text = "title: T\n---\n" + "".join(f"- prompt: q{n}\n  should: [x]\n" for n in range(30)) + "# *\n"
    yaml.CSafeLoader.__init__ = counted
    try:
        source.load(text, "yaml")  # a `*` in the text: the pre-pass runs
    finally:
        yaml.CSafeLoader.__init__ = real
    assert parses == [len(text)]
