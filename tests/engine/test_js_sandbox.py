"""`$js` in V8: limits, isolation, no host access, and recovery.

Each misbehaving script must end as a recorded point error, and the next
evaluation in the same process must work.
"""

from __future__ import annotations

import threading
import time

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


def test_every_evaluation_has_a_context_of_its_own(sandbox) -> None:
    for _ in range(3):
        assert run("true", sandbox).score == 1.0
    run("while (true) {}", sandbox)
    assert run("true", sandbox).score == 1.0
    assert sandbox.contexts_created == 5


@pytest.mark.parametrize(
    "change",
    [
        "Object.getPrototypeOf(Uint8Array).prototype.fill = function () { return 'changed'; }",
        "Object.getPrototypeOf([][Symbol.iterator]()).next = function () { return 'changed'; }",
        "Object.getPrototypeOf(new Map().entries()).next = function () { return 'changed'; }",
        "Object.getPrototypeOf(Object.getPrototypeOf((function* () {})())).next = function () { return 'changed'; }",
        "Object.prototype.fill = 'changed'",
        "Array.prototype.fill = function () { return 'changed'; }",
        "String.prototype.trim = function () { return 'changed'; }",
    ],
)
def test_changes_to_any_built_in_prototype_do_not_reach_the_next_evaluation(change, sandbox) -> None:
    assert run(f"try {{ {change}; }} catch (e) {{}} true", sandbox).score == 1.0
    check = ("new Uint8Array(2).fill(1)[0] === 1 && [...[1, 2]].length === 2 && [...new Map([[1, 2]])].length === 1"
             " && [...(function* () { yield 1; })()].length === 1 && ({}).fill === undefined"
             " && [0].fill(1)[0] === 1 && ' a '.trim() === 'a'")
    assert (run(check, sandbox).score, run(check, sandbox).error) == (1.0, None)


@pytest.mark.parametrize(
    "script",
    [
        "new Uint8Array(2e9).fill(1); true",
        "new ArrayBuffer(2e9); true",
        "new Float64Array(1e8); true",
        "Uint8Array.from({length: 1e8}); true",
        "new ArrayBuffer(8, {maxByteLength: 1e10}); true",
        # Cumulative over the evaluation: many small ones, and copies of a large one.
        "const a = []; for (let i = 0; i < 100; i++) { a.push(new Uint8Array(1e6)); } true",
        "const a = new Uint8Array(3e7); const b = []; for (let i = 0; i < 5; i++) { b.push(a.slice()); } true",
        "const a = new Uint8Array(6e7); a.buffer.slice(0); true",
        "class Big extends Uint8Array {} new Big(1e8); true",
    ],
)
def test_typed_arrays_and_array_buffers_stay_within_the_memory_limit(script, sandbox) -> None:
    started = time.monotonic()
    result = run(script, sandbox)
    assert result.score is None
    assert result.error == ("Expression evaluation failed: typed arrays and ArrayBuffers past the memory limit "
                            "of 64 MB")
    assert time.monotonic() - started < 5  # refused before the allocation, not after seconds of filling it
    assert_next_evaluation_works(sandbox)


@pytest.mark.parametrize(
    "script",
    [
        "new Uint8Array(1e6).fill(7)[999999] === 7",
        "new Float64Array([1, 2, 3]).length === 3",
        "new Uint8Array(new ArrayBuffer(8), 2).length === 6",
        "new Uint8Array(3e7).subarray(1).length === 3e7 - 1",  # a view: no new bytes
        "new Uint8Array(10).map(x => x + 1)[0] === 1",
        "class Small extends Uint8Array {} new Small(4).length === 4",
        "Object.getPrototypeOf(new Int16Array(1)).constructor === Int16Array",
        "new DataView(new ArrayBuffer(4)).byteLength === 4",
        "Uint16Array.of(1, 2).length === 2 && Int8Array.from([1, 2, 3]).length === 3",
        "typeof WebAssembly === 'undefined' && typeof ArrayBuffer.prototype.transfer === 'undefined'",
    ],
)
def test_typed_arrays_within_the_limit_work_as_usual(script, sandbox) -> None:
    assert (run(script, sandbox).score, run(script, sandbox).error) == (1.0, None)


def test_calling_a_typed_array_constructor_without_new_is_still_an_error(sandbox) -> None:
    assert "requires 'new'" in run("Uint8Array(3)", sandbox).error


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


def test_the_limits_from_the_engine_configuration_apply() -> None:
    from dataclasses import replace

    from blueprints.spec.limits import DEFAULT_LIMITS
    from runs.engine.config import DEFAULT_CONFIG

    config = replace(DEFAULT_CONFIG, limits=replace(DEFAULT_LIMITS, js_timeout_ms=20, js_memory_bytes=16 << 20))
    assert "stopped after 20 ms (time limit)" in evaluate_point("$js", "while (true) {}", "x", config=config).error
    assert evaluate_point("$js", "new Uint8Array(20e6); true", "x", config=config).error.endswith(
        "past the memory limit of 16 MB")
    assert evaluate_point("$js", "new Uint8Array(20e6); true", "x").score == 1.0  # the defaults: 64 MB
