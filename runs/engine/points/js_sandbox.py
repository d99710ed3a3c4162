"""`$js` points and `$tool_args_match` expressions, run in V8 (mini-racer) within limits.

One V8 context per process, shared by threads through a lock. Each script is
compiled once into its own function, so its variables stay its own; globals a
sloppy script creates by assignment are deleted after every evaluation, and the
built-in objects are frozen so that no script can change what the next one sees.
The context has no I/O at all: no `require`, `process`, `fetch`, and the timer
functions mini-racer installs are removed (a callback could otherwise run after
an evaluation returned, outside its time limit).

Limits, per evaluation: 100 ms of wall-clock time and 64 MB of V8 heap by
default. A script that breaks one is stopped, its point records why, and the
context is thrown away and replaced; it is also replaced every few thousand
evaluations so that nothing accumulates.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import threading
from dataclasses import dataclass

from .result import PointResult, not_evaluated

DEFAULT_TIMEOUT_MS = 100
DEFAULT_MEMORY_BYTES = 64 * 1024 * 1024
DEFAULT_RECYCLE_AFTER = 5000  # evaluations per context
_MAX_SCRIPTS_PER_CONTEXT = 2000

# Installed once in every new context. It defines the one global the host uses
# (`__evalsite`), removes timers, freezes the built-ins and remembers which
# globals exist so that anything a script adds can be deleted afterwards.
_PRELUDE = r"""
(function () {
  'use strict';
  var global = globalThis;
  global.setTimeout = undefined;
  global.clearTimeout = undefined;
  global.__timer_manager = undefined;
  if (typeof Atomics === 'object') { Atomics.waitAsync = undefined; }

  var stringify = JSON.stringify;
  var ownNames = Object.getOwnPropertyNames;
  var defineProperty = Object.defineProperty;
  var freeze = Object.freeze;
  var FunctionConstructor = Function;
  var isSyntaxError = function (e) { return e instanceof SyntaxError; };
  var illegalReturn = /Illegal return/;
  var scripts = [];
  var wheres = [];

  function describe(error) {
    try {
      if (error && typeof error === 'object' && 'message' in error) { return String(error.message); }
      return String(error);
    } catch (e) {
      return 'an error that could not be described';
    }
  }

  function clamp(n) { return n < 0 ? 0 : (n > 1 ? 1 : n); }

  function classify(result) {
    if (typeof result === 'boolean') { return [result ? 1 : 0, null, null]; }
    if (typeof result === 'number') {
      if (result !== result) { return [null, null, 'Script returned NaN. Must return a boolean or a number.']; }
      return [clamp(result), null, null];
    }
    if (result === undefined || result === null) { return [0, null, null]; }
    if (typeof result === 'object' && 'score' in result) {
      var score = result.score;
      var explain = result.explain;
      explain = (explain === undefined || explain === null) ? null : String(explain);
      if (typeof score === 'boolean') { return [score ? 1 : 0, explain, null]; }
      if (typeof score === 'number' && score === score) { return [clamp(score), explain, null]; }
      return [null, null, 'Script returned an invalid score type: ' + typeof score + '. `score` must be a boolean or a number.'];
    }
    return [null, null, 'Script returned an invalid type: ' + typeof result + '. Must return a boolean or a number.'];
  }

  var api = {
    define: function (source) {
      // First as a script whose last expression is the result (upstream runs it
      // with vm.runInContext); a top-level `return` makes it a function body.
      var asScript = new FunctionConstructor('r', 'response', 'context',
        'return eval(' + stringify(String(source)) + ');');
      scripts.push({ source: String(source), run: asScript, body: null });
      return scripts.length - 1;
    },
    run: function (id, r, messages, modelId) {
      var script = scripts[id];
      var context = { messages: messages, modelId: modelId };
      var outcome;
      try {
        var result;
        if (script.body === null) {
          try {
            result = script.run(r, r, context);
          } catch (e) {
            if (!(isSyntaxError(e) && illegalReturn.test(describe(e)))) { throw e; }
            script.body = new FunctionConstructor('r', 'response', 'context', script.source);
            script.run = script.body;
            result = script.run(r, r, context);
          }
        } else {
          result = script.run(r, r, context);
        }
        outcome = classify(result);
      } catch (e) {
        outcome = [null, null, 'Expression evaluation failed: ' + describe(e)];
      }
      forgetNewGlobals();
      return stringify(outcome);
    },
    defineWhere: function (expression) {
      var fn = null;
      var problem = null;
      try {
        fn = new FunctionConstructor('args', 'return (' + String(expression) + ');');
      } catch (e) {
        problem = describe(e);
      }
      wheres.push({ fn: fn, problem: problem });
      return wheres.length - 1;
    },
    where: function (id, args) {
      var entry = wheres[id];
      var verdict = false;
      // As upstream, an expression that throws simply does not match.
      if (entry.fn !== null) {
        try { verdict = !!entry.fn(args); } catch (e) { verdict = false; }
      }
      forgetNewGlobals();
      return verdict;
    }
  };

  defineProperty(global, '__evalsite', { value: freeze(api), writable: false, configurable: false, enumerable: false });

  var baseline = Object.create(null);
  ownNames(global).forEach(function (name) { baseline[name] = true; });

  function forgetNewGlobals() {
    var names = ownNames(global);
    for (var i = 0; i < names.length; i++) {
      if (!baseline[names[i]]) {
        try { delete global[names[i]]; } catch (e) { /* not deletable: leave it */ }
      }
    }
  }

  // Freeze every built-in reachable from a global name, and its prototype, and
  // make the global bindings themselves read-only.
  ownNames(global).forEach(function (name) {
    var descriptor = Object.getOwnPropertyDescriptor(global, name);
    if (!descriptor || !('value' in descriptor)) { return; }
    var value = descriptor.value;
    if (value !== global && value !== null && (typeof value === 'object' || typeof value === 'function')) {
      try { freeze(value); } catch (e) {}
      try { if (value.prototype) { freeze(value.prototype); } } catch (e) {}
    }
    if (descriptor.configurable || descriptor.writable) {
      try { defineProperty(global, name, { writable: false, configurable: false }); } catch (e) {}
    }
  });
  [Object.getPrototypeOf(function () {}), Object.getPrototypeOf(function* () {}),
   Object.getPrototypeOf(async function () {}), Object.getPrototypeOf([][Symbol.iterator]()),
   Object.getPrototypeOf(''[Symbol.iterator]())].forEach(function (p) { try { freeze(p); } catch (e) {} });
})();
"""


@dataclass(frozen=True)
class _Limits:
    timeout_ms: int
    memory_bytes: int


class JsSandbox:
    """A V8 context for point scripts, with time and memory limits, safe to share between threads."""

    def __init__(
        self,
        *,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        memory_bytes: int = DEFAULT_MEMORY_BYTES,
        recycle_after: int = DEFAULT_RECYCLE_AFTER,
    ) -> None:
        self.limits = _Limits(timeout_ms, memory_bytes)
        self.recycle_after = recycle_after
        self._lock = threading.Lock()
        self._context = None
        self._context_manager = None
        self._script_ids: dict[str, int] = {}
        self._where_ids: dict[str, int] = {}
        self._evaluations = 0
        self.contexts_created = 0  # for tests and diagnostics

    # -- public

    def evaluate_script(
        self, source: str, response: str, messages: list | None, model_id: str | None
    ) -> PointResult:
        """Run a `$js` point. Never raises."""
        arguments = ",".join(
            (_to_js(response), _to_js(messages if messages is not None else []), _to_js(model_id))
        )
        with self._lock:
            outcome = self._run(self._script_ids, "define", source, "run", arguments)
        if isinstance(outcome, PointResult):
            return outcome
        score, explain, error = json.loads(outcome)
        if error is not None:
            return not_evaluated(error)
        return PointResult(score=float(score), explain=explain)

    def evaluate_where(self, expression: str, args: object) -> bool | PointResult:
        """`$tool_args_match`'s string `where`: is the expression truthy for these `args`?"""
        with self._lock:
            outcome = self._run(self._where_ids, "defineWhere", expression, "where", _to_js(args))
        return outcome if isinstance(outcome, PointResult) else bool(outcome)

    def close(self) -> None:
        with self._lock:
            self._discard_context()

    # -- inside the lock

    def _run(self, ids: dict[str, int], define: str, source: str, run: str, arguments: str):
        # A context that just timed out may have been stuck in work left over by
        # an earlier script (a promise callback runs after its evaluation
        # returned), so a failure on a context that had already run something is
        # tried once more on a fresh one before the script gets the blame.
        for attempt in (1, 2):
            fresh = self._context is None or self._evaluations == 0
            try:
                context = self._ensure_context()
                if source not in ids:
                    ids[source] = context.eval(f"__evalsite.{define}({_to_js(source)})", timeout_sec=self._timeout())
                self._evaluations += 1
                return context.eval(f"__evalsite.{run}({ids[source]},{arguments})", timeout_sec=self._timeout())
            except Exception as error:  # mini-racer reports limits and failures as exceptions
                reason = self._limit_reason(error)
                self._discard_context()
                if attempt == 1 and not fresh:
                    continue
                return not_evaluated(reason)
            finally:
                if self._context is not None and self._evaluations >= self.recycle_after:
                    self._discard_context()
        raise AssertionError("unreachable")

    def _timeout(self) -> float:
        return self.limits.timeout_ms / 1000

    def _limit_reason(self, error: Exception) -> str:
        from py_mini_racer import JSOOMException, JSTimeoutException

        if isinstance(error, JSTimeoutException):
            return f"Expression evaluation failed: stopped after {self.limits.timeout_ms} ms (time limit)"
        if isinstance(error, JSOOMException):
            megabytes = self.limits.memory_bytes // (1024 * 1024)
            return f"Expression evaluation failed: stopped at {megabytes} MB (memory limit)"
        return f"Expression evaluation failed: {error}"

    def _ensure_context(self):
        if self._context is None:
            from py_mini_racer import mini_racer

            manager = mini_racer(_event_loop())
            context = manager.__enter__()
            context.set_hard_memory_limit(self.limits.memory_bytes)
            context.eval(_PRELUDE)
            self._context_manager = manager
            self._context = context
            self._script_ids.clear()
            self._where_ids.clear()
            self._evaluations = 0
            self.contexts_created += 1
        elif len(self._script_ids) + len(self._where_ids) > _MAX_SCRIPTS_PER_CONTEXT:
            self._discard_context()
            return self._ensure_context()
        return self._context

    def _discard_context(self) -> None:
        if self._context_manager is not None:
            try:
                self._context_manager.__exit__(None, None, None)
            except Exception:  # a context that is already broken cannot be closed cleanly
                pass
        self._context_manager = None
        self._context = None
        self._script_ids.clear()
        self._where_ids.clear()
        self._evaluations = 0


_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def _event_loop() -> asyncio.AbstractEventLoop:
    """One asyncio loop, on a daemon thread, for every context this process makes.

    mini-racer otherwise gives each context a loop of its own and stops it when
    the context closes; a V8 callback that arrives late for a stopped script
    (after a time limit) then fails noisily on the stopped loop.
    """
    global _loop
    with _loop_lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="evalsite-js", daemon=True).start()
            _loop = loop
        return _loop


def _to_js(value: object) -> str:
    # JSON is a JavaScript expression; values JSON cannot hold become strings.
    return json.dumps(value, ensure_ascii=False, default=str)


_shared: JsSandbox | None = None
_shared_lock = threading.Lock()


def shared_sandbox() -> JsSandbox:
    """The process's sandbox, created on first use."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = JsSandbox()
            atexit.register(_shared.close)
        return _shared
