"""`$js` points and `$tool_args_match` expressions, run in V8 (mini-racer) within limits.

Every evaluation runs in a V8 context of its own, made for it and closed after
it, so nothing a script does (globals, changes to built-in prototypes, work
left in a promise) can reach another evaluation. That costs about 2-4 ms per
evaluation (tests/bench/bench_points.py prints it), small beside a model call.
The context has no I/O at all: no `require`, `process`, `fetch`, no
`WebAssembly`, and the timer functions mini-racer installs are removed.

Limits, per evaluation: 100 ms of wall-clock time and 64 MB of memory by
default. The memory limit is V8's heap limit, and ArrayBuffers and typed
arrays (whose bytes live outside the heap) are counted against the same number
by wrapping their constructors: together they may not pass it. A script that
breaks a limit is stopped and its point records why.
"""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass

from .result import PointResult, not_evaluated

DEFAULT_TIMEOUT_MS = 100
DEFAULT_MEMORY_BYTES = 64 * 1024 * 1024

# Installed once in every new context. It defines the one global the host uses
# (`__evalsite`), removes timers, freezes the built-ins and remembers which
# globals exist so that anything a script adds can be deleted afterwards.
_PRELUDE = r"""
(function (memoryLimit) {
  'use strict';
  var global = globalThis;
  global.setTimeout = undefined;
  global.clearTimeout = undefined;
  global.__timer_manager = undefined;
  global.WebAssembly = undefined;  // its memories live outside the heap limit
  if (typeof Atomics === 'object') { Atomics.waitAsync = undefined; }

  var stringify = JSON.stringify;
  var defineProperty = Object.defineProperty;
  var freeze = Object.freeze;
  var FunctionConstructor = Function;
  var ProxyConstructor = Proxy;
  var construct = Reflect.construct;
  var arrayFrom = Array.from;
  var RangeErrorConstructor = RangeError;
  var isSyntaxError = function (e) { return e instanceof SyntaxError; };
  var illegalReturn = /Illegal return/;
  var scripts = [];
  var wheres = [];

  // ArrayBuffer backing stores live outside the V8 heap, so the heap limit does not see
  // them: every constructor that allocates one counts its bytes, against the same limit,
  // for the whole evaluation (a context serves one evaluation).
  var allocated = 0;
  function charge(bytes) {
    bytes = Number(bytes);
    if (!(bytes >= 0)) { return; }  // NaN and negatives: the constructor itself refuses them
    allocated += bytes;
    if (allocated > memoryLimit) {
      throw new RangeErrorConstructor('typed arrays and ArrayBuffers past the memory limit of ' +
        Math.floor(memoryLimit / 1048576) + ' MB');
    }
  }
  function toIndex(value) {
    var n = Number(value);
    return n !== n ? 0 : Math.floor(Math.abs(n));
  }
  function guard(name, bytesFor) {
    var original = global[name];
    if (typeof original !== 'function') { return; }
    var guarded = new ProxyConstructor(original, {
      construct: function (target, args, newTarget) {
        args = bytesFor(args);
        return construct(target, args, newTarget === guarded ? target : newTarget);
      },
      apply: function (target, self, args) { return Reflect.apply(target, self, args); }  // "requires 'new'"
    });
    // Species lookups (slice, map, subarray, from, of) go through the guarded constructor too.
    defineProperty(original.prototype, 'constructor', { value: guarded, writable: false, configurable: false });
    defineProperty(global, name, { value: guarded, writable: true, configurable: true });
  }
  function isBuffer(value) {
    return value instanceof global.ArrayBuffer ||
      (typeof SharedArrayBuffer === 'function' && value instanceof global.SharedArrayBuffer);
  }
  ['ArrayBuffer', 'SharedArrayBuffer'].forEach(function (name) {
    guard(name, function (args) {
      var length = toIndex(args[0]);
      var options = args[1];
      var max = options && typeof options === 'object' ? toIndex(options.maxByteLength) : 0;
      charge(max > length ? max : length);
      return args;
    });
  });
  if (typeof ArrayBuffer === 'function') {
    // These make a new buffer of any length without a constructor call.
    ['transfer', 'transferToFixedLength'].forEach(function (name) {
      try { delete Object.getPrototypeOf(new ArrayBuffer(0))[name]; } catch (e) {}
    });
  }
  ['Int8Array', 'Uint8Array', 'Uint8ClampedArray', 'Int16Array', 'Uint16Array', 'Int32Array', 'Uint32Array',
   'Float16Array', 'Float32Array', 'Float64Array', 'BigInt64Array', 'BigUint64Array'].forEach(function (name) {
    var size = typeof global[name] === 'function' ? global[name].BYTES_PER_ELEMENT : 1;
    guard(name, function (args) {
      var first = args[0];
      if (first === null || (typeof first !== 'object' && typeof first !== 'function')) {
        charge(toIndex(first) * size);
      } else if (!isBuffer(first)) {
        // An array-like or an iterable: made into a plain array first (the heap limit bounds
        // that), so its length is known before the typed array is allocated.
        var values = arrayFrom(first);
        charge(values.length * size);
        args = [values];
      }
      return args;
    });
  });

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
    run: function (source, r, messages, modelId) {
      var context = { messages: messages, modelId: modelId };
      var outcome;
      try {
        var result;
        // First as a script whose last expression is the result (upstream runs it with
        // vm.runInContext); a top-level `return` makes it a function body.
        try {
          result = new FunctionConstructor('r', 'response', 'context',
            'return eval(' + stringify(String(source)) + ');')(r, r, context);
        } catch (e) {
          if (!(isSyntaxError(e) && illegalReturn.test(describe(e)))) { throw e; }
          result = new FunctionConstructor('r', 'response', 'context', String(source))(r, r, context);
        }
        outcome = classify(result);
      } catch (e) {
        outcome = [null, null, 'Expression evaluation failed: ' + describe(e)];
      }
      return stringify(outcome);
    },
    where: function (expression, args) {
      // As upstream, an expression that does not compile or throws simply does not match.
      try {
        return !!new FunctionConstructor('args', 'return (' + String(expression) + ');')(args);
      } catch (e) {
        return false;
      }
    }
  };

  defineProperty(global, '__evalsite', { value: freeze(api), writable: false, configurable: false, enumerable: false });
})
"""


@dataclass(frozen=True)
class _Limits:
    timeout_ms: int
    memory_bytes: int


class JsSandbox:
    """Runs point scripts in V8 with time and memory limits; safe to share between threads.

    Every evaluation gets a context of its own, made for it and closed after it.
    """

    def __init__(self, *, timeout_ms: int = DEFAULT_TIMEOUT_MS, memory_bytes: int = DEFAULT_MEMORY_BYTES) -> None:
        self.limits = _Limits(timeout_ms, memory_bytes)
        self._count_lock = threading.Lock()
        self.contexts_created = 0  # for tests and diagnostics

    # -- public

    def evaluate_script(
        self, source: str, response: str, messages: list | None, model_id: str | None
    ) -> PointResult:
        """Run a `$js` point. Never raises."""
        arguments = ",".join(
            (_to_js(source), _to_js(response), _to_js(messages if messages is not None else []), _to_js(model_id))
        )
        outcome = self._run(f"__evalsite.run({arguments})")
        if isinstance(outcome, PointResult):
            return outcome
        score, explain, error = json.loads(outcome)
        if error is not None:
            return not_evaluated(error)
        return PointResult(score=float(score), explain=explain)

    def evaluate_where(self, expression: str, args: object) -> bool | PointResult:
        """`$tool_args_match`'s string `where`: is the expression truthy for these `args`?"""
        outcome = self._run(f"__evalsite.where({_to_js(expression)},{_to_js(args)})")
        return outcome if isinstance(outcome, PointResult) else bool(outcome)

    def close(self) -> None:
        """Nothing is kept between evaluations; kept for callers that close what they open."""

    # -- one evaluation, in a context of its own

    def _run(self, code: str):
        from py_mini_racer import mini_racer

        manager = None
        try:
            manager = mini_racer(_event_loop())
            context = manager.__enter__()
            with self._count_lock:
                self.contexts_created += 1
            context.set_hard_memory_limit(self.limits.memory_bytes)
            context.eval(f"{_PRELUDE}({int(self.limits.memory_bytes)})")
            return context.eval(code, timeout_sec=self.limits.timeout_ms / 1000)
        except Exception as error:  # mini-racer reports limits and failures as exceptions
            return not_evaluated(self._limit_reason(error))
        finally:
            if manager is not None:
                try:
                    manager.__exit__(None, None, None)
                except Exception:  # a context that is already broken cannot be closed cleanly
                    pass

    def _limit_reason(self, error: Exception) -> str:
        from py_mini_racer import JSOOMException, JSTimeoutException

        if isinstance(error, JSTimeoutException):
            return f"Expression evaluation failed: stopped after {self.limits.timeout_ms} ms (time limit)"
        if isinstance(error, JSOOMException):
            megabytes = self.limits.memory_bytes // (1024 * 1024)
            return f"Expression evaluation failed: stopped at {megabytes} MB (memory limit)"
        return f"Expression evaluation failed: {error}"


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


_shared: dict[tuple[int, int], JsSandbox] = {}
_shared_lock = threading.Lock()


def shared_sandbox(limits=None) -> JsSandbox:
    """The process's sandbox for these limits (a `Limits`; None: the defaults), created on first use."""
    key = (DEFAULT_TIMEOUT_MS, DEFAULT_MEMORY_BYTES) if limits is None else (
        int(limits.js_timeout_ms), int(limits.js_memory_bytes))
    with _shared_lock:
        if key not in _shared:
            _shared[key] = JsSandbox(timeout_ms=key[0], memory_bytes=key[1])
        return _shared[key]
