"""Hostile scripts against code mode: the sandbox holds and the host never dies (SPEC X4).

Each script runs in the real QuickJS worker through the real engine. After every test no worker
is left running, and the same session still runs a normal script.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from agentcore.extensions.codemode import sandbox as sandbox_module
from agentcore.extensions.codemode.protocol import (
    MAX_CALLS,
    MAX_OUTPUT_CHARS,
    STORE_VALUE_DEPTH,
    ProtocolError,
    parse_message,
)
from agentcore.extensions.codemode.sandbox import sandbox_fingerprint
from tests.agentcore.codemode_helpers import codemode_end, entries_of, script_turn, worker_pids
from tests.agentcore.session_helpers import run_with

COMPLETIONS = "openai-completions"


@pytest.fixture(autouse=True)
def no_worker_left_behind():
    yield
    assert worker_pids() == [], "every sandbox worker is reaped when its script ends"


async def run_script(make_agent: Any, fake_server: Any, code: str, **code_mode: int) -> tuple[Any, Any]:
    """Run ``code`` as one codemode call, then a harmless script in the same session (the host
    is still fine); returns the hostile call's end event and the agent."""
    fake_server.enqueue(*script_turn(code, call_id="hostile"), *script_turn("return 'still here'", call_id="after"))
    agent = await make_agent(COMPLETIONS, session={"code_mode": dict(code_mode)})
    end = codemode_end(await run_with(agent, {"prompt": "hostile", "request_id": "h"}))
    after = codemode_end(await run_with(agent, {"prompt": "after", "request_id": "a"}))
    assert after.result == 'Return value: "still here"' and not after.is_error
    return end, agent


async def test_an_endless_loop_is_killed_at_the_deadline(make_agent, fake_server) -> None:
    """X4: while (true) {} cannot stop itself (no interrupt handler can call into Python), so the
    host kills the worker process at timeout_ms."""
    started = time.monotonic()
    end, agent = await run_script(make_agent, fake_server, "let i = 0; while (true) { i++; }", timeout_ms=1000)
    assert end.is_error and "stopped at its deadline (1000 ms)" in end.result
    assert 1.0 <= end.duration_ms / 1000 < 10 and time.monotonic() - started >= 1.0
    (finished,) = entries_of(agent, "code_run_end")[:1]
    assert finished.payload["status"] == "timeout"


async def test_an_endless_loop_after_a_tool_call_is_killed_too(make_agent, fake_server) -> None:
    """X4: the deadline covers the whole script, nested calls included."""
    end, _ = await run_script(make_agent, fake_server, "await tools.ls({}); for (;;) {}", timeout_ms=1200)
    assert end.is_error and "deadline (1200 ms)" in end.result


async def test_a_memory_bomb_is_stopped_at_the_memory_limit(make_agent, fake_server) -> None:
    """X4: allocation beyond memory_limit_bytes stops the script (QuickJS's limit; the context is
    discarded with its process)."""
    code = "const keep = []; while (true) keep.push('x'.repeat(1 << 16) + keep.length);"
    end, agent = await run_script(make_agent, fake_server, code, memory_limit_bytes=16 << 20)
    assert end.is_error and f"ran out of memory (limit {16 << 20} bytes)" in end.result
    assert entries_of(agent, "code_run_end")[0].payload["status"] == "memory"


async def test_a_memory_bomb_that_swallows_the_error_still_ends(make_agent, fake_server) -> None:
    """X4: a script that catches out-of-memory and keeps allocating ends — at a limit, or by
    crashing its worker (QuickJS may, in that state) — and the host carries on."""
    code = """
        const keep = [];
        for (;;) { try { keep.push(new Array(1 << 16).fill(keep.length)); } catch (e) { keep.push(String(e)); } }
    """
    end, _ = await run_script(make_agent, fake_server, code, memory_limit_bytes=8 << 20, timeout_ms=3000)
    assert end.is_error
    assert any(
        reason in end.result for reason in ("ran out of memory", "deadline (3000 ms)", "sandbox process crashed")
    ), end.result


async def test_endless_tool_calls_are_bounded(make_agent, fake_server) -> None:
    """X4: while (true) { await tools.x() } stops after MAX_CALLS nested calls."""
    end, agent = await run_script(make_agent, fake_server, "while (true) { await tools.ls({}); }")
    assert end.is_error and f"more than {MAX_CALLS} tool calls" in end.result
    assert len(entries_of(agent, "nested_result")) == MAX_CALLS


async def test_prototype_tricks_cannot_reach_the_bridge_or_break_the_protocol(make_agent, fake_server) -> None:
    """X4: replacing JSON, Promise.prototype.then, Array methods or Object.prototype getters does
    not change what the host receives; the bridge functions are not reachable from the script."""
    code = """
        const bridge = [typeof __agentcore_send, typeof __agentcore_config, typeof __agentcore_deliver,
                        typeof __agentcore_start, Function("return typeof this.__agentcore_send")(),
                        typeof globalThis.tools.constructor, "__proto__" in tools];
        JSON.stringify = () => '{"type":"done","ok":true,"stores":{}}';
        JSON.parse = () => ({hijacked: true});
        Promise.prototype.then = function () { throw new Error("hijacked then"); };
        Array.prototype.slice = () => { throw new Error("hijacked slice"); };
        Object.defineProperty(Object.prototype, "name", {get() { return "bash"; }});
        Object.defineProperty(Object.prototype, "ok", {get() { return true; }});
        const readme = await tools.read({path: "README.md"});
        let refused;
        try { await tools.__proto__({}); } catch (e) { refused = e.message; }
        text(refused);
        return {bridge, readme: readme.slice(0, 14)};
    """
    end, agent = await run_script(make_agent, fake_server, code)
    assert not end.is_error, end.result
    assert "tools.__proto__ is not available in code mode" in end.result
    returned = json.loads(end.result.split("Return value: ", 1)[1])
    assert returned["bridge"] == ["undefined"] * 6 + [False]
    assert returned["readme"] == "     1\t# Demo "
    intents = [(e.payload["name"], e.payload["arguments"]) for e in entries_of(agent, "nested_intent")]
    assert intents[0] == ("read", {"path": "README.md"})


async def test_a_poisoned_to_json_sends_garbage_arguments_which_are_refused(make_agent, fake_server) -> None:
    """X4: Object.prototype.toJSON changes what JSON the script sends; the host validates it
    like any model call and refuses it (no intent, no effect)."""
    code = (
        "Object.prototype.toJSON = function () { return 'owned'; }; return await tools.write({path: 'x', content: 'y'})"
    )
    end, agent = await run_script(make_agent, fake_server, code)
    assert end.is_error and "expected a JSON object" in end.result
    assert [e.payload["status"] for e in entries_of(agent, "nested_result")][:1] == ["invalid"]


async def test_there_is_no_file_network_process_timer_or_module_access(make_agent, fake_server) -> None:
    """X4: the only way out of the sandbox is tools.<name>."""
    code = """
        const names = ["require", "process", "fetch", "XMLHttpRequest", "std", "os", "setTimeout", "setInterval",
                       "WebAssembly", "Deno", "Bun", "importScripts"];
        let imported;
        try { await import("os"); imported = "imported"; } catch (e) { imported = "refused"; }
        return {globals: names.filter(n => typeof globalThis[n] !== "undefined"), imported};
    """
    end, _ = await run_script(make_agent, fake_server, code)
    assert json.loads(end.result.removeprefix("Return value: ")) == {"globals": [], "imported": "refused"}


async def test_huge_output_is_truncated(make_agent, fake_server) -> None:
    """X4: text() output beyond MAX_OUTPUT_CHARS is cut (and counted); a huge return value too."""
    code = "text('x'.repeat(3000000)); for (let i = 0; i < 20000; i++) text('line ' + i); return 'y'.repeat(2000000)"
    end, agent = await run_script(make_agent, fake_server, code)
    assert not end.is_error
    assert end.result.startswith("x" * MAX_OUTPUT_CHARS + "\n[output truncated: ")
    assert "more characters were not kept]" in end.result
    assert len(end.result) < 2 * MAX_OUTPUT_CHARS + 500
    record = entries_of(agent, "code_run_end")[0].payload
    assert record["dropped_chars"] > 3_000_000 - MAX_OUTPUT_CHARS


async def test_a_script_waiting_on_nothing_ends_at_once(make_agent, fake_server) -> None:
    """X4: a promise nothing can settle (no timers exist) is reported, not waited for."""
    started = time.monotonic()
    end, _ = await run_script(make_agent, fake_server, "await new Promise(() => {})", timeout_ms=60_000)
    assert end.is_error and "nothing can settle" in end.result
    assert time.monotonic() - started < 30


async def test_syntax_errors_throws_and_deep_recursion_are_script_errors(make_agent, fake_server) -> None:
    """X4: the script's own failures are errors the model can read; the sandbox survives them."""
    end, _ = await run_script(make_agent, fake_server, "this is not javascript")
    assert end.is_error and "The script threw: SyntaxError" in end.result
    end, _ = await run_script(make_agent, fake_server, "function f() { return f() + 1 } f()")
    assert end.is_error and "stack overflow" in end.result
    end, _ = await run_script(make_agent, fake_server, "throw {not: 'an error'}")
    assert end.is_error and 'thrown: {"not":"an error"}' in end.result


def test_the_host_refuses_anything_outside_the_protocol() -> None:
    """X4: the worker is sandboxed code's neighbour; the host parses its lines strictly."""
    bad = [
        b"not json\n",
        b"[1, 2]\n",
        b'{"type": "shell", "command": "rm -rf /"}\n',
        b'{"type": "call", "id": "0", "name": "ls", "args": {}}\n',
        b'{"type": "call", "id": true, "name": "ls", "args": {}}\n',
        b'{"type": "text", "text": 5}\n',
        b'{"type": "done", "ok": true, "stores": {"k": "not json"}}\n',
        b'{"type": "done", "ok": true, "stores": {"": "1"}}\n',
        b'{"type": "done", "ok": "yes", "stores": {}}\n',
        b"\xff\xfe\n",
    ]
    for line in bad:
        with pytest.raises(ProtocolError):
            parse_message(line)


# The global object of a script: ECMAScript's built-ins as QuickJS has them, and the script API.
STANDARD_GLOBALS = """
    AggregateError Array ArrayBuffer Atomics BigInt BigInt64Array BigUint64Array Boolean DataView Date Error
    EvalError Float32Array Float64Array Function Infinity Int16Array Int32Array Int8Array InternalError JSON Map
    Math NaN Number Object Promise Proxy RangeError ReferenceError Reflect RegExp Set SharedArrayBuffer String
    Symbol SyntaxError TypeError URIError Uint16Array Uint32Array Uint8Array Uint8ClampedArray WeakMap WeakSet
    decodeURI decodeURIComponent encodeURI encodeURIComponent escape eval globalThis isFinite isNaN parseFloat
    parseInt undefined unescape
""".split()
SCRIPT_API = ["console", "load", "store", "text", "tools"]

EVERY_REACHABLE_FUNCTION = """
    const api = new Set([tools, text, store, load, console]);  // the documented bridge (calls tools, writes text)
    const seen = new Set(), queue = [[globalThis, "globalThis"]], calls = [];
    while (queue.length) {
        const [object, path] = queue.shift();
        if ((typeof object !== "object" && typeof object !== "function") || object === null) continue;
        if (seen.has(object) || api.has(object)) continue;
        seen.add(object);
        const proto = Object.getPrototypeOf(object);
        if (proto) queue.push([proto, path + ".__proto__"]);
        for (const key of Reflect.ownKeys(object)) {
            const d = Object.getOwnPropertyDescriptor(object, key);
            for (const [value, how] of [[d.value, ""], [d.get, "(get)"]]) {
                if (typeof value !== "function" && (typeof value !== "object" || value === null)) continue;
                if (api.has(value)) continue;
                const where = path + "." + String(key) + how;
                queue.push([value, where]);
                if (typeof value === "function") calls.push([value, object, where]);
            }
        }
    }
    const call = ([fn, self]) => {
        try {
            const v = Reflect.apply(fn, self, []);
            return typeof v === "number" ? v : null;
        } catch (e) {
            return null;
        }
    };
    const first = calls.map(call);
    let spin = 0;
    for (let i = 0; i < 3e6; i++) spin += i;  // any clock moves on meanwhile
    const second = calls.map(call);
    const moving = calls.filter((c, i) => c[0] !== Math.random && first[i] !== null && second[i] !== null &&
                                          first[i] === first[i] && first[i] !== second[i]).map(c => c[2]);
    const clocks = [Date.now(), new Date().getTime(), +new (new Date(0).constructor)(), +Reflect.construct(Date, []),
                    Date.parse(Date()), +new (Object.getPrototypeOf(new Date(0)).constructor)()];
    const globals = Object.getOwnPropertyNames(globalThis).sort();
    return {moving, called: calls.length, clocks, globals, symbols: Object.getOwnPropertySymbols(globalThis).length};
"""


async def test_no_live_clock_and_no_bridge_function_is_reachable(make_agent, fake_server) -> None:
    """X4 (deterministic replay): as an adversary would look for one, by calling every function
    reachable from globalThis (own keys, symbols, getters, prototypes) twice with a busy loop
    between: none but the seeded Math.random gives another number; every way to the clock gives
    the recorded start time; the global object holds ECMAScript's built-ins and the script API,
    nothing else (no QuickJS __date_clock, no __agentcore_* bridge function)."""
    end, agent = await run_script(make_agent, fake_server, EVERY_REACHABLE_FUNCTION)
    assert not end.is_error, end.result
    seen = json.loads(end.result.split("Return value: ", 1)[1])
    assert seen["called"] > 400, "the walk reached the built-ins"
    assert seen["moving"] == [], "no function but Math.random (seeded, recorded) gives a new number"
    (header,) = [e.payload for e in entries_of(agent, "code_run")][:1]
    start = header["clock_ms"]
    assert seen["clocks"] == [start] * 4 + [start // 1000 * 1000, start], "Date() has whole seconds"
    assert seen["globals"] == sorted(STANDARD_GLOBALS + SCRIPT_API) and seen["symbols"] == 0


async def test_a_deeply_nested_store_value_is_refused_in_the_script_at_once(make_agent, fake_server) -> None:
    """X4: store() takes values nested at most STORE_VALUE_DEPTH levels (arrays and objects, not
    brackets inside strings); a deeper one throws in the script (which can catch it and go on)
    — it does not hang the script until its deadline."""
    code = f"""
        const nest = (n) => {{ let v = 0; for (let i = 0; i < n; i++) v = i % 2 ? [v] : {{v}}; return v; }};
        const refused = [];
        for (const n of [5000, {STORE_VALUE_DEPTH + 1}]) {{
            try {{ store("deep " + n, nest(n)); refused.push("stored"); }} catch (e) {{ refused.push(e.message); }}
        }}
        store("deepest allowed", nest({STORE_VALUE_DEPTH}));
        store("brackets in strings", {{s: "[{{".repeat(500) + '\\"[', t: ["]]", "{{{{"]}});
        return refused;
    """
    started = time.monotonic()
    async with asyncio.timeout(60):
        end, agent = await run_script(make_agent, fake_server, code, timeout_ms=120_000)
    assert time.monotonic() - started < 60
    assert not end.is_error, end.result
    refused = json.loads(end.result.split("Return value: ", 1)[1])
    assert refused == [
        f'store("deep 5000"): the value is nested 5000 levels deep; at most {STORE_VALUE_DEPTH}',
        f'store("deep {STORE_VALUE_DEPTH + 1}"): the value is nested {STORE_VALUE_DEPTH + 1} levels deep; '
        f"at most {STORE_VALUE_DEPTH}",
    ]
    (finished,) = entries_of(agent, "code_run_end")[:1]
    assert finished.payload["stored"] == ["brackets in strings", "deepest allowed"]


ROGUE_WORKER = Path(__file__).with_name("codemode_rogue_worker.py")


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (
            json.dumps({"type": "done", "ok": True, "stores": {"k": _nested(5000)}}),
            f"the stored value of 'k' is nested deeper than {STORE_VALUE_DEPTH} levels",
        ),
        (
            '{"type": "call", "id": 0, "name": "ls", "args": ' + _nested(20_000) + "}",
            "could not be read (RecursionError: maximum recursion depth exceeded",
        ),
        (json.dumps({"type": "done", "ok": True, "stores": {}, "dropped_chars": "lots"}), "dropped_chars"),
    ],
    ids=["deep stored value", "call too deep to decode", "a count that is not a number"],
)
async def test_a_message_the_host_cannot_take_fails_the_script_at_once(
    make_agent, fake_server, monkeypatch, line: str, reason: str
) -> None:
    """X4: a worker taken over by an attacker (a real process that sends the line it is given)
    says something the host cannot take — a stored value nested past the limit, a line nested
    too deep to decode, a count that is not a number: the script fails at once with a protocol
    error naming it, not at its deadline, and the session goes on."""
    sandbox_fingerprint()  # the header names the real sandbox (the cached fingerprint), not the impostor
    monkeypatch.setattr(sandbox_module, "WORKER", ROGUE_WORKER)
    started = time.monotonic()
    fake_server.enqueue(*script_turn(line, call_id="rogue"))
    agent = await make_agent(COMPLETIONS, session={"code_mode": {"timeout_ms": 120_000}})
    async with asyncio.timeout(60):
        end = codemode_end(await run_with(agent, {"prompt": "rogue", "request_id": "r"}))
    assert time.monotonic() - started < 60, "not at the deadline"
    assert end.is_error and "The sandbox broke its protocol and was stopped" in end.result and reason in end.result
    assert entries_of(agent, "code_run_end")[0].payload["status"] == "failed"
    monkeypatch.undo()  # the real worker again
    fake_server.enqueue(*script_turn("return 'still here'", call_id="after"))
    after = codemode_end(await run_with(agent, {"prompt": "after", "request_id": "a"}))
    assert after.result == 'Return value: "still here"' and not after.is_error


def test_the_stored_value_depth_counts_arrays_and_objects_not_brackets_in_strings() -> None:
    """X4: the host's depth check reads the JSON text: brackets inside strings (escaped quotes
    included) are not nesting; STORE_VALUE_DEPTH levels pass, one more is refused."""

    def done(value: str) -> bytes:
        return json.dumps({"type": "done", "ok": True, "stores": {"k": value}}).encode()

    in_strings = json.dumps({"s": "[" * 500 + '\\"{' * 100, "t": ["]]]", "{{{"]})
    assert parse_message(done(in_strings)).stores == {"k": in_strings}
    allowed = "[" * (STORE_VALUE_DEPTH - 1) + '{"a": 1}' + "]" * (STORE_VALUE_DEPTH - 1)
    assert parse_message(done(allowed)).stores == {"k": allowed}
    with pytest.raises(ProtocolError, match=f"nested deeper than {STORE_VALUE_DEPTH} levels"):
        parse_message(done("[" + allowed + "]"))
