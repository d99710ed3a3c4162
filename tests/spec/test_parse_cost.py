"""What keeps a parse cheap changes nothing else: the collector's state around a parse (blueprints/spec/gcpause.py)."""

import gc
import threading

import pytest

from blueprints.spec import parse_any
from blueprints.spec.gcpause import collector_held
from blueprints.spec.parse import parse_blueprint

TEXT = "title: T\nmodels: [CORE]\n---\n- prompt: a\n  should: [x]\n"


@pytest.fixture
def collector_restored():
    before = gc.isenabled()
    yield
    gc.enable() if before else gc.disable()


@pytest.mark.parametrize("parse", [parse_blueprint, parse_any])
@pytest.mark.parametrize("enabled", [True, False])
def test_a_parse_holds_the_collector_and_leaves_it_as_it_was(collector_restored, parse, enabled):
    gc.enable() if enabled else gc.disable()
    during = []

    def lookup(name):  # asked in the middle of the parse
        during.append(gc.isenabled())
        return ["openai:gpt-4o"]

    result = parse(TEXT, collections=lookup)
    assert result.ok
    assert during and not any(during)
    assert gc.isenabled() is enabled


def test_the_collector_comes_back_when_the_last_of_overlapping_parses_ends(collector_restored):
    gc.enable()
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def first():
        with collector_held():
            first_in.set()
            second_in.wait(5)
        first_out.set()

    def second():
        first_in.wait(5)
        with collector_held():
            second_in.set()
            first_out.wait(5)
            seen["after the first ended"] = gc.isenabled()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == {"after the first ended": False}
    assert gc.isenabled()


def test_an_exception_inside_gives_the_collector_back(collector_restored):
    gc.enable()
    with pytest.raises(ValueError):
        with collector_held():
            raise ValueError("x")
    assert gc.isenabled()
