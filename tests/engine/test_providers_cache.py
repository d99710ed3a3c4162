"""The response cache: a stable key, two stores, and how the router uses them."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from runs.engine.providers import MemoryCache, Router, SqliteCache, cache_key, settings_from_env
from runs.engine.types import ChatRequest, Turn

REPO = Path(__file__).resolve().parents[2]
IDENTITY = {"provider": "openai", "model": "gpt-4o-mini", "url": "https://api.openai.com/v1/chat/completions"}
HI = [{"role": "user", "content": "hi"}]


# -- the key -------------------------------------------------------------------


def test_the_key_is_a_stable_hash_so_answers_survive_upgrades():
    # Pinned: changing the recipe silently empties everyone's cache; bump KEY_VERSION on purpose instead.
    assert cache_key(IDENTITY, HI, temperature=0, max_tokens=1500) == \
        "d5ff6e6037a02dbbb030fd421cc08e44eb1f4dd727502c203ce26310f2c0ca61"


@pytest.mark.parametrize("change", [
    dict(identity={**IDENTITY, "model": "gpt-4o"}),
    dict(identity={**IDENTITY, "url": "http://127.0.0.1:11434/v1/chat/completions"}),
    dict(messages=[{"role": "user", "content": "hi!"}]),
    dict(messages=[{"role": "system", "content": "be nice"}, *HI]),
    dict(temperature=0.7),
    dict(max_tokens=100),
    dict(trial=1),
])
def test_anything_that_changes_the_answer_changes_the_key(change):
    base = dict(identity=IDENTITY, messages=HI, temperature=0, max_tokens=1500, trial=0)
    changed = {**base, **change}
    assert cache_key(base["identity"], base["messages"], temperature=base["temperature"],
                     max_tokens=base["max_tokens"], trial=base["trial"]) != \
        cache_key(changed["identity"], changed["messages"], temperature=changed["temperature"],
                  max_tokens=changed["max_tokens"], trial=changed["trial"])


def test_what_does_not_change_the_answer_does_not_change_the_key():
    one = cache_key(IDENTITY, HI, temperature=0, max_tokens=1500)
    assert cache_key(dict(reversed(list(IDENTITY.items()))), HI, temperature=0.0, max_tokens=1500) == one
    assert cache_key(IDENTITY, [{"content": "hi", "role": "user"}], temperature=0, max_tokens=1500, trial=0) == one


# -- the stores ----------------------------------------------------------------


@pytest.mark.parametrize("make", [lambda tmp: MemoryCache(), lambda tmp: SqliteCache(tmp / "c.sqlite3")],
                         ids=["memory", "sqlite"])
def test_a_store_gives_back_what_was_set_and_none_otherwise(make, tmp_path):
    cache = make(tmp_path)
    value = {"text": "héllo", "input_tokens": 3, "output_tokens": None}
    assert cache.get("k") is None
    cache.set("k", value)
    value["text"] = "changed after storing"
    assert cache.get("k") == {"text": "héllo", "input_tokens": 3, "output_tokens": None}
    cache.set("k", {"text": "newer"})
    assert cache.get("k") == {"text": "newer"} and len(cache) == 1


def test_the_sqlite_store_persists_and_uses_wal(tmp_path):
    path = tmp_path / "deep" / "cache.sqlite3"
    writer = SqliteCache(path)
    writer.set("k", {"text": "kept"})
    assert writer.get("k") == {"text": "kept"}  # seen at once by its own process, before it is stored
    writer.close()  # stores what it kept (the router does this when a run's work ends)
    assert SqliteCache(path).get("k") == {"text": "kept"}
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


_WRITER = """
import sys
from runs.engine.providers.cache import SqliteCache
path, worker = sys.argv[1], int(sys.argv[2])
cache = SqliteCache(path)
for i in range(40):
    cache.set(f"{worker}-{i}", {"text": f"answer {worker}-{i}"})
    cache.get(f"{(worker + 1) % 3}-{i}")
    if i % 10 == 9:
        cache.flush()  # concurrent transactions from several processes
cache.close()
"""


def test_several_processes_can_share_one_sqlite_cache(tmp_path):
    path = str(tmp_path / "shared.sqlite3")
    SqliteCache(path)
    workers = [subprocess.Popen([sys.executable, "-c", _WRITER, path, str(w)], cwd=REPO) for w in range(3)]
    assert [w.wait(60) for w in workers] == [0, 0, 0]
    cache = SqliteCache(path)
    assert len(cache) == 120 and cache.get("2-39") == {"text": "answer 2-39"}


# -- the router and the cache ---------------------------------------------------------


class Counting:
    def __init__(self, status: int = 200):
        self.calls = 0
        self.status = status

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        if self.status != 200:
            return httpx.Response(self.status, json={"error": {"message": "nope"}})
        return httpx.Response(200, json={"choices": [{"message": {"content": f"answer {self.calls}"},
                                                      "finish_reason": "stop"}],
                                         "usage": {"prompt_tokens": 10, "completion_tokens": 5}})


def ask(**kwargs) -> ChatRequest:
    values = dict(model_id="openai:gpt-4o-mini", messages=tuple(HI), temperature=0)
    values.update(kwargs)
    return ChatRequest(**values)


def run_calls(requests, cache, handler, **router_kwargs):
    async def main():
        settings = settings_from_env({"OPENAI_API_KEY": "k"}, max_attempts=1)
        async with Router(settings, cache=cache, transport=httpx.MockTransport(handler), **router_kwargs) as router:
            return [await router.complete(r) for r in requests]

    return asyncio.run(main())


def test_a_repeated_call_is_answered_from_the_cache():
    handler, cache = Counting(), MemoryCache()
    first, second = run_calls([ask(), ask(purpose="judge")], cache, handler)
    assert handler.calls == 1
    assert (first.text, first.cached) == ("answer 1", False) and first.cost_usd == pytest.approx(4.5e-06)
    assert (second.text, second.cached, second.attempts, second.cost_usd) == ("answer 1", True, 0, 0.0)
    assert (second.usage.input_tokens, second.usage.output_tokens) == (10, 5)


def test_the_cache_persists_across_runs(tmp_path):
    handler = Counting()
    run_calls([ask()], SqliteCache(tmp_path / "c.sqlite3"), handler)
    again, = run_calls([ask()], SqliteCache(tmp_path / "c.sqlite3"), handler)
    assert handler.calls == 1 and again.cached and again.text == "answer 1"


def test_no_cache_neither_reads_nor_writes():
    handler, cache = Counting(), MemoryCache()
    results = run_calls([ask(), ask(use_cache=False), ask(use_cache=False)], cache, handler)
    assert handler.calls == 3 and [r.cached for r in results] == [False, False, False]
    assert len(cache) == 1


def test_a_fresh_run_calls_again_and_refreshes_what_is_stored():
    handler, cache = Counting(), MemoryCache()
    run_calls([ask()], cache, handler)
    fresh, = run_calls([ask()], cache, handler, fresh=True)
    assert fresh.text == "answer 2" and not fresh.cached
    later, = run_calls([ask()], cache, handler)
    assert later.text == "answer 2" and later.cached and handler.calls == 2


def test_each_trial_is_its_own_call():
    handler, cache = Counting(), MemoryCache()
    results = run_calls([ask(trial=0), ask(trial=1), ask(trial=1)], cache, handler)
    assert [r.text for r in results] == ["answer 1", "answer 2", "answer 2"]
    assert [r.cached for r in results] == [False, False, True]


def test_failures_are_never_cached():
    cache = MemoryCache()
    failed, = run_calls([ask()], cache, Counting(status=500))
    assert failed.error and len(cache) == 0


def test_an_async_store_works_and_a_broken_store_costs_a_call_not_an_item():
    class AsyncStore(MemoryCache):
        async def get(self, key):
            return super().get(key)

        async def set(self, key, value):
            super().set(key, value)

    class BrokenStore:
        def get(self, key):
            raise sqlite3.OperationalError("database is locked")

        def set(self, key, value):
            raise sqlite3.OperationalError("disk I/O error")

    handler = Counting()
    results = run_calls([ask(), ask()], AsyncStore(), handler)
    assert [r.cached for r in results] == [False, True]
    broken = run_calls([ask(), ask()], BrokenStore(), handler)
    assert all(r.ok and not r.cached for r in broken)


def test_writes_are_stored_together_once_enough_are_kept(tmp_path):
    path = tmp_path / "batched.sqlite3"
    cache = SqliteCache(path)
    for i in range(SqliteCache.WRITE_BATCH - 1):
        cache.set(f"k{i}", {"text": str(i)})
    stored = lambda: sqlite3.connect(path).execute("SELECT COUNT(*) FROM responses").fetchone()[0]  # noqa: E731
    assert stored() == 0
    cache.set("last", {"text": "x"})
    assert stored() == SqliteCache.WRITE_BATCH


class Replying:
    """Answers each call with the next of ``texts`` (the last one again when they run out)."""

    def __init__(self, *texts: str):
        self.texts, self.calls = list(texts), 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        text = self.texts[min(self.calls, len(self.texts) - 1)]
        self.calls += 1
        return httpx.Response(200, json={"choices": [{"message": {"content": text}, "finish_reason": "stop"}],
                                         "usage": {"prompt_tokens": 10, "completion_tokens": 5}})


def test_an_answer_the_caller_cannot_use_is_never_cached_nor_served_from_the_cache():
    readable = lambda text: text.startswith("OK")  # noqa: E731
    handler, cache = Replying("I think it's fine!!", "OK now"), MemoryCache()
    bad, good, again = run_calls([ask(cacheable=readable)] * 3, cache, handler)
    assert (bad.text, bad.cached, good.text, good.cached) == ("I think it's fine!!", False, "OK now", False)
    assert (again.text, again.cached) == ("OK now", True) and handler.calls == 2
    # An unusable answer stored by an older version is asked for again, not served.
    (key,) = cache._data
    stale = MemoryCache()
    stale.set(key, {"text": "I think it's fine!!"})
    (fresh,) = run_calls([ask(cacheable=readable)], stale, Replying("OK at last"))
    assert (fresh.text, fresh.cached) == ("OK at last", False)


def test_an_empty_answer_is_never_cached():
    handler, cache = Replying("", "Paris."), MemoryCache()
    empty, full = run_calls([ask(), ask()], cache, handler)
    assert not empty.text and (full.text, full.cached, handler.calls) == ("Paris.", False, 2)


def test_a_judge_whose_answer_was_unreadable_is_asked_again_on_retry():
    from runs.engine.judge import JudgePlan, JudgeSpec, JudgeTask, ask_judge

    task = JudgeTask(criterion="Names Paris", conversation=(Turn("user", "Capital?"), Turn("assistant", "Paris.", True)),
                     subject_text="Paris.", all_criteria=("[should] Names Paris",))
    plan, judge = JudgePlan(judges=(JudgeSpec("openai:gpt-4o-mini"),)), JudgeSpec("openai:gpt-4o-mini")
    cache = MemoryCache()

    async def verdict(handler):
        settings = settings_from_env({"OPENAI_API_KEY": "k"}, max_attempts=1)
        async with Router(settings, cache=cache, transport=httpx.MockTransport(handler)) as router:
            return await ask_judge(judge, task, plan, router.complete)

    broken = Replying("I think it's fine!!")
    first = asyncio.run(verdict(broken))
    assert not first.ok and broken.calls == 2  # the answer and the repair were both unreadable
    fixed = Replying("<reflection>Says Paris.</reflection><classification>CLASS_EXACTLY_MET</classification>")
    second = asyncio.run(verdict(fixed))
    assert second.ok and second.score == 1.0 and fixed.calls == 1 and not second.cached
    third = asyncio.run(verdict(Replying("never asked")))
    assert third.ok and third.cached  # a readable verdict is cached as before
