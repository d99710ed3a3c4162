"""`$js` in V8: limits, isolation, no host access, and recovery.

Each misbehaving script must end as a recorded point error, and the next
evaluation in the same process must work.
"""

from __future__ import annotations

import threading

import pytest

from runs.engine.points import JsSandbox, evaluate_point


@pytest.fixture()
def sandbox():
    box = JsSandbox()
    yield box
    box.close()


def run(script: str, sandbox: JsSandbox, response: str = "hello world", **context):
    return evaluate_point("js", script, response, js_sandbox=sandbox, **context)


def assert_next_evaluation_works(sandbox: JsSandbox) -> None:
    result = run("r.length === 11", sandbox)
    assert (result.score, result.error) == (1.0, None)


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        ("while (true) {}", "stopped after 100 ms (time limit)"),
        ("for (;;) { Math.random(); }", "stopped after 100 ms (time limit)"),
        ("require('fs').readFileSync('/etc/passwd')", "require is not defined"),
        ("process.env", "process is not defined"),
        ("fetch('http://127.0.0.1/')", "fetch is not defined"),
        ("import('fs')", "Script returned an invalid type: object"),  # a promise, rejected later
        ("throw new Error('boom')", "Expression evaluation failed: boom"),
        ("throw 'plain string'", "Expression evaluation failed: plain string"),
        ("function f() { return f(); } f()", "Maximum call stack size exceeded"),
        ("r.foo()", "Expression evaluation failed"),
        ("this is not javascript", "Expression evaluation failed"),
        ("setTimeout(() => 1, 0)", "Expression evaluation failed"),
    ],
)
def test_a_misbehaving_script_records_why_and_the_next_evaluation_works(script, reason, sandbox) -> None:
    result = run(script, sandbox)
    assert result.score is None
    assert reason in result.error
    assert_next_evaluation_works(sandbox)


def test_a_memory_bomb_is_stopped_at_the_memory_limit_and_the_next_evaluation_works() -> None:
    # A generous time limit, so that a busy machine cannot make the clock win the race.
    box = JsSandbox(timeout_ms=5000)
    try:
        result = run("const a = []; for (;;) { a.push(new Array(1e6).fill(1.5)); }", box)
        assert (result.score, result.error) == (None, "Expression evaluation failed: stopped at 64 MB (memory limit)")
        assert_next_evaluation_works(box)
    finally:
        box.close()


def test_work_left_behind_in_a_promise_does_not_blame_the_next_script(sandbox) -> None:
    # The callback runs after its own evaluation returned and hangs the context;
    # the next script is retried on a fresh context instead of being failed.
    first = run("Promise.resolve().then(() => { while (true) {} }); true", sandbox)
    assert first.score == 1.0
    assert_next_evaluation_works(sandbox)


def test_globals_a_script_creates_are_gone_for_the_next_one(sandbox) -> None:
    assert run("leaked = 42; leaked === 42", sandbox).score == 1.0
    assert run("typeof leaked === 'undefined'", sandbox).score == 1.0
    assert run("var declared = 1; declared === 1", sandbox).score == 1.0
    assert run("typeof declared === 'undefined'", sandbox).score == 1.0


def test_built_ins_cannot_be_changed_for_later_scripts(sandbox) -> None:
    run("String.prototype.includes = function () { return true; }; Math.max = null; JSON = null; true", sandbox)
    assert run("!'abc'.includes('z') && Math.max(1, 2) === 2 && JSON.stringify(1) === '1'", sandbox).score == 1.0


def test_the_same_script_keeps_no_state_between_evaluations(sandbox) -> None:
    script = "var count = (typeof count === 'number' ? count : 0) + 1; count === 1"
    assert [run(script, sandbox).score for _ in range(3)] == [1.0, 1.0, 1.0]


@pytest.mark.parametrize(
    ("script", "score", "explain"),
    [
        ("true", 1.0, None),
        ("false", 0.0, None),
        ("0.25", 0.25, None),
        ("-3", 0.0, None),
        ("7", 1.0, None),
        ("undefined", 0.0, None),
        ("null", 0.0, None),
        ("({score: 0.4, explain: 'why'})", 0.4, "why"),
        ("({score: true})", 1.0, None),
        ("({score: 2, explain: 3})", 1.0, "3"),
        ("return {score: 0.5, explain: 'body'};", 0.5, "body"),
        ("const n = r.split(' ').length; n === 2", 1.0, None),
        ("if (r.startsWith('hello')) return 1; return 0;", 1.0, None),
        ("response === r", 1.0, None),
    ],
)
def test_results_convert_as_upstream(script, score, explain, sandbox) -> None:
    result = run(script, sandbox)
    assert (result.score, result.explain, result.error) == (score, explain, None)


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ("'text'", "Script returned an invalid type: string. Must return a boolean or a number."),
        ("[1]", "Script returned an invalid type: object. Must return a boolean or a number."),
        ("({score: 'high'})", "Script returned an invalid score type: string."),
        ("NaN", "Script returned NaN."),
    ],
)
def test_invalid_results_are_errors(script, message, sandbox) -> None:
    result = run(script, sandbox)
    assert result.score is None and message in result.error


def test_context_carries_messages_and_model_id(sandbox) -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    script = "context.messages.length === 2 && context.messages[1].content === 'Hi' && context.modelId === 'm-1'"
    assert run(script, sandbox, messages=messages, model_id="m-1").score == 1.0


def test_a_non_string_script_is_an_error(sandbox) -> None:
    assert run(42, sandbox).error == "Argument for js must be a string expression."  # type: ignore[arg-type]


def test_contexts_are_replaced_after_a_limit_and_after_many_evaluations() -> None:
    box = JsSandbox(recycle_after=3)
    try:
        for _ in range(7):
            assert run("true", box).score == 1.0
        assert box.contexts_created == 3  # after the 3rd and 6th evaluation
        run("while (true) {}", box)
        before = box.contexts_created
        assert run("true", box).score == 1.0
        assert box.contexts_created == before + 1
    finally:
        box.close()


def test_a_tighter_time_limit_is_reported_in_its_own_words() -> None:
    box = JsSandbox(timeout_ms=20)
    try:
        assert "stopped after 20 ms (time limit)" in run("while (true) {}", box).error
    finally:
        box.close()


def test_threads_can_share_one_sandbox(sandbox) -> None:
    results: list[float | None] = []

    def work(index: int) -> None:
        for _ in range(20):
            results.append(run(f"r === 'thread {index}'", sandbox, response=f"thread {index}").score)

    threads = [threading.Thread(target=work, args=(index,)) for index in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [1.0] * 80


def test_the_shared_sandbox_is_used_by_default() -> None:
    assert evaluate_point("js", "r === 'x'", "x").score == 1.0
    assert evaluate_point("expr", "r === 'x'", "x").score == 1.0
    assert evaluate_point("$js", "while(true){}", "x").error.endswith("(time limit)")
    assert evaluate_point("js", "r === 'x'", "x").score == 1.0
