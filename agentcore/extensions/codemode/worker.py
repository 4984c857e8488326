"""The code-mode sandbox worker: one QuickJS context in a process of its own (SPEC X4).

Run by the host as ``python -I -S worker.py <dir holding _quickjs>``; imports nothing but the
standard library and ``_quickjs``, so it starts in ~30 ms and never loads agentcore (or the
host's environment, which it does not get). Why a process: QuickJS cannot combine its own time
limit with calls into Python, so the only deadline that holds against ``while (true) {}`` is
the host killing the process. The process also ends when the host dies (``PR_SET_PDEATHSIG``),
and has an address-space and CPU-time limit of its own as a backstop to the interpreter's
memory limit.

Protocol: JSON lines. stdin: one ``start`` message, then ``result`` messages answering the
script's tool calls *in the order they were asked* (the host runs them one at a time). stdout:
``call``, ``text``, then one ``done`` (the script settled) or ``fatal`` (the sandbox failed),
after which the worker exits. The worker drains every pending promise job before it reads the
next answer, so the script's sequence of calls is a function of the script and the answers it
got — which is what lets the host re-run a script after a crash and feed it the answers it
already committed (see ``replay.py``).

Everything a script can reach is defined in ``PRELUDE``: ECMAScript's built-ins (anything else
on the global object is deleted first — the bridge, and QuickJS's ``__date_clock``, a live
clock), ``tools``, ``text``, ``store``, ``load`` and ``console.log`` (= ``text``). No file,
network, process, timer or module API exists. ``Date`` is frozen at the script's start time
and ``Math.random`` is a seeded generator; both values are recorded, so a re-run sees the same
ones.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
from typing import Any, TextIO

PRELUDE = r"""
(function () {
  'use strict';
  const send = globalThis.__agentcore_send;
  const config = JSON.parse(globalThis.__agentcore_config());
  // The global object keeps ECMAScript's built-ins, nothing else the engine or the worker put
  // there: the bridge (__agentcore_*) and QuickJS's own __date_clock, a live microsecond clock
  // that would get around the frozen Date (and differ on a re-run).
  const builtins = Object.create(null);
  for (const name of ('AggregateError Array ArrayBuffer Atomics BigInt BigInt64Array BigUint64Array Boolean ' +
      'DataView Date Error EvalError Float32Array Float64Array Function Infinity Int16Array Int32Array Int8Array ' +
      'InternalError JSON Map Math NaN Number Object Promise Proxy RangeError ReferenceError Reflect RegExp Set ' +
      'SharedArrayBuffer String Symbol SyntaxError TypeError URIError Uint16Array Uint32Array Uint8Array ' +
      'Uint8ClampedArray WeakMap WeakSet decodeURI decodeURIComponent encodeURI encodeURIComponent escape eval ' +
      'globalThis isFinite isNaN parseFloat parseInt undefined unescape').split(' ')) {
    builtins[name] = true;
  }
  for (const name of Reflect.ownKeys(globalThis)) {
    if (typeof name !== 'string' || builtins[name] !== true) delete globalThis[name];
  }
  // Captured before any script runs: a script may replace these globals, not the prelude's copies.
  const stringify = JSON.stringify, parse = JSON.parse, apply = Reflect.apply;
  const create = Object.create, freeze = Object.freeze, defineProperty = Object.defineProperty;
  const PromiseCtor = Promise, promiseThen = Promise.prototype.then;
  const ErrorCtor = Error, TypeErrorCtor = TypeError, StringCtor = String;
  const AsyncFunction = (async function () {}).constructor;
  const RealDate = Date, imul = Math.imul;
  const indexOf = String.prototype.indexOf, slice = String.prototype.slice;
  const pending = create(null);
  const names = config.tools.slice();
  const known = create(null);
  for (let i = 0; i < names.length; i++) known[names[i]] = true;
  const probes = create(null);
  for (const name of ['then', 'toJSON', 'toString', 'valueOf', 'constructor', 'inspect']) probes[name] = true;

  function asText(value) {
    if (typeof value === 'string') return value;
    if (value === undefined) return 'undefined';
    try {
      const json = stringify(value);
      if (json !== undefined) return json;
    } catch (e) {}
    return StringCtor(value);
  }

  function describe(error) {
    try {
      if (error instanceof ErrorCtor) {
        let stack = typeof error.stack === 'string' ? error.stack : '';
        // Frames up to the script's own function; what called it is the prelude.
        const top = apply(indexOf, stack, ['at anonymous (']);
        const end = top < 0 ? -1 : apply(indexOf, stack, ['\n', top]);
        if (end >= 0) stack = apply(slice, stack, [0, end + 1]);
        return StringCtor(error.name) + ': ' + StringCtor(error.message) + (stack ? '\n' + stack : '');
      }
      return 'thrown: ' + asText(error);
    } catch (e) {
      return 'the script threw a value that cannot be described';
    }
  }

  function callTool(name, args) {
    return new PromiseCtor(function (resolve, reject) {
      let json;
      try {
        json = stringify(args === undefined ? {} : args);
      } catch (e) {
        reject(new TypeErrorCtor('tools.' + name + ': the arguments are not JSON: ' + describe(e)));
        return;
      }
      if (json === undefined) json = 'null';
      const id = send('{"type":"call","name":' + stringify(name) + ',"args":' + json + '}');
      if (typeof id !== 'number') {
        reject(new ErrorCtor(StringCtor(id)));
        return;
      }
      pending[id] = { resolve: resolve, reject: reject };
    });
  }

  const descriptor = function (name) {
    return { value: function (args) { return callTool(name, args); }, enumerable: true, configurable: true };
  };
  const tools = new Proxy(create(null), {
    get: function (target, name) {
      // Names the language itself probes (await, JSON, string conversion) are not tool calls.
      if (typeof name !== 'string' || (known[name] !== true && probes[name] === true)) return undefined;
      return function (args) { return callTool(name, args); };
    },
    has: function (target, name) { return typeof name === 'string' && known[name] === true; },
    ownKeys: function () { return names.slice(); },
    getOwnPropertyDescriptor: function (target, name) {
      return typeof name === 'string' && known[name] === true ? descriptor(name) : undefined;
    },
    set: function () { return false; },
    defineProperty: function () { return false; },
    deleteProperty: function () { return false; },
  });

  function text() {
    let line = '';
    for (let i = 0; i < arguments.length; i++) line += (i ? ' ' : '') + asText(arguments[i]);
    send('{"type":"text","text":' + stringify(line + '\n') + '}');
  }

  // store()/load(): the context's values as of the script's start, plus this script's own
  // writes; the writes are committed with the script's result (see docs/code-mode.md).
  const values = create(null);
  const changed = create(null);
  const initial = config.store;
  for (const key in initial) values[key] = StringCtor(initial[key]);  // JSON texts, as stored
  let count = 0, total = 0;
  for (const key in values) { count++; total += key.length + values[key].length; }

  function nesting(json) {  // how deeply arrays and objects nest in a JSON text (~20 ms for 64 KiB)
    let depth = 0, deepest = 0, quoted = false;
    for (let i = 0; i < json.length; i++) {
      const c = json[i];  // indexing a string primitive: nothing a script can replace
      if (quoted) {
        if (c === '\\') i++;  // a backslash escapes the next character
        else if (c === '"') quoted = false;
      } else if (c === '"') {
        quoted = true;
      } else if (c === '[' || c === '{') {
        if (++depth > deepest) deepest = depth;
      } else if (c === ']' || c === '}') {
        depth--;
      }
    }
    return deepest;
  }
  function checkKey(key) {
    if (typeof key !== 'string' || key.length === 0 || key.length > config.store_key_chars) {
      throw new TypeErrorCtor('store keys are non-empty strings of at most ' + config.store_key_chars + ' characters');
    }
  }
  function store(key, value) {
    checkKey(key);
    const old = values[key];
    if (value === undefined) {
      if (old !== undefined) { count--; total -= key.length + old.length; }
      delete values[key];
      changed[key] = true;
      return;
    }
    const json = stringify(value);
    if (json === undefined) throw new TypeErrorCtor('store(' + stringify(key) + '): the value is not JSON');
    if (json.length > config.store_value_chars) {
      throw new ErrorCtor('store(' + stringify(key) + '): the value is ' + json.length +
        ' characters of JSON; at most ' + config.store_value_chars);
    }
    const depth = nesting(json);
    if (depth > config.store_value_depth) {
      throw new ErrorCtor('store(' + stringify(key) + '): the value is nested ' + depth +
        ' levels deep; at most ' + config.store_value_depth);
    }
    if (old === undefined && count >= config.store_keys) {
      throw new ErrorCtor('store: at most ' + config.store_keys + ' keys');
    }
    const grown = total + json.length - (old === undefined ? -key.length : old.length);
    if (grown > config.store_total_chars) {
      throw new ErrorCtor('store: the values together may take at most ' + config.store_total_chars +
        ' characters of JSON');
    }
    if (old === undefined) count++;
    total = grown;
    values[key] = json;
    changed[key] = true;
  }
  function load(key) {
    checkKey(key);
    const json = values[key];
    return json === undefined ? undefined : parse(json);
  }

  // Determinism: a frozen clock and a seeded generator (mulberry32), both recorded by the host.
  const now = config.clock_ms;
  let seed = config.seed >>> 0;
  function random() {
    seed = (seed + 0x6D2B79F5) >>> 0;
    let t = seed;
    t = imul(t ^ (t >>> 15), t | 1);
    t ^= t + imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  function FrozenDate() {
    if (!new.target) return new RealDate(now).toString();
    const args = Array.prototype.slice.call(arguments);
    return args.length ? new RealDate(...args) : new RealDate(now);
  }
  FrozenDate.prototype = RealDate.prototype;
  FrozenDate.now = function () { return now; };
  FrozenDate.UTC = RealDate.UTC;
  FrozenDate.parse = RealDate.parse;
  defineProperty(RealDate.prototype, 'constructor', { value: FrozenDate, writable: true, configurable: true });
  Math.random = random;

  let finished = false;
  function finish(ok, value, error) {
    if (finished) return;
    finished = true;
    const stored = create(null);
    for (const key in changed) stored[key] = values[key] === undefined ? null : values[key];
    let result = '{"type":"done","ok":' + (ok ? 'true' : 'false');
    if (ok && value !== undefined) {
      let json;
      try { json = stringify(value); } catch (e) { json = undefined; }
      result += ',"value_json":' + stringify(json === undefined ? stringify(asText(value)) : json);
    }
    if (!ok) result += ',"error":' + stringify(error);
    result += ',"stores":' + stringify(stored) + '}';
    send(result);
  }

  const globals = {
    tools: tools, text: text, store: store, load: load,
    console: freeze({ log: text, info: text, warn: text, error: text, debug: text }),
    Date: FrozenDate,
  };
  for (const key in globals) {
    defineProperty(globalThis, key, { value: globals[key], writable: true, configurable: true });
  }

  globalThis.__agentcore_deliver = function (id, ok, json) {
    const waiter = pending[id];
    if (waiter === undefined) return;
    delete pending[id];
    const value = parse(json);
    if (ok) {
      waiter.resolve(value);
      return;
    }
    const error = new ErrorCtor(StringCtor(value));
    defineProperty(error, 'stack', { value: '', writable: true, configurable: true });  // the tool failed, not a line
    waiter.reject(error);
  };
  globalThis.__agentcore_start = function (code) {
    let run;
    try {
      run = new AsyncFunction(code);
    } catch (e) {
      finish(false, undefined, describe(e));
      return;
    }
    let promise;
    try {
      promise = run();
    } catch (e) {
      finish(false, undefined, describe(e));
      return;
    }
    apply(promiseThen, promise, [
      function (value) { finish(true, value); },
      function (error) { finish(false, undefined, describe(error)); },
    ]);
  };
})();
"""

# Process limits beyond the interpreter's own memory limit (the Python runtime needs some too).
ADDRESS_SPACE_MARGIN = 512 << 20
CPU_SECONDS_MARGIN = 5
PR_SET_PDEATHSIG = 1


class Worker:
    """One script: its output budget and its call counter (the call order the host logs)."""

    def __init__(self, start: dict[str, Any], out: TextIO) -> None:
        self.out = out
        self.calls = 0
        self.outstanding = 0
        self.done = False
        self.text_left = int(start["max_output_chars"])
        self.dropped = 0
        self.max_message = int(start["max_message_chars"])

    def write(self, message: dict[str, Any]) -> None:
        """One line of ASCII JSON (escapes keep lone surrogates and any encoding intact)."""
        self.out.write(json.dumps(message, ensure_ascii=True, separators=(",", ":")) + "\n")
        self.out.flush()

    def send(self, message: object) -> object:
        """The one bridge from JavaScript. Never raises (a Python exception inside a QuickJS
        callable breaks the interpreter): a problem goes back to the prelude as a string."""
        try:
            return self._send(message)
        except Exception as exc:  # pragma: no cover - defensive
            return f"sandbox error: {type(exc).__name__}"

    def _send(self, message: object) -> object:
        if not isinstance(message, str):
            return "sandbox error: bad message"
        if message.startswith('{"type":"text"'):
            self._text(json.loads(message)["text"])
            return None
        if message.startswith('{"type":"done"'):
            done = json.loads(message)
            value = done.get("value_json")
            if isinstance(value, str) and len(value) > self.max_message:
                done["value_json"] = value[: self.max_message]
                done["value_truncated"] = len(value)
            if self.dropped:
                done["dropped_chars"] = self.dropped
            self.done = True
            self.write(done)
            return None
        if len(message) > self.max_message:
            return f"the tool call is {len(message)} characters of JSON; at most {self.max_message}"
        if message.startswith('{"type":"call"'):
            call = json.loads(message)
            call["id"] = index = self.calls
            self.calls += 1
            self.outstanding += 1
            self.write(call)
            return index
        return "sandbox error: unknown message"

    def _text(self, text: str) -> None:
        if len(text) > self.text_left:
            self.dropped += len(text) - self.text_left
            text = text[: self.text_left]
        if text:
            self.text_left -= len(text)
            self.write({"type": "text", "text": text})


def _limit_process(start: dict[str, Any], parent: int) -> None:
    """Die with the host; bounded address space and CPU time whatever the script does."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        pass
    if os.getppid() != parent:  # the host died before the death signal was armed
        os._exit(3)
    memory = int(start["memory_limit_bytes"]) + ADDRESS_SPACE_MARGIN
    seconds = int(start["timeout_ms"]) // 1000 + CPU_SECONDS_MARGIN
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run(quickjs: Any, start: dict[str, Any], stdin: TextIO, out: TextIO) -> None:
    worker = Worker(start, out)
    config = json.dumps({key: start[key] for key in _PRELUDE_CONFIG})
    context = quickjs.Context()
    context.set_memory_limit(int(start["memory_limit_bytes"]))
    context.set_max_stack_size(int(start["stack_bytes"]))
    context.add_callable("__agentcore_send", worker.send)
    context.add_callable("__agentcore_config", lambda: config)
    try:
        context.eval(PRELUDE)
        deliver = context.get("__agentcore_deliver")
        begin = context.get("__agentcore_start")
        context.eval("delete globalThis.__agentcore_deliver; delete globalThis.__agentcore_start;")
        begin(start["script"])
        while True:
            while context.execute_pending_job():
                pass
            if worker.done:
                return
            if worker.outstanding == 0:
                worker.write({"type": "fatal", "kind": "stalled", "error": _STALLED})
                return
            line = stdin.readline()
            if not line:
                return  # the host went away
            answer = json.loads(line)
            worker.outstanding -= 1
            payload = answer["value"] if answer["ok"] else answer["error"]
            deliver(answer["id"], bool(answer["ok"]), json.dumps(payload))
    except MemoryError:
        worker.write({"type": "fatal", "kind": "memory", "error": "out of memory"})
    except Exception as exc:  # _quickjs.JSException (out of memory outside the script's reach), ...
        text = str(exc)[:2000]
        worker.write({"type": "fatal", "kind": "memory" if "out of memory" in text else "internal", "error": text})


def main() -> None:
    sys.path.insert(0, sys.argv[1])
    import _quickjs  # type: ignore[import-not-found]  # loaded while the host prepares the start message

    line = sys.stdin.readline()
    if not line:
        return
    start = json.loads(line)
    _limit_process(start, int(sys.argv[2]))
    run(_quickjs, start, sys.stdin, sys.stdout)


_PRELUDE_CONFIG = (
    "tools",
    "store",
    "seed",
    "clock_ms",
    "store_key_chars",
    "store_value_chars",
    "store_keys",
    "store_total_chars",
    "store_value_depth",
)
_STALLED = (
    "the script is waiting for a promise that nothing can settle (no tool call is outstanding); "
    "code mode has no timers or events"
)

if __name__ == "__main__":
    main()
